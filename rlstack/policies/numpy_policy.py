"""NumpyPolicy: an act-only policy for rollout workers, with no framework import.

A rollout worker only needs actions, their log-likelihoods, value estimates and the
algorithm's (numpy) postprocessing; the learner keeps the framework policy. With
``rollout_inference="auto"`` (the default) workers use this policy whenever the model is
built-in and dense and the worker has no GPU; ``"framework"`` keeps the framework policy
on the workers too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import RLStackError
from rlstack.models.catalog import ModelCatalog
from rlstack.models.specs import initial_weights
from rlstack.models.numpy.distributions import DISTRIBUTIONS
from rlstack.models.numpy.model import NumpyModel, supports
from rlstack.models.numpy.recurrent import NumpyLSTMModel
from rlstack.policies.policy import Policy
from rlstack.policies.rnn_sequencing import state_out_key
from rlstack.sample_batch import SampleBatch

PostprocessFn = Callable[[SampleBatch, dict], SampleBatch]


def numpy_inference_applies(observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float) -> bool:
    """Whether a rollout worker with this config acts with a :class:`NumpyPolicy`."""
    mode = config.get("rollout_inference", "auto")
    if mode == "framework":
        return False
    model_config = config.get("model", {})
    eligible = (
        not model_config.get("custom_model")
        # Attention (GTrXL) has no numpy implementation: the framework's model acts.
        and not model_config.get("use_attention")
        # A custom action distribution is a framework class: the framework policy acts.
        and not model_config.get("custom_action_dist")
        and not num_gpus
        and supports(ModelCatalog.get_model_spec(observation_space, action_space, model_config))
    )
    if mode == "numpy" and not eligible:
        raise RLStackError(
            "rollout_inference='numpy' needs a built-in dense model (no conv layers, no custom_model, no "
            "use_attention) with a "
            "built-in action distribution (no custom_action_dist) and "
            "no GPU on the workers; use rollout_inference='auto' or 'framework'."
        )
    return eligible


class NumpyPolicy(Policy):
    """Acts with the built-in dense model in numpy; cannot learn.

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        config: The trainer's merged config.
        num_gpus: Must be 0.
        sampling_seed: Seed of the action-sampling generator.
        postprocess_fn: The algorithm's trajectory postprocessing, ``fn(batch, config)``.
    """

    framework = "numpy"
    # The numpy network built from model_spec().
    model_class: type[NumpyModel] = NumpyModel
    # Acts with use_lstm's model too (the learner's policy decides whether it may train).
    supports_recurrent_models = True

    def __init__(
        self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
        sampling_seed: int | None = None, postprocess_fn: PostprocessFn | None = None,
    ) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        spec = self.model_spec()
        self.model = self.model_class(spec) if spec.lstm is None else NumpyLSTMModel(spec)
        self.model.set_canonical_weights(initial_weights(spec, config.get("seed")))
        self.dist_class = DISTRIBUTIONS[self.dist_spec.kind]
        self.sampling_rng = np.random.default_rng(sampling_seed)
        self.postprocess_fn = postprocess_fn
        # Read once: compute_actions runs once per env step of every rollout worker.
        self._carries_state = self.is_recurrent

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None,
                        state_batches: list[np.ndarray] | None = None, prev_action_batch: Any = None,
                        prev_reward_batch: Any = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        explore = self.config.get("explore", True) if explore is None else bool(explore)
        obs = np.asarray(obs_batch, dtype=np.float32)
        state_out: list[np.ndarray] = []
        if self._carries_state:
            dist_inputs, values, state_out = self._step(obs, state_batches, prev_action_batch, prev_reward_batch)
        else:
            dist_inputs, values = self.model.policy_and_value(obs)
        dist = self.dist_class(dist_inputs, self.dist_spec)
        actions = dist.sample(self.sampling_rng) if explore else dist.deterministic_sample()
        extras = {
            SampleBatch.ACTION_LOGP: dist.logp(actions),
            SampleBatch.ACTION_DIST_INPUTS: dist_inputs.astype(np.float32, copy=False),
            SampleBatch.VF_PREDS: values.astype(np.float32, copy=False),
        }
        if state_out:
            extras.update({state_out_key(i): value.astype(np.float32, copy=False) for i, value in enumerate(state_out)})
        return actions, extras

    def compute_values(self, obs_batch: np.ndarray, state_batches: list[np.ndarray] | None = None,
                       prev_action_batch: Any = None, prev_reward_batch: Any = None) -> np.ndarray:
        obs = np.asarray(obs_batch, dtype=np.float32)
        if self._carries_state:
            return self._step(obs, state_batches, prev_action_batch, prev_reward_batch)[1].astype(np.float32, copy=False)
        return self.model.value(obs).astype(np.float32, copy=False)

    def _step(self, obs: np.ndarray, state_batches: list[np.ndarray] | None, prev_action_batch: Any,
              prev_reward_batch: Any) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        states = self.initial_state_batch(len(obs)) if state_batches is None else state_batches
        prev = self.prev_input_batches(len(obs), prev_action_batch, prev_reward_batch, trusted=True)
        return self.model.step(obs, [np.asarray(value, dtype=np.float32) for value in states], **prev)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return self.postprocess_fn(batch, self.config) if self.postprocess_fn is not None else batch

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        raise RLStackError("NumpyPolicy only acts (on rollout workers); the learner is the framework policy.")

    def get_weights(self) -> dict[str, np.ndarray]:
        return self.model.get_canonical_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        self.model.set_canonical_weights(weights)

    def share_weights(self, weights: dict[str, np.ndarray]) -> bool:
        # Only a model that keeps the float32 arrays it is given (rather than copying or
        # restacking them) acts from the learner's memory.
        if not getattr(self.model, "keeps_given_arrays", False):
            return False
        self.model.set_canonical_weights(weights)
        return True
