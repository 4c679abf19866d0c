"""RandomPolicy: 1.13's ``ray.rllib.examples.policy.random_policy``, a hand-coded policy.

It acts at random and learns nothing: the shape of a user policy in a multi-agent run
(``multiagent.policies: {"random": PolicySpec(policy_class=RandomPolicy)}``, left out of
``policies_to_train``).
"""

from __future__ import annotations

from typing import Any

from rlstack.policies.policy import Policy


class RandomPolicy(Policy):
    """Samples each action from the action space."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.action_space.seed(self.config.get("seed"))

    def compute_actions(self, obs_batch: Any, state_batches: Any = None, prev_action_batch: Any = None,
                        prev_reward_batch: Any = None, **kwargs: Any) -> tuple[list[Any], list, dict]:
        return [self.action_space.sample() for _ in obs_batch], [], {}

    def learn_on_batch(self, samples: Any) -> dict:
        return {}
