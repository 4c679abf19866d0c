"""Bad input outside the config dict: observations handed to a trained policy, action
spaces an algorithm cannot handle, env creators that return no env, and experiment
YAML files with a wrong type for a key. Each is a specific rlstack error that says what
was given, what was expected and how to fix it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.env import register_env
from rlstack.errors import ConfigError, EnvError, ObservationError, RLStackError
from rlstack.experiments import load_experiments, validate_experiments
from rlstack.trainers.ppo import PPOTrainer
from tests.helpers.envs import DictObsEnv

TINY = {"num_workers": 0, "train_batch_size": 64, "sgd_minibatch_size": 32, "num_sgd_iter": 1,
        "rollout_fragment_length": 64, "model": {"fcnet_hiddens": [8]}}


# ----- observations given to compute_single_action / compute_actions --------------------------

@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLSTACK_RESULTS_DIR", str(tmp_path_factory.mktemp("results")))
        trainer = PPOTrainer(TINY, "CartPole-v1")
        yield trainer
        trainer.stop()


EXPECTED_SPACE = r"the observation space Box\(.*\) \(shape \(4,\), dtype float32\)"


@pytest.mark.parametrize(
    ("obs", "given", "fix"),
    [
        ([0.1, 0.2, 0.3], r"\(list, shape \(3,\), dtype float64\)",
         r"Pass one observation as the env returns it \(from env.reset\(\) or env.step\(\)\)"),
        ("abc", r"\(str, shape \(\), dtype <U3\)", r"Its dtype <U3 is not numeric: pass numbers, e\.g\. "
                                                  r"np\.asarray\(obs, dtype=np\.float32\)"),
        (np.zeros((84, 84, 3), np.uint8), r"\(ndarray, shape \(84, 84, 3\), dtype uint8\)", "Pass one observation"),
        (np.zeros(4, np.complex64), r"dtype complex64\)", "Its dtype complex64 is not numeric"),
        (np.zeros((2, 2), np.float32), r"shape \(2, 2\), dtype float32\)",
         r"It holds the right number of values: reshape it to \(4,\)"),
        (np.zeros((5, 4), np.float32), r"shape \(5, 4\), dtype float32\)",
         r"It looks like a batch of 5 observations: pass them to compute_actions\(\)"),
        ((np.zeros(4, np.float32), {}), r"\(tuple, shape None, dtype None\)",
         r"It looks like the \(obs, info\) pair that gymnasium's env.reset\(\) returns: unpack it"),
    ],
    ids=["short-vector", "string", "image", "complex", "reshapable", "batch", "reset-tuple"],
)
def test_wrong_observation_to_compute_single_action(cartpole, obs, given, fix):
    with pytest.raises(ObservationError, match=f"{given} does not fit {EXPECTED_SPACE}\\. {fix}") as info:
        cartpole.compute_single_action(obs)
    assert isinstance(info.value, ValueError) and isinstance(info.value, RLStackError)
    assert "\n" not in str(info.value)  # an image's repr is folded onto one line


def test_wrong_observation_in_a_batch_is_named_by_position(cartpole):
    good = np.zeros(4, np.float32)
    with pytest.raises(ObservationError, match=r"Observation 1 of 3 .*shape \(3,\)"):
        cartpole.compute_actions([good, good[:3], good])
    with pytest.raises(ObservationError, match=r"Observation 0 of 2 .*shape \(5,\)"):
        cartpole.compute_actions(np.zeros((2, 5), np.float32))


def test_observations_that_fit_are_accepted(cartpole):
    # Ints, float64 lists and values outside the Box's bounds are observations the policy
    # can act on: the check looks at shape and kind of number only.
    for obs in ([0, 0, 0, 0], [0.0, 1e6, 0.0, -1e6], np.zeros(4, np.float64), np.ones(4, bool)):
        assert cartpole.compute_single_action(obs, explore=False) in (0, 1)
    assert len(cartpole.compute_actions(np.zeros((3, 4), np.float32), explore=False)) == 3


def test_wrong_dict_observation_names_the_space():
    trainer = PPOTrainer(TINY, DictObsEnv)
    obs, _ = DictObsEnv().reset(seed=0)
    assert trainer.compute_single_action(obs, explore=False) in range(3)
    missing = {key: value for key, value in obs.items() if key != "choice"}
    with pytest.raises(ObservationError, match=r"\(dict, shape None, dtype None\) does not fit the observation "
                                               r"space Dict\(.*'choice': Discrete\(3\)"):
        trainer.compute_single_action(missing)
    trainer.stop()


# ----- action spaces an algorithm cannot handle ------------------------------------------------

class MultiBinaryActionEnv(gym.Env):
    """An env whose action space (MultiBinary, also inside a Tuple) no rlstack
    distribution covers."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.MultiBinary(2)

    def __init__(self, config=None):
        self.action_space = (config or {}).get("action_space", MultiBinaryActionEnv.action_space)

    def reset(self, *, seed=None, options=None):
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("algorithm, action_space, message", [
    ("PPO", gym.spaces.MultiBinary(2), r"Action space MultiBinary\(2\) is not supported; use Discrete, MultiDiscrete "
                                       r"or Box, or a Tuple / Dict of them"),
    ("A2C", gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.MultiBinary(2)]),
     r"has a leaf MultiBinary\(2\); Tuple / Dict action spaces may hold Discrete, MultiDiscrete and Box"),
    ("DQN", gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(3)]),
     r"Q-learning \(DQN, ApeX\) needs a Discrete action space, got Tuple"),
])
def test_unsupported_action_space_names_it_and_the_supported_ones(algorithm, action_space, message):
    from rlstack.trainers.common.registry import get_trainer_class

    with pytest.raises(ConfigError, match=message):
        get_trainer_class(algorithm)({"num_workers": 0, "model": {"fcnet_hiddens": [8]},
                                      "env_config": {"action_space": action_space}}, MultiBinaryActionEnv)


Q_LEARNING_ON_BOX = (r"Q-learning \(DQN, ApeX\) needs a Discrete action space, got Box\(-2\.0, 2\.0, \(1,\), "
                     r"float32\)\. Use PPO \(any action space\), or discretise the actions with a gymnasium "
                     r"ActionWrapper")


def test_dqn_on_a_box_action_space():
    from rlstack.trainers.dqn import DQNTrainer

    with pytest.raises(ConfigError, match=Q_LEARNING_ON_BOX):
        DQNTrainer({"num_workers": 0}, "Pendulum-v1")


@pytest.mark.parametrize("algorithm", ["DQN", "APEX"])
def test_q_learning_on_a_box_action_space_with_remote_workers(ray_local, algorithm):
    # The error is raised in the rollout worker actor's constructor; the trainer raises
    # it as the same ConfigError, not as Ray's ActorDiedError.
    from rlstack.trainers.common.registry import get_trainer_class

    config = {"num_workers": 1, "num_cpus_for_driver": 0}
    if algorithm == "APEX":
        config["num_replay_buffer_shards"] = 1
    with pytest.raises(ConfigError, match=Q_LEARNING_ON_BOX + r".*\(raised while a remote rollout worker started\)"):
        get_trainer_class(algorithm)(config, "Pendulum-v1")


# ----- env creators that return something that is not an env -----------------------------------

@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (None, r"returned NoneType, which is not an env \(None\): it needs observation_space, action_space, "
               r"reset\(\) and step\(\)\. Return a gymnasium.Env"),
        ({"obs": 1}, r"returned dict, which is not an env \(\{'obs': 1\}\)"),
        (MultiBinaryActionEnv, r"returned the class MultiBinaryActionEnv, not an env: return an instance, e\.g\. "
                               r"lambda ctx: MultiBinaryActionEnv\(\.\.\.\)"),
    ],
    ids=["none", "dict", "class"],
)
def test_env_creator_returning_a_non_env(returned, message):
    register_env("not_an_env", lambda ctx: returned)
    with pytest.raises(EnvError, match=message):
        PPOTrainer(TINY, "not_an_env")


def test_env_creator_error_in_a_remote_worker_keeps_its_type(ray_local):
    register_env("not_an_env_remote", lambda ctx: None)
    with pytest.raises(EnvError, match=r"returned NoneType, which is not an env.*raised while a remote rollout "
                                       r"worker started"):
        PPOTrainer({**TINY, "num_workers": 1, "num_cpus_for_driver": 0}, "not_an_env_remote")
    # The failed worker set gave its reserved CPUs back: two workers fit again.
    trainer = PPOTrainer({**TINY, "num_workers": 2}, "CartPole-v1")
    trainer.stop()


# ----- experiment YAML files with a wrong type for a key --------------------------------------

@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("  config: {num_workers: two}\n", r"cartpole-ppo.yaml: num_workers must be an integer >= 0, got 'two'"),
        ("  config: {num_workers: 1.5}\n", r"num_workers must be an integer >= 0, got 1\.5"),
        ("  config: {model: [16, 16]}\n",
         r"model for PPO must be a dict of sub-keys, got list \(\[16, 16\]\); write it as a mapping"),
        ("  config: {evaluation_config: {model: 3}}\n", r"model for PPO's evaluation_config must be a dict"),
        ("  config: {lr: fast}\n", r"lr must be > 0, got 'fast'"),
        ("  config: [1, 2]\n", r"config must be a dict \(config must be a dict of trainer config keys\), got list "
                               r"\(\[1, 2\]\); e\.g\. config: \{num_workers: 2"),
        ("  stop: 150\n", r"stop must be a dict \(.*\), got int \(150\); e\.g\. stop: \{training_iteration: 10"),
        ("  stop: {episode_reward_mean: high}\n",
         r"stop criterion 'episode_reward_mean' must be a number .*got str \('high'\)"),
        ("  num_samples: '4'\n", r"num_samples must be an integer >= 1, got str \('4'\); e\.g\. num_samples: 4"),
        ("  checkpoint_freq: true\n", r"checkpoint_freq must be an integer >= 0 .*got bool \(True\)"),
        ("  checkpoint_at_end: 'yes please'\n", r"checkpoint_at_end must be true or false, got str"),
    ],
    ids=["int-as-word", "int-as-float", "model-list", "eval-model", "lr-word", "config-list", "stop-int",
         "stop-value", "num-samples-str", "checkpoint-freq-bool", "checkpoint-at-end-str"],
)
def test_yaml_with_a_wrong_type_names_file_experiment_key_and_value(tmp_path, body, message):
    path = tmp_path / "cartpole-ppo.yaml"
    path.write_text("cartpole-ppo:\n  run: PPO\n  env: CartPole-v1\n" + body)
    with pytest.raises(ConfigError, match=message) as info:
        validate_experiments(load_experiments(str(path)))
    assert f"Experiment 'cartpole-ppo' in {path}" in str(info.value)


def test_yaml_empty_sections_mean_the_defaults(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("e:\n  run: PPO\n  env: CartPole-v1\n  config:\n    env_config:\n    model:\n    num_workers: 0\n")
    experiments = load_experiments(str(path))
    validate_experiments(experiments)
    config = PPOTrainer.merge_and_validate(experiments["e"]["config"])
    assert config["env_config"] == {} and config["model"]["fcnet_hiddens"] == [256, 256]
