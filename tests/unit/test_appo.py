"""APPO: the loss against a float64 numpy reference written from 1.13's APPO
(V-trace of the target network's policy over the behaviour policy, ratio
``clip(mu / pi_target, 0, 2) * pi / mu`` in PPO's clipped surrogate; without V-trace the
plain PPO surrogate on GAE advantages), torch and TF agreeing on one batch from the same
weights (vtrace on and off, with the KL term, with and without ``vtrace_drop_last_ts``),
the target network and KL coefficient updates, ``_separate_vf_optimizer`` (two losses,
two optimizers at their own rates; 1.x's separate-losses example trains), and the config
errors a user meets."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.appo.appo import APPOTrainer
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.impala.fragments import VALID
from rlstack.trainers.impala.vtrace import fold_truncation, vtrace
from rlstack.trainers.ppo.appo import DEFAULT_CONFIG

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
T_FRAG, NUM_SEQ, GAMMA = 5, 4, 0.9


def _config(**overrides):
    return merge_config(DEFAULT_CONFIG, {"seed": 2, "gamma": GAMMA, "rollout_fragment_length": T_FRAG,
                                         "model": {"fcnet_hiddens": [16]}, **overrides}, "APPO")


def _policy(framework: str, **overrides):
    if framework == "torch":
        from rlstack.trainers.appo.appo_torch_policy import APPOTorchPolicy

        return APPOTorchPolicy(OBS_SPACE, ACTION_SPACE, _config(**overrides))
    from rlstack.trainers.appo.appo_tf_policy import APPOTFPolicy

    return APPOTFPolicy(OBS_SPACE, ACTION_SPACE, _config(**overrides))


def _weights(policy, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: (np.array(v) + rng.normal(0, 0.3, np.shape(v))).astype(np.float32)
            for k, v in policy.get_weights().items()}


def _set_target_and_current(policy, target: dict, current: dict) -> None:
    policy.set_weights(target)
    policy.update_target()
    policy.set_weights(current)


def _forward(weights, spec, obs):
    from rlstack.models.numpy.model import NumpyModel

    model = NumpyModel(spec)
    model.set_canonical_weights(weights)
    logits, values = model(obs.astype(np.float64))
    return np.asarray(logits, np.float64), np.asarray(values, np.float64)


def _log_softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _batch(seed: int = 0) -> SampleBatch:
    """NUM_SEQ fragments of T_FRAG steps; sequence 1 terminates at its step 2, sequence 2
    is truncated at its step 1 (V(x_final) = 2.5); behaviour logits random."""
    rng = np.random.default_rng(seed)
    n = T_FRAG * NUM_SEQ
    behaviour_logits = rng.normal(0, 1, (n, ACTION_SPACE.n)).astype(np.float32)
    actions = rng.integers(0, ACTION_SPACE.n, n).astype(np.int64)
    terminateds, truncateds = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    bootstrap_value = np.zeros(n, dtype=np.float32)
    terminateds[T_FRAG + 2] = True
    truncateds[2 * T_FRAG + 1] = True
    bootstrap_value[2 * T_FRAG + 1] = 2.5
    return SampleBatch({
        B.OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        B.ACTIONS: actions,
        B.ACTION_DIST_INPUTS: behaviour_logits,
        B.ACTION_LOGP: _log_softmax(behaviour_logits.astype(np.float64))[np.arange(n), actions].astype(np.float32),
        B.REWARDS: rng.normal(0, 1, n).astype(np.float32),
        B.TERMINATEDS: terminateds,
        B.TRUNCATEDS: truncateds,
        B.BOOTSTRAP_VALUE: bootstrap_value,
        B.ADVANTAGES: rng.normal(0, 2, n).astype(np.float32),
        B.VALUE_TARGETS: rng.normal(0, 2, n).astype(np.float32),
        VALID: np.ones(n, dtype=np.float32),
    })


def _time_major(x):
    x = np.asarray(x)
    return np.swapaxes(x.reshape(-1, T_FRAG, *x.shape[1:]), 0, 1)


def numpy_appo_loss(cfg, spec, current, target, batch) -> dict[str, float]:
    """1.13's APPO loss in float64 (means over the steps used)."""
    n = batch.count
    actions = batch[B.ACTIONS]
    logits, values = _forward(current, spec, batch[B.OBS])
    log_probs = _log_softmax(logits)
    logp = log_probs[np.arange(n), actions]
    behaviour_log_probs = _log_softmax(batch[B.ACTION_DIST_INPUTS].astype(np.float64))
    behaviour_logp = batch[B.ACTION_LOGP].astype(np.float64)
    entropy = -(np.exp(log_probs) * log_probs).sum(axis=1)
    eps = cfg["clip_param"]
    if cfg["vtrace"]:
        target_log_probs = _log_softmax(_forward(target, spec, batch[B.OBS])[0])
        target_logp = target_log_probs[np.arange(n), actions]
        kl = (np.exp(target_log_probs) * (target_log_probs - log_probs)).sum(axis=1)
        tm = [_time_major(x) for x in (logp, behaviour_logp, target_logp, values, entropy, kl)]
        logp, behaviour_logp, target_logp, values, entropy, kl = tm
        discounts = np.where(_time_major(batch[B.TERMINATEDS]), 0.0, GAMMA)
        rewards, discounts = fold_truncation(_time_major(batch[B.REWARDS]).astype(np.float64), discounts,
                                             _time_major(batch[B.TRUNCATEDS]),
                                             _time_major(batch[B.BOOTSTRAP_VALUE]).astype(np.float64), GAMMA)
        # vtrace_drop_last_ts: each fragment's last step only bootstraps; without it every
        # step is learned on and the last one bootstraps from its own value.
        steps = slice(None, -1) if cfg["vtrace_drop_last_ts"] else slice(None)
        vs, advantages = vtrace((target_logp - behaviour_logp)[steps], discounts[steps], rewards[steps],
                                values[steps], values[-1], cfg["vtrace_clip_rho_threshold"],
                                cfg["vtrace_clip_pg_rho_threshold"])
        logp, behaviour_logp, target_logp, values, entropy, kl = (
            x[steps] for x in (logp, behaviour_logp, target_logp, values, entropy, kl))
        is_ratio = np.clip(np.exp(behaviour_logp - target_logp), 0.0, 2.0)
        ratio = is_ratio * np.exp(logp - behaviour_logp)
        value_targets = vs
    else:
        kl = (np.exp(behaviour_log_probs) * (behaviour_log_probs - log_probs)).sum(axis=1)
        advantages = batch[B.ADVANTAGES].astype(np.float64)
        ratio = np.exp(logp - behaviour_logp)
        value_targets = batch[B.VALUE_TARGETS].astype(np.float64)
    policy_loss = -np.mean(np.minimum(advantages * ratio, advantages * np.clip(ratio, 1 - eps, 1 + eps)))
    vf_loss = 0.5 * np.mean((values - value_targets) ** 2)
    total = policy_loss + cfg["vf_loss_coeff"] * vf_loss - cfg["entropy_coeff"] * np.mean(entropy)
    if cfg["use_kl_loss"]:
        total += cfg["kl_coeff"] * np.mean(kl)
    return {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": np.mean(entropy),
            "kl": np.mean(kl), "ratio_max": float(np.max(ratio)), "ratio_min": float(np.min(ratio))}


def _loss_stats(policy, batch) -> dict[str, float]:
    if policy.framework == "torch":
        import torch

        loss, stats = policy.loss({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in batch.items()})
    else:
        import tensorflow as tf

        loss, stats = policy.loss({k: tf.convert_to_tensor(v) for k, v in batch.items()})
    out = {k: float(np.asarray(v.detach() if hasattr(v, "detach") else v)) for k, v in stats.items()}
    assert out["total_loss"] == pytest.approx(float(np.asarray(loss.detach() if hasattr(loss, "detach") else loss)))
    return out


SETTINGS = [pytest.param({"vtrace": True}, id="vtrace"),
            pytest.param({"vtrace": True, "vtrace_drop_last_ts": False}, id="vtrace-keep-last"),
            pytest.param({"vtrace": True, "use_kl_loss": True}, id="vtrace-kl"),
            pytest.param({"vtrace": False}, id="gae"),
            pytest.param({"vtrace": False, "use_kl_loss": True}, id="gae-kl")]


@pytest.mark.parametrize("settings", SETTINGS)
def test_loss_matches_numpy_reference(framework, settings):
    policy = _policy(framework, **settings)
    current, target = _weights(policy, 1), _weights(policy, 2)
    _set_target_and_current(policy, target, current)
    batch = _batch(seed=3)
    expected = numpy_appo_loss(policy.config, policy.model_spec(), current, target, batch)
    # The batch reaches both sides of the clip, so a wrong clip shows.
    eps = policy.config["clip_param"]
    assert expected["ratio_max"] > 1 + eps and expected["ratio_min"] < 1 - eps
    got = _loss_stats(policy, batch)
    keys = ["total_loss", "policy_loss", "vf_loss", "entropy"] + (["kl"] if settings.get("use_kl_loss") else [])
    for key in keys:
        np.testing.assert_allclose(got[key], expected[key], rtol=2e-5, err_msg=key)


def test_vtrace_reads_the_target_network_not_the_current_weights():
    pytest.importorskip("torch")
    policy = _policy("torch", vtrace=True)
    current = _weights(policy, 1)
    batch = _batch(seed=3)
    _set_target_and_current(policy, _weights(policy, 2), current)
    first = _loss_stats(policy, batch)["total_loss"]
    _set_target_and_current(policy, _weights(policy, 5), current)
    assert abs(_loss_stats(policy, batch)["total_loss"] - first) > 1e-3
    policy.update_target()  # target = current: pi / pi_target's importance factor is mu / pi
    expected = numpy_appo_loss(policy.config, policy.model_spec(), current, current, batch)
    assert _loss_stats(policy, batch)["total_loss"] == pytest.approx(expected["total_loss"], rel=2e-5)


@pytest.mark.parametrize("settings", SETTINGS)
def test_torch_and_tf_agree_on_the_loss_and_one_step(settings):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    torch_policy, tf_policy = _policy("torch", **settings), _policy("tf", **settings)
    current, target = _weights(torch_policy, 1), _weights(torch_policy, 2)
    for policy in (torch_policy, tf_policy):
        _set_target_and_current(policy, target, current)
    batch = _batch(seed=4)
    torch_stats, tf_stats = _loss_stats(torch_policy, batch), _loss_stats(tf_policy, batch)
    for key in torch_stats:
        np.testing.assert_allclose(torch_stats[key], tf_stats[key], rtol=2e-5, atol=1e-6, err_msg=key)
    torch_policy.learn_on_batch(batch.copy())
    tf_policy.learn_on_batch(batch.copy())
    after_torch, after_tf = torch_policy.get_weights(), tf_policy.get_weights()
    for name in after_torch:
        np.testing.assert_allclose(after_torch[name], after_tf[name], rtol=1e-4, atol=1e-6, err_msg=name)
    assert not np.allclose(after_torch["logits/kernel"], current["logits/kernel"])


def test_update_target_copies_weights_and_adapts_the_kl_coefficient(framework):
    policy = _policy(framework, use_kl_loss=True, kl_coeff=1.0, kl_target=0.01)
    batch = _batch(seed=3)
    _set_target_and_current(policy, _weights(policy, 2), _weights(policy, 1))
    assert _loss_stats(policy, batch)["kl"] > 0.01
    policy.update_target(kl=0.05)  # over twice the target: x1.5
    assert _loss_stats(policy, batch)["kl"] == pytest.approx(0.0, abs=1e-6)
    assert float(np.asarray(policy.get_state()["kl_coeff"])) == pytest.approx(1.5)
    policy.update_target(kl=0.001)  # under half the target: x0.5
    assert float(np.asarray(policy.get_state()["kl_coeff"])) == pytest.approx(0.75)
    # The state carries the target network and the coefficient.
    state = policy.get_state()
    other = _policy(framework, use_kl_loss=True)
    other.set_state(state)
    np.testing.assert_allclose(_loss_stats(other, batch)["total_loss"], _loss_stats(policy, batch)["total_loss"],
                               rtol=1e-6)


def test_gae_on_the_workers_only_without_vtrace():
    from rlstack.trainers.appo.appo import postprocess_appo

    n = 4
    piece = SampleBatch({B.REWARDS: np.ones(n, np.float32), B.VF_PREDS: np.zeros(n, np.float32),
                         B.TERMINATEDS: np.array([0, 0, 0, 1], bool), B.TRUNCATEDS: np.zeros(n, bool)})
    assert B.ADVANTAGES not in postprocess_appo(piece.copy(), _config(vtrace=True))
    out = postprocess_appo(piece.copy(), _config(vtrace=False, gamma=0.5, **{"lambda": 1.0}))
    np.testing.assert_allclose(out[B.ADVANTAGES], [1.875, 1.75, 1.5, 1.0])
    np.testing.assert_allclose(out[B.VALUE_TARGETS], [1.875, 1.75, 1.5, 1.0])


def test_defaults_are_1_13s():
    expected = {"vtrace": True, "use_critic": True, "use_gae": True, "lambda": 1.0, "clip_param": 0.4,
                "use_kl_loss": False, "kl_coeff": 1.0, "kl_target": 0.01, "rollout_fragment_length": 50,
                "train_batch_size": 500, "num_workers": 2, "num_sgd_iter": 1, "minibatch_buffer_size": 1,
                "replay_proportion": 0.0, "learner_queue_size": 16, "learner_queue_timeout": 300,
                "max_sample_requests_in_flight_per_worker": 2, "broadcast_interval": 1, "grad_clip": 40.0,
                "opt_type": "adam", "lr": 0.0005, "vf_loss_coeff": 0.5, "entropy_coeff": 0.01,
                "min_time_s_per_reporting": 10, "target_update_frequency": 1, "vtrace_drop_last_ts": True,
                "_separate_vf_optimizer": False, "_lr_vf": 0.0005}
    assert {key: DEFAULT_CONFIG[key] for key in expected} == expected


@pytest.mark.parametrize(("overrides", "message"), [
    ({"replay_proportion": 0.5}, "replay_proportion=0.5 is not implemented in rlstack's APPO"),
    ({"num_aggregation_workers": 2}, "num_aggregation_workers=2 is not implemented in rlstack's APPO"),
    ({"minibatch_buffer_size": 0}, "minibatch_buffer_size must be an integer >= 1"),
    ({"vtrace_drop_last_ts": 0}, "vtrace_drop_last_ts must be True or False"),
    ({"_separate_vf_optimizer": True, "model": {"vf_share_layers": True}}, "set model: {vf_share_layers: False}"),
    ({"use_critic": False}, "use_critic=False is not implemented"),
    ({"target_update_frequency": 0}, "target_update_frequency must be an integer >= 1"),
    ({"clip_param": 0.0}, "clip_param must be > 0"),
    ({"kl_coeff": -1.0}, "kl_coeff must be >= 0"),
    ({"lambda": 1.5}, "lambda must be in [0, 1]"),
    ({"vtrace": "yes"}, "vtrace must be True or False"),
    ({"opt_type": "sgd"}, "opt_type='sgd' is not allowed"),
    ({"batch_mode": "complete_episodes"}, "batch_mode='complete_episodes': APPO learns on fixed-length fragments"),
    ({"rollout_fragment_length": 1}, "rollout_fragment_length must be >= 2 for APPO"),
    ({"target_update_freq": 2}, "did you mean 'target_update_frequency'"),
])
def test_config_errors_name_the_key(overrides, message):
    with pytest.raises(ConfigError) as info:
        APPOTrainer.merge_and_validate(overrides)
    assert message in str(info.value)


def test_recurrent_models_are_refused():
    with pytest.raises(ConfigError, match="APPO"):
        APPOTrainer.merge_and_validate({"model": {"use_lstm": True}})


def test_1_13_import_paths():
    import rlstack
    from rlstack.trainers.appo import DEFAULT_CONFIG as folder_config
    from rlstack.trainers.ppo import APPOTrainer as from_ppo_package
    from rlstack.trainers.ppo.appo import APPOTrainer as from_ppo_module

    assert from_ppo_package is from_ppo_module is APPOTrainer is rlstack.APPOTrainer
    assert folder_config is DEFAULT_CONFIG
    assert rlstack.get_trainer_class("APPO") is APPOTrainer


# ----- _separate_vf_optimizer (1.x's cartpole-appo-vtrace-separate-losses.yaml) -------------------------

VALUE_LAYERS = ("vf_fc_0", "value_out")


@pytest.mark.parametrize("settings", [pytest.param({"vtrace": True}, id="vtrace"),
                                      pytest.param({"vtrace": False, "use_kl_loss": True}, id="gae-kl")])
def test_separate_vf_optimizer_returns_the_policy_and_the_value_loss(framework, settings):
    """1.13's APPO with _separate_vf_optimizer: the first loss is the surrogate minus the
    entropy bonus (plus the KL term), the second the value loss alone, vf_loss_coeff unused."""
    policy = _policy(framework, _separate_vf_optimizer=True, vf_loss_coeff=0.01, **settings)
    current, target = _weights(policy, 1), _weights(policy, 2)
    _set_target_and_current(policy, target, current)
    batch = _batch(seed=3)
    expected = numpy_appo_loss({**policy.config, "vf_loss_coeff": 0.0}, policy.model_spec(), current, target, batch)
    if policy.framework == "torch":
        import torch

        losses, stats = policy.loss({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in batch.items()})
    else:
        import tensorflow as tf

        losses, stats = policy.loss({k: tf.convert_to_tensor(v) for k, v in batch.items()})
    first, second, reported = (float(np.asarray(x.detach() if hasattr(x, "detach") else x))
                               for x in (*losses, stats["total_loss"]))
    assert first == pytest.approx(expected["total_loss"], rel=2e-5)
    assert second == pytest.approx(expected["vf_loss"], rel=2e-5)
    assert reported == pytest.approx(first, rel=1e-6)


def test_separate_vf_optimizer_steps_each_branch_at_its_own_rate():
    """Two optimizers: the value layers' at _lr_vf, the rest at lr. Adam's first step
    moves each weight by about its rate (m / sqrt(v) = sign(g)); torch and TF agree."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    rates = {"lr": 1e-3, "_lr_vf": 1e-2}
    after = {}
    for framework in ("torch", "tf"):
        policy = _policy(framework, _separate_vf_optimizer=True, **rates)
        current = _weights(policy, 1)
        _set_target_and_current(policy, _weights(policy, 2), current)
        assert len(policy.optimizers) == 2
        stats = policy.learn_on_batch(_batch(seed=4))
        assert {"grad_gnorm", "grad_gnorm_1"} <= set(stats)
        after[framework] = policy.get_weights()
        for name, value in after[framework].items():
            step = np.abs(np.asarray(value) - current[name])
            rate = rates["_lr_vf"] if name.split("/")[0] in VALUE_LAYERS else rates["lr"]
            assert np.median(step) == pytest.approx(rate, rel=0.05), (framework, name)
    for name in after["torch"]:
        np.testing.assert_allclose(after["torch"][name], after["tf"][name], rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("framework_name", ["tf", "torch"])
def test_the_1x_separate_losses_config_trains(framework_name):
    """1.x's cartpole-appo-vtrace-separate-losses.yaml settings (two optimizers, every step
    of a fragment learned on, _tf_policy_handles_more_than_one_loss) build and train."""
    pytest.importorskip("tensorflow" if framework_name == "tf" else "torch")
    trainer = APPOTrainer({
        "framework": framework_name, "_tf_policy_handles_more_than_one_loss": True,
        "_separate_vf_optimizer": True, "_lr_vf": 0.00075, "vtrace": True, "vtrace_drop_last_ts": False,
        "num_sgd_iter": 6, "vf_loss_coeff": 0.01, "observation_filter": "MeanStdFilter",
        "model": {"fcnet_hiddens": [32], "fcnet_activation": "linear", "vf_share_layers": False},
        "num_workers": 0, "rollout_fragment_length": 10, "train_batch_size": 20,
        "min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 20,
    }, "CartPole-v1")
    try:
        before = trainer.get_policy().get_weights()
        for _ in range(2):
            result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert {"grad_gnorm", "grad_gnorm_1", "vf_loss", "total_loss"} <= set(stats)
        assert result["num_target_updates"] == 2
        after = trainer.get_policy().get_weights()
        assert not np.allclose(after["value_out/kernel"], before["value_out/kernel"])
        assert not np.allclose(after["logits/kernel"], before["logits/kernel"])
    finally:
        trainer.stop()


def test_1x_appo_tuned_examples_keep_their_settings():
    from pathlib import Path

    from rlstack.experiments import _experiment_config, _first_values, load_experiments

    experiments = load_experiments(str(Path(__file__).resolve().parents[1] / "fixtures" / "tuned_1x" / "appo.yaml"))

    def merged(name):
        return APPOTrainer.merge_and_validate(_first_values(_experiment_config(experiments[name], None)))

    assert merged("cartpole-appo-vtrace")["vtrace_drop_last_ts"] is False
    separate = merged("cartpole-appo-vtrace-separate-losses")
    assert (separate["_separate_vf_optimizer"], separate["_lr_vf"]) == (True, 0.00075)
    assert "_tf_policy_handles_more_than_one_loss" not in separate  # accepted, and the learners need no switch
    pendulum = merged("pendulum-appo-vtrace")
    assert (pendulum["minibatch_buffer_size"], pendulum["num_sgd_iter"]) == (16, 10)
