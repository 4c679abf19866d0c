"""The one learner loop of each framework (TorchPolicy / TFPolicy.learn_on_batch) and its
hooks, on a tiny policy with two optimizers, against numpy:

* each optimizer steps on d loss_i / d (its own parameters) only, by the Adam step a
  numpy Adam computes from hand-derived gradients, clipped per optimizer, with the
  norms reported as ``grad_gnorm`` / ``grad_gnorm_1``;
* ``optimizer_step_mask`` skips an optimizer (its weights and Adam state stay);
* ``per_row_stats`` come back in the batch's row order, and refuse shuffled minibatches;
* ``after_gradient_step`` runs once per step, and the step count is kept in the state;
* a NaN loss applies no update from the bad step on, naming the loss term;
* ``compute_gradients`` / ``apply_gradients`` equal one ``learn_on_batch`` step;
* the state round trip of both optimizers (``optimizer/...`` and ``optimizer/1/...``);
* DQN on the base loop: its ``td_error`` and weights equal ``loss()`` and an Adam step
  taken by hand, step by step.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import NonFiniteError
from rlstack.sample_batch import SampleBatch, concat_samples

B = SampleBatch
D = 3  # observation size
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (D,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(2)
LR_A, LR_B = 0.01, 0.05
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8

_rng = np.random.default_rng(0)
INIT = {"a/kernel": _rng.normal(0, 0.5, (D, 1)).astype(np.float32), "a/bias": np.array([0.1], np.float32),
        "b/kernel": _rng.normal(0, 0.5, (D, 1)).astype(np.float32), "b/bias": np.array([-0.2], np.float32)}


def _config(**overrides):
    return {"lr": LR_A, "seed": 0, "model": {"fcnet_hiddens": [4]}, "grad_clip": None, "sgd_minibatch_size": 4,
            "num_sgd_iter": 1, **overrides}


def _batch(n=8, seed=1):
    rng = np.random.default_rng(seed)
    return SampleBatch({B.OBS: rng.uniform(-1, 1, (n, D)).astype(np.float32),
                        "y": rng.normal(0, 1, n).astype(np.float32)})


# ----- the two-optimizer policy, once per framework -----------------------------------------
# Two linear layers a(x) and b(x); both losses read both outputs:
#   loss_a = mean((a + b - y)^2)    -> optimizer 0, over a's kernel and bias
#   loss_b = mean((a - 2 b - y)^2)  -> optimizer 1, over b's kernel and bias


def _torch_class():
    import torch

    from rlstack.policies.torch_policy import TorchPolicy

    class TwoOptimizerTorchPolicy(TorchPolicy):
        loss_columns = (B.OBS, "y")

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            # Created after super().__init__(): the optimizers are built on first use.
            self.layer_a, self.layer_b = torch.nn.Linear(D, 1), torch.nn.Linear(D, 1)
            self.set_layers(INIT)
            self.after_steps = 0
            self.masks_seen: list[int] = []

        def set_layers(self, weights):
            with torch.no_grad():
                for name, layer in (("a", self.layer_a), ("b", self.layer_b)):
                    layer.weight.copy_(torch.from_numpy(weights[f"{name}/kernel"].T.copy()))
                    layer.bias.copy_(torch.from_numpy(weights[f"{name}/bias"]))

        def layers(self):
            return {f"{name}/{part}": (layer.weight.detach().numpy().T.copy() if part == "kernel"
                                       else layer.bias.detach().numpy().copy())
                    for name, layer in (("a", self.layer_a), ("b", self.layer_b)) for part in ("kernel", "bias")}

        def make_optimizers(self):
            return [self.make_optimizer(list(self.layer_a.parameters()), self.config["lr"]),
                    self.make_optimizer(list(self.layer_b.parameters()), LR_B)]

        def loss(self, train_batch):
            x, y = train_batch[B.OBS], train_batch["y"]
            a, b = self.layer_a(x)[:, 0], self.layer_b(x)[:, 0]
            loss_a = ((a + b - y) ** 2).mean()
            loss_b = ((a - 2.0 * b - y) ** 2).mean()
            return (loss_a, loss_b), {"loss_a": loss_a, "loss_b": loss_b, "row_y": y * 1.0}

        def after_gradient_step(self):
            self.after_steps += 1

        def step_count(self):
            return self.after_steps

    return TwoOptimizerTorchPolicy


def _tf_class():
    from rlstack.models.tf.framework import tf
    from rlstack.policies.tf_policy import TFPolicy

    class TwoOptimizerTFPolicy(TFPolicy):
        loss_columns = (B.OBS, "y")

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            # Created after super().__init__(): the optimizers are built on first use.
            self.layer_vars = {name: tf.Variable(value) for name, value in INIT.items()}
            self.lr_b = tf.Variable(LR_B, trainable=False)
            self.after_steps = tf.Variable(0, dtype=tf.int64, trainable=False)

        def set_layers(self, weights):
            for name, var in self.layer_vars.items():
                var.assign(weights[name])

        def layers(self):
            return {name: var.numpy().copy() for name, var in self.layer_vars.items()}

        def make_optimizers(self):
            v = self.layer_vars
            return [self.make_optimizer([v["a/kernel"], v["a/bias"]], self.lr),
                    self.make_optimizer([v["b/kernel"], v["b/bias"]], self.lr_b)]

        def loss(self, train_batch):
            v = self.layer_vars
            x, y = train_batch[B.OBS], train_batch["y"]
            a = (x @ v["a/kernel"])[:, 0] + v["a/bias"][0]
            b = (x @ v["b/kernel"])[:, 0] + v["b/bias"][0]
            loss_a = tf.reduce_mean(tf.square(a + b - y))
            loss_b = tf.reduce_mean(tf.square(a - 2.0 * b - y))
            return (loss_a, loss_b), {"loss_a": loss_a, "loss_b": loss_b, "row_y": y * 1.0}

        def after_gradient_step(self):
            self.after_steps.assign_add(1)

        def step_count(self):
            return int(self.after_steps.numpy())

    return TwoOptimizerTFPolicy


def _two_optimizer_class(framework):
    return _torch_class() if framework == "torch" else _tf_class()


def _build(framework, cls=None, **overrides):
    cls = cls or _two_optimizer_class(framework)
    return cls(OBS_SPACE, ACTION_SPACE, _config(**overrides))


def _subclass(framework, **attributes):
    return type("Variant", (_two_optimizer_class(framework),), attributes)


def _steps_taken(policy):
    return int(np.asarray(policy.get_state()["num_grad_steps"]))


# ----- the numpy reference -----------------------------------------------------------------


def _gradients(w, batch):
    """(d loss_a / d a's parameters, d loss_b / d b's parameters), by hand, float64."""
    x, y = batch[B.OBS].astype(np.float64), batch["y"].astype(np.float64)
    a = x @ w["a/kernel"][:, 0] + w["a/bias"][0]
    b = x @ w["b/kernel"][:, 0] + w["b/bias"][0]
    r, s = a + b - y, a - 2.0 * b - y
    # d mean(r^2) / d a = 2 r / n; d mean(s^2) / d b = -4 s / n
    grad_a = {"a/kernel": (2.0 * x.T @ r / len(y))[:, None], "a/bias": np.array([2.0 * r.mean()])}
    grad_b = {"b/kernel": (-4.0 * x.T @ s / len(y))[:, None], "b/bias": np.array([-4.0 * s.mean()])}
    return grad_a, grad_b


class NumpyAdam:
    """torch's Adam update, per parameter name."""

    def __init__(self, lr):
        self.lr, self.t, self.m, self.v = lr, 0, {}, {}

    def step(self, w, grads, clip=None):
        norm = float(np.sqrt(sum((g**2).sum() for g in grads.values())))
        scale = min(1.0, clip / (norm + 1e-6)) if clip is not None else 1.0
        self.t += 1
        for name, g in grads.items():
            g = g * scale
            self.m[name] = BETA1 * self.m.get(name, 0.0) + (1 - BETA1) * g
            self.v[name] = BETA2 * self.v.get(name, 0.0) + (1 - BETA2) * g * g
            denom = np.sqrt(self.v[name]) / np.sqrt(1 - BETA2**self.t) + EPS
            w[name] = w[name] - self.lr / (1 - BETA1**self.t) * self.m[name] / denom
        return norm


def _reference(batch, minibatch, mask=lambda step: (True, True), clip=None):
    """Weights after in-order minibatch steps of the two optimizers, and the norms."""
    w = {name: value.astype(np.float64) for name, value in INIT.items()}
    adam_a, adam_b = NumpyAdam(LR_A), NumpyAdam(LR_B)
    norms = {"grad_gnorm": [], "grad_gnorm_1": []}
    for step, start in enumerate(range(0, batch.count, minibatch)):
        grad_a, grad_b = _gradients(w, batch.slice(start, start + minibatch))
        step_a, step_b = mask(step)
        # Both gradients at the same weights, then both updates.
        if step_a:
            norms["grad_gnorm"].append(adam_a.step(w, grad_a, clip))
        if step_b:
            norms["grad_gnorm_1"].append(adam_b.step(w, grad_b, clip))
    return w, norms


def _assert_layers(policy, expected, rtol=1e-5, atol=1e-6):
    actual = policy.layers()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=rtol, atol=atol, err_msg=name)


# ----- the tests ---------------------------------------------------------------------------------


def test_each_optimizer_moves_only_its_own_parameters_by_its_adam_step(framework):
    # Two full-batch steps: Adam's second step depends on the gradients' size, not only
    # their sign, so a gradient of the wrong loss would not match.
    policy = _build(framework, sgd_minibatch_size=8)
    batch = _batch(n=8)
    policy.learn_on_batch(batch)
    stats = policy.learn_on_batch(batch)
    expected, _ = _reference(concat_samples([batch, batch]), 8)
    _assert_layers(policy, expected)
    assert policy.optimizer is policy.optimizers[0] and len(policy.optimizers) == 2
    # Each optimizer used its own learning rate: a's moved ~LR_A, b's ~LR_B in the first step.
    one = _build(framework, sgd_minibatch_size=8)
    one.learn_on_batch(batch)
    moved = {name: np.abs(one.layers()[name] - INIT[name]).max() for name in INIT}
    assert moved["a/kernel"] == pytest.approx(LR_A, rel=0.05) and moved["b/kernel"] == pytest.approx(LR_B, rel=0.05)
    assert stats["cur_lr"] == pytest.approx(LR_A)
    assert _steps_taken(policy) == 2 and policy.step_count() == 2


def test_in_order_minibatches_and_clipping_per_optimizer(framework):
    cls = _subclass(framework, shuffle_minibatches=False)
    batch = _batch(n=12, seed=2)
    unclipped, norms = _reference(batch, 4)
    # A clip between the two optimizers' norms: only optimizer 1's gradients are scaled.
    clip = 0.5 * (max(norms["grad_gnorm"]) + min(norms["grad_gnorm_1"]))
    assert max(norms["grad_gnorm"]) < clip < min(norms["grad_gnorm_1"])
    policy = _build(framework, cls, grad_clip=clip)
    stats = policy.learn_on_batch(batch)
    expected, clipped_norms = _reference(batch, 4, clip=clip)
    _assert_layers(policy, expected)
    assert any(not np.allclose(expected[k], unclipped[k], rtol=1e-4) for k in ("b/kernel", "b/bias"))
    assert stats["grad_gnorm"] == pytest.approx(np.mean(clipped_norms["grad_gnorm"]), rel=1e-5)
    assert stats["grad_gnorm_1"] == pytest.approx(np.mean(clipped_norms["grad_gnorm_1"]), rel=1e-5)
    # Statistics: the mean of the three steps' losses at the weights each step saw.
    assert np.isfinite(stats["loss_a"]) and np.isfinite(stats["loss_b"])


def test_step_mask_skips_an_optimizer(framework):
    def mask(self, step):
        if framework == "torch":
            self.masks_seen.append(int(step))
            return True, step % 2 == 0
        from rlstack.models.tf.framework import tf

        return True, tf.equal(step % 2, 0)

    cls = _subclass(framework, shuffle_minibatches=False, optimizer_step_mask=mask)
    policy = _build(framework, cls, grad_clip=100.0)
    batch = _batch(n=12, seed=3)
    stats = policy.learn_on_batch(batch)
    expected, norms = _reference(batch, 4, mask=lambda step: (True, step % 2 == 0), clip=100.0)
    _assert_layers(policy, expected)
    if framework == "torch":
        assert policy.masks_seen == [0, 1, 2]
    state = policy.get_state()
    steps_key_a = "optimizer/0/step" if framework == "torch" else "optimizer/step"
    steps_key_b = "optimizer/1/0/step" if framework == "torch" else "optimizer/1/step"
    assert float(state[steps_key_a]) == 3 and float(state[steps_key_b]) == 2
    # grad_gnorm_1 is the mean over the steps optimizer 1 took.
    assert stats["grad_gnorm_1"] == pytest.approx(np.mean(norms["grad_gnorm_1"]), rel=1e-5)

    # The step count goes on over calls: the next call starts at step 3 (b skipped there).
    before = policy.layers()
    policy.learn_on_batch(batch.slice(0, 4))
    np.testing.assert_array_equal(policy.layers()["b/kernel"], before["b/kernel"])
    assert not np.array_equal(policy.layers()["a/kernel"], before["a/kernel"])
    assert _steps_taken(policy) == 4


def test_per_row_stats_come_back_in_row_order(framework):
    cls = _subclass(framework, shuffle_minibatches=False, per_row_stats=("row_y",))
    policy = _build(framework, cls, num_sgd_iter=2)
    batch = _batch(n=10, seed=4)  # minibatches of 4, 4, 2
    stats = policy.learn_on_batch(batch)
    np.testing.assert_array_equal(stats["row_y"], batch["y"])
    assert np.ndim(stats["loss_a"]) == 0


def test_per_row_stats_refuse_shuffled_minibatches(framework):
    cls = _subclass(framework, per_row_stats=("row_y",))
    with pytest.raises(TypeError, match="shuffle_minibatches"):
        _build(framework, cls)


def test_after_gradient_step_runs_once_per_step(framework):
    policy = _build(framework, num_sgd_iter=2)
    policy.learn_on_batch(_batch(n=10))  # 3 minibatches x 2 epochs
    assert policy.step_count() == 6 and _steps_taken(policy) == 6
    policy.learn_on_batch(_batch(n=4))  # 1 minibatch x 2 epochs
    assert policy.step_count() == 8 and _steps_taken(policy) == 8


def test_non_finite_loss_stops_every_optimizer_from_that_step_on(framework):
    cls = _subclass(framework, shuffle_minibatches=False)
    policy = _build(framework, cls)
    batch = _batch(n=12, seed=5)
    batch["y"][6] = np.nan  # the second minibatch
    with pytest.raises(NonFiniteError, match="loss_a"):
        policy.learn_on_batch(batch)
    # The first step was applied, nothing after it.
    expected, _ = _reference(batch.slice(0, 4), 4)
    _assert_layers(policy, expected)
    assert policy.step_count() == 1 and _steps_taken(policy) == 1


def test_a_nan_gradient_under_a_finite_loss_stops_the_update():
    # sqrt(|a - a|) is 0 with a NaN gradient (inf * 0): the loss says nothing, the
    # gradients do, and without grad_clip no norm is taken that would show it.
    import torch

    base = _two_optimizer_class("torch")

    class NanGradient(base):
        def loss(self, train_batch):
            (loss_a, loss_b), stats = super().loss(train_batch)
            a = self.layer_a(train_batch[B.OBS])[:, 0]
            return (loss_a + torch.sqrt((a - a).abs()).sum(), loss_b), stats

    policy = _build("torch", NanGradient)
    before = policy.layers()
    with pytest.raises(NonFiniteError, match="gradients"):
        policy.learn_on_batch(_batch(n=8, seed=7))
    _assert_layers(policy, before, rtol=0, atol=0)
    assert _steps_taken(policy) == 0


def test_compute_and_apply_gradients_equal_one_learn_on_batch_step(framework):
    batch = _batch(n=8, seed=6)
    worker, driver, reference = (_build(framework, sgd_minibatch_size=8, grad_clip=0.5) for _ in range(3))
    grads, stats = worker.compute_gradients(batch)
    assert len(grads) == 4 and {"grad_gnorm", "grad_gnorm_1", "loss_a", "loss_b"} <= set(stats)
    driver.apply_gradients(grads)
    reference.learn_on_batch(batch)
    _assert_layers(driver, reference.layers(), rtol=1e-6, atol=1e-7)
    assert driver.step_count() == 1 and _steps_taken(driver) == 1
    expected, _ = _reference(batch, 8, clip=0.5)
    _assert_layers(driver, expected)


def test_state_round_trip_keeps_both_optimizers(framework):
    policy = _build(framework)
    policy.learn_on_batch(_batch(n=8, seed=7))
    state = {key: np.array(value, copy=True) for key, value in policy.get_state().items()}
    # Optimizer 0 keeps the keys a single-optimizer policy has always saved; optimizer
    # 1's go under optimizer/1/.
    own = {f"optimizer/{key}" for key in policy.optimizers[0].get_state()}
    second = {f"optimizer/1/{key}" for key in policy.optimizers[1].get_state()}
    assert not own & second
    assert {key for key in state if key.startswith("optimizer/")} == own | second
    layers = policy.layers()
    batch = _batch(n=8, seed=8)
    policy.learn_on_batch(batch)

    restored = _build(framework)
    restored.set_layers(layers)
    restored.set_state(state)
    assert _steps_taken(restored) == 2
    restored.learn_on_batch(batch)
    _assert_layers(restored, policy.layers(), rtol=0, atol=0)

    # Control: without optimizer 1's state the second layer moves differently.
    fresh = _build(framework)
    fresh.set_layers(layers)
    fresh.set_state({key: value for key, value in state.items() if key not in second})
    fresh.learn_on_batch(batch)
    assert not np.allclose(fresh.layers()["b/kernel"], policy.layers()["b/kernel"], rtol=1e-6, atol=0)


def test_wrong_number_of_losses_is_a_clear_error(framework):
    def one_loss(self, train_batch):
        losses, stats = type(self).__mro__[1].loss(self, train_batch)
        return losses[0], stats

    policy = _build(framework, _subclass(framework, loss=one_loss))
    with pytest.raises(TypeError, match="returned 1 loss.*2 optimizer"):
        policy.learn_on_batch(_batch())


@pytest.mark.parametrize("returned, message", [
    ("none", "returned no optimizer; return at least one"),
    ("twice", "is in optimizers 0 and 1; give each one to one optimizer"),
])
def test_make_optimizers_is_checked_once_for_both_frameworks(framework, returned, message):
    def make_optimizers(self):
        if returned == "none":
            return []
        own = type(self).__mro__[1].make_optimizers(self)
        members = own[0].params if framework == "torch" else own[0].variables
        return [own[0], self.make_optimizer(list(members), 0.1)]

    policy = _build(framework, _subclass(framework, make_optimizers=make_optimizers))
    with pytest.raises(TypeError, match=message):
        policy.learn_on_batch(_batch())


# ----- DQN on the base loop --------------------------------------------------------------------


@pytest.mark.parametrize("double_q", [True, False])
def test_dqn_learn_on_batch_equals_its_loss_stepped_by_hand(framework, double_q):
    """One Adam step per train_batch_size rows, in order, with the target network fixed:
    td_error, the loss statistic and the weights equal ``loss()`` on each chunk followed
    by a clipped Adam step taken by hand with a second copy of the policy."""
    from rlstack.trainers.common.config import merge_config
    from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG

    config = merge_config(DEFAULT_CONFIG, {"seed": 0, "model": {"fcnet_hiddens": [16]}, "hiddens": [8],
                                           "train_batch_size": 16, "lr": 1e-2, "grad_clip": 0.5,
                                           "double_q": double_q}, "DQN")
    if framework == "torch":
        from rlstack.trainers.dqn.dqn_torch_policy import DQNTorchPolicy as cls
    else:
        from rlstack.trainers.dqn.dqn_tf_policy import DQNTFPolicy as cls
    looped, by_hand = cls(OBS_SPACE, ACTION_SPACE, config), cls(OBS_SPACE, ACTION_SPACE, config)
    rng = np.random.default_rng(9)
    n = 48
    batch = SampleBatch({
        B.OBS: rng.uniform(-1, 1, (n, D)).astype(np.float32), B.ACTIONS: rng.integers(0, 2, n),
        B.REWARDS: rng.normal(0, 1.5, n).astype(np.float32), B.NEXT_OBS: rng.uniform(-1, 1, (n, D)).astype(np.float32),
        B.TERMINATEDS: rng.random(n) < 0.2, B.DISCOUNTS: np.full(n, 0.9, np.float32),
        B.WEIGHTS: rng.uniform(0.5, 1.5, n).astype(np.float32)})
    # A target network unlike the online one, in both copies.
    weights = looped.get_weights()
    target = {k: v + rng.normal(0, 0.3, v.shape).astype(np.float32) for k, v in weights.items()}
    for policy in (looped, by_hand):
        policy.set_state({**{f"weights/{k}": v for k, v in weights.items()},
                          **{f"target/{k}": v for k, v in target.items()}})

    stats = looped.learn_on_batch(batch)

    td_errors, losses = [], []
    for start in range(0, n, 16):
        chunk = batch.slice(start, start + 16)
        loss, chunk_stats, grads = _loss_and_gradients(by_hand, chunk)
        td_errors.append(chunk_stats["td_error"])
        losses.append(loss)
        _apply_clipped(by_hand, grads, 0.5)
    np.testing.assert_allclose(stats["td_error"], np.concatenate(td_errors), rtol=1e-5, atol=1e-6)
    assert stats["loss"] == pytest.approx(np.mean(losses), rel=1e-5)
    for name, value in by_hand.get_weights().items():
        np.testing.assert_allclose(looped.get_weights()[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def _loss_and_gradients(policy, chunk):
    """loss(), its statistics and d loss / d parameters on one chunk, with autograd/tape."""
    if policy.framework == "torch":
        import torch

        loss, stats = policy.loss({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in chunk.items()})
        grads = torch.autograd.grad(loss, policy.optimizer.params)
        return float(loss.detach()), {k: v.detach().numpy() for k, v in stats.items()}, [g.numpy() for g in grads]
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss, stats = policy.loss({k: tf.convert_to_tensor(v) for k, v in chunk.items()})
    grads = tape.gradient(loss, policy.optimizer.variables)
    return float(loss), {k: v.numpy() for k, v in stats.items()}, [g.numpy() for g in grads]


def _apply_clipped(policy, grads, clip):
    norm = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads))
    scale = min(1.0, clip / (norm + 1e-6))
    policy.apply_gradients([(g * scale).astype(np.float32) for g in grads])


def test_torch_learners_flush_subnormals_in_every_intra_op_thread():
    """Adam's moments of a weight whose gradient is zero decay through the subnormal
    range, where CPU arithmetic is many times slower; the torch learner flushes them to
    zero (as TF does) in the driver thread and in torch's intra-op threads. Checked in a
    fresh interpreter: the mode is per thread and is inherited by threads created later."""
    import subprocess
    import sys

    script = (
        "import torch\n"
        "torch.set_num_threads(2)\n"
        "import rlstack.policies.torch_policy\n"
        # (bit patterns compared, not values: comparisons treat subnormals as zero too)
        # 1e-40 from its bit pattern (a cast would flush it already); split between threads
        "x = torch.full((1_000_000,), 71362, dtype=torch.int32).view(torch.float32)\n"
        "y = x * 1.0\n"
        "print(int((y.view(torch.int32) != 0).sum()))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "0", f"{proc.stdout.strip()} subnormal products survived"
