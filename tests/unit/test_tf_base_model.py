"""1.13's ``policy.model.base_model``: the built-in TF networks as Keras functional models
over the policy's own variables (``summary()`` lists the real layers; training shows in it)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from rlstack.models.catalog import ModelCatalog  # noqa: E402
from rlstack.models.prev_inputs import with_prev_inputs  # noqa: E402
from rlstack.models.tf.model import TFModel, TFQModel  # noqa: E402
from rlstack.models.tf.recurrent_net import TF_OPS, TFLSTMModel  # noqa: E402

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
RNG = np.random.default_rng(0)


def _summary(keras_model) -> str:
    lines: list[str] = []
    keras_model.summary(print_fn=lambda line, *args, **kwargs: lines.append(line))
    return "\n".join(lines)


def test_a_tf_trainers_default_model_has_a_keras_base_model_that_trains_with_it():
    from rlstack.trainers.ppo import PPOTrainer

    trainer = PPOTrainer(config={"framework": "tf", "num_workers": 0, "seed": 0, "train_batch_size": 64,
                                 "sgd_minibatch_size": 32, "num_sgd_iter": 1, "rollout_fragment_length": 64,
                                 "model": {"fcnet_hiddens": [16, 16]}}, env="CartPole-v1")
    try:
        model = trainer.get_policy().model
        base_model = model.base_model
        text = _summary(base_model)
        for layer in ("fc_0 (Dense)", "fc_1 (Dense)", "logits (Dense)", "value_out (Dense)"):
            assert layer in text
        n_weights = sum(int(np.prod(v.shape)) for v in model.weight_vars.values())
        assert f"Total params: {n_weights:,}" in text
        assert base_model.count_params() == n_weights

        obs = RNG.uniform(-1, 1, (5, 4)).astype(np.float32)
        before = base_model(obs)[0].numpy()
        trainer.train()
        logits, values = base_model(obs)
        expected_logits, expected_values = model.policy_and_value(tf.constant(obs))
        # The Keras model reads the policy's variables, so it shows the update.
        assert not np.allclose(logits.numpy(), before)
        np.testing.assert_allclose(logits.numpy(), expected_logits.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values.numpy()[:, 0], expected_values.numpy(), rtol=1e-5, atol=1e-6)
        assert model.base_model is base_model
    finally:
        trainer.stop()


def test_vision_dict_and_free_log_std_base_models_compute_the_models_outputs():
    image = gym.spaces.Box(0.0, 1.0, (10, 10, 3), np.float32)
    filters = [[4, [3, 3], 2], [8, [5, 5], 1]]
    mixed = gym.spaces.Dict({"image": image, "vector": OBS, "token": gym.spaces.Discrete(4)})
    cases = [
        (image, gym.spaces.Discrete(3), {"conv_filters": filters}),
        # A CNN branch and the vector columns (not contiguous), concatenated, then post_fc.
        (mixed, gym.spaces.Discrete(3), {"conv_filters": filters, "post_fcnet_hiddens": [16]}),
        (OBS, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), {"fcnet_hiddens": [8], "free_log_std": True}),
    ]
    for obs_space, action_space, config in cases:
        spec = ModelCatalog.get_model_spec(obs_space, action_space, config)
        model = TFModel(spec, seed=1)
        obs = RNG.uniform(0, 1, (3, spec.obs_size)).astype(np.float32)
        dist_inputs, values = model.base_model(obs)
        expected_inputs, expected_values = model.policy_and_value(tf.constant(obs))
        np.testing.assert_allclose(dist_inputs.numpy(), expected_inputs.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values.numpy()[:, 0], expected_values.numpy(), rtol=1e-5, atol=1e-6)
        assert len(model.base_model.weights) == len(model.weight_vars)
    assert "cnn0_0 (Conv2D)" in _summary(TFModel(ModelCatalog.get_model_spec(image, gym.spaces.Discrete(3), {}))
                                         .base_model)


@pytest.mark.parametrize("options", [{"dueling": False}, {"dueling": True, "num_atoms": 5},
                                     {"dueling": True, "noisy": True}])
def test_q_model_base_model_gives_the_greedy_q_values(options):
    spec = ModelCatalog.get_q_model_spec(OBS, gym.spaces.Discrete(3), {"fcnet_hiddens": [8]}, hiddens=[8],
                                         **options)
    model = TFQModel(spec, seed=2)
    obs = RNG.uniform(-1, 1, (4, 4)).astype(np.float32)
    np.testing.assert_allclose(model.base_model(obs).numpy(), model.q_values(tf.constant(obs), noise=False).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_lstm_base_model_runs_the_encoder_and_lstm_on_sequences():
    spec = ModelCatalog.get_model_spec(OBS, gym.spaces.Discrete(2), {
        "fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 6, "lstm_use_prev_action": True,
        "lstm_use_prev_reward": True})
    model = TFLSTMModel(spec)
    assert "lstm (RNN)" in _summary(model.base_model)
    batch, steps = 2, 3
    obs = RNG.uniform(-1, 1, (batch * steps, 4)).astype(np.float32)
    h, c = (RNG.normal(size=(batch, 6)).astype(np.float32) for _ in range(2))
    input_dict = {"obs": tf.constant(obs), "obs_flat": tf.constant(obs), "prev_actions": tf.constant([0, 1, 1, 0, 1, 0]),
                  "prev_rewards": tf.constant(RNG.normal(size=6).astype(np.float32))}
    out, (h_out, c_out) = model(input_dict, [tf.constant(h), tf.constant(c)], tf.constant([steps] * batch))
    prev = with_prev_inputs(spec.prev, tf.zeros([batch * steps, 0]), input_dict, TF_OPS).numpy()
    logits, values, keras_h, keras_c = model.base_model(
        [obs.reshape(batch, steps, 4), prev.reshape(batch, steps, -1), h, c])
    np.testing.assert_allclose(logits.numpy().reshape(batch * steps, -1), out.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values.numpy().reshape(-1), model.value_function().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(keras_h.numpy(), h_out.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(keras_c.numpy(), c_out.numpy(), rtol=1e-5, atol=1e-6)


def test_a_network_built_without_outputs_has_a_base_model_of_its_features():
    # 1.13's ComplexInputNetwork idiom: a FullyConnectedNetwork with num_outputs=None as a
    # feature stack inside a custom model, whose base_model.summary() the model prints.
    import gymnasium as gym
    import numpy as np

    from rlstack.models.catalog import ModelCatalog

    stack = ModelCatalog.get_model_v2(gym.spaces.Box(-1.0, 1.0, (6,), np.float32), gym.spaces.Discrete(2), None,
                                      {"fcnet_hiddens": [8, 4], "fcnet_activation": "relu"}, framework="tf",
                                      name="post_fc_stack")
    features, _ = stack.base_model(np.zeros((3, 6), np.float32))
    assert tuple(features.shape) == (3, 4)
