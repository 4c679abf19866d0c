"""Torch/TF update equivalence, one case per algorithm: from the same initial weights, on
the same fixed batch, one full training step of the torch trainer and of the TF trainer
(every optimizer, target update, coefficient and schedule the algorithm has) lands on the
same new weights and reports the same statistics. With this, a learning run in one
framework (tests/learning) stands for both.

How a step is taken, by the kind of trainer:

* synchronous trainers (PPO, PG, A2C, MARWIL, BC, DQN, SAC, DDPG, TD3, CQL): the trainer's
  own ``training_step()`` with ``num_workers=0``, its local worker's ``sample()`` replaced
  by the fixed batch (the torch trainer sampled it once);
* the learners of asynchronous trainers, on a batch sampled the same way: A3C's driver
  applies the gradients a worker computed (``compute_gradients``/``apply_gradients``);
  IMPALA's learner learns on a fragment; APPO's learns and then moves its target network
  and KL coefficient; Ape-X's (DQN's and DDPG's) learn from the prioritized replay and
  refresh their targets, as their synchronous siblings' ``training_step`` does with
  Ape-X's settings;
* ES and ARS: one ``train()`` with one evolution worker each (the workers act in numpy in
  both frameworks; the framework's part is the policy's weights in and out).

Random draws inside a loss (SAC's and CQL's reparameterised samples, CQL's uniform
actions, TD3's target smoothing, Rainbow's noisy heads) come from one shared numpy stream
keyed by shape, so both frameworks see the same noise.

Each case is also run with one framework's update changed (the sign of the TF policy's
first loss flipped; ES/ARS: one weight of the new TF weights moved), and the comparison
must then fail: a test that cannot fail proves nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("tensorflow")

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

from rlstack.sample_batch import SampleBatch  # noqa: E402
from rlstack.trainers.common.registry import get_trainer_class  # noqa: E402

RTOL, ATOL = 1e-4, 2e-5  # float32 arithmetic in two libraries, a few Adam steps
NOISE_SEED = 1234
SMALL = {"fcnet_hiddens": [16, 16]}


@dataclass(frozen=True)
class Case:
    """One algorithm's step: the trainer (num_workers=0) that samples the batch and, for
    ``step="trainer"``, takes the step; its config on top of the defaults."""

    trainer: str
    env: str
    config: dict[str, Any]
    step: str = "trainer"  # "trainer" | "learn" | "gradients" | "appo" | "evolution"
    # Statistics whose meaning differs between the frameworks (not compared), with why.
    unequal_stats: tuple[str, ...] = ()


ON_POLICY = {"model": SMALL, "lr_schedule": [[0, 1e-3], [400, 2e-4]]}
REPLAY = {"learning_starts": 0, "target_network_update_freq": 1, "buffer_size": 1000,
          "rollout_fragment_length": 64, "train_batch_size": 32}

CASES: dict[str, Case] = {
    "PPO": Case("PPO", "CartPole-v1", {**ON_POLICY, "train_batch_size": 128, "rollout_fragment_length": 128,
                                       "sgd_minibatch_size": 32, "num_sgd_iter": 3, "entropy_coeff": 0.01,
                                       "kl_target": 1e-4, "grad_clip": 0.5}),
    "PPO-box": Case("PPO", "Pendulum-v1", {**ON_POLICY, "train_batch_size": 128, "rollout_fragment_length": 128,
                                           "sgd_minibatch_size": 64, "num_sgd_iter": 2, "vf_clip_param": 5.0}),
    "PG": Case("PG", "CartPole-v1", {**ON_POLICY, "train_batch_size": 128, "rollout_fragment_length": 128}),
    "A2C": Case("A2C", "CartPole-v1", {**ON_POLICY, "train_batch_size": 100, "rollout_fragment_length": 100,
                                       "entropy_coeff_schedule": [[0, 0.01], [400, 0.001]], "grad_clip": 5.0}),
    "A2C-microbatch": Case("A2C", "CartPole-v1", {**ON_POLICY, "train_batch_size": 100,
                                                  "rollout_fragment_length": 100, "microbatch_size": 40}),
    "A3C": Case("A2C", "CartPole-v1", {**ON_POLICY, "rollout_fragment_length": 20, "train_batch_size": 20,
                                       "grad_clip": 40.0}, step="gradients"),
    "IMPALA": Case("IMPALA", "CartPole-v1", {**ON_POLICY, "rollout_fragment_length": 50, "train_batch_size": 50,
                                             "entropy_coeff": 0.01, "grad_clip": 40.0}, step="learn"),
    "IMPALA-rmsprop": Case("IMPALA", "CartPole-v1", {**ON_POLICY, "rollout_fragment_length": 50,
                                                     "train_batch_size": 50, "opt_type": "rmsprop"}, step="learn"),
    "APPO": Case("APPO", "CartPole-v1", {**ON_POLICY, "rollout_fragment_length": 50, "train_batch_size": 50,
                                         "use_kl_loss": True, "kl_coeff": 0.5, "num_sgd_iter": 2,
                                         "minibatch_buffer_size": 1}, step="appo"),
    "APPO-gae": Case("APPO", "CartPole-v1", {**ON_POLICY, "rollout_fragment_length": 50, "train_batch_size": 50,
                                             "vtrace": False}, step="appo"),
    "MARWIL": Case("MARWIL", "CartPole-v1", {**ON_POLICY, "train_batch_size": 100, "rollout_fragment_length": 100,
                                             "beta": 1.0}),
    "BC": Case("BC", "CartPole-v1", {**ON_POLICY, "train_batch_size": 100, "rollout_fragment_length": 100}),
    "DQN": Case("DQN", "CartPole-v1", {**REPLAY, "model": SMALL, "hiddens": [16], "double_q": True,
                                       "dueling": True, "n_step": 1, "prioritized_replay": True}),
    "DQN-plain": Case("DQN", "CartPole-v1", {**REPLAY, "model": SMALL, "hiddens": [], "double_q": False,
                                             "dueling": False, "prioritized_replay": False,
                                             "training_intensity": 64}),
    "Rainbow": Case("DQN", "CartPole-v1", {**REPLAY, "model": SMALL, "hiddens": [16], "num_atoms": 11,
                                           "v_min": -10.0, "v_max": 10.0, "noisy": True, "n_step": 3,
                                           "double_q": True, "dueling": True, "prioritized_replay": True}),
    "ApeX": Case("DQN", "CartPole-v1", {**REPLAY, "model": SMALL, "hiddens": [16], "n_step": 3,
                                        "worker_side_prioritization": True, "prioritized_replay": True}),
    "SAC": Case("SAC", "Pendulum-v1", {**REPLAY, "Q_model": SMALL, "policy_model": SMALL, "tau": 0.01,
                                       "target_entropy": "auto", "rollout_fragment_length": 64}),
    "SAC-discrete": Case("SAC", "CartPole-v1", {**REPLAY, "Q_model": SMALL, "policy_model": SMALL,
                                                "rollout_fragment_length": 64}),
    "DDPG": Case("DDPG", "Pendulum-v1", {**REPLAY, "actor_hiddens": [16, 16], "critic_hiddens": [16, 16],
                                         "tau": 0.01, "l2_reg": 1e-4}),
    "TD3": Case("TD3", "Pendulum-v1", {**REPLAY, "actor_hiddens": [16, 16], "critic_hiddens": [16, 16],
                                       "training_intensity": 96},
                # With policy_delay the torch actor's loss is averaged over the steps the
                # actor takes, TF's over every step (the weights agree either way).
                unequal_stats=("actor_loss",)),
    "ApeX-DDPG": Case("DDPG", "Pendulum-v1", {**REPLAY, "actor_hiddens": [16, 16], "critic_hiddens": [16, 16],
                                              "n_step": 3, "prioritized_replay": True,
                                              "worker_side_prioritization": True}),
    "CQL": Case("CQL", "Pendulum-v1", {**REPLAY, "Q_model": SMALL, "policy_model": SMALL, "bc_iters": 0,
                                       "num_actions": 3, "input": "sampler"}),
    "CQL-lagrangian-bc": Case("CQL", "Pendulum-v1", {**REPLAY, "Q_model": SMALL, "policy_model": SMALL,
                                                     "bc_iters": 100, "num_actions": 2, "lagrangian": True,
                                                     "input": "sampler"}),
    "ES": Case("ES", "CartPole-v1", {"model": SMALL, "episodes_per_batch": 4, "train_batch_size": 50,
                                     "noise_size": 100_000, "num_workers": 1, "eval_prob": 0.0},
               step="evolution"),
    "ARS": Case("ARS", "CartPole-v1", {"model": SMALL, "num_rollouts": 2, "rollouts_used": 1,
                                       "noise_size": 100_000, "num_workers": 1, "eval_prob": 0.0},
                step="evolution"),
}


# ----- the shared noise ------------------------------------------------------------------

def _draw(kind: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng([NOISE_SEED, len(kind), *shape])
    if kind == "uniform":
        return rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def _torch_draw(kind: str) -> Callable[[Any], torch.Tensor]:
    return lambda shape: torch.from_numpy(_draw(kind, tuple(int(n) for n in shape)))


def _tf_draw(kind: str) -> Callable[[Any], tf.Tensor]:
    def draw(shape: Any) -> tf.Tensor:
        out = tf.numpy_function(lambda s: _draw(kind, tuple(int(n) for n in s)), [tf.cast(shape, tf.int64)],
                                tf.float32)
        out.set_shape([None, None])
        return out
    return draw


def share_noise(policy: Any) -> None:
    """Replaces the policy's own random draws inside its loss by the shared stream."""
    draw = _torch_draw if policy.framework == "torch" else _tf_draw
    if hasattr(policy, "loss_noise"):
        policy.loss_noise = draw("normal")
    if hasattr(policy, "cql_uniform_actions"):
        policy.cql_uniform_actions = draw("uniform")
    if hasattr(policy, "draw_target_noise"):
        shape_of = (lambda a: a.shape) if policy.framework == "torch" else tf.shape
        normal = draw("normal")
        policy.draw_target_noise = lambda actions: normal(shape_of(actions))
    spec = getattr(policy.model, "spec", None)
    if getattr(spec, "noise_layers", None):
        for model, seed in ((policy.model, 7), (policy.target_model, 8)):
            rng = np.random.default_rng(seed)
            model.fixed_noise = {layer.name[:-len("_sigma")]: (
                rng.standard_normal(layer.kernel_shape[0]).astype(np.float32),
                rng.standard_normal(layer.kernel_shape[1]).astype(np.float32)) for layer in spec.noise_layers}


# ----- building the pair and the batch -----------------------------------------------------

def build(case: Case, framework: str) -> Any:
    config = {"seed": 3, "num_workers": 0, **case.config, "framework": framework}
    return get_trainer_class(case.trainer)(config=config, env=case.env)


def copy_state(source: Any, target: Any) -> None:
    """The torch policy's weights (and target networks) into the TF policy."""
    state = source.get_state()
    target.set_state({key: value for key, value in state.items() if key.startswith(("weights/", "target/"))})


def fixed_batch(trainer: Any) -> SampleBatch:
    """One sampling round of the trainer's local worker (postprocessed by its policy)."""
    return trainer.workers.local_worker().sample()


@contextlib.contextmanager
def pair(case: Case) -> Iterator[tuple[Any, Any]]:
    """The torch and the TF trainer of ``case``, the TF policy holding the torch policy's
    weights, both drawing the shared noise; stopped on exit."""
    trainers = []
    try:
        for framework in ("torch", "tf"):
            trainers.append(build(case, framework))
        torch_policy, tf_policy = (trainer.get_policy() for trainer in trainers)
        copy_state(torch_policy, tf_policy)
        for policy in (torch_policy, tf_policy):
            share_noise(policy)
        yield trainers[0], trainers[1]
    finally:
        for trainer in trainers:
            trainer.stop()


def take_step(case: Case, trainer: Any, batch: SampleBatch) -> dict[str, Any]:
    """One training step of ``trainer`` on ``batch``; returns its learner stats."""
    policy = trainer.get_policy()
    if case.step == "trainer":
        trainer.workers.local_worker().sample = lambda: batch.copy()
        info = trainer.training_step()
        return info.get("default_policy", {}).get("learner_stats", {})
    if case.step == "gradients":  # A3C: a worker's gradients, applied on the driver
        grads, stats = policy.compute_gradients(batch.copy())
        policy.apply_gradients(grads)
        return stats.get("learner_stats", stats)
    if case.step == "learn":
        return policy.learn_on_batch(batch.copy())
    if case.step == "appo":
        stats = policy.learn_on_batch(batch.copy())
        policy.update_target(stats.get("kl"))  # the KL coefficient's update is in the compared state
        return stats
    if case.step == "evolution":
        return trainer.train()["info"]
    raise AssertionError(case.step)


# ----- the comparison ---------------------------------------------------------------------

def comparable_state(policy: Any) -> dict[str, np.ndarray]:
    """The policy state both frameworks share in meaning: weights, target networks and
    learned coefficients (not optimizer slots or random-generator states)."""
    state = {}
    for key, value in policy.get_state().items():
        array = np.asarray(value)
        if key.startswith("optimizer/") or key.endswith("rng") or not np.issubdtype(array.dtype, np.number):
            continue
        state[key] = array
    return state


def assert_same_step(torch_state: dict, tf_state: dict, torch_stats: dict, tf_stats: dict,
                     before: dict[str, np.ndarray], unequal_stats: tuple[str, ...] = ()) -> None:
    shared = sorted(torch_state.keys() & tf_state.keys())
    assert any(key.startswith("weights/") for key in shared), f"no weights in common: {sorted(torch_state)}"
    moved = [key for key in shared if key.startswith("weights/")
             and not np.allclose(torch_state[key], before[key], rtol=0, atol=1e-7)]
    assert moved, "the step moved no weight: nothing was compared"
    for key in shared:
        np.testing.assert_allclose(tf_state[key], torch_state[key], rtol=RTOL, atol=ATOL, err_msg=key)
    numbers = [key for key in torch_stats.keys() & tf_stats.keys() if key not in unequal_stats
               and np.ndim(torch_stats[key]) == 0 and isinstance(torch_stats[key], (int, float, np.number))
               and isinstance(tf_stats[key], (int, float, np.number))]
    assert numbers, f"no statistic in common: torch {sorted(torch_stats)}, tf {sorted(tf_stats)}"
    for key in numbers:
        np.testing.assert_allclose(float(tf_stats[key]), float(torch_stats[key]), rtol=1e-3, atol=1e-4,
                                   err_msg=f"stat {key}")


def run_case(case: Case, change_tf: Callable[[Any], None] | None = None) -> None:
    """One step in each framework from the same state and batch, compared; ``change_tf``
    first alters the TF policy (to show that the comparison catches it)."""
    with pair(case) as (torch_trainer, tf_trainer):
        torch_policy, tf_policy = torch_trainer.get_policy(), tf_trainer.get_policy()
        if change_tf is not None:
            change_tf(tf_policy)
        before = comparable_state(torch_policy)
        batch = None if case.step == "evolution" else fixed_batch(torch_trainer)
        torch_stats = take_step(case, torch_trainer, batch)
        tf_stats = take_step(case, tf_trainer, batch)
        assert_same_step(comparable_state(torch_policy), comparable_state(tf_policy), torch_stats, tf_stats, before,
                         case.unequal_stats)


def needs_ray(case: Case) -> bool:
    return case.step == "evolution"


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_and_tf_take_the_same_step(name, request):
    case = CASES[name]
    if needs_ray(case):
        request.getfixturevalue("ray_local")
    run_case(case)


# ----- the comparison can fail --------------------------------------------------------------

def flip_first_loss(policy: Any) -> None:
    """The sign of the policy's first loss flipped (its autograd path forced: a closed-form
    gradient would not read the changed loss)."""
    original = policy.loss

    def loss(train_batch):
        losses, stats = original(train_batch)
        if isinstance(losses, (tuple, list)):
            return type(losses)([-losses[0], *losses[1:]]), stats
        return -losses, stats
    policy.loss = loss
    policy.use_closed_form = False


def move_new_weights(policy: Any) -> None:
    """The new weights the evolution step sets, one of them moved by 1e-3."""
    original = policy.set_weights

    def set_weights(weights):
        weights = dict(weights)
        name = sorted(weights)[0]
        original({**weights, name: weights[name] + 1e-3})
    policy.set_weights = set_weights


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_changed_tf_update_is_caught(name, request):
    case = CASES[name]
    if needs_ray(case):
        request.getfixturevalue("ray_local")
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        run_case(case, move_new_weights if case.step == "evolution" else flip_first_loss)
