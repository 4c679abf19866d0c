"""What the DQN family's numpy, torch and TF policies share: acting on Q-values as
``exploration_config`` says (epsilon-greedy, SoftQ, or a perturbed network's Q-values
for ParameterNoise), n-step postprocessing with worker-side priorities, the Rainbow model
checks, and the numpy acting policy that rollout workers use (no framework import).

A policy supplies ``q_values(obs, noise)`` and, for ParameterNoise, a perturbed copy of
its network: ``load_perturbed_weights(weights)`` and ``perturbed_q_values(obs)``."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.catalog import ModelCatalog
from rlstack.models.specs import QModelSpec
from rlstack.models.numpy.model import NumpyQModel
from rlstack.policies.numpy_policy import NumpyPolicy, PostprocessFn
from rlstack.policies.policy import Policy
from rlstack.policies.postprocessing import postprocess_n_step
from rlstack.sample_batch import SampleBatch
from rlstack.utils.exploration import ParameterNoise, QExploration, make_q_exploration

QValuesFn = Callable[[np.ndarray], np.ndarray]
# Observations -> the Q-network's heads [B, num_actions, num_atoms] (C51 logits).
LogitsFn = Callable[[np.ndarray], np.ndarray]

# The column prepare_batch adds for plain (not double) Q: Q'(s', a*) of the fixed target
# network, computed once for all the gradient steps of one learn_on_batch.
Q_TP1_BEST = "q_tp1_best"


def q_model_spec(policy: Policy) -> QModelSpec:
    """The Q-network for a DQN-family policy (``hiddens``, ``dueling``, ``num_atoms``,
    ``v_min``, ``v_max``, ``noisy`` and ``sigma0`` from its config)."""
    config = policy.config
    return ModelCatalog.get_q_model_spec(policy.observation_space, policy.action_space, config.get("model", {}),
                                         config["hiddens"], config["dueling"], num_atoms=config["num_atoms"],
                                         v_min=config["v_min"], v_max=config["v_max"], noisy=config["noisy"],
                                         sigma0=config["sigma0"])


def q_model_kwargs(config: dict) -> dict[str, Any]:
    """What a custom model built on 1.13's Q-model bases (``DQNTorchModel``,
    ``DistributionalQTFModel``) gets from the DQN config, as 1.13 passed it: the Q-head's
    keys, and as ``num_outputs`` the embedding size its ``forward`` returns (the last of
    ``fcnet_hiddens`` where the head has hidden layers, else one per action)."""
    hiddens = list(config["hiddens"])
    kwargs: dict[str, Any] = {
        "q_hiddens": tuple(hiddens), "dueling": bool(config["dueling"]), "num_atoms": int(config["num_atoms"]),
        "use_noisy": bool(config["noisy"]), "v_min": config["v_min"], "v_max": config["v_max"],
        "sigma0": config["sigma0"],
    }
    if hiddens:
        kwargs["num_outputs"] = int(([256] + list(config.get("model", {}).get("fcnet_hiddens", [])))[-1])
    return kwargs


def uses_rainbow_heads(config: dict) -> bool:
    """Whether the Q-network is distributional or noisy (built-in models only)."""
    return config["num_atoms"] > 1 or bool(config["noisy"])


def check_rainbow_model(policy: Policy) -> None:
    """Distributional and noisy heads exist on the built-in Q-network only.

    Raises:
        ConfigError: If ``num_atoms > 1`` or ``noisy`` is asked of a custom model.
    """
    if uses_rainbow_heads(policy.config) and not policy.builtin_model:
        raise ConfigError(
            f"num_atoms={policy.config['num_atoms']} / noisy={policy.config['noisy']} build the heads of rlstack's "
            "built-in Q-network; a custom_model has its own q_values(). Remove model.custom_model, or set "
            "num_atoms=1 and noisy=False."
        )


def make_exploration(policy: Policy) -> QExploration:
    """The ``exploration_config`` exploration of ``policy`` as placed (worker index,
    worker count), seeded with its per-worker sampling seed."""
    return make_q_exploration(policy.config["exploration_config"], policy.worker_index, policy.num_workers,
                              seed=policy.sampling_seed)


def act_on_q_values(policy: Policy, obs_batch: np.ndarray,
                    explore: bool | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The actions ``policy.exploration`` picks and the ``q_values`` extra column (the
    Q-values acted on).

    Noisy networks act with fresh noise when exploring and with their mean weights when
    not (greedy evaluation is deterministic). With ParameterNoise an exploring policy acts
    on its perturbed copy, whose weights are the clean ones plus the noise drawn at the
    episode's first action; ``explore=False`` acts on the clean network.
    """
    explore = policy.config.get("explore", True) if explore is None else bool(explore)
    exploration = policy.exploration
    if explore and isinstance(exploration, ParameterNoise):
        if exploration.needs_new_noise:
            policy.load_perturbed_weights(exploration.perturb(policy.get_weights()))  # type: ignore[attr-defined]
        q_values = policy.perturbed_q_values(obs_batch)  # type: ignore[attr-defined]
    else:
        q_values = policy.q_values(obs_batch, explore)  # type: ignore[attr-defined]
    actions = exploration.choose(q_values, policy.global_timestep, explore)
    return actions, {"q_values": np.asarray(q_values, dtype=np.float32)}


def _softmax(q_values: np.ndarray) -> np.ndarray:
    return np.exp(_log_softmax(np.asarray(q_values, dtype=np.float64)))


def adapt_parameter_noise(policy: Policy, batch: SampleBatch) -> None:
    """ParameterNoise's stddev adaptation after a trajectory piece (Plappert et al. 2018,
    section 3.2): the KL divergence ``KL(softmax(Q_clean) || softmax(Q_perturbed))`` over
    the piece's observations against the KL that epsilon-greedy would cause; a piece that
    ends an episode makes the next exploring action draw new noise. Other explorations:
    nothing."""
    exploration = getattr(policy, "exploration", None)
    if not isinstance(exploration, ParameterNoise) or not batch.count:
        return
    if exploration.noise is not None:
        obs = batch[SampleBatch.OBS]
        clean = _softmax(policy.q_values(obs, False))  # type: ignore[attr-defined]
        perturbed = _softmax(policy.perturbed_q_values(obs))  # type: ignore[attr-defined]
        distance = float(np.nanmean(np.sum(clean * np.log(clean / (perturbed + 1e-6) + 1e-12), axis=1)))
        exploration.adapt(distance, exploration.target_kl(policy.global_timestep, clean.shape[1]))
    ended = bool(batch[SampleBatch.TERMINATEDS][-1])
    if SampleBatch.TRUNCATEDS in batch:
        ended = ended or bool(batch[SampleBatch.TRUNCATEDS][-1])
    if ended:
        exploration.end_episode()


def td_errors(batch: SampleBatch, q_fn: QValuesFn, double_q: bool, target_q_fn: QValuesFn | None = None) -> np.ndarray:
    """``|Q(s, a) - (R + discount * (1 - terminated) * Q'(s', a*))|`` in numpy.

    Without a target network (rollout workers) ``Q'`` is ``Q`` itself, so double Q and
    plain max coincide.
    """
    q_t = q_fn(batch[SampleBatch.OBS])
    q_tp1 = q_fn(batch[SampleBatch.NEXT_OBS])
    q_tp1_target = target_q_fn(batch[SampleBatch.NEXT_OBS]) if target_q_fn is not None else q_tp1
    best = np.argmax(q_tp1 if double_q else q_tp1_target, axis=1)
    q_tp1_best = q_tp1_target[np.arange(len(best)), best]
    not_done = 1.0 - batch[SampleBatch.TERMINATEDS].astype(np.float32)
    target = batch[SampleBatch.REWARDS] + batch[SampleBatch.DISCOUNTS] * not_done * q_tp1_best
    q_selected = q_t[np.arange(len(best)), batch[SampleBatch.ACTIONS].astype(np.int64)]
    return np.abs(q_selected - target)


def project_distribution(rewards: np.ndarray, bootstrap: np.ndarray, probs: np.ndarray,
                         support: np.ndarray) -> np.ndarray:
    """C51's categorical projection in numpy (as the torch and TF policies' own):
    ``Tz_j = clip(r + bootstrap z_j, v_min, v_max)``, its mass ``probs[:, j]`` split
    between the support points around it (all to ``z_i`` when it lands on ``z_i``)."""
    num_atoms = len(support)
    v_min, v_max = float(support[0]), float(support[-1])
    tz = np.clip(rewards[:, None] + bootstrap[:, None] * support[None, :], v_min, v_max)
    b = (tz - v_min) / ((v_max - v_min) / (num_atoms - 1))
    lower, upper = np.floor(b), np.ceil(b)
    mass_lower = probs * (upper - b + (lower == upper))
    mass_upper = probs * (b - lower)
    m = np.zeros_like(probs)
    rows = np.repeat(np.arange(len(probs)), num_atoms)
    np.add.at(m, (rows, np.clip(lower, 0, num_atoms - 1).astype(np.int64).ravel()), mass_lower.ravel())
    np.add.at(m, (rows, np.clip(upper, 0, num_atoms - 1).astype(np.int64).ravel()), mass_upper.ravel())
    return m


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def c51_td_errors(batch: SampleBatch, logits_fn: LogitsFn, support: np.ndarray) -> np.ndarray:
    """The per-row cross-entropy of C51 (the learner's TD error, as 1.13) under one
    network (rollout workers have no target network, so double Q and plain argmax
    coincide)."""
    rows = np.arange(batch.count)
    logits_t = logits_fn(batch[SampleBatch.OBS])[rows, batch[SampleBatch.ACTIONS].astype(np.int64)]
    probs_tp1 = np.exp(_log_softmax(logits_fn(batch[SampleBatch.NEXT_OBS])))
    best = np.argmax((probs_tp1 * support).sum(axis=2), axis=1)
    not_done = 1.0 - batch[SampleBatch.TERMINATEDS].astype(np.float32)
    m = project_distribution(batch[SampleBatch.REWARDS], batch[SampleBatch.DISCOUNTS] * not_done,
                             probs_tp1[rows, best], support)
    return -(m * _log_softmax(logits_t)).sum(axis=1)


def postprocess_q_learning(batch: SampleBatch, config: dict, q_fn: QValuesFn,
                           logits_fn: LogitsFn | None = None) -> SampleBatch:
    """n-step returns, and with ``worker_side_prioritization`` the initial replay
    priorities under the worker's current weights (Horgan et al. 2018): ``|TD error|``,
    or with ``num_atoms > 1`` the C51 cross-entropy from ``logits_fn`` (the same scale
    as the learner's priorities)."""
    batch = postprocess_n_step(batch, config)
    if config.get("worker_side_prioritization") and batch.count:
        if config.get("num_atoms", 1) > 1 and logits_fn is not None:
            support = np.linspace(config["v_min"], config["v_max"], config["num_atoms"], dtype=np.float32)
            errors = c51_td_errors(batch, logits_fn, support)
        else:
            errors = td_errors(batch, q_fn, config["double_q"])
        batch[SampleBatch.PRIORITIES] = errors.astype(np.float32)
    return batch


class DQNNumpyPolicy(NumpyPolicy):
    """Acts on the built-in dense Q-network's Q-values in numpy (rollout workers).

    Args:
        observation_space: The env's observation space.
        action_space: The env's (Discrete) action space.
        config: The trainer's merged config.
        num_gpus: Must be 0.
        sampling_seed: Seed of the exploration generator.
        postprocess_fn: Unused (n-step postprocessing is built in); kept for the
            rollout worker's uniform constructor call.
    """

    model_class = NumpyQModel
    needs_next_obs = True
    needs_bootstrap_value = False

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None, postprocess_fn: PostprocessFn | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed, postprocess_fn)
        self.exploration = make_exploration(self)
        self.model.noise_rng = np.random.default_rng(sampling_seed)
        # ParameterNoise's perturbed copy of the network (made on first use).
        self.perturbed_model: NumpyQModel | None = None

    def model_spec(self) -> QModelSpec:
        return q_model_spec(self)

    def bind_worker(self, worker_index: int, num_workers: int) -> None:
        super().bind_worker(worker_index, num_workers)
        self.exploration = make_exploration(self)

    def q_values(self, obs_batch: np.ndarray, noise: bool = True) -> np.ndarray:
        """``Q(s, .)`` as ``float32 [B, num_actions]`` (``noise``: draw noisy layers' noise)."""
        return self.model.q_values(np.asarray(obs_batch, dtype=np.float32), noise).astype(np.float32, copy=False)

    def load_perturbed_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads ParameterNoise's perturbed weights into the acting copy of the network."""
        if self.perturbed_model is None:
            self.perturbed_model = copy.deepcopy(self.model)
        self.perturbed_model.set_canonical_weights(weights)

    def perturbed_q_values(self, obs_batch: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of the perturbed copy, ``float32 [B, num_actions]``."""
        obs = np.asarray(obs_batch, dtype=np.float32)
        return self.perturbed_model.q_values(obs, False).astype(np.float32, copy=False)  # type: ignore[union-attr]

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return act_on_q_values(self, obs_batch, explore)

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        return self.q_values(obs_batch).max(axis=1)

    def q_logits(self, obs_batch: np.ndarray) -> np.ndarray:
        """The heads' outputs ``[B, num_actions, num_atoms]`` (noise drawn)."""
        return self.model.q_logits(np.asarray(obs_batch, dtype=np.float32))

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        adapt_parameter_noise(self, batch)
        return postprocess_q_learning(batch, self.config, self.q_values, self.q_logits)
