"""Keys of the learner's part of a result (``ray.rllib.utils.metrics.learner_info``).

``result["info"][LEARNER_INFO][policy_id][LEARNER_STATS_KEY]`` holds one policy's loss
statistics (``total_loss``, ``policy_loss``, ``vf_loss``, ``entropy``, ``kl``, ...):
``result["info"]["learner"]["default_policy"]["learner_stats"]``.
"""

from __future__ import annotations

LEARNER_INFO = "learner"
LEARNER_STATS_KEY = "learner_stats"

__all__ = ["LEARNER_INFO", "LEARNER_STATS_KEY"]
