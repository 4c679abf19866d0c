"""The torch PPO policy's closed-form gradient (models/torch/closed_form.py) against autograd.

The closed form is what every torch PPO run with a built-in dense model and Discrete
actions uses, so it must give autograd's gradients, statistics and weights on every
branch of the loss: clipped and unclipped ratios on both signs of the advantage, value
errors inside and beyond vf_clip_param, the entropy bonus, the KL penalty, shared and
separate value networks, tanh / relu / linear layers, and grad_clip.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlstack.models.torch.closed_form import DISTRIBUTION_TERMS, DenseGraph  # noqa: E402
from rlstack.trainers.common.config import merge_config  # noqa: E402
from rlstack.trainers.ppo import DEFAULT_CONFIG  # noqa: E402
from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy  # noqa: E402
from tests.helpers.closed_form_cases import (  # noqa: E402
    B, CASES, OBS_SPACE, check_every_branch_is_hit, check_closed_form_learning_matches_autograd,
    check_non_finite_target_stops_the_update, check_value_layers_stay_without_a_critic,
    make_policy, ppo_batch,
)

def _policy(overrides, num_actions=3, seed=0, num_gpus=0):
    return make_policy(PPOTorchPolicy, overrides, num_actions, seed, num_gpus=num_gpus)



def _grads_and_stats(policy, batch, closed_form):
    policy.use_closed_form = closed_form
    grads = policy.make_grad_fn(policy._to_tensors(batch))
    loss, stats = grads(torch.arange(40, device=policy.device))
    return ([p.grad.clone() for p in policy.model.parameters()],
            {key: float(value.detach()) for key, value in stats.items()}, float(loss.detach()))


@pytest.mark.parametrize("case", sorted(CASES))
def test_closed_form_gradient_equals_autograd(case):
    policy = _policy(CASES[case])
    assert DenseGraph.supports(policy.model)
    batch = ppo_batch(policy)
    closed_form_grads, closed_form_stats, closed_form_loss = _grads_and_stats(policy, batch, closed_form=True)
    auto_grads, auto_stats, auto_loss = _grads_and_stats(policy, batch, closed_form=False)
    for closed_form, auto in zip(closed_form_grads, auto_grads):
        assert closed_form.shape == auto.shape
        torch.testing.assert_close(closed_form, auto, rtol=1e-4, atol=1e-6)
    assert closed_form_stats.keys() == auto_stats.keys()
    for key in auto_stats:
        assert closed_form_stats[key] == pytest.approx(auto_stats[key], rel=1e-5, abs=1e-7), key
    assert closed_form_loss == pytest.approx(auto_loss, rel=1e-5, abs=1e-7)
    with torch.no_grad():
        dist_inputs, values = policy.model.policy_and_value(policy._to_tensors(batch)[B.OBS])
    check_every_branch_is_hit(policy, dist_inputs.numpy(), values.numpy(), batch)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU (runs on the lent GPU machine)")
@pytest.mark.parametrize("case", sorted(CASES))
def test_closed_form_path_on_the_gpu(case):
    # The same equalities with the policy on cuda:0 (num_gpus=1).
    policy = _policy(CASES[case], num_gpus=1)
    assert policy.device.type == "cuda"
    batch = ppo_batch(policy)
    closed_form_grads, closed_form_stats, closed_form_loss = _grads_and_stats(policy, batch, closed_form=True)
    auto_grads, auto_stats, auto_loss = _grads_and_stats(policy, batch, closed_form=False)
    for closed_form, auto in zip(closed_form_grads, auto_grads):
        assert closed_form.device.type == "cuda"
        torch.testing.assert_close(closed_form, auto, rtol=1e-4, atol=1e-6)
    for key in auto_stats:
        assert closed_form_stats[key] == pytest.approx(auto_stats[key], rel=1e-5, abs=1e-7), key
    assert closed_form_loss == pytest.approx(auto_loss, rel=1e-5, abs=1e-7)
    check_closed_form_learning_matches_autograd(PPOTorchPolicy, CASES[case], num_gpus=1)


@pytest.mark.parametrize("case", sorted(CASES))
def test_closed_form_learning_matches_autograd_over_several_batches(case):
    check_closed_form_learning_matches_autograd(PPOTorchPolicy, CASES[case])


def test_models_outside_the_closed_form_path_fall_back_to_autograd():
    # Multi-discrete actions, images and other activations keep the autograd loss.
    multi = PPOTorchPolicy(OBS_SPACE, gym.spaces.MultiDiscrete([2, 3]), merge_config(DEFAULT_CONFIG, {"seed": 0}, "PPO"))
    assert DenseGraph.supports(multi.model)  # the model would do; the distribution is not covered
    image = PPOTorchPolicy(gym.spaces.Box(0, 255, (42, 42, 3), np.uint8), gym.spaces.Discrete(2),
                           merge_config(DEFAULT_CONFIG, {"seed": 0}, "PPO"))
    swish = _policy({"model": {"fcnet_hiddens": [8], "fcnet_activation": "swish"}})
    no_critic = _policy({"use_critic": False, "use_gae": False})
    assert not DenseGraph.supports(image.model)
    assert not DenseGraph.supports(swish.model)
    assert not DenseGraph.supports(torch.nn.Linear(5, 3))
    for policy in (multi, image, swish, no_critic):
        grad_fn = policy.make_grad_fn({})
        assert grad_fn.__qualname__.startswith("TorchPolicy.make_grad_fn"), type(policy.model)  # the autograd path


def test_closed_form_path_rejects_a_non_finite_loss_before_the_update():
    check_non_finite_target_stops_the_update(_policy({}))


def test_without_a_critic_the_value_layers_stay_as_they_were():
    # The value layers get no gradient; Adam leaves them (and their moments) alone, as
    # torch.optim does, instead of refusing the step.
    policy = _policy({"use_critic": False, "use_gae": False})
    check_value_layers_stay_without_a_critic(policy)


@pytest.mark.parametrize("kind", ["categorical", "diag_gaussian"])
def test_closed_form_terms_equal_the_distributions_own_and_their_autograd(kind):
    from rlstack.models.torch.torch_action_dist import TorchCategorical, TorchDiagGaussian

    dist_class = {"categorical": TorchCategorical, "diag_gaussian": TorchDiagGaussian}[kind]
    columns_of, terms_of = DISTRIBUTION_TERMS[kind]
    gen = torch.Generator().manual_seed(3)
    width = 4
    z = torch.randn(6, width, generator=gen, dtype=torch.float64).float().requires_grad_(True)
    old_inputs = torch.randn(6, width, generator=gen)
    actions = torch.randint(0, width, (6,), generator=gen) if kind == "categorical" else torch.randn(6, width // 2)
    logp, kl, entropy, *derivatives = terms_of(z, *columns_of(actions, old_inputs))
    new, old = dist_class(z), dist_class(old_inputs)
    expected = (new.logp(actions), old.kl(new), new.entropy())
    for term, reference, derivative in zip((logp, kl, entropy), expected, derivatives):
        torch.testing.assert_close(term, reference, rtol=1e-5, atol=1e-6)
        # Rows are independent: the gradient of the sum is each row's d term / dz.
        autograd, = torch.autograd.grad(reference.sum(), z, retain_graph=True)
        torch.testing.assert_close(derivative, autograd, rtol=1e-4, atol=1e-6)
