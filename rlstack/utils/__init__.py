"""Framework-free helpers: schedules, observation filters, seeding, timers, imports.

The names RLlib 1.x scripts import from ``ray.rllib.utils`` itself are here too
(``from rlstack.utils import override, try_import_torch``); none imports a framework.
"""

from rlstack.utils.annotations import DeveloperAPI, PublicAPI, override
from rlstack.utils.framework import try_import_jax, try_import_tf, try_import_tfp, try_import_torch

__all__ = ["DeveloperAPI", "PublicAPI", "override", "try_import_jax", "try_import_tf", "try_import_tfp",
           "try_import_torch"]
