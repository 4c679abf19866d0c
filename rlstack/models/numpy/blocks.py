"""The actor-critic blocks of ``models/blocks.py`` in numpy, for rollout workers.

Workers of SAC, TD3 and DDPG only act: the actor's forward pass in numpy is faster than a
framework's at batch 1-32 and keeps torch and TensorFlow out of the worker. The critics'
forward pass is here too (for ``compute_values`` and for tests). Dense networks only.
"""

from __future__ import annotations

import numpy as np

from rlstack.models.blocks import ActorCriticSpec
from rlstack.models.numpy.model import NumpyLayers


def supports_blocks(spec: ActorCriticSpec) -> bool:
    """True when the actor and the critics have no conv layers."""
    return not spec.actor.encoder.images and not any(critic.encoder.images for critic in spec.critics)


class NumpyActorCritic(NumpyLayers):
    """The actor and critics of a dense :class:`~rlstack.models.blocks.ActorCriticSpec`.

    Args:
        spec: The actor-critic spec.

    Raises:
        ValueError: If the spec has conv layers.
    """

    def __init__(self, spec: ActorCriticSpec) -> None:
        if not supports_blocks(spec):
            raise ValueError("NumpyActorCritic covers dense networks only; this one has conv layers.")
        super().__init__(spec)

    # set_canonical_weights keeps float32 arrays as given (NumpyPolicy.share_weights).
    keeps_given_arrays = True

    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads canonical-layout weights. Float32 arrays are kept as given, not copied:
        the learner's ``get_weights()`` hands out fresh copies, and weights arrive after
        every sampling round (or they are views of a CPU learner's parameters, see
        :meth:`~rlstack.policies.policy.Policy.shared_weights`).

        Raises:
            ValueError: If a weight is missing or has the wrong shape.
        """
        self._bind_layers(self._load_layers(weights, copy=False))

    def set_actor_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads the actor's canonical-layout weights (kept as given, as
        :meth:`set_canonical_weights`); the critics keep theirs.

        Raises:
            ValueError: If no weights were loaded before (the critics would have none), or
                an actor weight is missing or has the wrong shape.
        """
        if not self.weights:
            raise ValueError("set_actor_weights() updates the actor of a loaded model; call "
                             "set_canonical_weights() with every weight first.")
        self._bind_layers({**self.weights, **self._load_layers(weights, copy=False, layers=self.spec.actor.layers)})

    def actor_outputs(self, obs: np.ndarray) -> np.ndarray:
        """The actor's outputs ``[B, num_outputs]`` for flat observations."""
        actor = self.spec.actor
        return self._run(actor.out, self._encode(actor.encoder, obs))

    def critic_values(self, obs: np.ndarray, actions: np.ndarray | None = None) -> np.ndarray:
        """Every critic's Q-values: ``[C, B]`` for Q(s, a), ``[C, B, num_actions]`` for Q(s, .)."""
        x = obs if actions is None else np.concatenate([obs, np.asarray(actions, np.float32)], axis=1)
        q = np.stack([self._run(critic.out, self._encode(critic.encoder, x)) for critic in self.spec.critics])
        return q if self.spec.discrete else q[..., 0]

    def policy_and_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The actor's outputs and the critics' value of its greedy behaviour (see
        ``models/torch/blocks.py``'s ``TorchActorCritic.policy_and_value``)."""
        outputs = self.actor_outputs(obs)
        kind = self.spec.actor.kind
        if kind == "categorical":
            shifted = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
            probs = shifted / shifted.sum(axis=-1, keepdims=True)
            return outputs, (probs * self.critic_values(obs).min(axis=0)).sum(-1)
        greedy = np.tanh(outputs[:, : self.spec.actor.action_dim] if kind == "squashed_gaussian" else outputs)
        return outputs, self.critic_values(obs, greedy).min(axis=0)

    def value(self, obs: np.ndarray) -> np.ndarray:
        """The greedy value of :meth:`policy_and_value` ``[B]``."""
        return self.policy_and_value(obs)[1]
