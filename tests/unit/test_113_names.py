"""1.13 names and hooks that users' custom models, envs and trainers use: the torch SlimConv2d
layer, ray.rllib.utils' aliases and helpers, models.utils, IMPALA's after_train_step."""

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


def test_the_1x_utils_user_code_imports_from_the_package_and_its_old_module_names():
    import numpy as np

    from rlstack.models import ModelV2
    from rlstack.models.modelv2 import ModelV2 as Home
    from rlstack.utils import add_mixins, force_list, merge_dicts, one_hot
    from rlstack.utils.torch_ops import one_hot as torch_one_hot
    from rlstack.utils.torch_utils import one_hot as torch_home

    assert one_hot(np.array([2, 0]), depth=3).tolist() == [[0, 0, 1], [1, 0, 0]]
    assert force_list(None) == [] and force_list((1, 2)) == [1, 2] and force_list("a") == ["a"]
    assert merge_dicts({"a": {"b": 1}}, {"a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}
    assert ModelV2 is Home and torch_one_hot is torch_home

    class Mixin:
        def hello(self):
            return "mixin"

    class Base:
        def hello(self):
            return "base"

    assert add_mixins(Base, [Mixin])().hello() == "mixin"


def test_models_utils_give_activations_and_the_default_filters_by_name():
    from torch import nn

    from rlstack.models.utils import get_activation_fn, get_filter_config

    assert get_activation_fn("relu", framework="torch") is nn.ReLU and get_activation_fn("linear") is None
    assert get_filter_config([42, 42, 3])[0] == [16, [4, 4], 2] == get_filter_config([3, 42, 42])[0]
    with pytest.raises(ValueError, match="conv_filters"):
        get_filter_config([50, 50, 3])
    with pytest.raises(ValueError, match="Unknown activation 'relux'"):
        get_activation_fn("relux", framework="torch")


def test_impalas_after_train_step_hook_gets_each_learner_steps_info_as_in_1x():
    from rlstack.trainers.impala import IMPALATrainer

    seen = {"made": 0, "steps": []}

    def after_train_step(workers, config):  # 1.13: a factory of the per-step callable
        seen["made"] += 1
        return lambda fetches: seen["steps"].append(sorted(fetches))

    trainer = IMPALATrainer({"framework": "torch", "num_workers": 0, "train_batch_size": 100,
                             "rollout_fragment_length": 50, "min_time_s_per_reporting": 0,
                             "model": {"fcnet_hiddens": [8]}, "after_train_step": after_train_step}, "CartPole-v1")
    try:
        trainer.train()
    finally:
        trainer.stop()
    assert seen["made"] == 1 and seen["steps"] and seen["steps"][0] == ["default_policy"]
