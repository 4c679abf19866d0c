"""DQNTrainer: deep Q-learning (Mnih et al. 2015) with the Rainbow pieces classic RLlib
offered: double Q, dueling heads, n-step returns, prioritized replay, distributional
Q-values (C51, ``num_atoms > 1``) and noisy heads (``noisy``).

One ``training_step``: every worker samples one fragment (exploring per
``exploration_config``, n-step returns computed on the worker; with
``batch_mode="complete_episodes"`` whole episodes only), the rows go into the replay
buffer, and once ``learning_starts`` steps were sampled the learner takes as many gradient steps on
replayed batches as ``training_intensity`` asks for, updates the replayed rows'
priorities, refreshes the target network every ``target_network_update_freq`` sampled
steps and sends the weights back to the workers.
"""

from __future__ import annotations

import logging
import numbers
from typing import Any

from rlstack.errors import ConfigError
from rlstack.policies.postprocessing import postprocess_n_step
from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config
from rlstack.trainers.common.off_policy import REPLAY_CONFIG, OffPolicyTrainer, validate_replay_config
from rlstack.utils.exploration import EXPLORATION_DEFAULTS, EpsilonGreedy, ParameterNoise, validate_exploration_config

logger = logging.getLogger(__name__)

# Classic RLlib 1.x DQN defaults, on top of COMMON_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # === Model ===
        # Atoms of the value distribution per action; > 1 is distributional DQN (C51,
        # Bellemare et al. 2017): cross-entropy to the projected n-step target.
        "num_atoms": 1,
        # The support of the value distribution: num_atoms points from v_min to v_max
        # (returns beyond it are clipped onto its ends).
        "v_min": -10.0,
        # The upper end of that support.
        "v_max": 10.0,
        # Factorised-Gaussian noisy layers in the Q heads (Fortunato et al. 2018), noise
        # drawn at every forward pass when learning and exploring; greedy actions
        # (explore=False) use the mean weights. Epsilon-greedy still applies per
        # exploration_config, as in 1.13: set final_epsilon 0 to explore by noise only.
        "noisy": False,
        # Initial noise scale: sigma weights start at sigma0 / sqrt(layer inputs).
        "sigma0": 0.5,
        # Dueling heads: Q = V + A - mean(A) (Wang et al. 2016).
        "dueling": True,
        # Hidden layers of the Q head (and of the value head when dueling), after the
        # model's fcnet_hiddens encoder; ReLU.
        "hiddens": [256],
        # Double Q-learning: the online network picks the next action, the target rates it.
        "double_q": True,
        # === Exploration ===
        # EpsilonGreedy (here), PerWorkerEpsilonGreedy, SoftQ ({type: SoftQ, temperature:
        # 1.0}: actions from softmax(Q / temperature)) or ParameterNoise (noise on the
        # Q-network's weights per episode); keys and meaning in rlstack/utils/exploration.py.
        # Another type replaces these keys.
        "exploration_config": dict(EXPLORATION_DEFAULTS),
        # === Replay buffer, replay ratio, n-step and target network ===
        # (keys and comments: trainers/common/off_policy.py's REPLAY_CONFIG, 1.x DQN's defaults)
        **REPLAY_CONFIG,
        # === Optimisation ===
        "lr": 5e-4,
        "adam_epsilon": 1e-8,
        "grad_clip": 40,
        # Rows per gradient step.
        "train_batch_size": 32,
        "rollout_fragment_length": 4,
        "num_workers": 0,
        # Run training_step until this many steps were sampled per train() call.
        "min_sample_timesteps_per_reporting": 1000,
    },
    None,
    "DQN",
))



def _check_rainbow_keys(config: dict[str, Any], algorithm: str) -> None:
    num_atoms = config["num_atoms"]
    if not isinstance(num_atoms, numbers.Integral) or isinstance(num_atoms, bool) or num_atoms < 1:
        raise ConfigError(f"num_atoms must be an integer >= 1 for {algorithm} (1: expected Q-values; e.g. 51: "
                          f"distributional C51), got {num_atoms!r}.")
    for key in ("v_min", "v_max", "sigma0"):
        if not isinstance(config[key], numbers.Real) or isinstance(config[key], bool):
            raise ConfigError(f"{key} must be a number for {algorithm}, got {config[key]!r}.")
    if config["v_min"] >= config["v_max"]:
        raise ConfigError(f"v_min must be below v_max for {algorithm} (the support of the value distribution), got "
                          f"v_min={config['v_min']!r}, v_max={config['v_max']!r}.")
    if not isinstance(config["noisy"], bool):
        raise ConfigError(f"noisy must be True or False for {algorithm}, got {config['noisy']!r}.")
    if config["sigma0"] < 0:
        raise ConfigError(f"sigma0 must be >= 0 for {algorithm} (the noisy layers' initial noise scale), got "
                          f"{config['sigma0']!r}.")


def validate_dqn_config(config: dict[str, Any], algorithm: str = "DQN") -> None:
    """Checks the DQN family's keys (DQN and ApeX).

    Raises:
        ConfigError: Naming the key, the value and the fix.
    """
    validate_replay_config(config, algorithm)
    _check_rainbow_keys(config, algorithm)
    validate_exploration_config(config["exploration_config"], algorithm)
    if config["exploration_config"]["type"] == "ParameterNoise":
        if config["noisy"]:
            raise ConfigError(f"exploration_config type ParameterNoise and noisy=True both perturb the Q-network for "
                              f"{algorithm}; use one: set noisy=False, or another exploration_config type.")
        if config["batch_mode"] != "complete_episodes":
            # As 1.13: the noise is drawn per episode, and its stddev adapts on whole ones.
            logger.warning("exploration_config type ParameterNoise needs batch_mode='complete_episodes' for %s; "
                           "setting batch_mode='complete_episodes'.", algorithm)
            config["batch_mode"] = "complete_episodes"
    value = config["target_network_update_freq"]
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"target_network_update_freq must be an integer >= 1 for {algorithm} (sampled steps "
                          f"between target-network copies), got {value!r}.")



class DQNTrainer(OffPolicyTrainer):
    """Deep Q-learning with the classic RLlib API.

    Examples:
        >>> from rlstack.trainers.dqn import DQNTrainer, DEFAULT_CONFIG
        >>> config = DEFAULT_CONFIG.copy()
        >>> config.update(learning_starts=100, min_sample_timesteps_per_reporting=200)
        >>> trainer = DQNTrainer(config, "CartPole-v1")
        >>> result = trainer.train()
        >>> result["timesteps_total"] >= 200, result["replay_buffer"]["num_entries"] == result["timesteps_total"]
        (True, True)
        >>> trainer.stop()
    """

    _name = "DQN"
    _default_config = DEFAULT_CONFIG
    postprocess_fn = staticmethod(postprocess_n_step)
    numpy_policy_class = "rlstack.trainers.dqn.dqn_policy:DQNNumpyPolicy"
    _HOT_KEYS = (*OffPolicyTrainer._HOT_KEYS, "exploration_config")

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        validate_dqn_config(config, cls._name)

    policy_classes = {"torch": "rlstack.trainers.dqn.dqn_torch_policy:DQNTorchPolicy",
                      "tf": "rlstack.trainers.dqn.dqn_tf_policy:DQNTFPolicy"}

    def extra_results(self) -> dict[str, Any]:
        results = super().extra_results()
        # The first policy's epsilon; in a multi-agent run it may be another algorithm's
        # policy (1.13's two-trainer example), which has none.
        exploration = getattr(self.learner_policy, "exploration", None)
        if isinstance(exploration, (EpsilonGreedy, ParameterNoise)):
            results["cur_epsilon"] = exploration.epsilon(self._counters["num_env_steps_sampled"])
        return results
