"""V-trace (Espeholt et al. 2018) and IMPALA's loss against references written from the paper.

Covered here:

* the numpy reference :func:`rlstack.trainers.impala.vtrace.vtrace` against eq. 1 of the
  paper written as its explicit sum (not the backward recursion the library uses),
  ``v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t V`` with
  ``delta_t V = min(rho_bar, rho_t) (r_t + gamma_t V(x_{t+1}) - V(x_t))`` and
  ``c_i = min(c_bar, rho_i)`` (the paper's ``gamma^{t-s}`` generalised to per-step
  discounts, 0 at an episode end), and the policy-gradient advantages
  ``min(pg_rho_bar, rho_s) (r_s + gamma_s v_{s+1} - V(x_s))``, on a trajectory whose
  numbers are also worked out by hand;
* numpy vs torch vs TF on random inputs, the on-policy reduction (all rhos 1, no
  clipping: ``v_s`` is the n-step return bootstrapped from ``V(x_T)``) and the TF version
  under a ``tf.function`` with ``[None, None]`` inputs called with two different T;
* :func:`fold_truncation` (a time-limit end becomes ``r + gamma V(x_final)`` with
  ``gamma_t = 0``);
* the IMPALA loss of :class:`ImpalaTorchPolicy` and :class:`ImpalaTFPolicy`: torch vs TF,
  and each against a float64 numpy reference built from the numpy ``vtrace`` and the
  policy's own forward pass, on env-major fragments with a termination, a truncation
  and behaviour log-probs that put rhos on both sides of the clip;
* ``vtrace_drop_last_ts`` True (the default: each fragment's last step only bootstraps)
  and False (1.x's tuned examples: every step learned on): the loss against the
  reference in each framework, and on-policy value targets worked out as n-step returns;
* one ``learn_on_batch`` with Adam and with the paper's RMSProp (grad clip 40): torch
  and TF reach the same weights, and ``get_state`` / ``set_state`` carry the optimizer
  state (a restored policy repeats the next step exactly);
* IMPALA's config checks through ``IMPALATrainer.merge_and_validate``.

Each framework is skipped on its own when it is not installed (the loss and learning
parity tests need both).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.impala.fragments import VALID, fixed_length_fragments
from rlstack.trainers.impala.vtrace import fold_truncation, vtrace
from tests.helpers.tensors import as_tensors, to_float

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
T_FRAG = 5  # rollout_fragment_length
NUM_SEQ = 4  # sequences per train batch
GAMMA = 0.9
BASE_CONFIG = {"seed": 3, "gamma": GAMMA, "rollout_fragment_length": T_FRAG, "train_batch_size": T_FRAG * NUM_SEQ,
               "model": {"fcnet_hiddens": [16]}, "entropy_coeff": 0.05, "vf_loss_coeff": 0.5, "lr": 1e-2}


# ----- the explicit-sum reference (eq. 1) -----------------------------------------------------


def vtrace_by_sum(log_rhos, discounts, rewards, values, bootstrap_value, rho_bar, pg_rho_bar, c_bar):
    """V-trace targets and advantages in float64, as eq. 1's sum (O(T^2), no recursion)."""
    log_rhos, discounts, rewards, values = (np.asarray(x, np.float64) for x in (log_rhos, discounts, rewards, values))
    bootstrap_value = np.asarray(bootstrap_value, np.float64)
    T, nb = values.shape
    rhos = np.exp(log_rhos)
    vs = np.empty((T, nb))
    pg = np.empty((T, nb))
    for b in range(nb):
        next_values = [values[t + 1, b] if t + 1 < T else bootstrap_value[b] for t in range(T)]
        deltas = [(rhos[t, b] if rho_bar is None else min(rho_bar, rhos[t, b]))
                  * (rewards[t, b] + discounts[t, b] * next_values[t] - values[t, b]) for t in range(T)]
        for s in range(T):
            total = values[s, b]
            for t in range(s, T):
                weight = 1.0
                for i in range(s, t):
                    weight *= discounts[i, b] * min(c_bar, rhos[i, b])
                total += weight * deltas[t]
            vs[s, b] = total
        for s in range(T):
            v_next = vs[s + 1, b] if s + 1 < T else bootstrap_value[b]
            pg_rho = rhos[s, b] if pg_rho_bar is None else min(pg_rho_bar, rhos[s, b])
            pg[s, b] = pg_rho * (rewards[s, b] + discounts[s, b] * v_next - values[s, b])
    return vs, pg


# A 4-step trajectory (B = 1): rhos 2 and 1.5 are above the clip 1, 0.5 and 0.8 below;
# the episode ends at step 2 (gamma_2 = 0).
HAND = {
    "log_rhos": np.log([[2.0], [0.5], [0.8], [1.5]]),
    "discounts": np.array([[0.9], [0.8], [0.0], [0.9]]),
    "rewards": np.array([[1.0], [-2.0], [0.5], [3.0]]),
    "values": np.array([[0.5], [1.5], [-1.0], [2.0]]),
    "bootstrap_value": np.array([4.0]),
}
# By hand, with rho_bar = pg_rho_bar = c_bar = 1: clipped rhos = c = [1, .5, .8, 1],
# V(x_{t+1}) = [1.5, -1, 2, 4]:
#   delta = [1 (1 + .9*1.5 - .5), .5 (-2 + .8*(-1) - 1.5), .8 (.5 + 0 - (-1)), 1 (3 + .9*4 - 2)]
#         = [1.85, -2.15, 1.2, 4.6]
#   v_3 = 2 + 4.6 = 6.6
#   v_2 = -1 + 1.2 (+ gamma_2 = 0 times the rest) = 0.2
#   v_1 = 1.5 - 2.15 + (.8*.5) 1.2 (+ 0) = -0.17
#   v_0 = .5 + 1.85 + (.9*1)(-2.15) + (.9*1 * .8*.5) 1.2 (+ 0) = 0.847
#   A_s = pg_rho_s (r_s + gamma_s v_{s+1} - V_s) with v_4 = V(x_4) = 4:
#   A = [1 (1 + .9*(-.17) - .5), .5 (-2 + .8*.2 - 1.5), .8 (.5 + 0 - (-1)), 1 (3 + .9*4 - 2)]
#     = [0.347, -1.67, 1.2, 4.6]
HAND_CLIPPED = ([0.847, -0.17, 0.2, 6.6], [0.347, -1.67, 1.2, 4.6])
# Without rho / pg-rho clipping (c still clipped at 1): delta_0 = 2 * 1.85 = 3.7 and
# delta_3 = 1.5 * 4.6 = 6.9, so v_3 = 8.9, v_0 = .5 + 3.7 - 1.935 + .432 = 2.697, and
# A_0 = 2 * .347 = 0.694, A_3 = 6.9 (v_1, v_2, A_1, A_2 unchanged).
HAND_UNCLIPPED = ([2.697, -0.17, 0.2, 8.9], [0.694, -1.67, 1.2, 6.9])


@pytest.mark.parametrize("clip, expected", [(1.0, HAND_CLIPPED), (None, HAND_UNCLIPPED)], ids=["clip1", "noclip"])
def test_vtrace_by_hand(clip, expected):
    by_sum = vtrace_by_sum(**HAND, rho_bar=clip, pg_rho_bar=clip, c_bar=1.0)
    np.testing.assert_allclose(by_sum[0][:, 0], expected[0], rtol=1e-12)
    np.testing.assert_allclose(by_sum[1][:, 0], expected[1], rtol=1e-12)
    vs, pg = vtrace(**HAND, clip_rho_threshold=clip, clip_pg_rho_threshold=clip, clip_c_threshold=1.0)
    assert vs.dtype == np.float64 and vs.shape == (4, 1) and pg.shape == (4, 1)
    np.testing.assert_allclose(vs[:, 0], expected[0], rtol=1e-10)
    np.testing.assert_allclose(pg[:, 0], expected[1], rtol=1e-10)


@pytest.mark.parametrize("rho_bar, pg_rho_bar, c_bar", [(1.0, 1.0, 1.0), (None, None, 1.0), (1.5, 0.8, 0.7),
                                                         (None, 1.0, 2.0)])
def test_vtrace_matches_explicit_sum(rho_bar, pg_rho_bar, c_bar):
    rng = np.random.default_rng(0)
    T, nb = 7, 3
    log_rhos = rng.uniform(-2, 2, (T, nb))
    discounts = np.where(rng.random((T, nb)) < 0.2, 0.0, rng.uniform(0.5, 1.0, (T, nb)))
    discounts[3, 0] = 0.0
    args = (log_rhos, discounts, rng.normal(0, 1, (T, nb)), rng.normal(0, 1, (T, nb)), rng.normal(0, 1, nb))
    expected_vs, expected_pg = vtrace_by_sum(*args, rho_bar=rho_bar, pg_rho_bar=pg_rho_bar, c_bar=c_bar)
    vs, pg = vtrace(*args, clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar, clip_c_threshold=c_bar)
    np.testing.assert_allclose(vs, expected_vs, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pg, expected_pg, rtol=1e-10, atol=1e-12)


# ----- numpy vs torch vs TF --------------------------------------------------------------------


def _random_inputs(T, nb, seed):
    rng = np.random.default_rng(seed)
    discounts = np.where(rng.random((T, nb)) < 0.25, 0.0, GAMMA).astype(np.float32)
    if T > 2:
        discounts[T // 2, 0] = 0.0
    return (rng.uniform(-2, 2, (T, nb)).astype(np.float32), discounts,
            rng.normal(0, 1, (T, nb)).astype(np.float32), rng.normal(0, 1, (T, nb)).astype(np.float32),
            rng.normal(0, 1, nb).astype(np.float32))


def _torch_vtrace(inputs, **kwargs):
    torch = pytest.importorskip("torch")
    from rlstack.trainers.impala.vtrace_torch import vtrace as vtrace_torch

    out = vtrace_torch(*(torch.from_numpy(x) for x in inputs), **kwargs)
    assert all(t.dtype == torch.float32 and not t.requires_grad for t in out)
    return tuple(t.numpy() for t in out)


def _tf_vtrace(inputs, **kwargs):
    tf = pytest.importorskip("tensorflow")
    from rlstack.trainers.impala.vtrace_tf import vtrace as vtrace_tf

    out = vtrace_tf(*(tf.convert_to_tensor(x) for x in inputs), **kwargs)
    assert all(t.dtype == tf.float32 for t in out)
    return tuple(t.numpy() for t in out)


FRAMEWORK_VTRACE = {"torch": _torch_vtrace, "tf": _tf_vtrace}
CLIPS = [(1.0, 1.0), (None, None), (1.0, None), (None, 1.0)]


@pytest.mark.parametrize("rho_bar, pg_rho_bar", CLIPS, ids=[f"rho={r}-pg={p}" for r, p in CLIPS])
@pytest.mark.parametrize("T", [1, 5, 20])
@pytest.mark.parametrize("nb", [1, 4])
def test_frameworks_match_numpy(framework, T, nb, rho_bar, pg_rho_bar):
    inputs = _random_inputs(T, nb, seed=100 * T + nb)
    kwargs = dict(clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar, clip_c_threshold=1.0)
    expected_vs, expected_pg = vtrace(*inputs, **kwargs)
    vs, pg = FRAMEWORK_VTRACE[framework](inputs, **kwargs)
    assert vs.shape == pg.shape == (T, nb)
    np.testing.assert_allclose(vs, expected_vs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pg, expected_pg, rtol=1e-5, atol=1e-6)


def test_torch_matches_tf():
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    for T, nb in [(1, 4), (5, 1), (20, 4)]:
        for rho_bar, pg_rho_bar in CLIPS:
            inputs = _random_inputs(T, nb, seed=7 * T + nb)
            kwargs = dict(clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar, clip_c_threshold=1.0)
            for a, b in zip(_torch_vtrace(inputs, **kwargs), _tf_vtrace(inputs, **kwargs)):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _discounted_returns(rewards, discounts, bootstrap_value):
    returns = np.empty(rewards.shape)
    acc = np.asarray(bootstrap_value, np.float64)
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + discounts[t] * acc
        returns[t] = acc
    return returns


@pytest.mark.parametrize("kind", ["numpy", "torch", "tf"])
def test_on_policy_vtrace_is_n_step_return(kind):
    _, discounts, rewards, values, bootstrap = _random_inputs(12, 3, seed=5)
    inputs = (np.zeros_like(values), discounts, rewards, values, bootstrap)
    expected = _discounted_returns(rewards.astype(np.float64), discounts.astype(np.float64), bootstrap)
    kwargs = dict(clip_rho_threshold=None, clip_pg_rho_threshold=None, clip_c_threshold=1.0)
    if kind == "numpy":
        vs, pg = vtrace(*inputs, **kwargs)
    else:
        vs, pg = FRAMEWORK_VTRACE[kind](inputs, **kwargs)
    np.testing.assert_allclose(vs, expected, rtol=1e-5, atol=1e-6)
    # The advantages are then the n-step return minus the baseline.
    np.testing.assert_allclose(pg, expected - values, rtol=1e-5, atol=1e-6)
    # And clipping at 1 changes nothing when every rho is 1.
    clipped = vtrace(*inputs)
    np.testing.assert_allclose(clipped[0], expected, rtol=1e-6, atol=1e-6)


def test_tf_vtrace_in_tf_function_with_varying_T():
    tf = pytest.importorskip("tensorflow")
    from rlstack.trainers.impala.vtrace_tf import vtrace as vtrace_tf

    matrix, vector = tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.float32)
    fn = tf.function(lambda lr, d, r, v, bv: vtrace_tf(lr, d, r, v, bv, 1.0, 1.0, 1.0),
                     input_signature=[matrix] * 4 + [vector])
    for T, nb in [(3, 2), (9, 2), (4, 5)]:
        inputs = _random_inputs(T, nb, seed=T)
        vs, pg = fn(*(tf.convert_to_tensor(x) for x in inputs))
        expected_vs, expected_pg = vtrace(*inputs, 1.0, 1.0, 1.0)
        np.testing.assert_allclose(vs.numpy(), expected_vs, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(pg.numpy(), expected_pg, rtol=1e-5, atol=1e-6)
    # One trace served every T and B.
    assert fn.experimental_get_tracing_count() == 1


# ----- fold_truncation ---------------------------------------------------------------------------


def test_fold_truncation():
    rewards = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    discounts = np.array([[GAMMA, 0.0], [GAMMA, GAMMA], [GAMMA, GAMMA]])  # [0, 1] terminated
    truncateds = np.array([[False, False], [True, False], [False, True]])
    final_values = np.array([[7.0, 8.0], [10.0, 11.0], [12.0, -13.0]])  # read only where truncated
    folded_rewards, folded_discounts = fold_truncation(rewards, discounts, truncateds, final_values, GAMMA)
    np.testing.assert_allclose(folded_rewards, [[1.0, 2.0], [3.0 + GAMMA * 10.0, 4.0], [5.0, 6.0 - GAMMA * 13.0]])
    np.testing.assert_array_equal(folded_discounts, [[GAMMA, 0.0], [0.0, GAMMA], [GAMMA, 0.0]])
    # The inputs are left alone.
    assert rewards[1, 0] == 3.0 and discounts[1, 0] == GAMMA

    # A truncation at the last step: V-trace's target there is r + gamma V(x_final),
    # not the bootstrap of the next fragment.
    vs, _ = vtrace(np.zeros((3, 2)), folded_discounts, folded_rewards, np.zeros((3, 2)), np.array([100.0, 100.0]),
                   None, None, 1.0)
    assert vs[2, 1] == pytest.approx(6.0 - GAMMA * 13.0)
    assert vs[1, 0] == pytest.approx(3.0 + GAMMA * 10.0)
    assert vs[0, 0] == pytest.approx(1.0 + GAMMA * (3.0 + GAMMA * 10.0))


# ----- the IMPALA loss: torch vs TF vs numpy --------------------------------------------------------


def _impala_config(**overrides):
    from rlstack.trainers.impala import DEFAULT_CONFIG

    return merge_config(DEFAULT_CONFIG, {**BASE_CONFIG, **overrides}, "IMPALA")


def _both(**overrides):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from rlstack.trainers.impala.impala_tf_policy import ImpalaTFPolicy
    from rlstack.trainers.impala.impala_torch_policy import ImpalaTorchPolicy

    config = _impala_config(**overrides)
    return ImpalaTorchPolicy(OBS_SPACE, ACTION_SPACE, config), ImpalaTFPolicy(OBS_SPACE, ACTION_SPACE, config)


def _build(framework, **overrides):
    if framework == "torch":
        from rlstack.trainers.impala.impala_torch_policy import ImpalaTorchPolicy as cls
    else:
        from rlstack.trainers.impala.impala_tf_policy import ImpalaTFPolicy as cls
    return cls(OBS_SPACE, ACTION_SPACE, _impala_config(**overrides))


def _copy(arrays):
    return {key: np.array(value, copy=True) for key, value in arrays.items()}


def _perturb(weights, seed, scale=0.4):
    """Weights moved away from the init (whose policy and value heads start near 0), so
    that logits, values and their gradients are O(1)."""
    rng = np.random.default_rng(seed)
    return {name: (value + rng.normal(0.0, scale, value.shape)).astype(np.float32) for name, value in weights.items()}


def _forward(policy, obs):
    """(logits, values) in float64 from the policy's own model."""
    if policy.framework == "torch":
        import torch

        with torch.no_grad():
            logits, values = policy.model.policy_and_value(torch.from_numpy(obs))
        return logits.numpy().astype(np.float64), values.numpy().astype(np.float64)
    import tensorflow as tf

    logits, values = policy.model.policy_and_value(tf.convert_to_tensor(obs))
    return logits.numpy().astype(np.float64), values.numpy().astype(np.float64)


def _log_softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _make_batch(policy, seed, reward_scale=1.0):
    """NUM_SEQ fragments of T_FRAG steps, env-major (each fragment's rows contiguous).

    Sequence 1 terminates at its step 2, sequence 2 is truncated at its step 1 with
    V(x_final) = 2.5; every fragment's last row carries a bootstrap value too (as the
    rollout worker writes it), which IMPALA's loss must ignore. The behaviour log-probs
    are the current policy's plus noise, so the rhos lie on both sides of 1.
    """
    rng = np.random.default_rng(seed)
    n = T_FRAG * NUM_SEQ
    obs = rng.uniform(-1, 1, (n, OBS_SPACE.shape[0])).astype(np.float32)
    actions = rng.integers(0, ACTION_SPACE.n, n).astype(np.int64)
    logits, _ = _forward(policy, obs)
    target_logp = _log_softmax(logits)[np.arange(n), actions]
    terminateds = np.zeros(n, dtype=bool)
    truncateds = np.zeros(n, dtype=bool)
    bootstrap_value = np.zeros(n, dtype=np.float32)
    terminateds[1 * T_FRAG + 2] = True
    truncateds[2 * T_FRAG + 1] = True
    bootstrap_value[2 * T_FRAG + 1] = 2.5
    bootstrap_value[T_FRAG - 1 :: T_FRAG] = rng.normal(0, 3, NUM_SEQ)
    return SampleBatch({
        B.OBS: obs,
        B.ACTIONS: actions,
        B.ACTION_LOGP: (target_logp + rng.normal(0, 0.7, n)).astype(np.float32),
        B.REWARDS: (reward_scale * rng.normal(0, 1, n)).astype(np.float32),
        B.TERMINATEDS: terminateds,
        B.TRUNCATEDS: truncateds,
        B.BOOTSTRAP_VALUE: bootstrap_value,
        VALID: np.ones(n, dtype=np.float32),
    })


def _time_major(x):
    """[num_seq * T, ...] env-major rows to [T, num_seq, ...]."""
    x = np.asarray(x)
    return np.swapaxes(x.reshape(-1, T_FRAG, *x.shape[1:]), 0, 1)


def numpy_impala_loss(policy, batch):
    """IMPALA's loss in float64 from the numpy ``vtrace`` and ``policy``'s forward pass:
    V-trace over steps 0..T-2 of each fragment (``vtrace_drop_last_ts``, the default) or
    0..T-1, bootstrapped from V(x_{T-1})."""
    cfg = policy.config
    steps = slice(None, -1) if cfg["vtrace_drop_last_ts"] else slice(None)
    logits, values = _forward(policy, batch[B.OBS])
    log_probs = _log_softmax(logits)
    n = batch.count
    logp = _time_major(log_probs[np.arange(n), batch[B.ACTIONS]])
    entropy = _time_major(-(np.exp(log_probs) * log_probs).sum(axis=1))
    values = _time_major(values)
    log_rhos = logp - _time_major(batch[B.ACTION_LOGP]).astype(np.float64)
    terminateds, truncateds = _time_major(batch[B.TERMINATEDS]), _time_major(batch[B.TRUNCATEDS])
    discounts = np.where(terminateds, 0.0, GAMMA)
    rewards, discounts = fold_truncation(_time_major(batch[B.REWARDS]).astype(np.float64), discounts, truncateds,
                                         _time_major(batch[B.BOOTSTRAP_VALUE]).astype(np.float64), GAMMA)
    vs, pg_adv = vtrace(log_rhos[steps], discounts[steps], rewards[steps], values[steps], values[-1],
                        cfg["vtrace_clip_rho_threshold"], cfg["vtrace_clip_pg_rho_threshold"], 1.0)
    valid = _time_major(batch[VALID])[steps]  # padding rows (multi-agent fragments) count for nothing
    pi_loss = -np.sum(logp[steps] * pg_adv * valid)
    vf_loss = 0.5 * np.sum((values[steps] - vs) ** 2 * valid)
    entropy_sum = np.sum(entropy[steps] * valid)
    total = pi_loss + cfg["vf_loss_coeff"] * vf_loss - cfg["entropy_coeff"] * entropy_sum
    return {"total_loss": total, "policy_loss": pi_loss, "vf_loss": vf_loss, "entropy": entropy_sum / valid.sum(),
            "mean_rho": np.sum(np.exp(log_rhos[steps]) * valid) / valid.sum(), "log_rhos": log_rhos}


LOSS_KEYS = ("total_loss", "policy_loss", "vf_loss", "entropy", "mean_rho")


def test_impala_loss_parity_and_numpy_reference():
    torch_policy, tf_policy = _both()
    # Same seed, same canonical initial weights.
    torch_weights, tf_weights = _copy(torch_policy.get_weights()), _copy(tf_policy.get_weights())
    assert torch_weights.keys() == tf_weights.keys()
    for name in torch_weights:
        np.testing.assert_array_equal(torch_weights[name], tf_weights[name], err_msg=name)
    weights = _perturb(torch_weights, seed=1)
    torch_policy.set_weights(weights)
    tf_policy.set_weights(weights)
    batch = _make_batch(torch_policy, seed=2)

    expected = numpy_impala_loss(torch_policy, batch)
    # The batch exercises both clipping branches on the steps V-trace uses.
    rhos = np.exp(expected["log_rhos"][:-1])
    assert np.any(rhos > 1.2) and np.any(rhos < 0.8)
    # ...and the numpy reference sees the same forward pass through either model.
    tf_expected = numpy_impala_loss(tf_policy, batch)
    for key in LOSS_KEYS:
        assert tf_expected[key] == pytest.approx(expected[key], rel=1e-5), key

    results = {}
    for framework, policy in (("torch", torch_policy), ("tf", tf_policy)):
        loss, stats = policy.loss(as_tensors(framework, batch))
        assert to_float(loss) == pytest.approx(to_float(stats["total_loss"]), rel=1e-7)
        results[framework] = {key: to_float(stats[key]) for key in (*LOSS_KEYS, "vf_explained_var")}
        for key in LOSS_KEYS:
            np.testing.assert_allclose(results[framework][key], expected[key], rtol=1e-5, err_msg=f"{framework} {key}")
    for key in (*LOSS_KEYS, "vf_explained_var"):
        np.testing.assert_allclose(results["torch"][key], results["tf"][key], rtol=1e-5, atol=1e-7, err_msg=key)


def test_impala_loss_reference_is_sensitive_to_the_batch_details():
    """Controls for the reference test: the truncation's bootstrap value, the
    termination and the behaviour log-probs each change the loss, while the bootstrap
    values of the fragments' last rows (dropped by V-trace) do not."""
    pytest.importorskip("torch")
    policy = _build("torch")
    policy.set_weights(_perturb(_copy(policy.get_weights()), seed=1))
    batch = _make_batch(policy, seed=2)
    base = numpy_impala_loss(policy, batch)["total_loss"]
    loss, _ = policy.loss(as_tensors("torch", batch))
    assert to_float(loss) == pytest.approx(base, rel=1e-5)

    def changed(column, rows, value):
        columns = {key: np.array(v, copy=True) for key, v in batch.items()}
        columns[column][rows] = value
        return to_float(policy.loss(as_tensors("torch", SampleBatch(columns)))[0])

    assert abs(changed(B.BOOTSTRAP_VALUE, 2 * T_FRAG + 1, -4.0) - base) > 1e-3
    assert abs(changed(B.TERMINATEDS, 1 * T_FRAG + 2, False) - base) > 1e-3
    assert abs(changed(B.ACTION_LOGP, slice(None), batch[B.ACTION_LOGP] + 0.3) - base) > 1e-3
    last_rows = changed(B.BOOTSTRAP_VALUE, slice(T_FRAG - 1, None, T_FRAG), 50.0)
    assert last_rows == pytest.approx(base, rel=1e-6)


def test_impala_loss_with_and_without_drop_last_ts_matches_the_reference(framework):
    """vtrace_drop_last_ts=False (1.x's cartpole-impala.yaml) learns on every step of a
    fragment, the last bootstrapping from its own value; True (the default) leaves the
    last step out. Both against the numpy reference, and the last step's reward matters
    to the loss only without the drop."""
    losses = {}
    for drop_last in (True, False):
        policy = _build(framework, vtrace_drop_last_ts=drop_last)
        policy.set_weights(_perturb(_copy(policy.get_weights()), seed=1))
        batch = _make_batch(policy, seed=2)
        expected = numpy_impala_loss(policy, batch)
        _, stats = policy.loss(as_tensors(framework, batch))
        for key in LOSS_KEYS:
            np.testing.assert_allclose(to_float(stats[key]), expected[key], rtol=1e-5, err_msg=f"{drop_last} {key}")
        columns = {key: np.array(v, copy=True) for key, v in batch.items()}
        columns[B.REWARDS][T_FRAG - 1 :: T_FRAG] += 5.0  # every fragment's last step
        moved = to_float(policy.loss(as_tensors(framework, SampleBatch(columns)))[0])
        losses[drop_last] = (expected["total_loss"], moved)
    assert losses[True][1] == pytest.approx(losses[True][0], rel=1e-6)
    assert abs(losses[False][1] - losses[False][0]) > 1e-2
    assert abs(losses[False][0] - losses[True][0]) > 1e-3


@pytest.mark.parametrize("drop_last", [True, False])
def test_on_policy_value_targets_by_hand_with_and_without_the_last_step(framework, drop_last):
    """On-policy (all rhos 1) and without episode ends, V-trace's targets are n-step
    returns to the fragment's end, bootstrapped from V(x_{T-1}): with the drop the steps
    0..T-2, ``v_t = sum_{k=t}^{T-2} gamma^{k-t} r_k + gamma^{T-1-t} V(x_{T-1})``; without
    it the steps 0..T-1, ``v_t = sum_{k=t}^{T-1} gamma^{k-t} r_k + gamma^{T-t} V(x_{T-1})``
    (the last step's own target is ``r_{T-1} + gamma V(x_{T-1})``). The value loss is
    ``0.5 sum (V(x_t) - v_t)^2`` over those steps."""
    policy = _build(framework, vtrace_drop_last_ts=drop_last)
    policy.set_weights(_perturb(_copy(policy.get_weights()), seed=1))
    batch = _make_batch(policy, seed=2)
    logits, values = _forward(policy, batch[B.OBS])
    n = batch.count
    batch[B.ACTION_LOGP] = _log_softmax(logits)[np.arange(n), batch[B.ACTIONS]].astype(np.float32)
    batch[B.TERMINATEDS] = np.zeros(n, dtype=bool)
    batch[B.TRUNCATEDS] = np.zeros(n, dtype=bool)
    values, rewards = _time_major(values), _time_major(batch[B.REWARDS]).astype(np.float64)
    num_steps = T_FRAG - 1 if drop_last else T_FRAG
    vf_loss = 0.0
    for seq in range(NUM_SEQ):
        for t in range(num_steps):
            target = sum(GAMMA ** (k - t) * rewards[k, seq] for k in range(t, num_steps))
            target += GAMMA ** (num_steps - t) * values[-1, seq]
            vf_loss += 0.5 * (values[t, seq] - target) ** 2
    _, stats = policy.loss(as_tensors(framework, batch))
    assert to_float(stats["vf_loss"]) == pytest.approx(vf_loss, rel=1e-5)
    assert to_float(stats["mean_rho"]) == pytest.approx(1.0, rel=1e-5)


def _agent_pieces(policy, seed):
    """A multi-agent policy's rows: agent 0 acts 7 steps and is cut open (its worker's
    bootstrap value 1.5), agent 1 acts 3 steps and terminates, both in episode 9."""
    batch = _make_batch(policy, seed)
    rows = SampleBatch({key: value[:10] for key, value in batch.items() if key != VALID})
    rows[B.TERMINATEDS] = np.arange(10) == 9
    rows[B.TRUNCATEDS] = np.zeros(10, dtype=bool)
    rows[B.BOOTSTRAP_VALUE] = np.where(np.arange(10) == 6, 1.5, 0.0).astype(np.float32)
    rows[B.EPS_ID] = np.full(10, 9)
    rows[B.AGENT_INDEX] = np.r_[np.zeros(7, np.int64), np.ones(3, np.int64)]
    return rows


def test_multi_agent_pieces_become_fragments_whose_padding_the_loss_leaves_out():
    torch_policy, tf_policy = _both()
    weights = _perturb(_copy(torch_policy.get_weights()), seed=1)
    for policy in (torch_policy, tf_policy):
        policy.set_weights(weights)
    fragments = fixed_length_fragments(_agent_pieces(torch_policy, seed=5), T_FRAG)
    # 7 rows -> two fragments (3 padding rows), 3 rows -> one fragment (2 padding rows).
    assert list(fragments[VALID]) == [1] * 7 + [0] * 3 + [1] * 3 + [0] * 2
    assert list(np.flatnonzero(fragments[B.TRUNCATEDS])) == [6]  # the open end bootstraps from 1.5
    assert fragments[B.BOOTSTRAP_VALUE][6] == 1.5
    assert list(np.flatnonzero(fragments[B.TERMINATEDS])) == [7, 8, 9, 12, 13, 14]
    expected = numpy_impala_loss(torch_policy, fragments)
    for framework, policy in (("torch", torch_policy), ("tf", tf_policy)):
        _, stats = policy.loss(as_tensors(framework, fragments))
        for key in LOSS_KEYS:
            np.testing.assert_allclose(to_float(stats[key]), expected[key], rtol=1e-5, err_msg=f"{framework} {key}")
    # Whatever the padding rows hold, the loss is the same.
    scrambled = {key: np.array(v, copy=True) for key, v in fragments.items()}
    padding = fragments[VALID] == 0
    scrambled[B.OBS][padding] = 5.0
    scrambled[B.ACTION_LOGP][padding] = -3.0
    again, _ = torch_policy.loss(as_tensors("torch", SampleBatch(scrambled)))
    assert to_float(again) == pytest.approx(expected["total_loss"], rel=1e-5)
    # ... while a real row's does change it (the control).
    scrambled[B.OBS][~padding] = 5.0
    assert abs(to_float(torch_policy.loss(as_tensors("torch", SampleBatch(scrambled)))[0]) - expected["total_loss"]) > 1e-3


# ----- learn_on_batch: torch vs TF, optimizer state round trip ----------------------------------------

OPTIMIZERS = [("adam", {}), ("rmsprop", {}), ("rmsprop", {"momentum": 0.9})]
OPTIMIZER_IDS = ["adam", "rmsprop", "rmsprop-momentum"]


def _assert_weights_close(actual, expected, rtol, atol):
    assert actual.keys() == expected.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("opt_type, extra", OPTIMIZERS, ids=OPTIMIZER_IDS)
def test_learn_on_batch_parity(opt_type, extra):
    torch_policy, tf_policy = _both(opt_type=opt_type, grad_clip=40.0, **extra)
    if opt_type == "rmsprop":
        assert type(torch_policy.optimizer).__name__ == type(tf_policy.optimizer).__name__ == "RMSProp"
    weights = _perturb(_copy(torch_policy.get_weights()), seed=3)
    for policy in (torch_policy, tf_policy):
        policy.set_weights(weights)
    # Large rewards push the gradient norm above grad_clip, so the clip is active.
    batch = _make_batch(torch_policy, seed=4, reward_scale=10.0)
    torch_stats = torch_policy.learn_on_batch(batch)
    tf_stats = tf_policy.learn_on_batch(batch)
    assert torch_stats["grad_gnorm"] > 40.0
    torch_after, tf_after = _copy(torch_policy.get_weights()), _copy(tf_policy.get_weights())
    _assert_weights_close(torch_after, tf_after, rtol=1e-4, atol=1e-6)
    assert any(not np.allclose(torch_after[k], weights[k], rtol=1e-3, atol=1e-4) for k in weights)
    for key in ("total_loss", "policy_loss", "vf_loss", "entropy", "grad_gnorm", "cur_lr", "entropy_coeff"):
        assert torch_stats[key] == pytest.approx(tf_stats[key], rel=1e-4, abs=1e-6), key
    # The stats are those of the loss at the weights before the step.
    torch_policy.set_weights(weights)
    expected = numpy_impala_loss(torch_policy, batch)
    assert torch_stats["total_loss"] == pytest.approx(expected["total_loss"], rel=1e-5)


def _state(policy):
    return {key: (np.array(value, copy=True) if isinstance(value, np.ndarray) else value)
            for key, value in policy.get_state().items()}


@pytest.mark.parametrize("opt_type, extra", OPTIMIZERS, ids=OPTIMIZER_IDS)
def test_state_round_trip_carries_optimizer_state(framework, opt_type, extra):
    config = dict(opt_type=opt_type, grad_clip=40.0, **extra)
    policy = _build(framework, **config)
    policy.set_weights(_perturb(_copy(policy.get_weights()), seed=5))
    policy.learn_on_batch(_make_batch(policy, seed=6, reward_scale=3.0))  # non-trivial optimizer state
    state = _state(policy)
    optimizer_keys = [key for key in state if key.startswith("optimizer/")]
    assert optimizer_keys
    if opt_type == "rmsprop":
        assert any(key.endswith("/mean_square") for key in optimizer_keys)
        assert any(key.endswith("/momentum") for key in optimizer_keys)
    saved_weights = {key[len("weights/"):]: value for key, value in state.items() if key.startswith("weights/")}

    batch = _make_batch(policy, seed=7, reward_scale=3.0)
    expected_stats = policy.learn_on_batch(batch)
    expected_weights = _copy(policy.get_weights())

    restored = _build(framework, **dict(config, seed=99))  # different initial weights
    restored.set_state(state)
    for name, value in saved_weights.items():
        np.testing.assert_array_equal(restored.get_weights()[name], value, err_msg=name)
    restored_state = _state(restored)
    for key in optimizer_keys:
        np.testing.assert_array_equal(restored_state[key], state[key], err_msg=key)
    stats = restored.learn_on_batch(batch)
    weights = _copy(restored.get_weights())
    assert weights.keys() == expected_weights.keys()
    for name in expected_weights:
        np.testing.assert_array_equal(weights[name], expected_weights[name], err_msg=name)
    assert stats == expected_stats

    # Control: the same weights without the optimizer state take a different step.
    fresh = _build(framework, **config)
    fresh.set_weights(saved_weights)
    fresh.learn_on_batch(batch)
    fresh_weights = fresh.get_weights()
    assert any(not np.allclose(fresh_weights[k], expected_weights[k], rtol=1e-6, atol=0) for k in expected_weights)


# ----- config checks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, key", [
    ({"vtrace": False}, "vtrace"),
    ({"vtrace_drop_last_ts": "no"}, "vtrace_drop_last_ts"),
    ({"minibatch_buffer_size": 0}, "minibatch_buffer_size"),
    ({"_separate_vf_optimizer": True, "model": {"vf_share_layers": True}}, "vf_share_layers"),
    ({"_separate_vf_optimizer": True, "model": {"custom_model": "mine"}}, "make_optimizers"),
    ({"opt_type": "sgd"}, "opt_type"),
    ({"rollout_fragment_length": 1}, "rollout_fragment_length"),
    ({"batch_mode": "complete_episodes"}, "batch_mode"),
    ({"replay_proportion": 0.5}, "replay_proportion"),
], ids=lambda value: value if isinstance(value, str) else None)
def test_validate_config_rejects(overrides, key):
    from rlstack.trainers.impala import IMPALATrainer

    with pytest.raises(ConfigError) as info:
        IMPALATrainer.merge_and_validate(overrides)
    assert key in str(info.value)


def test_validate_config_accepts_defaults_and_rmsprop():
    from rlstack.trainers.impala import DEFAULT_CONFIG, IMPALATrainer

    config = IMPALATrainer.merge_and_validate(None)
    assert config["vtrace"] is True and config["opt_type"] == "adam"
    assert config["rollout_fragment_length"] == DEFAULT_CONFIG["rollout_fragment_length"]
    config = IMPALATrainer.merge_and_validate({"opt_type": "rmsprop", "rollout_fragment_length": 2,
                                               "vtrace_clip_rho_threshold": 2.0})
    assert config["opt_type"] == "rmsprop"
    assert math.isclose(config["vtrace_clip_rho_threshold"], 2.0)
    # 1.13's defaults; a one-step fragment is fine once its last step is learned on.
    assert (DEFAULT_CONFIG["vtrace_drop_last_ts"], DEFAULT_CONFIG["minibatch_buffer_size"]) == (True, 1)
    assert (DEFAULT_CONFIG["_separate_vf_optimizer"], DEFAULT_CONFIG["_lr_vf"]) == (False, 0.0005)
    with pytest.raises(ConfigError, match="or set vtrace_drop_last_ts=False"):
        IMPALATrainer.merge_and_validate({"rollout_fragment_length": 1})
    assert IMPALATrainer.merge_and_validate({"rollout_fragment_length": 1, "vtrace_drop_last_ts": False})
