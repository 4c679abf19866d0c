"""The torch DDPG / TD3 policy's closed-form gradient (models/torch/fused_actor_critic.py
and ``DDPGTorchPolicy._fused_grad_fn``) against autograd of ``loss()``.

Every torch DDPG and TD3 run with the built-in dense actor-critic learns through the
fused path, so it must give autograd's gradient of the actor's and the critics' losses
w.r.t. their own optimizer's parameters, the losses and statistics and, over several
Adam steps with TD3's delayed actor, the weights, on every branch: one critic or twins,
target policy smoothing (noise beyond its clip), the Huber or the squared loss with TD
errors on both sides of the threshold, L2 regularisation, tanh and relu layers, actions
on non-unit Box bounds, terminated rows, n-step discounts, prioritized-replay weights,
the actor resting, an odd minibatch and grad_clip.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlstack.models.torch import fused_actor_critic  # noqa: E402
from rlstack.models.torch.blocks import TorchActorCritic  # noqa: E402
from rlstack.sample_batch import SampleBatch  # noqa: E402
from rlstack.trainers.common.config import merge_config  # noqa: E402
from rlstack.trainers.ddpg.ddpg import DEFAULT_CONFIG, validate_ddpg_config  # noqa: E402
from rlstack.trainers.ddpg.ddpg_torch_policy import DDPGTorchPolicy  # noqa: E402

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 4.0], np.float32))
GAMMA = 0.9
ROWS = 16  # train_batch_size: the rows of one gradient step

CASES = {
    # DDPG with RL-Zoo's shape (one critic, relu, squared loss), smaller, and L2.
    "ddpg": {"twin_q": False, "smooth_target_policy": False, "use_huber": False, "l2_reg": 0.01},
    # TD3: twin critics, smoothing, a delayed actor; Huber with a threshold inside the TD errors.
    "td3_huber": {"twin_q": True, "smooth_target_policy": True, "use_huber": True, "huber_threshold": 0.7,
                  "policy_delay": 2, "l2_reg": 0.0},
    "td3_tanh": {"twin_q": True, "smooth_target_policy": True, "use_huber": False, "policy_delay": 2,
                 "actor_hidden_activation": "tanh", "critic_hidden_activation": "tanh", "l2_reg": 0.01},
    "ddpg_tanh_huber": {"twin_q": False, "smooth_target_policy": False, "use_huber": True,
                        "actor_hidden_activation": "tanh", "critic_hidden_activation": "tanh", "l2_reg": 0.0},
}


def _policy(case: str, num_gpus: float = 0, **overrides) -> DDPGTorchPolicy:
    config = merge_config(DEFAULT_CONFIG, {
        "seed": 0, "gamma": GAMMA, "train_batch_size": ROWS, "actor_hiddens": [8, 6], "critic_hiddens": [7, 5],
        "target_noise": 0.2, "target_noise_clip": 0.3, **CASES[case], **overrides}, "DDPG")
    validate_ddpg_config(config)
    policy = DDPGTorchPolicy(OBS_SPACE, BOX, config, num_gpus=num_gpus)
    # Online and target networks apart, at a scale where TD errors reach past the Huber
    # threshold and every unit matters.
    rng = np.random.default_rng(1)
    online = {name: (value + rng.normal(0.0, 0.5, value.shape)).astype(np.float32)
              for name, value in policy.get_weights().items()}
    target = {name: (value + rng.normal(0.0, 0.3, value.shape)).astype(np.float32) for name, value in online.items()}
    state = {key: np.array(value, copy=True) for key, value in policy.get_state().items()}
    state.update({f"weights/{name}": value for name, value in online.items()})
    state.update({f"target/{name}": value for name, value in target.items()})
    policy.set_state(state)
    return policy


def _batch(n: int, prioritized: bool = True, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    terminateds = rng.random(n) < 0.25
    terminateds[:2] = [True, False]
    return SampleBatch({
        B.OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        B.ACTIONS: rng.uniform(-0.95, 0.95, (n, 2)).astype(np.float32),
        B.REWARDS: rng.normal(0.0, 1.5, n).astype(np.float32),
        B.NEXT_OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        B.TERMINATEDS: terminateds,
        B.DISCOUNTS: (GAMMA ** rng.integers(1, 4, n)).astype(np.float32),
        B.WEIGHTS: rng.uniform(0.2, 2.0, n).astype(np.float32) if prioritized else np.ones(n, np.float32),
    })


def _params(policy: DDPGTorchPolicy) -> list[torch.nn.Parameter]:
    return [p for optimizer in policy.optimizers for p in optimizer.params]


def _grads_and_stats(policy: DDPGTorchPolicy, batch: SampleBatch, index, fused: bool,
                     stepping: tuple[bool, bool] = (True, True)):
    """One grad-fn call with the smoothing noise fixed (entries beyond the clip); the
    gradients of the stepping optimizers' parameters (None for the others), the losses
    and the statistics."""
    policy.use_fused_sgd = fused
    rows = len(range(batch.count)[index]) if isinstance(index, slice) else len(index)
    noise = torch.from_numpy((np.random.default_rng(5).standard_normal((rows, 2)) * 1.5).astype(np.float32))
    policy.draw_target_noise = lambda actions: noise.to(actions.device)
    with torch.no_grad():
        tensors = policy.prepare_batch(policy._to_tensors(batch))
    grads = policy.make_grad_fn(tensors)
    for p in _params(policy):  # the fused path's buffers; autograd replaces them
        p.grad = torch.full_like(p, float("nan"))
    policy._stepping = stepping
    try:
        losses, stats = grads(index)
    finally:
        policy._stepping = ()
    resting = [p for optimizer, on in zip(policy.optimizers, stepping) if not on for p in optimizer.params]
    return ([None if any(p is q for q in resting) else p.grad.clone() for p in _params(policy)],
            [float(loss.detach()) for loss in losses],
            {key: value.detach().clone() for key, value in stats.items()})


def _assert_equal(fused, auto):
    fused_grads, fused_losses, fused_stats = fused
    auto_grads, auto_losses, auto_stats = auto
    assert fused_losses == pytest.approx(auto_losses, rel=1e-5, abs=1e-6)
    assert fused_stats.keys() == auto_stats.keys()
    for key in auto_stats:
        torch.testing.assert_close(fused_stats[key], auto_stats[key], rtol=1e-5, atol=1e-6, msg=key)
    for fused_grad, auto_grad in zip(fused_grads, auto_grads):
        assert (fused_grad is None) == (auto_grad is None)
        if auto_grad is not None:
            torch.testing.assert_close(fused_grad, auto_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("stepping", [(True, True), (False, True)], ids=["both_step", "actor_rests"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_gradient_equals_autograd(case, stepping):
    policy = _policy(case)
    assert fused_actor_critic.supports(policy.model)
    batch = _batch(40)
    # A slice (learn_on_batch's in-order minibatch) and an odd tensor of row positions.
    for index in (slice(8, 8 + ROWS), torch.tensor([3, 0, 17, 39, 22, 5, 30, 11, 2, 28, 19])):
        auto = _grads_and_stats(policy, batch, index, fused=False, stepping=stepping)
        fused = _grads_and_stats(policy, batch, index, fused=True, stepping=stepping)
        _assert_equal(fused, auto)
        if stepping[0] is False:
            # A resting actor's gradients are left alone (no work done for them).
            assert all(bool(torch.isnan(p.grad).all()) for p in policy.optimizers[0].params)
        td = auto[2]["td_error"]
        threshold = CASES[case].get("huber_threshold", 1.0)
        assert bool((td.abs() > threshold).any()) and bool((td.abs() < threshold).any())
        assert 0 < int(torch.as_tensor(batch[B.TERMINATEDS])[index].sum()) < len(td)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_learning_equals_autograd(case):
    """learn_on_batch over 3.5 minibatches (the last one short; TD3's actor steps on
    every second) with an active grad_clip leaves the same weights, TD errors and
    statistics on both paths (each draws the smoothing noise from its own generator,
    seeded alike)."""
    fused_policy, auto_policy = (_policy(case, grad_clip=0.2) for _ in range(2))
    auto_policy.use_fused_sgd = False
    batch = _batch(3 * ROWS + ROWS // 2, seed=2)
    fused_stats = fused_policy.learn_on_batch(batch)
    auto_stats = auto_policy.learn_on_batch(batch)
    assert auto_stats["grad_gnorm_1"] > 0.2  # the clip binds
    fused_weights, auto_weights = fused_policy.get_weights(), auto_policy.get_weights()
    for name in auto_weights:
        np.testing.assert_allclose(fused_weights[name], auto_weights[name], rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(fused_stats["td_error"], auto_stats["td_error"], rtol=1e-4, atol=1e-4)
    assert fused_stats.keys() == auto_stats.keys()
    for key in auto_stats:
        if key != "td_error":
            assert fused_stats[key] == pytest.approx(auto_stats[key], rel=1e-4, abs=1e-5), key
    initial = _policy(case).get_weights()
    for prefix in ("actor/", "q/"):
        assert any(not np.allclose(fused_weights[name], value) for name, value in initial.items()
                   if name.startswith(prefix)), prefix


def test_learn_on_batch_takes_the_fused_path(monkeypatch):
    def no_loss(self, train_batch):
        raise AssertionError("loss() called on the fused path")

    monkeypatch.setattr(DDPGTorchPolicy, "loss", no_loss)
    for case in ("ddpg", "td3_huber"):
        _policy(case).learn_on_batch(_batch(2 * ROWS))
    policy = _policy("ddpg")
    policy.use_fused_sgd = False
    with pytest.raises(AssertionError, match="fused path"):
        policy.learn_on_batch(_batch(2 * ROWS))


def test_models_outside_the_fused_path_fall_back_to_autograd(monkeypatch):
    calls = []
    original = DDPGTorchPolicy.loss

    def counted_loss(self, train_batch):
        calls.append(type(self.model).__name__)
        return original(self, train_batch)

    monkeypatch.setattr(DDPGTorchPolicy, "loss", counted_loss)
    swish = _policy("ddpg", actor_hidden_activation="swish")
    assert not fused_actor_critic.supports(swish.model)

    class UserActorCritic(TorchActorCritic):  # a user's subclass may change the forward pass
        def custom_loss(self, policy_loss, loss_inputs):
            return policy_loss

    class UserDDPGPolicy(DDPGTorchPolicy):
        model_class = UserActorCritic

    user = UserDDPGPolicy(OBS_SPACE, BOX, swish.config | {"actor_hidden_activation": "relu"})
    assert not fused_actor_critic.supports(user.model) and user._has_custom_loss
    for policy in (swish, user):
        assert np.isfinite(policy.learn_on_batch(_batch(ROWS))["critic_loss"])
    assert calls == ["TorchActorCritic", "UserActorCritic"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU (runs on the lent GPU machine)")
def test_fused_path_on_the_gpu():
    policy = _policy("td3_huber", num_gpus=1)
    assert policy.device.type == "cuda"
    batch = _batch(40)
    index = slice(8, 8 + ROWS)
    _assert_equal(_grads_and_stats(policy, batch, index, fused=True),
                  _grads_and_stats(policy, batch, index, fused=False))
