"""Tuple / Dict action spaces: the flat layout policies act with, the multi-action
distributions of the three frameworks, and the nested actions envs receive."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.models.catalog import action_dist_spec
from rlstack.models.numpy.distributions import DISTRIBUTIONS as NUMPY_DISTRIBUTIONS
from rlstack.utils.spaces.space_utils import FlatActionLayout, flatten_space, tree_leaves, unbatch

NESTED = gym.spaces.Dict({
    "a": gym.spaces.Tuple([gym.spaces.Dict({"d": gym.spaces.Box(-10.0, 10.0, ()), "e": gym.spaces.Discrete(2)})]),
    "b": gym.spaces.Box(-10.0, 10.0, (2,)),
    "c": gym.spaces.Discrete(4, start=1),
    "m": gym.spaces.MultiDiscrete([3, 2]),
})


def test_layout_round_trips_nested_actions_with_starts_and_scalar_boxes():
    layout = FlatActionLayout(NESTED)
    assert [type(s).__name__ for s in flatten_space(NESTED)] == ["Box", "Discrete", "Box", "Discrete", "MultiDiscrete"]
    assert layout.widths == (1, 1, 2, 1, 2) and layout.width == 7 and not layout.discrete
    flat = np.array([[0.5, 1, 0.1, 0.2, 3, 2, 1], [0.1, 0, 0.3, 0.4, 0, 0, 0]], np.float32)
    actions = layout.to_env(flat)
    assert all(NESTED.contains(action) for action in actions)
    assert actions[0]["c"] == 4 and actions[1]["c"] == 1  # category 3 and 0, from start 1
    assert actions[0]["a"][0]["d"].shape == ()
    np.testing.assert_allclose(layout.from_env(actions), flat)
    np.testing.assert_allclose(layout.from_env(actions[0]), flat[:1])
    assert FlatActionLayout(gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2)).discrete
    with pytest.raises(TypeError, match="MultiBinary"):
        FlatActionLayout(gym.spaces.Tuple([gym.spaces.MultiBinary(2)]))


def test_tree_helpers_follow_gymnasiums_key_order():
    assert tree_leaves({"b": 1, "a": (2, {"z": 3, "y": 4})}) == [2, 4, 3, 1]
    assert unbatch((np.array([1, 2]), {"x": np.array([3, 4])})) == [(1, {"x": 3}), (2, {"x": 4})]


def _inputs(spec, rows=5, seed=0):
    return np.random.default_rng(seed).normal(size=(rows, spec.num_outputs)).astype(np.float32)


def test_numpy_multi_action_samples_in_the_layout_and_sums_the_leaves_logps():
    spec = action_dist_spec(NESTED)
    assert spec.kind == "multi_action" and spec.num_outputs == 2 + 2 + 4 + 4 + 5
    dist = NUMPY_DISTRIBUTIONS["multi_action"](_inputs(spec), spec)
    actions = dist.sample(np.random.default_rng(1))
    assert actions.shape == (5, 7) and actions.dtype == np.float32
    parts = spec.layout.split(actions)
    leaf_logps = [NUMPY_DISTRIBUTIONS[child.kind](inputs, child).logp(part[:, 0] if child.kind == "categorical"
                                                                       else part)
                  for child, inputs, part in zip(spec.children, np.split(_inputs(spec), np.cumsum(
                      [c.num_outputs for c in spec.children])[:-1], axis=1), parts)]
    np.testing.assert_allclose(dist.logp(actions), sum(leaf_logps), rtol=1e-5)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_framework_multi_action_matches_numpy(framework):
    spec = action_dist_spec(NESTED)
    inputs = _inputs(spec)
    numpy_dist = NUMPY_DISTRIBUTIONS["multi_action"](inputs, spec)
    actions = numpy_dist.sample(np.random.default_rng(2))
    if framework == "torch":
        torch = pytest.importorskip("torch")
        from rlstack.models.torch.distributions import DISTRIBUTIONS

        dist = DISTRIBUTIONS["multi_action"](torch.from_numpy(inputs), spec)
        logp = dist.logp(torch.from_numpy(actions)).numpy()
        entropy = dist.entropy().numpy()
        assert dist.deterministic_sample().shape == (5, 7)
        assert float(dist.kl(dist).abs().max()) < 1e-6
    else:
        tf = pytest.importorskip("tensorflow")
        from rlstack.models.tf.distributions import DISTRIBUTIONS, make_distribution

        dist = make_distribution(DISTRIBUTIONS["multi_action"], tf.constant(inputs), spec)
        logp = dist.logp(tf.constant(actions)).numpy()
        entropy = dist.entropy().numpy()
        assert tuple(dist.deterministic_sample().shape) == (5, 7)
        assert float(tf.reduce_max(tf.abs(dist.kl(dist)))) < 1e-6
    np.testing.assert_allclose(logp, numpy_dist.logp(actions), rtol=1e-4, atol=1e-4)
    assert entropy.shape == (5,)
