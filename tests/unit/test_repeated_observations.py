"""Repeated observations (1.13's ``Repeated`` space): encoded as the list's length and
``max_len`` padded items, restored for a model as RepeatedValues."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import EnvError
from rlstack.models.modelv2 import model_obs_space, restore_original_dimensions
from rlstack.models.preprocessors import Preprocessor, RepeatedValuesPreprocessor, get_preprocessor
from rlstack.models.repeated_values import RepeatedValues
from rlstack.utils.spaces.repeated import Repeated
from rlstack.utils.spaces.simplex import Simplex

PLAYER = gym.spaces.Dict({"location": gym.spaces.Box(-1.0, 1.0, (2,)),
                          "items": Repeated(gym.spaces.Discrete(3), max_len=2)})
PLAYERS = Repeated(PLAYER, max_len=3)


def _players():
    return [{"location": np.array([0.5, -0.5], np.float32), "items": [2]},
            {"location": np.array([0.1, 0.2], np.float32), "items": [0, 1]}]


def test_layout_is_the_length_then_padded_items():
    preprocessor = Preprocessor(PLAYERS)
    item = (1 + 2 * 3) + 2  # gymnasium's Dict sorts keys: the items' length and 2 one-hot slots, then location
    assert preprocessor.size == 1 + 3 * item
    row = preprocessor.transform(_players())
    assert row[0] == 2
    np.testing.assert_array_equal(row[1:1 + item], [1, 0, 0, 1, 0, 0, 0, 0.5, -0.5])
    assert not row[1 + 2 * item:].any()  # the third player is padding
    assert get_preprocessor(PLAYERS) is RepeatedValuesPreprocessor
    with pytest.raises(EnvError, match="max_len 3"):
        preprocessor.transform([_players()[0]] * 4)


@pytest.mark.parametrize("tensorlib", ["numpy", "torch"])
def test_model_gets_repeated_values_back(tensorlib):
    rows = Preprocessor(PLAYERS).transform_batch([_players(), _players()[:1]])
    if tensorlib == "torch":
        torch = pytest.importorskip("torch")
        rows = torch.from_numpy(rows)
    obs = restore_original_dimensions(rows, model_obs_space(PLAYERS), tensorlib)
    assert isinstance(obs, RepeatedValues) and obs.max_len == 3
    assert [float(n) for n in obs.lengths] == [2.0, 1.0]
    assert tuple(obs.values["location"].shape) == (2, 3, 2)
    assert isinstance(obs.values["items"], RepeatedValues) and tuple(obs.values["items"].lengths.shape) == (2, 3)
    first_row = obs.unbatch_all()[0]
    assert len(first_row) == 2 and len(obs.unbatch_all()[1]) == 1
    np.testing.assert_allclose(np.asarray(first_row[1]["location"]), [0.1, 0.2], rtol=1e-6)
    assert len(first_row[1]["items"]) == 2  # the second player's two items, one-hot
    assert len(obs.unbatch_repeat_dim()) == 3


def test_spaces_sample_what_they_contain():
    PLAYERS.seed(0)
    sample = PLAYERS.sample()
    assert 1 <= len(sample) <= 3 and PLAYERS.contains(sample)
    simplex = Simplex((2, 3))
    simplex.seed(0)
    value = simplex.sample()
    assert simplex.contains(value) and np.allclose(value.sum(-1), 1.0)
