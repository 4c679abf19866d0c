"""RLlib 1.13's ``ray.rllib.agents.pg.utils`` path: ``post_process_advantages`` lives in
:mod:`rlstack.trainers.pg.pg_policy`."""

from rlstack.trainers.pg.pg_policy import post_process_advantages

__all__ = ["post_process_advantages"]
