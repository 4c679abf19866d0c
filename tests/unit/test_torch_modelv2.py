"""Classic RLlib's ModelV2 custom models on torch policies: the 1.13 model interface, the
model-building helpers (FullyConnectedNetwork, SlimFC, the catalog's get_model_v2 /
get_action_dist, get_preprocessor), custom_loss, custom action distributions, and
refusals that explain themselves."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlstack.errors import ConfigError  # noqa: E402
from rlstack.examples.env.action_mask_env import ActionMaskEnv  # noqa: E402
from rlstack.models.catalog import ModelCatalog  # noqa: E402
from rlstack.models.modelv2 import ModelV2  # noqa: E402
from rlstack.models.preprocessors import get_preprocessor  # noqa: E402
from rlstack.models.torch.fcnet import FullyConnectedNetwork  # noqa: E402
from rlstack.models.torch.misc import SlimFC, normc_initializer, same_padding, valid_padding  # noqa: E402
from rlstack.models.torch.torch_action_dist import TorchCategorical, TorchDiagGaussian  # noqa: E402
from rlstack.models.torch.visionnet import VisionNetwork  # noqa: E402
from rlstack.sample_batch import SampleBatch as B  # noqa: E402
from rlstack.trainers.common.config import merge_config  # noqa: E402
from rlstack.trainers.dqn import DEFAULT_CONFIG as DQN_DEFAULTS  # noqa: E402
from rlstack.trainers.dqn.dqn_torch_policy import DQNTorchPolicy  # noqa: E402
from rlstack.trainers.ppo import DEFAULT_CONFIG  # noqa: E402
from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy  # noqa: E402
from tests.helpers import torch_modelv2_models as models  # noqa: E402
from tests.helpers.closed_form_cases import ppo_batch  # noqa: E402

OBS = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
ACT = gym.spaces.Discrete(3)


def _ppo(model: dict, obs_space=OBS, action_space=ACT, seed=0) -> PPOTorchPolicy:
    config = merge_config(DEFAULT_CONFIG, {"seed": seed, "train_batch_size": 96, "sgd_minibatch_size": 32,
                                           "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16], **model}}, "PPO")
    return PPOTorchPolicy(obs_space, action_space, config)


def _acted_batch(policy, n=96, seed=0):
    """A PPO train batch of the policy's own actions, with random advantages and targets."""
    rng = np.random.default_rng(seed)
    obs = _obs(n, seed)
    actions, extras = policy.compute_actions(obs)
    return B({B.OBS: obs, B.ACTIONS: actions, B.ACTION_LOGP: extras[B.ACTION_LOGP],
              B.ACTION_DIST_INPUTS: extras[B.ACTION_DIST_INPUTS], B.ADVANTAGES: rng.normal(0, 1, n).astype(np.float32),
              B.VALUE_TARGETS: rng.normal(0, 1, n).astype(np.float32)})


def _obs(n=6, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, OBS.shape[0])).astype(np.float32)


@pytest.mark.parametrize("custom", [None, "WrappedFCModel"])
def test_model_call_gives_the_logits_the_policy_acts_with(custom):
    policy = _ppo({"custom_model": getattr(models, custom)} if custom else {})
    assert isinstance(policy.model, ModelV2)
    obs = _obs()
    _, extras = policy.compute_actions(obs, explore=False)
    with torch.no_grad():
        logits, state = policy.model({"obs": torch.from_numpy(obs)})
        values = policy.model.value_function()
    assert state == []
    np.testing.assert_allclose(logits.numpy(), extras[B.ACTION_DIST_INPUTS], rtol=1e-6)
    np.testing.assert_allclose(values.numpy(), extras[B.VF_PREDS], rtol=1e-6)
    np.testing.assert_allclose(policy.compute_values(obs), extras[B.VF_PREDS], rtol=1e-6)


def test_model_called_with_a_tensor_says_how_to_call_it():
    policy = _ppo({})
    with pytest.raises(TypeError, match="policy_and_value"):
        policy.model(torch.zeros(2, 5))


def test_dict_observations_reach_forward_as_a_dict():
    from rlstack.examples.models.action_mask_model import TorchActionMaskModel

    env = ActionMaskEnv({"action_space": gym.spaces.Discrete(4)})
    policy = _ppo({"custom_model": TorchActionMaskModel}, env.observation_space, env.action_space)
    assert policy.model.obs_space.original_space == env.observation_space
    seen = {}
    inner_forward = policy.model.forward

    def spy(input_dict, state, seq_lens):
        seen["obs"], seen["is_training"] = input_dict["obs"], input_dict["is_training"]
        return inner_forward(input_dict, state, seq_lens)

    policy.model.forward = spy
    obs, _ = env.reset(seed=0)
    flat = policy.preprocessor.transform(obs)[None]
    action, _, _ = policy.compute_single_action(flat[0], explore=False)
    assert set(seen["obs"]) == {"action_mask", "observations"}  # acting reaches forward too
    assert seen["is_training"] is False
    seen.clear()
    policy.model({"obs": torch.from_numpy(flat)})
    assert set(seen["obs"]) == {"action_mask", "observations"}
    np.testing.assert_array_equal(seen["obs"]["action_mask"].numpy()[0], obs["action_mask"])
    assert obs["action_mask"][int(action)] == 1.0


def test_action_mask_model_never_picks_a_masked_action_and_no_masking_does():
    from rlstack.examples.models.action_mask_model import TorchActionMaskModel

    env = ActionMaskEnv({"action_space": gym.spaces.Discrete(100)})
    masked = _ppo({"custom_model": TorchActionMaskModel}, env.observation_space, env.action_space)
    unmasked = _ppo({"custom_model": TorchActionMaskModel, "custom_model_config": {"no_masking": True}},
                    env.observation_space, env.action_space)
    rows, masks = [], []
    for seed in range(20):
        obs, _ = env.reset(seed=seed)
        rows.append(masked.preprocessor.transform(obs))
        masks.append(obs["action_mask"])
    obs_batch, masks = np.stack(rows), np.stack(masks)
    picked = np.concatenate([masked.compute_actions(obs_batch, explore=True)[0] for _ in range(50)]
                            + [masked.compute_actions(obs_batch, explore=False)[0]])
    assert masks[np.tile(np.arange(20), 51), picked].all()
    free = np.concatenate([unmasked.compute_actions(obs_batch, explore=True)[0] for _ in range(10)])
    assert not masks[np.tile(np.arange(20), 10), free].all()


def test_custom_loss_changes_the_gradient_and_metrics_report_it():
    policy = _ppo({"custom_model": models.CustomLossModel, "custom_model_config": {"coeff": 10.0}})
    batch = ppo_batch(policy)
    tensors = policy._to_tensors(batch)
    index = torch.arange(32)
    policy.make_grad_fn(tensors)(index)
    with_custom = [p.grad.clone() for p in policy.model.parameters()]
    loss, _ = policy.loss({key: value[index] for key, value in tensors.items()})
    policy.optimizer.zero_grad()
    loss.backward()
    plain = [p.grad.clone() for p in policy.model.parameters()]
    head = policy.model.pi._model[0].weight
    # d/dW of 10 * sum(W^2) is 20 W on the head's weight, nothing elsewhere.
    names = [name for name, _ in policy.model.named_parameters()]
    for name, a, b in zip(names, with_custom, plain):
        expected = b + 20.0 * head.detach() if name == "pi._model.0.weight" else b
        torch.testing.assert_close(a, expected, rtol=1e-5, atol=1e-6)
    assert np.isfinite(policy.learn_on_batch(batch)["total_loss"])
    policy.model_loss({key: value[index] for key, value in tensors.items()})
    metrics = policy.model_metrics()
    assert metrics["extra_loss"] == pytest.approx(10.0 * float((head.detach() ** 2).sum()), rel=1e-5)


def test_custom_action_dist_sizes_the_model_and_is_used_for_acting_and_loss():
    dist = models.TemperatureCategorical
    ModelCatalog.register_custom_action_dist("temperature_categorical", dist)
    policy = _ppo({"custom_action_dist": "temperature_categorical"})
    assert policy.dist_class is dist and policy.model.num_outputs == ACT.n + 1
    obs = _obs(200)
    actions, extras = policy.compute_actions(obs)
    assert extras[B.ACTION_DIST_INPUTS].shape == (200, ACT.n + 1)
    assert set(np.unique(actions)) <= {0, 1, 2}
    inputs = torch.from_numpy(extras[B.ACTION_DIST_INPUTS])
    np.testing.assert_allclose(extras[B.ACTION_LOGP], dist(inputs, policy.model).logp(torch.from_numpy(actions)),
                               rtol=1e-5)
    calls = dist.logp_calls
    stats = policy.learn_on_batch(_acted_batch(policy))
    assert dist.logp_calls > calls and np.isfinite(stats["total_loss"])
    # With a custom model too: its num_outputs comes from the distribution.
    custom = _ppo({"custom_model": models.WrappedFCModel, "custom_action_dist": dist})
    assert custom.model.num_outputs == ACT.n + 1 and custom.dist_class is dist
    assert ModelCatalog.get_action_dist(ACT, {"custom_action_dist": "temperature_categorical"}) == (dist, 4)


def test_unknown_custom_action_dist_is_a_config_error():
    with pytest.raises(ConfigError, match="register_custom_action_dist"):
        _ppo({"custom_action_dist": "no_such_dist"})


def test_recurrent_custom_model_trains_with_ppo_on_sequences():
    # 1.13's RecurrentNetwork contract: forward_rnn sees [B, T, obs], T = 1 when acting
    # and max_seq_len (padded) when learning.
    policy = _ppo({"custom_model": models.RecurrentModel, "max_seq_len": 4})
    assert [value.shape for value in policy.get_initial_state()] == [(8,), (8,)]
    models.RecurrentModel.seen_input_shapes.clear()
    obs = _obs(3)
    actions, extras = policy.compute_actions(obs, state_batches=policy.initial_state_batch(3))
    assert models.RecurrentModel.seen_input_shapes[-1] == (3, 1, 5)
    assert extras["state_out_0"].shape == (3, 8)
    n = 12
    batch = _acted_batch(policy, n)
    batch[B.EPS_ID] = np.repeat([0, 1], [7, 5])
    for i in range(2):
        batch[f"state_in_{i}"] = np.zeros((n, 8), np.float32)
    stats = policy.learn_on_batch(batch)
    assert np.isfinite(stats["total_loss"])
    # Episodes of 7 and 5 steps in sequences of 4: 4 sequences of 4 padded steps.
    assert (4, 4, 5) in models.RecurrentModel.seen_input_shapes


def test_recurrent_custom_model_is_refused_by_an_algorithm_without_sequences():
    config = merge_config(DQN_DEFAULTS, {"model": {"custom_model": models.RecurrentModel}}, "DQN")
    with pytest.raises(ConfigError, match="is recurrent.*PPO"):
        DQNTorchPolicy(OBS, ACT, config)


def test_custom_q_model_drives_dqn_and_its_target_network():
    config = merge_config(DQN_DEFAULTS, {"seed": 0, "train_batch_size": 16,
                                         "model": {"fcnet_hiddens": [16], "custom_model": models.WrappedFCModel}},
                          "DQN")
    policy = DQNTorchPolicy(OBS, ACT, config)
    obs = _obs(16)
    with torch.no_grad():
        q = policy.model.q_values(torch.from_numpy(obs))
    assert q.shape == (16, 3)
    np.testing.assert_allclose(policy.q_values(obs), q.numpy())
    np.testing.assert_array_equal(policy.compute_actions(obs, explore=False)[0], q.numpy().argmax(1))
    batch = B({B.OBS: obs, B.ACTIONS: np.zeros(16, np.int64), B.REWARDS: np.ones(16, np.float32),
               B.NEXT_OBS: obs, B.TERMINATEDS: np.zeros(16, bool), B.DISCOUNTS: np.full(16, 0.99, np.float32),
               B.WEIGHTS: np.ones(16, np.float32)})
    policy.learn_on_batch(batch)
    state = policy.get_state()
    target = {key for key in state if key.startswith("target/")}
    assert target
    moved = any(not np.array_equal(state[k], state["weights/" + k[len("target/"):]]) for k in target)
    assert moved  # the online network learned; the target is still the initial copy
    policy.update_target()
    restored = DQNTorchPolicy(OBS, ACT, config)
    restored.set_state(policy.get_state())
    np.testing.assert_allclose(restored.q_values(obs), policy.q_values(obs), rtol=1e-6)


def test_custom_q_model_needs_no_value_function():
    """1.13's Q-model examples define only forward(): their outputs are the Q-values."""
    from torch import nn

    from rlstack.models.torch.torch_modelv2 import TorchModelV2

    class QOnly(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            self.q = nn.Linear(int(obs_space.shape[0]), int(action_space.n))

        def forward(self, input_dict, state, seq_lens):
            return self.q(input_dict["obs"]), state

    config = merge_config(DQN_DEFAULTS, {"seed": 0, "model": {"custom_model": QOnly}}, "DQN")
    policy = DQNTorchPolicy(OBS, ACT, config)
    obs = _obs(8)
    with torch.no_grad():
        expected = policy.model.q(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(policy.q_values(obs), expected, rtol=1e-6)


def test_torch_model_v2_super_init_style_and_variables():
    model = models.CustomLossModel(OBS, ACT, 3, {}, "m", coeff=2.0)
    assert isinstance(model, torch.nn.Module) and model.num_outputs == 3 and model.name == "m"
    names = [name for name, _ in model.named_parameters()]
    assert len(model.variables()) == len(names) == len(model.trainable_variables())
    assert set(model.variables(as_dict=True)) == set(names)
    model.pi._model[0].weight.requires_grad_(False)
    assert "pi._model.0.weight" not in model.trainable_variables(as_dict=True)


def test_fully_connected_network_without_outputs_returns_its_features():
    config = {"fcnet_hiddens": [16, 7], "vf_share_layers": False}
    net = FullyConnectedNetwork(OBS, ACT, None, config, "fc")
    out, _ = net({"obs": torch.zeros(4, 5)})
    assert net.num_outputs == 7 and out.shape == (4, 7) and net.value_function().shape == (4,)
    head = FullyConnectedNetwork(OBS, ACT, 3, config, "fc")
    assert head({"obs": torch.zeros(4, 5)})[0].shape == (4, 3)
    torch.manual_seed(3)
    a = FullyConnectedNetwork(OBS, ACT, 3, config, "fc").get_canonical_weights()
    torch.manual_seed(3)
    b = FullyConnectedNetwork(OBS, ACT, 3, config, "fc").get_canonical_weights()
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_vision_network_reads_images_and_refuses_vectors():
    image = gym.spaces.Box(0.0, 1.0, (10, 10, 3), np.float32)
    net = VisionNetwork(image, ACT, 3, {"conv_filters": [[4, [3, 3], 2], [8, [5, 5], 1]]}, "cnn")
    out, _ = net({"obs": torch.rand(2, 10, 10, 3)})
    assert out.shape == (2, 3) and net.value_function().shape == (2,)
    with pytest.raises(ConfigError, match="FullyConnectedNetwork"):
        VisionNetwork(OBS, ACT, 3, {}, "cnn")


def test_get_model_v2_builds_builtin_and_custom_models():
    fc = ModelCatalog.get_model_v2(OBS, ACT, 3, {"fcnet_hiddens": [8]}, framework="torch")
    assert isinstance(fc, FullyConnectedNetwork) and fc.num_outputs == 3
    image = gym.spaces.Box(0.0, 1.0, (10, 10, 3), np.float32)
    assert isinstance(ModelCatalog.get_model_v2(image, ACT, 3, {}, "torch"), VisionNetwork)
    custom = ModelCatalog.get_model_v2(OBS, ACT, 3, {"custom_model": models.CustomLossModel,
                                                     "custom_model_config": {"coeff": 4.0}}, "torch", name="x")
    assert custom.coeff == 4.0 and custom.name == "x"
    with pytest.raises(ConfigError, match="framework"):
        ModelCatalog.get_model_v2(OBS, ACT, 3, {}, framework="jax")


def test_get_action_dist_matches_the_space():
    assert ModelCatalog.get_action_dist(ACT, {}, framework="torch") == (TorchCategorical, 3)
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert ModelCatalog.get_action_dist(box, {}, framework="torch") == (TorchDiagGaussian, 4)
    dist_class, n = ModelCatalog.get_action_dist(gym.spaces.MultiDiscrete([2, 3]), {}, framework="torch")
    assert n == 5 and dist_class.required_model_output_shape(gym.spaces.MultiDiscrete([2, 3]), {}) == 5


def test_torch_distribution_wrapper_interface():
    logits = torch.tensor([[0.0, 3.0, -1.0], [2.0, 0.0, 0.0]])
    dist = TorchCategorical(logits, None)
    assert dist.deterministic_sample().tolist() == [1, 0]
    np.testing.assert_allclose(dist.sampled_action_logp().numpy(),
                               torch.log_softmax(logits, 1)[[0, 1], [1, 0]].numpy(), rtol=1e-6)
    sample = dist.sample()
    torch.testing.assert_close(dist.sampled_action_logp(), dist.logp(sample))
    assert TorchCategorical(logits, None, temperature=2.0).logits.tolist() == (logits / 2.0).tolist()


def test_get_preprocessor_shapes():
    box = gym.spaces.Box(0.0, 1.0, (2, 3), np.float32)
    prep = get_preprocessor(box)(box)
    assert prep.shape == (2, 3) and prep.size == 6 and prep.observation_space.shape == (2, 3)
    one_hot = get_preprocessor(gym.spaces.Discrete(4))(gym.spaces.Discrete(4))
    np.testing.assert_array_equal(one_hot.transform(2), [0, 0, 1, 0])
    space = ActionMaskEnv({"action_space": gym.spaces.Discrete(3)}).observation_space
    flat = get_preprocessor(space)(space, {})
    assert flat.shape == (8,) and flat.transform(space.sample()).shape == (8,)


def test_slim_fc_normc_and_padding():
    layer = SlimFC(4, 3, initializer=normc_initializer(0.5), activation_fn="relu", bias_init=0.1)
    weight = layer._model[0].weight
    np.testing.assert_allclose(weight.detach().pow(2).sum(1).sqrt().numpy(), [0.5] * 3, rtol=1e-5)
    assert (layer(torch.randn(5, 4)) >= 0).all()
    np.testing.assert_allclose(layer._model[0].bias.detach().numpy(), [0.1] * 3)
    with pytest.raises(ValueError, match="activation"):
        SlimFC(4, 3, activation_fn="gelu2")
    assert same_padding((84, 84), 8, 4) == ((2, 2, 2, 2), (21, 21))
    assert same_padding((5, 5), (3, 3), (2, 2)) == ((1, 1, 1, 1), (3, 3))
    assert valid_padding((84, 84), 8, 4) == ((0, 0, 0, 0), (20, 20))


def test_shortcut_custom_model_keeps_its_weight_names():
    from tests.helpers.custom_models import TinyTorchModel

    policy = _ppo({"custom_model": TinyTorchModel, "custom_model_config": {"hidden": 8}})
    assert isinstance(policy.model, ModelV2)
    assert sorted(policy.get_weights()) == sorted(TinyTorchModel(OBS, ACT, 3, {}, "m", hidden=8).state_dict())
    obs = _obs()
    _, extras = policy.compute_actions(obs, explore=False)
    logits, _ = policy.model({"obs": torch.from_numpy(obs)})
    np.testing.assert_allclose(logits.detach().numpy(), extras[B.ACTION_DIST_INPUTS], rtol=1e-6)


def test_importing_the_action_mask_module_imports_no_framework():
    import subprocess
    import sys

    code = ("import sys, rlstack.examples.models.action_mask_model as m; "
            "assert 'torch' not in sys.modules and 'tensorflow' not in sys.modules; "
            "m.TorchActionMaskModel; assert 'tensorflow' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "ok", out.stderr
