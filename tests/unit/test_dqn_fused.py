"""The torch DQN policy's closed-form gradient (QDenseGraph in models/torch/fused.py) against autograd.

The fused path is what every torch DQN / ApeX run with a built-in dense Q-network uses,
so it must give autograd's gradients of ``loss()``, its statistics and, over several
Adam steps, its weights on every branch: TD errors inside and beyond the Huber loss's
delta, terminated and live rows, n-step discounts, prioritized-replay weights, double Q,
dueling streams with and without hidden layers, tanh / relu / linear encoders, a network
without encoder layers, a short last minibatch and grad_clip.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlstack.models.torch.fused import QDenseGraph  # noqa: E402
from rlstack.models.torch.model import TorchQModel  # noqa: E402
from rlstack.sample_batch import SampleBatch  # noqa: E402
from rlstack.trainers.common.config import merge_config  # noqa: E402
from rlstack.trainers.dqn import DEFAULT_CONFIG  # noqa: E402
from rlstack.trainers.dqn.dqn_torch_policy import DQNTorchPolicy  # noqa: E402

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
GAMMA = 0.9
ROWS = 16  # train_batch_size: the rows of one gradient step

CASES = {
    # RL-Zoo's CartPole network (bench/dqn_cartpole.py), smaller: plain DQN on a ReLU MLP.
    "rl_zoo": {"double_q": False, "dueling": False, "hiddens": [],
               "model": {"fcnet_hiddens": [16, 16], "fcnet_activation": "relu"}},
    # DQN's classic defaults' shape: double Q, dueling, a hidden layer per stream, tanh encoder.
    "defaults": {"double_q": True, "dueling": True, "hiddens": [8], "model": {"fcnet_hiddens": [16]}},
    "dueling_without_hiddens": {"double_q": False, "dueling": True, "hiddens": [],
                                "model": {"fcnet_hiddens": [16], "fcnet_activation": "linear"}},
    "double_q_deep_streams": {"double_q": True, "dueling": False, "hiddens": [8, 8],
                              "model": {"fcnet_hiddens": [16], "fcnet_activation": "relu",
                                        "post_fcnet_hiddens": [8]}},
    # No encoder layers: the streams read the observation itself.
    "no_encoder": {"double_q": False, "dueling": True, "hiddens": [8], "model": {"fcnet_hiddens": []}},
}


def _policy(overrides: dict, num_gpus: float = 0, **extra) -> DQNTorchPolicy:
    config = merge_config(DEFAULT_CONFIG, {"seed": 0, "gamma": GAMMA, "train_batch_size": ROWS, "lr": 1e-2,
                                           **overrides, **extra}, "DQN")
    policy = DQNTorchPolicy(OBS_SPACE, ACTION_SPACE, config, num_gpus=num_gpus)
    # Online and target networks moved apart, and far enough from the init (whose Q head
    # starts near 0) that TD errors reach both branches of the Huber loss.
    rng = np.random.default_rng(1)
    online = {name: (value + rng.normal(0.0, 0.3, value.shape)).astype(np.float32)
              for name, value in policy.get_weights().items()}
    target = {name: (value + rng.normal(0.0, 0.3, value.shape)).astype(np.float32) for name, value in online.items()}
    state = {key: np.array(value, copy=True) for key, value in policy.get_state().items()}
    state.update({f"weights/{name}": value for name, value in online.items()})
    state.update({f"target/{name}": value for name, value in target.items()})
    policy.set_state(state)
    return policy


def _batch(n: int, prioritized: bool, seed: int = 0) -> SampleBatch:
    """Replayed rows: some terminated, n-step discounts gamma ** k for k in {1, 2, 3},
    rewards wide enough for |td| > 1, importance weights uniform or not."""
    rng = np.random.default_rng(seed)
    terminateds = rng.random(n) < 0.25
    terminateds[:2] = [True, False]
    return SampleBatch({
        B.OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        B.ACTIONS: rng.integers(0, ACTION_SPACE.n, n).astype(np.int64),
        B.REWARDS: rng.normal(0.0, 1.5, n).astype(np.float32),
        B.NEXT_OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        B.TERMINATEDS: terminateds,
        B.DISCOUNTS: (GAMMA ** rng.integers(1, 4, n)).astype(np.float32),
        B.WEIGHTS: rng.uniform(0.2, 2.0, n).astype(np.float32) if prioritized else np.ones(n, np.float32),
    })


def _grads_and_stats(policy: DQNTorchPolicy, batch: SampleBatch, index, fused: bool):
    policy.use_fused_sgd = fused
    with torch.no_grad():  # as learn_on_batch calls it
        tensors = policy.prepare_batch(policy._to_tensors(batch))
    policy._stepping = (True,)
    loss, stats = policy.make_grad_fn(tensors)(index)
    return ([p.grad.clone() for p in policy.model.parameters()],
            {key: value.detach().clone() for key, value in stats.items()}, float(loss.detach()))


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_gradient_equals_autograd(case, prioritized):
    policy = _policy(CASES[case])
    assert QDenseGraph.supports(policy.model)
    batch = _batch(40, prioritized)
    # A slice (learn_on_batch's in-order minibatch) and a tensor of row positions.
    for index in (slice(8, 8 + ROWS), torch.tensor([3, 0, 17, 39, 22, 5, 30, 11, 2, 28])):
        fused_grads, fused_stats, fused_loss = _grads_and_stats(policy, batch, index, fused=True)
        auto_grads, auto_stats, auto_loss = _grads_and_stats(policy, batch, index, fused=False)
        assert len(fused_grads) == len(auto_grads)
        for fused, auto in zip(fused_grads, auto_grads):
            assert fused.shape == auto.shape
            torch.testing.assert_close(fused, auto, rtol=1e-4, atol=1e-6)
        assert fused_stats.keys() == auto_stats.keys()
        for key in auto_stats:
            torch.testing.assert_close(fused_stats[key], auto_stats[key], rtol=1e-5, atol=1e-6, msg=key)
        assert fused_loss == pytest.approx(auto_loss, rel=1e-5, abs=1e-7)
        # Both branches of the Huber loss, and both kinds of row, are in the minibatch.
        td = auto_stats["td_error"].abs()
        assert bool((td > 1.0).any()) and bool((td < 1.0).any())
        assert 0 < int(torch.as_tensor(batch[B.TERMINATEDS])[index].sum()) < len(td)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_learning_equals_autograd(case):
    """learn_on_batch over 3.5 minibatches (the last one short) with an active grad_clip
    leaves the same weights, TD errors and statistics on both paths."""
    fused_policy, auto_policy = (_policy(CASES[case], grad_clip=0.1) for _ in range(2))
    auto_policy.use_fused_sgd = False
    batch = _batch(3 * ROWS + ROWS // 2, prioritized=True, seed=2)
    fused_stats = fused_policy.learn_on_batch(batch)
    auto_stats = auto_policy.learn_on_batch(batch)
    assert auto_stats["grad_gnorm"] > 0.1  # the clip binds
    fused_weights, auto_weights = fused_policy.get_weights(), auto_policy.get_weights()
    for name in auto_weights:
        np.testing.assert_allclose(fused_weights[name], auto_weights[name], rtol=1e-4, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(fused_stats["td_error"], auto_stats["td_error"], rtol=1e-4, atol=1e-5)
    assert fused_stats.keys() == auto_stats.keys()
    for key in ("loss", "mean_q", "min_q", "max_q", "mean_td_error", "grad_gnorm"):
        assert fused_stats[key] == pytest.approx(auto_stats[key], rel=1e-4, abs=1e-6), key
    # Learning moved the online network and left the target network alone.
    initial = _policy(CASES[case]).get_weights()
    assert any(not np.allclose(fused_weights[name], value) for name, value in initial.items())
    fused_target = fused_policy.get_state()
    auto_target = auto_policy.get_state()
    for key in (key for key in auto_target if key.startswith("target/")):
        np.testing.assert_array_equal(fused_target[key], auto_target[key])


def test_learn_on_batch_takes_the_fused_path_for_built_in_dense_networks(monkeypatch):
    # The fast path is what runs: learn_on_batch never calls loss() on it, and does for
    # a model it does not cover.
    def no_loss(self, train_batch):
        raise AssertionError("loss() called on the fused path")

    monkeypatch.setattr(DQNTorchPolicy, "loss", no_loss)
    for overrides in (CASES["rl_zoo"], {}):  # RL-Zoo's settings and DQN's defaults
        _policy(overrides).learn_on_batch(_batch(2 * ROWS, prioritized=False))
    policy = _policy(CASES["rl_zoo"])
    policy.use_fused_sgd = False
    with pytest.raises(AssertionError, match="fused path"):
        policy.learn_on_batch(_batch(2 * ROWS, prioritized=False))


def test_models_outside_the_fused_path_fall_back_to_autograd():
    config = merge_config(DEFAULT_CONFIG, {"seed": 0, "train_batch_size": ROWS}, "DQN")
    image = DQNTorchPolicy(gym.spaces.Box(0, 255, (10, 10, 3), np.uint8), ACTION_SPACE, config)
    swish = _policy({"model": {"fcnet_hiddens": [8], "fcnet_activation": "swish"}})
    assert not QDenseGraph.supports(image.model)
    assert not QDenseGraph.supports(swish.model)

    class UserQModel(TorchQModel):  # a user's subclass may change the forward pass
        pass

    assert not QDenseGraph.supports(UserQModel(swish.model.spec))
    rng = np.random.default_rng(3)
    for policy in (image, swish):
        batch = _batch(ROWS, prioritized=True)
        size = policy.preprocessor.size
        batch[B.OBS] = rng.uniform(0, 1, (ROWS, size)).astype(np.float32)
        batch[B.NEXT_OBS] = rng.uniform(0, 1, (ROWS, size)).astype(np.float32)
        assert np.isfinite(policy.learn_on_batch(batch)["loss"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU (runs on the lent GPU machine)")
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_path_on_the_gpu(case):
    # The same equalities with the policy on cuda:0 (num_gpus=1).
    policy = _policy(CASES[case], num_gpus=1)
    assert policy.device.type == "cuda"
    batch = _batch(40, prioritized=True)
    fused_grads, fused_stats, fused_loss = _grads_and_stats(policy, batch, slice(8, 8 + ROWS), fused=True)
    auto_grads, auto_stats, auto_loss = _grads_and_stats(policy, batch, slice(8, 8 + ROWS), fused=False)
    for fused, auto in zip(fused_grads, auto_grads):
        assert fused.device.type == "cuda"
        torch.testing.assert_close(fused, auto, rtol=1e-4, atol=1e-6)
    for key in auto_stats:
        torch.testing.assert_close(fused_stats[key], auto_stats[key], rtol=1e-5, atol=1e-6, msg=key)
    assert fused_loss == pytest.approx(auto_loss, rel=1e-5, abs=1e-7)
