"""The torch SAC policy's closed-form gradient (models/torch/fused_actor_critic.py and
``SACTorchPolicy._fused_grad_fn``) against autograd of ``loss()``.

Every torch SAC run with Box actions and the built-in dense actor-critic learns through
the fused path, so it must give autograd's gradient of each of ``loss()``'s three losses
w.r.t. its own optimizer's parameters, its losses and statistics and, over several Adam
steps, its weights, on every branch: twin and single critics, tanh and relu layers,
actions on non-unit Box bounds, TD errors inside and beyond the Huber loss's delta,
terminated rows, n-step discounts, prioritized-replay weights, log-stds inside and
beyond their clip, the deterministic loss, optimizers that rest, a short last minibatch
and grad_clip. Models outside it (discrete actions, a user's subclass, other activations)
keep autograd.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlstack.models.torch import fused_actor_critic  # noqa: E402
from rlstack.models.torch.blocks import TorchActorCritic  # noqa: E402
from rlstack.sample_batch import SampleBatch  # noqa: E402
from rlstack.trainers.common.config import merge_config  # noqa: E402
from rlstack.trainers.sac.sac import DEFAULT_CONFIG, validate_sac_config  # noqa: E402
from rlstack.trainers.sac.sac_torch_policy import SACTorchPolicy  # noqa: E402

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
# Non-unit bounds: the actor acts in [-1, 1], the replayed actions come mapped back.
BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
GAMMA = 0.9
ROWS = 16  # train_batch_size: the rows of one gradient step

CASES = {
    # RL-Zoo's Pendulum shape, smaller: ReLU, twin critics.
    "relu_twin": {"twin_q": True, "activation": "relu"},
    "tanh_twin": {"twin_q": True, "activation": "tanh"},
    "relu_single": {"twin_q": False, "activation": "relu"},
    "tanh_single_post_fc": {"twin_q": False, "activation": "tanh", "post_fcnet_hiddens": [5]},
}


def _policy(case: str, num_gpus: float = 0, log_std_median: float = -0.5, **overrides) -> SACTorchPolicy:
    spec = CASES[case]
    extra = {"post_fcnet_hiddens": spec["post_fcnet_hiddens"]} if "post_fcnet_hiddens" in spec else {}
    config = merge_config(DEFAULT_CONFIG, {
        "seed": 0, "gamma": GAMMA, "train_batch_size": ROWS, "twin_q": spec["twin_q"],
        "Q_model": {"fcnet_hiddens": [8, 6], "fcnet_activation": spec["activation"], **extra},
        "policy_model": {"fcnet_hiddens": [7, 6], "fcnet_activation": spec["activation"], **extra},
        **overrides}, "SAC")
    validate_sac_config(config)
    policy = SACTorchPolicy(OBS_SPACE, BOX, config, num_gpus=num_gpus)
    # Weights at a scale where every unit matters and TD errors reach both branches of
    # the Huber loss; target critics of their own; alpha != 1. The raw log-std outputs
    # are centred on log_std_median (2, their upper clip: some rows clipped, some not).
    rng = np.random.default_rng(1)
    shapes = {name: value.shape for name, value in policy.get_weights().items() if name != "log_alpha"}
    weights = {name: (rng.normal(size=shape) * 0.6).astype(np.float32) for name, shape in sorted(shapes.items())}
    target = {name: (value + rng.normal(0.0, 0.3, value.shape)).astype(np.float32)
              for name, value in weights.items() if not name.startswith("actor/")}
    policy.set_weights({**weights, "log_alpha": np.float32(math.log(0.5))})
    with torch.no_grad():
        raw_log_std = policy.model.actor_outputs(torch.from_numpy(_batch(40)[B.OBS]))[:, 2:].numpy()
    weights["actor/out/bias"][2:] += log_std_median - np.median(raw_log_std, axis=0)
    policy.set_weights({**weights, "log_alpha": np.float32(math.log(0.5))})
    policy.target_critics.set_canonical_weights(target)
    return policy


def _batch(n: int, prioritized: bool = True, seed: int = 0) -> SampleBatch:
    """Replayed rows: some terminated, n-step discounts gamma ** k for k in {1, 2, 3},
    rewards wide enough for |td| > 1, importance weights uniform or not."""
    rng = np.random.default_rng(seed)
    terminateds = rng.random(n) < 0.25
    terminateds[:2] = [True, False]
    return SampleBatch({
        B.OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        B.ACTIONS: rng.uniform(-0.95, 0.95, (n, 2)).astype(np.float32),
        B.REWARDS: rng.normal(0.0, 2.0, n).astype(np.float32),
        B.NEXT_OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        B.TERMINATEDS: terminateds,
        B.DISCOUNTS: (GAMMA ** rng.integers(1, 4, n)).astype(np.float32),
        B.WEIGHTS: rng.uniform(0.2, 2.0, n).astype(np.float32) if prioritized else np.ones(n, np.float32),
    })


def _params(policy: SACTorchPolicy) -> list[torch.nn.Parameter]:
    # The three optimizers' parameters, in their order.
    return [p for optimizer in policy.optimizers for p in optimizer.params]


def _grads_and_stats(policy: SACTorchPolicy, batch: SampleBatch, index, fused: bool,
                     stepping: tuple[bool, bool, bool] = (True, True, True)):
    """One grad-fn call with the loss's noise fixed; the gradients (None where absent),
    the losses and the statistics."""
    policy.use_fused_sgd = fused
    noise = torch.from_numpy(np.random.default_rng(5).normal(size=(2 * _rows(batch, index), 2)).astype(np.float32))
    noise = noise.to(policy.device)
    policy.loss_noise = lambda shape: noise
    with torch.no_grad():  # as learn_on_batch calls it
        tensors = policy.prepare_batch(policy._to_tensors(batch))
    for p in _params(policy):
        p.grad = None
    policy._stepping = stepping
    try:
        losses, stats = policy.make_grad_fn(tensors)(index)
    finally:
        policy._stepping = ()
    return ([None if p.grad is None else p.grad.clone() for p in _params(policy)],
            [float(loss.detach()) for loss in losses],
            {key: value.detach().clone() for key, value in stats.items()})


def _rows(batch: SampleBatch, index) -> int:
    return len(range(batch.count)[index]) if isinstance(index, slice) else len(index)


def _assert_equal(fused, auto, stepping=(True, True, True)):
    fused_grads, fused_losses, fused_stats = fused
    auto_grads, auto_losses, auto_stats = auto
    assert len(fused_grads) == len(auto_grads)
    assert fused_losses == pytest.approx(auto_losses, rel=1e-5, abs=1e-6)
    assert fused_stats.keys() == auto_stats.keys()
    for key in auto_stats:
        torch.testing.assert_close(fused_stats[key], auto_stats[key], rtol=1e-5, atol=1e-6, msg=key)
    for fused_grad, auto_grad in zip(fused_grads, auto_grads):
        if auto_grad is not None:
            torch.testing.assert_close(fused_grad, auto_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_gradient_equals_autograd(case, prioritized):
    policy = _policy(case)
    assert fused_actor_critic.supports(policy.model)
    batch = _batch(40, prioritized)
    # A slice (learn_on_batch's in-order minibatch) and a tensor of row positions (odd:
    # the actor's backward pass cannot halve its rows).
    for index in (slice(8, 8 + ROWS), torch.tensor([3, 0, 17, 39, 22, 5, 30, 11, 2, 28, 19])):
        auto = _grads_and_stats(policy, batch, index, fused=False)
        fused = _grads_and_stats(policy, batch, index, fused=True)
        assert all(grad is not None for grad in auto[0])
        _assert_equal(fused, auto)
        # Both branches of the Huber loss and both kinds of row are in the minibatch.
        td = auto[2]["td_error"]
        assert bool((td > 1.0).any()) and bool((td < 1.0).any())
        assert 0 < int(torch.as_tensor(batch[B.TERMINATEDS])[index].sum()) < len(td)


@pytest.mark.parametrize("case", ["relu_twin", "tanh_single_post_fc"])
def test_fused_gradient_equals_autograd_where_the_log_std_is_clipped(case):
    # Raw log-stds on both sides of the upper clip: no gradient passes where clipped.
    policy = _policy(case, log_std_median=2.0)
    batch = _batch(ROWS)
    with torch.no_grad():
        raw_log_std = policy.model.actor_outputs(torch.from_numpy(batch[B.OBS]))[:, 2:]
    assert bool((raw_log_std > 2.0).any()) and bool((raw_log_std < 2.0).any())
    _assert_equal(_grads_and_stats(policy, batch, slice(0, ROWS), fused=True),
                  _grads_and_stats(policy, batch, slice(0, ROWS), fused=False))


@pytest.mark.parametrize("case", ["relu_twin", "tanh_single_post_fc"])
def test_fused_gradient_equals_autograd_with_the_deterministic_loss(case):
    policy = _policy(case, _deterministic_loss=True)
    policy.loss_noise = lambda shape: pytest.fail("the deterministic loss draws no noise")
    batch = _batch(ROWS)
    _assert_equal(_grads_and_stats(policy, batch, slice(0, ROWS), fused=True),
                  _grads_and_stats(policy, batch, slice(0, ROWS), fused=False))


@pytest.mark.parametrize("stepping", [(False, True, True), (True, False, False), (False, False, True)],
                         ids=["actor_rests", "critics_and_alpha_rest", "only_alpha"])
def test_resting_optimizers_keep_their_gradients_and_the_others_equal_autograd(stepping):
    # SAC steps all three each time; a mask that rests some (as TD3's policy_delay does)
    # must leave their .grad untouched (no work done for them) and the others exact.
    policy = _policy("relu_twin")
    batch = _batch(ROWS)
    auto = _grads_and_stats(policy, batch, slice(0, ROWS), fused=False, stepping=stepping)
    policy.use_fused_sgd = True
    with torch.no_grad():
        tensors = policy.prepare_batch(policy._to_tensors(batch))
    grads = policy.make_grad_fn(tensors)  # attaches the .grad buffers
    for p in _params(policy):
        p.grad.fill_(float("nan"))
    noise = torch.from_numpy(np.random.default_rng(5).normal(size=(2 * ROWS, 2)).astype(np.float32))
    policy.loss_noise = lambda shape: noise
    policy._stepping = stepping
    losses, stats = grads(slice(0, ROWS))
    policy._stepping = ()
    assert [float(loss) for loss in losses] == pytest.approx(auto[1], rel=1e-5, abs=1e-6)
    for optimizer, on in zip(policy.optimizers, stepping):
        for p in optimizer.params:
            assert bool(torch.isnan(p.grad).all()) != on
    fused_grads = [p.grad.clone() for p in _params(policy)]
    for fused_grad, auto_grad in zip(fused_grads, auto[0]):
        assert (auto_grad is None) == bool(torch.isnan(fused_grad).all())
        if auto_grad is not None:
            torch.testing.assert_close(fused_grad, auto_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_learning_equals_autograd(case):
    """learn_on_batch over 3.5 minibatches (the last one short) with an active grad_clip
    leaves the same weights, log(alpha), TD errors and statistics on both paths (each
    draws the loss's noise from its own generator, seeded alike)."""
    fused_policy, auto_policy = (_policy(case, grad_clip=0.5) for _ in range(2))
    auto_policy.use_fused_sgd = False
    batch = _batch(3 * ROWS + ROWS // 2, seed=2)
    fused_stats = fused_policy.learn_on_batch(batch)
    auto_stats = auto_policy.learn_on_batch(batch)
    assert auto_stats["grad_gnorm_1"] > 0.5  # the clip binds
    fused_weights, auto_weights = fused_policy.get_weights(), auto_policy.get_weights()
    for name in auto_weights:
        np.testing.assert_allclose(fused_weights[name], auto_weights[name], rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(fused_stats["td_error"], auto_stats["td_error"], rtol=1e-4, atol=1e-4)
    assert fused_stats.keys() == auto_stats.keys()
    for key in auto_stats:
        if key != "td_error":
            assert fused_stats[key] == pytest.approx(auto_stats[key], rel=1e-4, abs=1e-5), key
    # Learning moved every parameter group.
    initial = _policy(case).get_weights()
    for prefix in ("actor/", "q/", "log_alpha"):
        assert any(not np.allclose(fused_weights[name], value) for name, value in initial.items()
                   if name.startswith(prefix)), prefix


def test_learn_on_batch_takes_the_fused_path(monkeypatch):
    # The fast path is what runs: learn_on_batch never calls loss() on it, and does with
    # use_fused_sgd = False.
    def no_loss(self, train_batch):
        raise AssertionError("loss() called on the fused path")

    monkeypatch.setattr(SACTorchPolicy, "loss", no_loss)
    _policy("relu_twin").learn_on_batch(_batch(2 * ROWS))
    policy = _policy("relu_twin")
    policy.use_fused_sgd = False
    with pytest.raises(AssertionError, match="fused path"):
        policy.learn_on_batch(_batch(2 * ROWS))


def test_models_outside_the_fused_path_fall_back_to_autograd(monkeypatch):
    calls = []
    original = SACTorchPolicy.loss

    def counted_loss(self, train_batch):
        calls.append(type(self.model).__name__)
        return original(self, train_batch)

    monkeypatch.setattr(SACTorchPolicy, "loss", counted_loss)
    config = merge_config(DEFAULT_CONFIG, {"seed": 0, "train_batch_size": ROWS,
                                           "Q_model": {"fcnet_hiddens": [8]},
                                           "policy_model": {"fcnet_hiddens": [8]}}, "SAC")
    discrete = SACTorchPolicy(OBS_SPACE, gym.spaces.Discrete(3), config)
    swish_config = merge_config(config, {"policy_model": {"fcnet_hiddens": [8], "fcnet_activation": "swish"}}, "SAC")
    swish = SACTorchPolicy(OBS_SPACE, BOX, swish_config)
    assert not fused_actor_critic.supports(discrete.model)
    assert not fused_actor_critic.supports(swish.model)

    class UserActorCritic(TorchActorCritic):  # a user's subclass may change the forward pass
        def custom_loss(self, policy_loss, loss_inputs):
            return policy_loss

    class UserSACPolicy(SACTorchPolicy):
        model_class = UserActorCritic

    user = UserSACPolicy(OBS_SPACE, BOX, config)
    assert not fused_actor_critic.supports(user.model) and user._has_custom_loss
    rng = np.random.default_rng(3)
    for policy in (discrete, swish, user):
        batch = _batch(ROWS)
        if policy is discrete:
            batch[B.ACTIONS] = rng.integers(0, 3, ROWS)
        assert np.isfinite(policy.learn_on_batch(batch)["critic_loss"])
    assert calls == ["TorchActorCritic", "TorchActorCritic", "UserActorCritic"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU (runs on the lent GPU machine)")
def test_fused_path_on_the_gpu():
    # The same equalities with the policy on cuda:0 (num_gpus=1).
    policy = _policy("relu_twin", num_gpus=1)
    assert policy.device.type == "cuda"
    batch = _batch(40)
    index = slice(8, 8 + ROWS)
    auto = _grads_and_stats(policy, batch, index, fused=False)
    fused = _grads_and_stats(policy, batch, index, fused=True)
    _assert_equal(fused, auto)
