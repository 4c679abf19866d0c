"""Classic RLlib 1.13 TF model API: TFModelV2 (Keras 3 models included), the built-in
networks under 1.13 constructors, TF action distributions, and how TF policies use them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from rlstack.errors import ConfigError  # noqa: E402
from rlstack.models.catalog import ModelCatalog  # noqa: E402
from rlstack.models.specs import initial_weights
from rlstack.models.modelv2 import model_obs_space  # noqa: E402
from rlstack.models.tf.fcnet import FullyConnectedNetwork  # noqa: E402
from rlstack.models.tf.misc import normc_initializer  # noqa: E402
from rlstack.models.tf.model import TFModel  # noqa: E402
from rlstack.models.tf.tf_action_dist import Categorical, DiagGaussian, MultiCategorical  # noqa: E402
from rlstack.models.tf.tf_modelv2 import TFModelV2  # noqa: E402
from rlstack.models.tf.visionnet import VisionNetwork  # noqa: E402
from rlstack.trainers.ppo import DEFAULT_CONFIG  # noqa: E402
from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy  # noqa: E402
from rlstack.utils.tf_utils import FLOAT_MAX, FLOAT_MIN  # noqa: E402
from tests.helpers.custom_models import KerasMetricsModel, TinyTFModel  # noqa: E402

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(3)


def _policy(model_config: dict, obs_space: gym.Space = OBS, act_space: gym.Space = ACT, **config) -> PPOTFPolicy:
    cfg = {**DEFAULT_CONFIG, "framework": "tf", "seed": 0, "sgd_minibatch_size": 32, "num_sgd_iter": 2,
           "train_batch_size": 64, **config}
    cfg["model"] = {**DEFAULT_CONFIG["model"], **model_config}
    return PPOTFPolicy(obs_space, act_space, cfg)


def _batch(policy: PPOTFPolicy, n: int = 64, seed: int = 0):
    from rlstack.sample_batch import SampleBatch

    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n, policy.preprocessor.size)).astype(np.float32)
    actions, extras = policy.compute_actions(obs, explore=True)
    return SampleBatch({
        SampleBatch.OBS: obs, SampleBatch.ACTIONS: actions, **extras,
        SampleBatch.ADVANTAGES: rng.normal(size=n).astype(np.float32),
        SampleBatch.VALUE_TARGETS: rng.normal(size=n).astype(np.float32),
    })


def test_keras_model_variables_are_found_by_path_and_trained():
    policy = _policy({"custom_model": KerasMetricsModel})
    model = policy.model
    named = model.trainable_variables(as_dict=True)
    assert len(named) == 6  # three dense layers: kernel + bias each
    assert all(isinstance(v, tf.Variable) for v in named.values())
    assert all(name.endswith(("/kernel", "/bias")) for name in named)
    assert [id(v) for v in policy.train_variables] == [id(v) for v in named.values()]
    before = {k: v.copy() for k, v in policy.get_weights().items()}
    stats = policy.learn_on_batch(_batch(policy))
    after = policy.get_weights()
    assert set(before) == set(after)
    assert all(not np.array_equal(before[k], after[k]) for k in before)  # every layer moved
    # The Keras model itself sees the update (the optimizer wrote into its variables).
    keras_kernel = model.base_model.trainable_variables[0]
    np.testing.assert_array_equal(keras_kernel.numpy(), named[keras_kernel.path].numpy())
    assert stats["model"] == {"foo": 42.0}


def test_model_call_returns_what_the_policy_acts_with():
    policy = _policy({"custom_model": KerasMetricsModel})
    obs = np.random.default_rng(1).uniform(-1, 1, (5, 4)).astype(np.float32)
    actions, extras = policy.compute_actions(obs, explore=False)
    logits, state = policy.model({"obs": tf.constant(obs)})
    assert state == []
    # The eager call and the compiled acting graph may pick different float32 kernels
    # (oneDNN by CPU): equal to float32 rounding, not bit for bit.
    np.testing.assert_allclose(logits.numpy(), extras["action_dist_inputs"], rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(policy.model.value_function().numpy(), extras["vf_preds"], rtol=1e-5, atol=1e-8)
    np.testing.assert_array_equal(actions, logits.numpy().argmax(axis=1))


def test_weights_round_trip_between_two_copies_of_a_keras_model():
    first, second = _policy({"custom_model": KerasMetricsModel}), _policy({"custom_model": KerasMetricsModel})
    obs = np.random.default_rng(2).uniform(-1, 1, (8, 4)).astype(np.float32)
    first.learn_on_batch(_batch(first))
    assert not np.allclose(first.compute_actions(obs, False)[1]["action_dist_inputs"],
                           second.compute_actions(obs, False)[1]["action_dist_inputs"])
    second.set_weights(first.get_weights())  # Keras named the second copy's layers differently
    np.testing.assert_array_equal(first.compute_actions(obs, False)[1]["action_dist_inputs"],
                                  second.compute_actions(obs, False)[1]["action_dist_inputs"])
    with pytest.raises(ValueError, match="variables"):
        second.set_weights(dict(list(first.get_weights().items())[:2]))


class _DictObsModel(TFModelV2):
    """Records what forward saw; one variable, registered the 1.x way."""

    seen: dict = {}

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        _DictObsModel.seen["obs_space"] = obs_space
        self.w = tf.Variable(tf.zeros([3, num_outputs + 1]))
        self.register_variables([self.w])

    def forward(self, input_dict, state, seq_lens):
        _DictObsModel.seen["obs"] = input_dict["obs"]
        out = tf.matmul(input_dict["obs"]["pos"], self.w)
        self._value = out[:, -1]
        return out[:, :-1], state

    def value_function(self):
        return self._value


def test_dict_observations_reach_forward_as_a_dict():
    space = gym.spaces.Dict({"pos": gym.spaces.Box(-1.0, 1.0, (3,), np.float32), "flag": gym.spaces.Discrete(2)})
    policy = _policy({"custom_model": _DictObsModel}, obs_space=space)
    assert _DictObsModel.seen["obs_space"].original_space == space
    obs = policy.preprocessor.transform({"pos": np.array([0.1, 0.2, 0.3], np.float32), "flag": 1})
    policy.compute_actions(obs[None], explore=False)
    seen = _DictObsModel.seen["obs"]
    assert isinstance(seen, dict) and set(seen) == {"pos", "flag"}
    assert seen["pos"].shape[1:] == (3,) and seen["flag"].shape[1:] == (2,)  # Discrete one-hot
    assert len(policy.model.variables()) == 1  # register_variables and the attribute: one variable


def test_nested_models_and_modules_are_walked():
    class Outer(TFModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            self.inner = FullyConnectedNetwork(obs_space, action_space, num_outputs, model_config, "inner")
            self.extra = [tf.Variable(1.0, trainable=False, name="counter")]
            self.module = TinyTFModel(obs_space, action_space, num_outputs, model_config, "tiny")
            self.module(tf.zeros([1, 4]))

    model = Outer(OBS, ACT, 3, {"fcnet_hiddens": [8]}, "outer")
    names = set(model.variables(as_dict=True))
    assert {"inner/fc_0/kernel", "inner/logits/kernel", "inner/value_out/bias"} <= names
    assert "counter:0" in names and len(model.trainable_variables()) == len(model.variables()) - 1


def test_fcnet_and_visionnet_have_the_1_13_constructor():
    fc = FullyConnectedNetwork(OBS, ACT, 3, {"fcnet_hiddens": [8, 8], "vf_share_layers": True}, "fc")
    out, state = fc({"obs": tf.ones([2, 4])})
    assert out.shape == (2, 3) and state == [] and fc.value_function().shape == (2,)
    features = FullyConnectedNetwork(OBS, ACT, None, {"fcnet_hiddens": [8, 5]}, "features")
    assert features.num_outputs == 5
    assert features({"obs": tf.ones([2, 4])})[0].shape == (2, 5)
    assert not any(name.startswith("logits") for name in features.variables(as_dict=True))
    image = gym.spaces.Box(0.0, 1.0, (10, 10, 3), np.float32)
    vision = VisionNetwork(image, ACT, 3, {"conv_filters": [[4, [3, 3], 2], [8, [5, 5], 1]]}, "vision")
    assert any("cnn" in name for name in vision.variables(as_dict=True))
    assert vision({"obs": tf.ones([2, 10, 10, 3])})[0].shape == (2, 3)


def test_builtin_model_answers_both_ways():
    spec = ModelCatalog.get_model_spec(OBS, ACT, {"fcnet_hiddens": [8]})
    model = TFModel(spec)
    model.set_canonical_weights(initial_weights(spec, seed=1))
    obs = tf.constant(np.random.default_rng(0).uniform(-1, 1, (4, 4)).astype(np.float32))
    dist_inputs, values = model.policy_and_value(obs)
    out, _ = model({"obs": obs})
    np.testing.assert_array_equal(out.numpy(), dist_inputs.numpy())
    np.testing.assert_array_equal(model.value_function().numpy(), values.numpy())
    assert sorted(model.variables(as_dict=True)) == sorted(spec_name for spec_name in model.weight_vars)


def test_normc_initializer_works_as_a_keras_initializer():
    layer = tf.keras.layers.Dense(5, kernel_initializer=normc_initializer(0.5))
    layer.build((None, 7))
    np.testing.assert_allclose(np.linalg.norm(layer.kernel.numpy(), axis=0), 0.5, rtol=1e-5)
    # One pair for both frameworks (classic RLlib's values): finite in float32.
    from rlstack.utils import torch_utils

    assert (FLOAT_MIN, FLOAT_MAX) == (torch_utils.FLOAT_MIN, torch_utils.FLOAT_MAX) == (-3.4e38, 3.4e38)
    assert np.isfinite(np.float32(FLOAT_MIN)) and np.isfinite(np.float32(FLOAT_MAX))


def test_tf_action_dists_match_the_formulas():
    logits = tf.constant([[1.0, 2.0, 0.5], [0.0, 0.0, 0.0]])
    cat = Categorical(logits)
    p = tf.nn.softmax(logits).numpy()
    np.testing.assert_allclose(cat.logp(tf.constant([1, 2])).numpy(), np.log([p[0, 1], p[1, 2]]), rtol=1e-6)
    np.testing.assert_allclose(cat.entropy().numpy(), -(p * np.log(p)).sum(axis=1), rtol=1e-6)
    sample = cat.sample()
    np.testing.assert_allclose(cat.sampled_action_logp().numpy(), cat.logp(sample).numpy())
    inputs = tf.constant([[0.5, -1.0, 0.1, 0.2]])
    gauss = DiagGaussian(inputs)
    np.testing.assert_allclose(gauss.deterministic_sample().numpy(), [[0.5, -1.0]])
    expected = sum(-0.5 * np.log(2 * np.pi) - s for s in (0.1, 0.2))
    np.testing.assert_allclose(gauss.logp(tf.constant([[0.5, -1.0]])).numpy(), [expected], rtol=1e-6)
    multi = MultiCategorical(tf.zeros([1, 5]), None, [2, 3])
    np.testing.assert_allclose(multi.logp(tf.constant([[0, 2]])).numpy(), [np.log(1 / 6)], rtol=1e-6)
    assert Categorical.required_model_output_shape(ACT, {}) == 3
    assert DiagGaussian.required_model_output_shape(gym.spaces.Box(-1, 1, (2, 3)), {}) == 12
    assert MultiCategorical.required_model_output_shape(gym.spaces.MultiDiscrete([2, 3]), {}) == 5


class _AlwaysLast(Categorical):
    """A custom distribution whose every action is the last one."""

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return int(action_space.n) + 1  # one extra output, ignored, to prove the model is sized by the dist

    def __init__(self, inputs, model):
        rows, n = tf.shape(inputs)[0], int(inputs.shape[-1]) - 1
        super().__init__(tf.concat([tf.fill([rows, n - 1], -50.0), tf.fill([rows, 1], 50.0)], axis=1), model)


@pytest.mark.parametrize("custom_model", [None, KerasMetricsModel])
def test_custom_action_dist_is_used_for_acting_and_learning(monkeypatch, custom_model):
    monkeypatch.setattr(ModelCatalog, "_custom_action_dists", {})
    ModelCatalog.register_custom_action_dist("always_last", _AlwaysLast)
    policy = _policy({"custom_action_dist": "always_last", "custom_model": custom_model})
    assert policy.dist_class is _AlwaysLast and policy.model.num_outputs == 4
    obs = np.random.default_rng(0).uniform(-1, 1, (20, 4)).astype(np.float32)
    for explore in (True, False):
        actions, extras = policy.compute_actions(obs, explore=explore)
        assert (actions == 2).all() and extras["action_dist_inputs"].shape == (20, 4)
    assert np.isfinite(policy.learn_on_batch(_batch(policy))["total_loss"])
    with pytest.raises(ConfigError, match="always_lats.*register_custom_action_dist"):
        _policy({"custom_action_dist": "always_lats"})


def test_custom_dist_subclassing_a_builtin_one_keeps_its_output_size(monkeypatch):
    """1.13 users subclass Categorical to change sampling; the size comes from the parent."""
    from rlstack.models.tf.tf_action_dist import Categorical

    class Hot(Categorical):
        pass

    policy = _policy({"custom_action_dist": Hot})
    assert policy.dist_class is Hot and policy.model.num_outputs == 3
    actions, _ = policy.compute_actions(np.zeros((5, 4), np.float32), explore=True)
    assert set(actions.tolist()) <= {0, 1, 2}


def test_custom_loss_changes_the_update():
    class L2Model(KerasMetricsModel):
        def custom_loss(self, policy_loss, loss_inputs):
            assert "obs" in loss_inputs
            return policy_loss + 10.0 * tf.add_n([tf.reduce_sum(tf.square(v)) for v in self.trainable_variables()])

    plain, penalised = _policy({"custom_model": KerasMetricsModel}), _policy({"custom_model": L2Model})
    penalised.set_weights(plain.get_weights())
    batch = _batch(plain)
    plain.learn_on_batch(batch)
    penalised.learn_on_batch(batch)
    norm = lambda p: sum(float(np.square(w).sum()) for w in p.get_weights().values())  # noqa: E731
    assert norm(penalised) < norm(plain)


def test_recurrent_custom_model_trains_with_ppo_on_sequences():
    # 1.13's RecurrentNetwork contract: forward_rnn sees [B, T, obs] (T = 1 when acting).
    from tests.helpers.custom_models import TFRNNModel

    policy = _policy({"custom_model": TFRNNModel, "max_seq_len": 4})
    assert [value.shape for value in policy.get_initial_state()] == [(8,), (8,)]
    TFRNNModel.seen_input_shapes.clear()
    obs = np.random.default_rng(0).uniform(-1, 1, (3, 4)).astype(np.float32)
    _, extras = policy.compute_actions(obs, state_batches=policy.initial_state_batch(3))
    # In a graph the batch and time sizes are dynamic: [B, T, 4] with B, T unknown at trace.
    assert len(TFRNNModel.seen_input_shapes[-1]) == 3 and TFRNNModel.seen_input_shapes[-1][-1] == 4
    assert extras["state_out_1"].shape == (3, 8)
    batch = _batch(policy, n=12)
    batch["eps_id"] = np.repeat([0, 1], [7, 5])
    for i in range(2):
        batch[f"state_in_{i}"] = np.zeros((12, 8), np.float32)
    before = [value.copy() for value in policy.get_weights().values()]
    stats = policy.learn_on_batch(batch)
    assert np.isfinite(stats["total_loss"])
    assert len(TFRNNModel.seen_input_shapes) > 1  # traced again for the padded sequences
    assert any(not np.array_equal(a, b) for a, b in zip(before, policy.get_weights().values()))


def test_recurrent_custom_models_are_refused_by_an_algorithm_without_sequences():
    from rlstack.trainers.dqn import DEFAULT_CONFIG as DQN_DEFAULTS
    from rlstack.trainers.dqn.dqn_tf_policy import DQNTFPolicy
    from tests.helpers.custom_models import TFRNNModel

    config = {**DQN_DEFAULTS, "framework": "tf", "model": {**DQN_DEFAULTS["model"], "custom_model": TFRNNModel}}
    with pytest.raises(ConfigError, match="is recurrent.*PPO"):
        DQNTFPolicy(OBS, ACT, config)


def test_shortcut_module_is_wrapped_as_a_tfmodelv2():
    policy = _policy({"custom_model": TinyTFModel})
    assert isinstance(policy.model, TFModelV2)
    assert [v.name for v in policy.model.trainable_variables()] == ["w:0"]
    obs = np.ones((2, 4), np.float32)
    logits, _ = policy.model({"obs": tf.constant(obs)})
    np.testing.assert_allclose(logits.numpy(), policy.compute_actions(obs, False)[1]["action_dist_inputs"])
    assert model_obs_space(OBS) is OBS


def test_dqn_custom_keras_model_and_its_target_network():
    from rlstack.sample_batch import SampleBatch as B
    from rlstack.trainers.dqn import DEFAULT_CONFIG as DQN_CONFIG
    from rlstack.trainers.dqn.dqn_tf_policy import DQNTFPolicy

    cfg = {**DQN_CONFIG, "framework": "tf", "seed": 0, "train_batch_size": 32,
           "model": {**DQN_CONFIG["model"], "custom_model": KerasMetricsModel}}
    policy = DQNTFPolicy(OBS, ACT, cfg)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (32, 4)).astype(np.float32)
    outputs, _ = policy.model({"obs": tf.constant(obs)})
    # The outputs are Q(s, .) (to float32 rounding: graph and eager kernels may differ by CPU).
    np.testing.assert_allclose(policy.q_values(obs), outputs.numpy(), rtol=1e-5, atol=1e-8)
    target_q = lambda p: p.target_model.policy_and_value(tf.constant(obs))[0].numpy()  # noqa: E731
    np.testing.assert_allclose(target_q(policy), policy.q_values(obs), rtol=1e-5, atol=1e-8)  # the same weights
    batch = B({B.OBS: obs, B.ACTIONS: rng.integers(0, 3, 32), B.REWARDS: rng.normal(size=32).astype(np.float32),
               B.NEXT_OBS: rng.uniform(-1, 1, (32, 4)).astype(np.float32), B.TERMINATEDS: np.zeros(32, bool),
               B.DISCOUNTS: np.full(32, 0.99, np.float32), B.WEIGHTS: np.ones(32, np.float32)})
    stats = policy.learn_on_batch(batch)
    assert stats["model"] == {"foo": 42.0}
    assert not np.allclose(target_q(policy), policy.q_values(obs))  # only the online network learned
    copy = DQNTFPolicy(OBS, ACT, cfg)
    copy.set_state(policy.get_state())
    np.testing.assert_array_equal(copy.q_values(obs), policy.q_values(obs))
    np.testing.assert_array_equal(target_q(copy), target_q(policy))
    policy.update_target()
    np.testing.assert_allclose(target_q(policy), policy.q_values(obs), rtol=1e-5, atol=1e-8)


def test_keras_models_work_after_rlstacks_keras_free_tf_import():
    # rlstack imports TensorFlow without Keras (models/tf/framework.py); a user's model
    # file then runs `import tensorflow as tf` and builds Keras layers.
    import subprocess
    import sys

    code = (
        "from rlstack.models.tf.framework import tf as rl_tf\n"
        "import sys; assert 'keras' not in sys.modules\n"
        "from tests.unit.test_tf_modelv2 import _batch, _policy\n"
        "from tests.helpers.custom_models import KerasMetricsModel\n"
        "policy = _policy({'custom_model': KerasMetricsModel})\n"
        "assert policy.learn_on_batch(_batch(policy))['model'] == {'foo': 42.0}\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


class _Branchy(KerasMetricsModel):
    """Branches in Python on a tensor: needs AutoGraph inside the policy's graphs."""

    def forward(self, input_dict, state, seq_lens):
        logits, state = super().forward(input_dict, state, seq_lens)
        if tf.reduce_sum(input_dict["obs"]) > 0:
            logits = logits + tf.constant([100.0, 0.0, 0.0])
        else:
            logits = logits + tf.constant([0.0, 100.0, 0.0])
        return logits, state


def test_custom_models_may_branch_on_tensors():
    policy = _policy({"custom_model": _Branchy})
    for sign, expected in ((1.0, 0), (-1.0, 1)):  # the branch reads the whole batch's sum
        actions, _ = policy.compute_actions(np.full((2, 4), sign, np.float32), explore=False)
        np.testing.assert_array_equal(actions, [expected, expected])
    assert np.isfinite(policy.learn_on_batch(_batch(policy))["total_loss"])
