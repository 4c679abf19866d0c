"""Unit tests for rlstack/models: preprocessors, the catalog, and torch/TF model parity."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError, EnvError
from rlstack.models import MODEL_DEFAULTS, ModelCatalog, Preprocessor
from rlstack.models.catalog import action_dist_spec
from rlstack.models.specs import initial_weights

Box = gym.spaces.Box
Discrete = gym.spaces.Discrete

CARTPOLE_OBS = Box(-np.inf, np.inf, (4,), np.float32)
CARTPOLE_ACT = Discrete(2)


def _dict_space() -> gym.spaces.Dict:
    return gym.spaces.Dict(
        {"img": Box(0.0, 1.0, (6, 6, 3), np.float32), "vec": Box(-1.0, 1.0, (2,), np.float32), "d": Discrete(4)}
    )


# --- Preprocessor ---------------------------------------------------------------------


def test_preprocessor_box_vector():
    p = Preprocessor(Box(-1.0, 1.0, (4,), np.float32))
    assert p.size == 4 and p.shape == (4,)
    assert [(c.kind, c.shape, c.start, c.size) for c in p.layout] == [("vector", (4,), 0, 4)]
    out = p.transform_batch([np.arange(4), np.arange(4) + 10])
    assert out.dtype == np.float32 and out.shape == (2, 4)
    np.testing.assert_array_equal(out[1], [10, 11, 12, 13])


def test_preprocessor_box_wrong_shape_raises_env_error():
    p = Preprocessor(Box(-1.0, 1.0, (4,), np.float32))
    with pytest.raises(EnvError, match="do not match"):
        p.transform_batch([np.zeros(3)])


def test_preprocessor_discrete_is_one_hot():
    p = Preprocessor(Discrete(3))
    assert p.size == 3
    assert p.layout[0].kind == "onehot"
    np.testing.assert_array_equal(p.transform_batch([2, 0]), [[0, 0, 1], [1, 0, 0]])
    np.testing.assert_array_equal(p.transform(1), [0, 1, 0])


def test_preprocessor_discrete_with_start_offset():
    p = Preprocessor(Discrete(3, start=5))
    np.testing.assert_array_equal(p.transform(6), [0, 1, 0])


def test_preprocessor_multidiscrete_one_hot_per_dimension():
    p = Preprocessor(gym.spaces.MultiDiscrete([2, 3]))
    assert p.size == 5
    np.testing.assert_array_equal(p.transform(np.array([1, 2])), [0, 1, 0, 0, 1])


def test_preprocessor_multidiscrete_with_start_offset():
    space = gym.spaces.MultiDiscrete([2, 3], start=[1, 1])
    p = Preprocessor(space)
    obs = np.array([2, 3])
    assert space.contains(obs)
    np.testing.assert_array_equal(p.transform(obs), [0, 1, 0, 0, 1])


def test_preprocessor_dict_layout_and_one_hot_offset():
    space = _dict_space()
    p = Preprocessor(space)
    assert p.size == 6 * 6 * 3 + 2 + 4
    # gymnasium sorts plain-dict keys: d, img, vec.
    layout = [(c.kind, c.shape, c.start, c.size) for c in p.layout]
    assert layout == [
        ("onehot", (4,), 0, 4),
        ("image", (6, 6, 3), 4, 108),
        ("vector", (2,), 112, 2),
    ]
    rng = np.random.default_rng(0)
    img = rng.random((6, 6, 3)).astype(np.float32)
    obs = {"img": img, "vec": np.array([0.25, -0.5], np.float32), "d": 2}
    row = p.transform_batch([obs])[0]
    np.testing.assert_array_equal(row[0:4], [0, 0, 1, 0])
    np.testing.assert_array_equal(row[4:112], img.reshape(-1))
    np.testing.assert_array_equal(row[112:114], [0.25, -0.5])


def test_preprocessor_tuple_space():
    p = Preprocessor(gym.spaces.Tuple((Discrete(2), Box(0.0, 1.0, (3,), np.float32))))
    assert p.size == 5
    np.testing.assert_array_equal(p.transform((1, np.array([0.1, 0.2, 0.3]))), np.float32([0, 1, 0.1, 0.2, 0.3]))


def test_preprocessor_unsupported_space_raises_env_error():
    with pytest.raises(EnvError, match="not supported"):
        Preprocessor(gym.spaces.Text(5))


# --- ModelCatalog specs -----------------------------------------------------------------


def _shapes(spec):
    return {layer.name: tuple(layer.kernel_shape) for layer in spec.layers}


def test_model_spec_cartpole_separate_value_encoder():
    spec = ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"fcnet_hiddens": [64, 64]})
    assert [layer.name for layer in spec.layers] == ["fc_0", "fc_1", "vf_fc_0", "vf_fc_1", "logits", "value_out"]
    assert _shapes(spec) == {
        "fc_0": (4, 64),
        "fc_1": (64, 64),
        "vf_fc_0": (4, 64),
        "vf_fc_1": (64, 64),
        "logits": (64, 2),
        "value_out": (64, 1),
    }
    assert spec.obs_size == 4
    assert spec.vf_encoder is not None
    assert all(layer.kind == "dense" for layer in spec.layers)
    assert spec.layers[0].activation == "tanh"  # default fcnet_activation
    assert spec.logits.activation == "linear" and spec.logits.init_std == 0.01


def test_model_spec_shared_layers():
    spec = ModelCatalog.get_model_spec(
        CARTPOLE_OBS, CARTPOLE_ACT, {"fcnet_hiddens": [32], "vf_share_layers": True, "fcnet_activation": "relu"}
    )
    assert [layer.name for layer in spec.layers] == ["fc_0", "logits", "value_out"]
    assert spec.vf_encoder is None
    assert spec.layers[0].activation == "relu"


def test_model_spec_does_not_mutate_defaults():
    before = {k: (list(v) if isinstance(v, list) else v) for k, v in MODEL_DEFAULTS.items()}
    ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"fcnet_hiddens": [8], "fcnet_activation": None})
    assert MODEL_DEFAULTS == before


def test_model_spec_unknown_key_names_the_key():
    with pytest.raises(ConfigError, match="fcnet_hidens") as info:
        ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"fcnet_hidens": [64]})
    assert "did you mean 'fcnet_hiddens'" in str(info.value)


def test_attention_models_have_no_built_in_spec():
    # The policy builds use_attention's network (AttentionWrapper); a dense spec would be a silent lie.
    with pytest.raises(ConfigError, match="use_attention=True.*AttentionWrapper"):
        ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"use_attention": True})


def test_use_lstm_puts_an_lstm_between_the_encoder_and_both_heads():
    spec = ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"use_lstm": True, "fcnet_hiddens": [32]})
    # 1.13's defaults: 256 cells, sequences of at most 20 steps.
    assert (spec.lstm.in_size, spec.lstm.cell_size, spec.lstm.max_seq_len) == (32, 256, 20)
    assert spec.vf_encoder is None
    assert spec.logits.kernel_shape == (256, 2) and spec.value_out.kernel_shape == (256, 1)


def test_model_spec_bad_activation_and_hiddens():
    with pytest.raises(ConfigError, match="fcnet_activation"):
        ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"fcnet_activation": "sigmoid"})
    with pytest.raises(ConfigError, match="fcnet_hiddens"):
        ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"fcnet_hiddens": [64, 0]})


def test_model_spec_image_default_filters_for_10x10():
    spec = ModelCatalog.get_model_spec(Box(0.0, 1.0, (10, 10, 3), np.float32), CARTPOLE_ACT, {"fcnet_hiddens": [16]})
    convs = [layer for layer in spec.encoder.layers if layer.kind == "conv"]
    assert [(c.name, c.kernel_shape, c.stride, c.padding) for c in convs] == [
        ("cnn0_0", (5, 5, 3, 16), 2, "same"),
        ("cnn0_1", (5, 5, 16, 32), 2, "valid"),
    ]
    # 10 -> same/2 -> 5 -> valid 5x5/2 -> 1: 1*1*32 features
    assert spec.encoder.images[0].out_size == 32
    assert spec.encoder.vector_columns == ()
    assert spec.logits.kernel_shape == (32, 2)


def test_model_spec_conv_filters_too_large_raise():
    with pytest.raises(ConfigError, match="do not fit"):
        ModelCatalog.get_model_spec(
            Box(0.0, 1.0, (4, 4, 1), np.float32), CARTPOLE_ACT, {"conv_filters": [[8, [2, 2], 1], [8, [5, 5], 1]]}
        )


def test_model_spec_malformed_conv_filters_raise():
    with pytest.raises(ConfigError, match="malformed"):
        ModelCatalog.get_model_spec(Box(0.0, 1.0, (8, 8, 1), np.float32), CARTPOLE_ACT, {"conv_filters": [[8, 3, 1]]})


def test_initial_weights_deterministic_per_seed():
    spec = ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"fcnet_hiddens": [64, 64]})
    a, b, c = initial_weights(spec, seed=1), initial_weights(spec, seed=1), initial_weights(spec, seed=2)
    assert set(a) == {f"{n}/{p}" for n in ("fc_0", "fc_1", "vf_fc_0", "vf_fc_1", "logits", "value_out")
                      for p in ("kernel", "bias")}
    for key in a:
        assert a[key].dtype == np.float32
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["fc_0/kernel"], c["fc_0/kernel"])
    assert a["fc_0/kernel"].shape == (4, 64)
    np.testing.assert_array_equal(a["fc_0/bias"], np.zeros(64))
    # normalised-columns init: each output column has norm init_std (0.01 for logits)
    np.testing.assert_allclose(np.linalg.norm(a["logits/kernel"], axis=0), 0.01, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(a["fc_0/kernel"], axis=0), 1.0, rtol=1e-5)


def test_get_custom_model_unknown_raises(monkeypatch):
    monkeypatch.setattr(ModelCatalog, "_custom_models", {})
    with pytest.raises(ConfigError, match="'nope'"):
        ModelCatalog.get_custom_model("nope")


def test_register_and_get_custom_model(monkeypatch):
    monkeypatch.setattr(ModelCatalog, "_custom_models", {})

    class MyModel:
        pass

    ModelCatalog.register_custom_model("mine", MyModel)
    assert ModelCatalog.get_custom_model("mine") is MyModel
    with pytest.raises(ConfigError, match="did you mean 'mine'"):
        ModelCatalog.get_custom_model("mien")


def test_action_dist_spec_discrete():
    d = action_dist_spec(Discrete(5))
    assert (d.kind, d.num_outputs, d.nvec) == ("categorical", 5, (5,))


def test_action_dist_spec_multidiscrete():
    d = action_dist_spec(gym.spaces.MultiDiscrete([2, 3, 4]))
    assert (d.kind, d.num_outputs, d.nvec, d.action_shape) == ("multi_categorical", 9, (2, 3, 4), (3,))


def test_action_dist_spec_box():
    d = action_dist_spec(Box(-1.0, 1.0, (2, 3), np.float32))
    assert (d.kind, d.num_outputs, d.action_dim, d.action_shape) == ("diag_gaussian", 12, 6, (2, 3))


def test_action_dist_spec_unsupported_raises():
    with pytest.raises(ConfigError, match="not supported"):
        action_dist_spec(gym.spaces.MultiBinary(3))


def test_free_log_std_halves_logits_and_adds_log_std_weight():
    spec = ModelCatalog.get_model_spec(
        CARTPOLE_OBS, Box(-1.0, 1.0, (3,), np.float32), {"fcnet_hiddens": [8], "free_log_std": True}
    )
    assert spec.logits.kernel_shape == (8, 3)
    weights = initial_weights(spec, seed=0)
    np.testing.assert_array_equal(weights["log_std"], np.zeros(3))


def test_no_final_linear_makes_the_last_hidden_layer_the_output_as_1_13_did():
    from rlstack.models.numpy.model import NumpyModel

    spec = ModelCatalog.get_model_spec(CARTPOLE_OBS, Discrete(3), {"fcnet_hiddens": [8, 5], "no_final_linear": True})
    # The last hidden layer has the action distribution's size and keeps its activation;
    # the separate value encoder keeps fcnet_hiddens.
    assert spec.logits is None and spec.num_outputs == 3
    assert [(layer.name, layer.kernel_shape, layer.activation) for layer in spec.encoder.fc] == [
        ("fc_0", (4, 8), "tanh"), ("fc_1", (8, 3), "tanh")]
    assert spec.value_out.kernel_shape == (5, 1)
    weights = initial_weights(spec, seed=0)
    obs = _random_obs(4)
    model = NumpyModel(spec)
    model.set_canonical_weights(weights)
    dist_inputs, _ = model(obs)
    expected = np.tanh(np.tanh(obs @ weights["fc_0/kernel"]) @ weights["fc_1/kernel"])
    np.testing.assert_allclose(dist_inputs, expected, rtol=1e-6)
    # Shared layers: the value head reads the output layer. No hidden layers: one layer over
    # the observation, with post_fcnet_activation (1.13's network without fcnet_hiddens).
    shared = ModelCatalog.get_model_spec(CARTPOLE_OBS, Discrete(3), {"fcnet_hiddens": [8], "vf_share_layers": True,
                                                                     "no_final_linear": True})
    assert shared.value_out.kernel_shape == (3, 1)
    bare = ModelCatalog.get_model_spec(CARTPOLE_OBS, Discrete(3), {"fcnet_hiddens": [], "no_final_linear": True})
    assert [(layer.kernel_shape, layer.activation) for layer in bare.encoder.fc] == [((4, 3), "relu")]
    # 1.13's LSTM wrapper and its network for Dict observations built a logits layer anyway.
    for space, config in ((CARTPOLE_OBS, {"use_lstm": True}), (_dict_space(), {})):
        assert ModelCatalog.get_model_spec(space, Discrete(3), {**config, "no_final_linear": True}).logits is not None
    with pytest.raises(ConfigError, match="not supported for image observations"):
        ModelCatalog.get_model_spec(Box(0.0, 1.0, (10, 10, 3), np.float32), Discrete(3), {"no_final_linear": True})
    with pytest.raises(ConfigError, match="free_log_std"):
        ModelCatalog.get_model_spec(CARTPOLE_OBS, Box(-1.0, 1.0, (2,), np.float32),
                                    {"no_final_linear": True, "free_log_std": True})


def test_1_13_model_keys_without_effect_are_accepted_at_their_no_op_values():
    for key, value in (("_disable_action_flattening", False), ("_time_major", False),
                       ("_disable_preprocessor_api", True), ("custom_preprocessor", None)):
        ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {key: value})
    with pytest.raises(ConfigError, match=r"model._time_major=True is not supported.*batch-major"):
        ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"_time_major": True})
    with pytest.raises(ConfigError, match=r"model._disable_action_flattening=True is not supported"):
        ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"_disable_action_flattening": True})
    with pytest.raises(ConfigError, match="_disable_preprocessor_api=True with a custom_model"):
        ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"_disable_preprocessor_api": True,
                                                                 "custom_model": "mine"})


# --- torch / TF parity ------------------------------------------------------------------

PARITY_CASES = {
    "vector": (Box(-2.0, 2.0, (5,), np.float32), Discrete(3), {"fcnet_hiddens": [16, 8]}),
    "image": (Box(0.0, 1.0, (10, 10, 3), np.float32), Discrete(4), {"fcnet_hiddens": [16]}),
    "image_odd_same_padding": (
        Box(0.0, 1.0, (9, 9, 2), np.float32),
        Discrete(2),
        {"conv_filters": [[4, [4, 4], 2], [8, [3, 3], 1]], "post_fcnet_hiddens": [8]},
    ),
    "dict": (_dict_space(), Discrete(3), {"fcnet_hiddens": [16], "post_fcnet_hiddens": [8]}),
    "no_final_linear": (Box(-2.0, 2.0, (5,), np.float32), Discrete(3),
                        {"fcnet_hiddens": [16, 8], "post_fcnet_hiddens": [6], "no_final_linear": True}),
    "dict_shared_box_actions": (
        _dict_space(),
        Box(-1.0, 1.0, (2,), np.float32),
        {"fcnet_hiddens": [16], "vf_share_layers": True, "fcnet_activation": "elu", "free_log_std": True},
    ),
}


@pytest.fixture(scope="module")
def frameworks():
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    torch.set_num_threads(1)
    from rlstack.models.tf.model import TFModel
    from rlstack.models.torch.model import TorchModel

    return torch, tf, TorchModel, TFModel


def _random_obs(size: int, seed: int = 0, n: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n, size)).astype(np.float32)


def _torch_forward(torch, model, obs):
    with torch.no_grad():
        dist, values = model.policy_and_value(torch.from_numpy(obs))
    return dist.numpy(), values.numpy()


def _tf_forward(tf, model, obs):
    dist, values = model.policy_and_value(tf.constant(obs))
    return dist.numpy(), values.numpy()


@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_torch_tf_models_agree(frameworks, case):
    torch, tf, TorchModel, TFModel = frameworks
    obs_space, act_space, model_config = PARITY_CASES[case]
    spec = ModelCatalog.get_model_spec(obs_space, act_space, model_config)
    weights = initial_weights(spec, seed=3)
    if spec.free_log_std:
        weights["log_std"] = np.array([0.1, -0.2], np.float32)
    # Random biases too, so a swapped or missing bias would show.
    rng = np.random.default_rng(7)
    for key in weights:
        if key.endswith("/bias"):
            weights[key] = rng.normal(size=weights[key].shape).astype(np.float32) * 0.1
    torch_model, tf_model = TorchModel(spec), TFModel(spec)
    torch_model.set_canonical_weights(weights)
    tf_model.set_canonical_weights(weights)
    obs = _random_obs(spec.obs_size)
    t_dist, t_values = _torch_forward(torch, torch_model, obs)
    f_dist, f_values = _tf_forward(tf, tf_model, obs)
    num_outputs = action_dist_spec(act_space).num_outputs
    assert t_dist.shape == f_dist.shape == (5, num_outputs)
    assert t_values.shape == f_values.shape == (5,)
    np.testing.assert_allclose(t_dist, f_dist, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t_values, f_values, rtol=1e-5, atol=1e-6)
    # the outputs are not trivially constant across rows
    assert np.ptp(t_values) > 1e-4
    # value() agrees with forward()
    with torch.no_grad():
        np.testing.assert_allclose(torch_model.value(torch.from_numpy(obs)).numpy(), t_values, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(tf_model.value(tf.constant(obs)).numpy(), f_values, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", ["vector", "image_odd_same_padding", "dict"])
def test_canonical_weights_round_trip_torch_to_tf(frameworks, case):
    torch, tf, TorchModel, TFModel = frameworks
    obs_space, act_space, model_config = PARITY_CASES[case]
    spec = ModelCatalog.get_model_spec(obs_space, act_space, model_config)
    weights = initial_weights(spec, seed=3)
    torch_model = TorchModel(spec)
    torch_model.set_canonical_weights(weights)
    exported = torch_model.get_canonical_weights()
    assert set(exported) == set(weights)
    for key in weights:
        assert exported[key].shape == weights[key].shape, key
        np.testing.assert_array_equal(exported[key], weights[key])
    tf_model = TFModel(spec)
    tf_model.set_canonical_weights(exported)
    back = tf_model.get_canonical_weights()
    for key in weights:
        np.testing.assert_array_equal(back[key], weights[key])
    obs = _random_obs(spec.obs_size, seed=1)
    t_dist, t_values = _torch_forward(torch, torch_model, obs)
    f_dist, f_values = _tf_forward(tf, tf_model, obs)
    np.testing.assert_allclose(t_dist, f_dist, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t_values, f_values, rtol=1e-5, atol=1e-6)


def test_set_canonical_weights_rejects_wrong_shape(frameworks):
    torch, tf, TorchModel, TFModel = frameworks
    spec = ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"fcnet_hiddens": [8]})
    other = ModelCatalog.get_model_spec(CARTPOLE_OBS, CARTPOLE_ACT, {"fcnet_hiddens": [9]})
    bad = initial_weights(other, seed=0)
    with pytest.raises(ValueError, match="fc_0"):
        TorchModel(spec).set_canonical_weights(bad)
    with pytest.raises(ValueError, match="fc_0"):
        TFModel(spec).set_canonical_weights(bad)


def test_workers_are_sent_only_the_custom_classes_their_config_names(monkeypatch):
    """A worker unpickles every class it is sent (importing that class's framework): a
    numpy-acting worker must get none, whatever else the driver registered."""
    monkeypatch.setattr(ModelCatalog, "_custom_models", {"mine": int, "other": float})
    monkeypatch.setattr(ModelCatalog, "_custom_action_dists", {"my_dist": str, "other_dist": bytes})
    assert ModelCatalog.registered_models({}) == {"models": {}, "action_dists": {}}
    assert ModelCatalog.registered_models({"custom_model": "mine", "custom_action_dist": "my_dist"}) == {
        "models": {"mine": int}, "action_dists": {"my_dist": str}}
    assert ModelCatalog.registered_models()["models"] == {"mine": int, "other": float}
