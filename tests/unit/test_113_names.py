"""1.13 names that users' custom models and envs import: the torch SlimConv2d layer and the
type aliases of ray.rllib.utils.typing."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rlstack.models.torch.misc import SlimConv2d, same_padding  # noqa: E402


def test_slim_conv2d_pads_convolves_and_activates_as_1x_did():
    padding, out_size = same_padding((84, 84), 8, 4)
    layer = SlimConv2d(3, 16, 8, 4, padding, bias_init=0.5)
    assert tuple(layer(torch.zeros(2, 3, 84, 84)).shape) == (2, 16, *out_size)
    # ReLU by default ("default"), so a zero input gives the bias through it.
    assert torch.allclose(layer(torch.zeros(1, 3, 84, 84)), torch.full((1, 16, 21, 21), 0.5))
    linear = SlimConv2d(3, 4, 3, 1, None, activation_fn=None, bias_init=-1.0)
    assert float(linear(torch.zeros(1, 3, 5, 5)).max()) == -1.0  # no activation: negatives pass
    with pytest.raises(ValueError, match="Unknown activation_fn 'sigmoidal'"):
        SlimConv2d(3, 4, 3, 1, None, activation_fn="sigmoidal")


def test_the_1x_type_aliases_user_code_annotates_with_import():
    from rlstack.utils import typing

    for name in ("MultiAgentDict", "AgentID", "PolicyID", "EnvInfoDict", "TensorType", "ModelConfigDict",
                 "TrainerConfigDict", "SampleBatchType", "EnvType"):
        assert hasattr(typing, name), name
