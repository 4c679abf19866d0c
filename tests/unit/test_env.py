"""Unit tests for rlstack/env: registry, EnvContext, the legacy adapter and VectorEnv."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.env import EnvContext, LegacyEnvAdapter, VectorEnv, make_env, register_env, registered_envs
from rlstack.env import registry as env_registry
from rlstack.errors import EnvError, RLStackError


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch):
    """Each test sees an empty register_env registry, and leaves none behind."""
    monkeypatch.setattr(env_registry, "_REGISTRY", {})


class CountEnv(gym.Env):
    """Deterministic env: obs is the step count since reset; terminates after ``length`` steps.

    With ``truncate_at`` it also reports ``truncated=True`` at that step (own time limit).
    """

    def __init__(self, config=None):
        config = config or {}
        self.length = config.get("length", 3)
        self.truncate_at = config.get("truncate_at")
        self.observation_space = gym.spaces.Box(0.0, 1000.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0
        self.reset_seeds = []
        self.context = config

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.reset_seeds.append(seed)
        self.t = 0
        return np.array([0.0], np.float32), {"reset": True}

    def step(self, action):
        self.t += 1
        terminated = self.t >= self.length
        truncated = self.truncate_at is not None and self.t >= self.truncate_at
        return np.array([float(self.t)], np.float32), 1.0, terminated, truncated, {"t": self.t}


class OldGymEnv:
    """Old gym API: not a gymnasium.Env, obs-only reset, 4-tuple step."""

    def __init__(self, config):
        self.terminate_at = config.get("terminate_at", 100)
        self.time_limit = config.get("time_limit", 100)
        self.observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.t = 0
        self.seeded = None

    def seed(self, s):
        self.seeded = s

    def reset(self):
        self.t = 0
        return np.zeros(2, np.float32)

    def step(self, action):
        self.t += 1
        info = {"t": self.t}
        done = False
        if self.t >= self.terminate_at:
            done = True
        elif self.t >= self.time_limit:
            done = True
            info["TimeLimit.truncated"] = True
        return np.full(2, self.t, np.float32), 0.5, done, info


# --- register_env / make_env ----------------------------------------------------------


def test_register_env_creator_receives_env_context():
    seen = {}

    def creator(ctx):
        seen["ctx"] = ctx
        return CountEnv(ctx)

    register_env("count", creator)
    assert "count" in registered_envs()
    ctx = EnvContext({"length": 7, "extra": "x"}, worker_index=2, vector_index=1, num_workers=4)
    env = make_env("count", ctx)
    assert isinstance(env, CountEnv)
    assert env.length == 7
    got = seen["ctx"]
    assert isinstance(got, EnvContext)
    assert got["length"] == 7 and got["extra"] == "x"
    assert (got.worker_index, got.vector_index, got.num_workers) == (2, 1, 4)


def test_register_env_rejects_non_callable():
    with pytest.raises(TypeError, match="callable"):
        register_env("bad", 42)


def test_registered_envs_is_a_copy():
    register_env("count", CountEnv)
    registered_envs().pop("count")
    assert "count" in registered_envs()


def test_env_context_is_a_dict_and_copy_with_replaces_indices():
    ctx = EnvContext({"a": 1}, worker_index=3, vector_index=0, num_workers=5)
    assert dict(ctx) == {"a": 1}
    other = ctx.copy_with(vector_index=2)
    assert dict(other) == {"a": 1}
    assert (other.worker_index, other.vector_index, other.num_workers) == (3, 2, 5)
    assert ctx.vector_index == 0
    defaults = EnvContext()
    assert dict(defaults) == {} and (defaults.worker_index, defaults.vector_index, defaults.num_workers) == (0, 0, 0)


def test_make_env_gymnasium_id():
    env = make_env("CartPole-v1", EnvContext())
    assert isinstance(env, gym.Env)
    assert env.observation_space.shape == (4,)
    assert env.action_space.n == 2
    obs, info = env.reset(seed=0)
    assert obs.shape == (4,)


def test_make_env_gymnasium_id_passes_env_config_as_kwargs():
    env = make_env("CartPole-v1", EnvContext({"sutton_barto_reward": True}))
    assert env.unwrapped._sutton_barto_reward is True


def test_make_env_gymnasium_id_with_bad_kwargs_raises_env_error():
    with pytest.raises(EnvError, match="CartPole-v1"):
        make_env("CartPole-v1", EnvContext({"no_such_kwarg": 1}))


def test_make_env_registered_name_takes_precedence_over_gymnasium_id():
    register_env("CartPole-v1", lambda ctx: CountEnv(ctx))
    assert isinstance(make_env("CartPole-v1", EnvContext()), CountEnv)


def test_make_env_env_class_is_constructed_with_context():
    ctx = EnvContext({"length": 5}, worker_index=1)
    env = make_env(CountEnv, ctx)
    assert isinstance(env, CountEnv)
    assert env.length == 5
    assert env.context is ctx


def test_make_env_callable_creator():
    calls = []

    def creator(ctx):
        calls.append(ctx.vector_index)
        return CountEnv({"length": 2})

    env = make_env(creator, EnvContext(vector_index=3))
    assert isinstance(env, CountEnv) and env.length == 2
    assert calls == [3]


def test_make_env_unknown_name_suggests_close_match():
    with pytest.raises(EnvError) as info:
        make_env("CartPole-v9", EnvContext())
    message = str(info.value)
    assert "'CartPole-v9'" in message
    assert "did you mean" in message
    assert "'CartPole-v1'" in message or "'CartPole-v0'" in message
    assert isinstance(info.value, RLStackError) and isinstance(info.value, ValueError)


def test_make_env_unknown_name_suggests_registered_names():
    register_env("MyCorridor", CountEnv)
    with pytest.raises(EnvError, match="did you mean 'MyCorridor'"):
        make_env("MyCoridor", EnvContext())


def test_make_env_takes_an_env_class_import_path_and_renames_rllib_paths():
    # 1.13 imported an unregistered "package.module.Class"; `rlstack migrate` leaves
    # strings alone, so RLlib's own paths are renamed by the rule when resolved.
    env = make_env("ray.rllib.examples.env.random_env.RandomEnv",
                   EnvContext({"observation_space": gym.spaces.Box(-1, 1, (3,)), "max_episode_len": 2}, 0))
    obs, _ = env.reset(seed=3)
    assert obs.shape == (3,)
    assert env.step(0)[3] is False and env.step(1)[3] is True  # truncated at max_episode_len
    assert type(make_env("rlstack.examples.env.stateless_cartpole.StatelessCartPole", EnvContext({}, 0))).__name__ \
        == "StatelessCartPole"
    with pytest.raises(EnvError, match="has no 'NoSuchEnv'"):
        make_env("ray.rllib.examples.env.random_env.NoSuchEnv", EnvContext({}, 0))
    with pytest.raises(EnvError, match="Unknown env 'no_such_package.Env'"):
        make_env("no_such_package.Env", EnvContext({}, 0))


def test_1x_tuned_examples_env_paths_build_rlstacks_envs():
    # 1.x's memory-leak and transformed-action tuned examples name these by path.
    large = make_env("ray.rllib.examples.env.random_env.RandomLargeObsSpaceEnv", EnvContext({}, 0))
    assert type(large).__name__ == "RandomLargeObsSpaceEnv" and large.observation_space.shape == (5000,)
    assert large.observation_space.contains(large.reset(seed=0)[0])
    pendulum = make_env("ray.rllib.examples.env.transformed_action_space_env.TransformedActionPendulum",
                        EnvContext({"low": -15.0, "high": 15.0}, 0))
    assert pendulum.unwrapped.spec.id == "Pendulum-v1"
    assert (pendulum.action_space.low.tolist(), pendulum.action_space.high.tolist()) == ([-15.0], [15.0])
    pendulum.reset(seed=0)
    pendulum.step(np.array([15.0], np.float32))


@pytest.mark.parametrize("name", sorted(env_registry.shipped_example_envs()))
def test_every_shipped_example_env_builds_from_its_1x_path(name):
    relative = env_registry.shipped_example_envs()[name]
    if name == "RockPaperScissors":
        pytest.importorskip("pettingzoo")
    for prefix in ("ray.rllib.examples.env", "rlstack.examples.env"):
        env = make_env(f"{prefix}.{relative}", EnvContext({}, 0))
        assert hasattr(env, "reset") and hasattr(env, "step")


def test_shipped_example_envs_are_the_example_modules_env_classes():
    shipped = env_registry.shipped_example_envs()
    assert shipped["RandomLargeObsSpaceEnv"] == "random_env.RandomLargeObsSpaceEnv"
    assert shipped["TransformedActionPendulum"] == "transformed_action_space_env.TransformedActionPendulum"
    assert "ActionTransform" not in shipped  # a wrapper, not an env
    for name in env_registry.EXAMPLE_ENVS:  # every env known by its bare name too
        assert name in shipped


def test_an_example_env_rlstack_does_not_ship_names_the_closest_shipped_ones():
    with pytest.raises(EnvError, match=r"has no 'RandomLargeObsSpace'.*not shipped with rlstack.*Closest shipped "
                                       r"example envs: 'ray.rllib.examples.env.random_env.RandomLargeObsSpaceEnv'"):
        make_env("ray.rllib.examples.env.random_env.RandomLargeObsSpace", EnvContext({}, 0))
    with pytest.raises(EnvError, match=r"rlstack has no module 'rlstack.examples.env.simple_corridor'.*Closest "
                                       r"shipped example envs: 'ray.rllib.examples.env\.") as info:
        make_env("ray.rllib.examples.env.simple_corridor.SimpleCorridor", EnvContext({}, 0))
    assert "StatelessCartPole" in str(info.value) and "register_env" in str(info.value)


def test_a_dotted_env_path_into_the_users_own_module_still_works(tmp_path, monkeypatch):
    (tmp_path / "my_envs_pkg").mkdir()
    (tmp_path / "my_envs_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_envs_pkg" / "corridor.py").write_text(
        "import gymnasium as gym\n\n\nclass SimpleCorridor(gym.Env):\n"
        "    observation_space = gym.spaces.Discrete(3)\n    action_space = gym.spaces.Discrete(2)\n\n"
        "    def __init__(self, config):\n        self.config = dict(config)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    env = make_env("my_envs_pkg.corridor.SimpleCorridor", EnvContext({"length": 5}, 0))
    assert type(env).__name__ == "SimpleCorridor" and env.config == {"length": 5}
    with pytest.raises(EnvError, match="module 'my_envs_pkg.corridor' has no 'Corridor'.$"):
        make_env("my_envs_pkg.corridor.Corridor", EnvContext({}, 0))


def test_make_env_none_raises_env_error():
    with pytest.raises(EnvError, match="No env"):
        make_env(None, EnvContext())


def test_make_env_bad_spec_type_raises_env_error():
    with pytest.raises(EnvError, match="must be a name"):
        make_env(3.5, EnvContext())


def test_creator_returning_non_env_raises_env_error():
    register_env("returns42", lambda ctx: 42)
    with pytest.raises(EnvError, match="returned int, which is not an env"):
        make_env("returns42", EnvContext())


# --- the legacy adapter ---------------------------------------------------------------


def test_old_gym_env_class_is_adapted():
    env = make_env(OldGymEnv, EnvContext({"terminate_at": 2}))
    assert isinstance(env, LegacyEnvAdapter)
    assert isinstance(env, gym.Env)
    assert env.observation_space.shape == (2,)
    assert env.action_space.n == 3
    result = env.reset(seed=11)
    assert isinstance(result, tuple) and len(result) == 2
    obs, info = result
    np.testing.assert_array_equal(obs, [0.0, 0.0])
    assert info == {}
    assert env.env.seeded == 11  # reset(seed=...) is forwarded to the old seed()
    step = env.step(0)
    assert len(step) == 5
    obs, reward, terminated, truncated, info = step
    assert (reward, terminated, truncated) == (0.5, False, False)
    obs, reward, terminated, truncated, info = env.step(0)
    assert terminated is True and truncated is False


def test_old_gym_time_limit_end_is_truncation():
    register_env("old", OldGymEnv)
    env = make_env("old", EnvContext({"time_limit": 2}))
    env.reset()
    assert env.step(1)[2:4] == (False, False)
    obs, reward, terminated, truncated, info = env.step(1)
    assert terminated is False
    assert truncated is True
    assert "TimeLimit.truncated" not in info
    assert info["t"] == 2
    np.testing.assert_array_equal(obs, [2.0, 2.0])


def test_old_gym_env_from_creator_is_adapted():
    register_env("old", lambda ctx: OldGymEnv(ctx))
    env = make_env("old", EnvContext({"terminate_at": 1}))
    env.reset()
    assert env.step(0)[2:4] == (True, False)


# --- VectorEnv ------------------------------------------------------------------------


def _vector(num_envs=2, lengths=(3, 5), **kwargs):
    return VectorEnv(lambda i: CountEnv({"length": lengths[i]}), num_envs, **kwargs)


def test_vector_env_auto_reset_on_termination():
    venv = _vector()
    obs = venv.reset()
    assert [o.tolist() for o in obs] == [[0.0], [0.0]]
    results = [venv.step([0, 0]) for _ in range(4)]

    for step in range(2):  # steps 1, 2: nothing ends
        obs, rewards, terminateds, truncateds, final_obs, infos = results[step]
        assert final_obs == {}
        assert not terminateds.any() and not truncateds.any()
        assert [o.tolist() for o in obs] == [[step + 1.0], [step + 1.0]]

    obs, rewards, terminateds, truncateds, final_obs, infos = results[2]  # step 3: env 0 ends
    assert terminateds.tolist() == [True, False]
    assert truncateds.tolist() == [False, False]
    assert list(final_obs) == [0]
    np.testing.assert_array_equal(final_obs[0], [3.0])
    np.testing.assert_array_equal(obs[0], [0.0])  # the reset observation
    np.testing.assert_array_equal(obs[1], [3.0])
    assert rewards.tolist() == [1.0, 1.0]
    assert infos[0] == {"t": 3} and infos[1] == {"t": 3}

    obs, rewards, terminateds, truncateds, final_obs, infos = results[3]  # step 4: env 0 restarted
    assert final_obs == {}
    assert not terminateds.any()
    np.testing.assert_array_equal(obs[0], [1.0])
    np.testing.assert_array_equal(obs[1], [4.0])


def test_vector_env_spaces_and_seeds_used_only_on_first_reset():
    venv = _vector(seeds=[10, 20])
    assert venv.observation_space == venv.envs[0].observation_space
    assert venv.action_space.n == 2
    venv.reset()
    for _ in range(3):
        venv.step([0, 0])
    venv.reset()
    assert venv.envs[0].reset_seeds == [10, None, None]  # first reset, auto-reset, second reset()
    assert venv.envs[1].reset_seeds == [20, None]


def test_vector_env_time_limit_is_truncation_not_termination():
    venv = VectorEnv(lambda i: gym.wrappers.TimeLimit(CountEnv({"length": 100}), max_episode_steps=2), 1)
    venv.reset()
    _, _, terminateds, truncateds, final_obs, _ = venv.step([0])
    assert not terminateds[0] and not truncateds[0] and final_obs == {}
    obs, _, terminateds, truncateds, final_obs, _ = venv.step([0])
    assert terminateds.tolist() == [False]
    assert truncateds.tolist() == [True]
    np.testing.assert_array_equal(final_obs[0], [2.0])
    np.testing.assert_array_equal(obs[0], [0.0])


def test_vector_env_terminated_and_truncated_together_counts_as_terminated():
    venv = VectorEnv(lambda i: CountEnv({"length": 2, "truncate_at": 2}), 1)
    venv.reset()
    venv.step([0])
    _, _, terminateds, truncateds, final_obs, _ = venv.step([0])
    assert terminateds.tolist() == [True]
    assert truncateds.tolist() == [False]
    assert 0 in final_obs


def test_vector_env_horizon_truncates_and_restarts_count():
    venv = VectorEnv(lambda i: CountEnv({"length": 100}), 1, horizon=2)
    venv.reset()
    _, _, terminateds, truncateds, final_obs, _ = venv.step([0])
    assert not truncateds[0] and final_obs == {}
    obs, _, terminateds, truncateds, final_obs, _ = venv.step([0])
    assert terminateds.tolist() == [False] and truncateds.tolist() == [True]
    np.testing.assert_array_equal(final_obs[0], [2.0])
    np.testing.assert_array_equal(obs[0], [0.0])
    # The step counter restarts with the episode: two more steps, truncated again.
    _, _, _, truncateds, final_obs, _ = venv.step([0])
    assert not truncateds[0] and final_obs == {}
    _, _, _, truncateds, final_obs, _ = venv.step([0])
    assert truncateds[0] and 0 in final_obs


def test_vector_env_horizon_does_not_override_termination():
    venv = VectorEnv(lambda i: CountEnv({"length": 2}), 1, horizon=2)
    venv.reset()
    venv.step([0])
    _, _, terminateds, truncateds, _, _ = venv.step([0])
    assert terminateds.tolist() == [True] and truncateds.tolist() == [False]


def test_vector_env_horizon_counter_reset_by_env_termination():
    # Episode ends by termination at step 3 < horizon 4; the next episode gets a full horizon.
    venv = VectorEnv(lambda i: CountEnv({"length": 3}), 1, horizon=4)
    venv.reset()
    for _ in range(3):
        _, _, terminateds, truncateds, _, _ = venv.step([0])
    assert terminateds[0] and not truncateds[0]
    for _ in range(2):
        _, _, terminateds, truncateds, final_obs, _ = venv.step([0])
        assert final_obs == {}


class _HalfMigratedEnv(CountEnv):
    """A gymnasium.Env subclass that still returns only obs from reset() and 4-tuple steps."""

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([0.0], np.float32)

    def step(self, action):
        self.t += 1
        return np.array([float(self.t)], np.float32), 1.0, self.t >= self.length, {}


def test_vector_env_wraps_gymnasium_subclass_with_obs_only_reset():
    venv = VectorEnv(lambda i: _HalfMigratedEnv({"length": 2}), 1)
    obs = venv.reset()
    np.testing.assert_array_equal(obs[0], [0.0])
    assert isinstance(venv.envs[0], LegacyEnvAdapter)
    venv.step([0])
    obs, _, terminateds, truncateds, final_obs, _ = venv.step([0])
    assert terminateds.tolist() == [True]
    np.testing.assert_array_equal(final_obs[0], [2.0])


class _OneXCorridor(gym.Env):
    """A 1.x example env after `import gym` became `import gymnasium as gym`: a gymnasium.Env
    whose reset() takes no seed and returns obs, whose step() returns 4 values, and which
    has a method of its own (a curriculum's set_task)."""

    def __init__(self, config):
        self.length = config["length"]
        self.observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def set_task(self, length):
        self.length = length

    def reset(self):
        self.t = 0
        return np.array([0.0], np.float32)

    def step(self, action):
        self.t += 1
        return np.array([float(self.t)], np.float32), 1.0, self.t >= self.length, {}


def test_a_1x_env_class_that_subclasses_gymnasium_env_is_adapted():
    env = make_env(_OneXCorridor, EnvContext({"length": 2}))
    assert isinstance(env, LegacyEnvAdapter)
    obs, info = env.reset(seed=3)
    np.testing.assert_array_equal(obs, [0.0])
    assert info == {}
    env.set_task(3)  # the env's own method, through the adapter
    assert env.env.length == 3 and isinstance(env.unwrapped, _OneXCorridor)
    steps = [env.step(0) for _ in range(3)]
    assert [s[2] for s in steps] == [False, False, True] and all(len(s) == 5 for s in steps)

    venv = VectorEnv(lambda i: make_env(_OneXCorridor, EnvContext({"length": 2})), 2)
    venv.reset()
    venv.step([0, 1])
    _, _, terminateds, truncateds, _, _ = venv.step([0, 1])
    assert terminateds.tolist() == [True, True] and truncateds.tolist() == [False, False]


def test_gymnasium_envs_and_multi_agent_envs_are_not_adapted():
    from rlstack.examples.env.multi_agent import MultiAgentCartPole

    assert not isinstance(make_env("CartPole-v1", EnvContext({})), LegacyEnvAdapter)
    assert not isinstance(make_env(MultiAgentCartPole, EnvContext({"num_agents": 2})), LegacyEnvAdapter)


class _OneXRandomStart(gym.Env):
    """A gym 0.21-style env class (after `import gymnasium as gym`) that draws its start
    with gym 0.21's ``self.np_random.randint``."""

    observation_space = gym.spaces.Discrete(10)
    action_space = gym.spaces.Discrete(2)

    def reset(self):
        self.state = self.np_random.randint(10)
        return self.state

    def step(self, action):
        return int(self.np_random.randint(3, 6)), 0.0, True, {}


class _OneXOwnSeed:
    """A duck-typed gym 0.21 env whose own seed() makes np_random (as gym.utils.seeding did)."""

    observation_space = gym.spaces.Discrete(10)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.seed()

    def seed(self, seed=None):
        from gymnasium.utils import seeding

        self.np_random, seed = seeding.np_random(seed)
        return [seed]

    def reset(self):
        return int(self.np_random.randint(10))

    def step(self, action):
        return 0, 0.0, True, {}


@pytest.mark.parametrize("env_class", [_OneXRandomStart, _OneXOwnSeed])
def test_an_adapted_1x_env_draws_with_randint_and_is_seeded_as_gymnasium_seeds(env_class):
    from gymnasium.utils import seeding

    env = make_env(lambda ctx: env_class(), EnvContext({}))
    assert isinstance(env, LegacyEnvAdapter)
    starts = [env.reset(seed=seed)[0] for seed in range(8)]
    # The same draws as a gymnasium env's np_random seeded with each seed.
    assert starts == [int(seeding.np_random(seed)[0].integers(10)) for seed in range(8)]
    assert starts == [make_env(lambda ctx: env_class(), EnvContext({})).reset(seed=seed)[0] for seed in range(8)]
    rng = env.env.np_random
    assert isinstance(rng, np.random.Generator)
    # RandomState.randint's bounds: randint(n) in [0, n), randint(low, high) excludes high.
    assert set(rng.randint(3, size=2000).tolist()) == {0, 1, 2}
    assert set(rng.randint(3, 6, size=2000).tolist()) == {3, 4, 5}
    assert rng.rand(2, 3).shape == (2, 3) and rng.randn(4).shape == (4,) and 0 <= rng.random_sample() < 1
    env.reset()  # no seed: the stream goes on


def test_an_unseeded_1x_env_and_gymnasium_envs_keep_their_generators():
    env = make_env(lambda ctx: _OneXRandomStart(), EnvContext({}))
    assert 0 <= env.reset()[0] < 10  # randint works before any seed is given
    # A gymnasium-API env is not adapted and keeps gymnasium's own Generator.
    cartpole = make_env("CartPole-v1", EnvContext({}))
    cartpole.reset(seed=0)
    assert type(cartpole.unwrapped.np_random) is np.random.Generator


def test_a_retired_gym_id_makes_its_gymnasium_successor_with_a_warning(monkeypatch, caplog):
    import logging

    monkeypatch.setattr(env_registry, "_WARNED_RETIRED_IDS", set())
    with caplog.at_level(logging.WARNING, logger="rlstack.env.registry"):
        env = make_env("Pendulum-v0", EnvContext({}))
        assert env.spec.id == "Pendulum-v1"
        assert make_env("FrozenLake-v0", EnvContext({})).spec.id == "FrozenLake-v1"
        make_env("Pendulum-v0", EnvContext({}))
    assert "'Pendulum-v0'" in caplog.text and "'Pendulum-v1'" in caplog.text
    assert caplog.text.count("'Pendulum-v0' is a gym id") == 1  # once per id, not per env
    assert make_env("CartPole-v0", EnvContext({})).spec.id == "CartPole-v0"  # gymnasium still has it
    with pytest.raises(EnvError, match="Unknown env 'NoSuchGame-v0'"):
        make_env("NoSuchGame-v0", EnvContext({}))


def test_a_trainer_on_a_retired_gym_id_runs_on_its_successor(monkeypatch, caplog):
    import logging

    from rlstack.trainers.pg import PGTrainer

    monkeypatch.setattr(env_registry, "_WARNED_RETIRED_IDS", set())
    with caplog.at_level(logging.WARNING, logger="rlstack.env.registry"):
        trainer = PGTrainer(config={"num_workers": 0, "train_batch_size": 20, "rollout_fragment_length": 20},
                            env="Pendulum-v0")
    try:
        assert trainer.workers.local_worker().foreach_env(lambda env: env.spec.id) == ["Pendulum-v1"]
        assert "'Pendulum-v0' is a gym id that gymnasium no longer registers" in caplog.text
        assert trainer.train()["timesteps_total"] >= 20
    finally:
        trainer.stop()


def test_1x_example_envs_named_by_path():
    context = EnvContext({}, 0)
    large = make_env("ray.rllib.examples.env.random_env.RandomLargeObsSpaceEnv", context)
    assert large.observation_space.shape == (5000,) and large.reset(seed=0)[0].shape == (5000,)
    continuous = make_env("ray.rllib.examples.env.random_env.RandomLargeObsSpaceEnvContActions", context)
    assert continuous.action_space == gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
    pendulum = make_env("ray.rllib.examples.env.transformed_action_space_env.TransformedActionPendulum",
                        EnvContext({"low": 300.0, "high": 500.0}, 0))
    assert pendulum.action_space == gym.spaces.Box(300.0, 500.0, (1,), np.float32)
    # The new range maps linearly onto Pendulum's own [-2, 2].
    np.testing.assert_allclose([pendulum.action(np.array([a], np.float32))[0] for a in (300.0, 400.0, 500.0)],
                               [-2.0, 0.0, 2.0])
    pendulum.reset(seed=0)
    assert np.isfinite(pendulum.step(np.array([450.0], np.float32))[1])


class _FourTupleStepEnv(CountEnv):
    def step(self, action):
        return np.array([1.0], np.float32), 0.0, False, {}


def test_vector_env_four_tuple_step_after_gymnasium_reset_raises():
    venv = VectorEnv(lambda i: _FourTupleStepEnv(), 1)
    venv.reset()
    with pytest.raises(EnvError, match="4 values"):
        venv.step([0])


def test_discrete_action_space_with_start_gets_actions_in_range():
    pytest.importorskip("torch")
    from rlstack.trainers.common.config import merge_config
    from rlstack.trainers.ppo import DEFAULT_CONFIG
    from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

    config = merge_config(DEFAULT_CONFIG, {"model": {"fcnet_hiddens": [4]}}, "PPO")
    for space in (gym.spaces.Discrete(3, start=5), gym.spaces.MultiDiscrete([2, 3], start=[1, -1])):
        policy = PPOTorchPolicy(gym.spaces.Box(-1, 1, (2,)), space, config)
        actions, _ = policy.compute_actions(np.zeros((50, 2), np.float32))
        env_actions = policy.unsquash_actions(actions)
        assert all(space.contains(a) for a in env_actions)


def test_unit_box_policies_map_actions_onto_the_bounds_whatever_normalize_actions_says():
    from rlstack.policies.policy import Policy

    class UnitBoxPolicy(Policy):
        acts_in_unit_box = True
        compute_actions = compute_values = learn_on_batch = get_weights = set_weights = None

    space = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 10.0], np.float32))
    actions = np.array([[-1.0, 1.0], [0.5, 0.0]], np.float32)
    for normalize_actions in (True, False):
        policy = UnitBoxPolicy(gym.spaces.Box(-1, 1, (2,)), space, {"normalize_actions": normalize_actions})
        np.testing.assert_allclose(policy.unsquash_actions(actions), [[-2.0, 10.0], [1.0, 5.0]])
        # An explicit unsquash_action=False (compute_single_action's argument) still returns [-1, 1].
        np.testing.assert_array_equal(policy.unsquash_actions(actions, normalize=False), actions)
    UnitBoxPolicy.acts_in_unit_box = False
    plain = UnitBoxPolicy(gym.spaces.Box(-1, 1, (2,)), space, {"normalize_actions": False})
    np.testing.assert_array_equal(plain.unsquash_actions(actions), actions)
