"""BCTrainer: behaviour cloning, MARWIL with ``beta`` 0 (no advantage weighting and no
value function), as in RLlib 1.13."""

from __future__ import annotations

from typing import Any

from rlstack.errors import ConfigError
from rlstack.trainers.common.config import DefaultConfig, merge_config
from rlstack.trainers.marwil.marwil import DEFAULT_CONFIG as MARWIL_DEFAULT_CONFIG
from rlstack.trainers.marwil.marwil import MARWILTrainer

BC_DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    MARWIL_DEFAULT_CONFIG,
    {
        # No advantage weighting: every recorded action counts the same.
        "beta": 0.0,
    },
    "BC",
))


class BCTrainer(MARWILTrainer):
    """Behaviour cloning with the classic RLlib API (``beta`` must stay 0)."""

    _name = "BC"
    _default_config = BC_DEFAULT_CONFIG

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        if config["beta"] != 0.0:
            raise ConfigError(f"BC is MARWIL with beta=0, got beta={config['beta']!r}; use run: MARWIL for "
                              "advantage-weighted imitation")
        super().validate_config(config)
