"""PGTrainer: vanilla policy gradient (REINFORCE; Williams 1992), classic RLlib 1.13's PG.

One ``training_step``: the workers sample ``train_batch_size`` steps (discounted returns
computed on the workers, per trajectory piece, with no critic to bootstrap from), the
learner takes one gradient step of ``-mean(log pi(a_t | s_t) * G_t)`` on the whole batch,
and the new weights go back to every worker. Multi-agent, each policy of
``policies_to_train`` does so on its own rows.
"""

from __future__ import annotations

from typing import Any

from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config, require_stochastic_sampling
from rlstack.trainers.pg.pg_policy import postprocess_returns
from rlstack.trainers.pg.pg_config import PGConfig as PGConfig  # 1.13's module path of PGConfig
from rlstack.trainers.common.trainer import Trainer

# Classic RLlib 1.13 PG defaults, on top of COMMON_CONFIG (rollout_fragment_length 200,
# train_batch_size 200 and batch_mode "truncate_episodes" are the common ones; a piece cut
# at rollout_fragment_length is not bootstrapped: its return stops at the cut).
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    COMMON_CONFIG,
    {
        # No remote workers: the driver samples.
        "num_workers": 0,
        # Learning rate.
        "lr": 0.0004,
    },
    "PG",
))


class PGTrainer(Trainer):
    """Vanilla policy gradient with the classic RLlib API.

    Examples:
        >>> from rlstack.trainers.pg import PGTrainer, DEFAULT_CONFIG
        >>> config = DEFAULT_CONFIG.copy()
        >>> config.update(min_time_s_per_reporting=0, seed=0)
        >>> trainer = PGTrainer(config, "CartPole-v1")
        >>> trainer.train()["timesteps_total"]
        200
        >>> trainer.stop()
    """

    _name = "PG"
    _default_config = DEFAULT_CONFIG
    # Discounted returns on the workers, in numpy, for workers that act through a numpy
    # copy of the policy; that copy asks for no bootstrap values (there is no critic).
    postprocess_fn = staticmethod(postprocess_returns)
    numpy_policy_class = "rlstack.trainers.pg.pg_policy:PGNumpyPolicy"
    supports_recurrent_models = True

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        require_stochastic_sampling(config)

    policy_classes = {"torch": "rlstack.trainers.pg.pg_torch_policy:PGTorchPolicy",
                      "tf": "rlstack.trainers.pg.pg_tf_policy:PGTFPolicy"}

