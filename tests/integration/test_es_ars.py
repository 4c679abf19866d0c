"""ES and ARS end to end on a local Ray, in torch and TF, on tiny budgets: two
iterations with two actors (1.13's result keys, the minimums per iteration met, the
policy's weights moved, the filter statistics merged into the driver's), the noise table
read by the actors as a read-only view of the object store's one copy, and a checkpoint
restored with the same greedy actions and optimizer state; the model exports."""

from __future__ import annotations

import numpy as np
import pytest
import ray

from rlstack.trainers.ars import ARSTrainer
from rlstack.trainers.es import ESTrainer

OBSERVATIONS = np.random.default_rng(0).uniform(-0.5, 0.5, (20, 4)).astype(np.float32)
CONFIGS = {
    "ES": (ESTrainer, {"episodes_per_batch": 8, "train_batch_size": 50}),
    "ARS": (ARSTrainer, {"num_rollouts": 8, "rollouts_used": 2, "model": {"fcnet_hiddens": []}}),
}


@pytest.mark.parametrize("algo", ["ES", "ARS"])
def test_two_iterations_checkpoint_and_actions(ray_local, framework, algo, tmp_path):
    trainer_class, extra = CONFIGS[algo]
    config = {"framework": framework, "num_workers": 2, "noise_size": 200_000, "eval_prob": 0.3, "seed": 0,
              "model": {"fcnet_hiddens": [8]}, **extra}
    trainer = trainer_class(config, "CartPole-v1")
    before = trainer.get_policy().get_weights()
    first, second = trainer.train(), trainer.train()
    for result in (first, second):
        info = result["info"]
        assert info["episodes_this_iter"] == result["episodes_this_iter"] >= 8
        assert info["timesteps_this_iter"] == result["timesteps_this_iter"] > 0
        for key in ("weights_norm", "grad_norm", "update_ratio"):
            assert np.isfinite(info[key]) and info[key] > 0, key
    assert second["timesteps_total"] == first["timesteps_this_iter"] + second["timesteps_this_iter"]
    assert second["episodes_total"] == first["episodes_this_iter"] + second["episodes_this_iter"]
    if algo == "ES":
        assert first["timesteps_this_iter"] >= 50
    assert "episode_reward_mean" in second and "episode_reward_max" in second
    after = trainer.get_policy().get_weights()
    assert not np.allclose(before["logits/kernel"], after["logits/kernel"])
    np.testing.assert_array_equal(before["value_out/kernel"], after["value_out/kernel"])  # not searched
    filter_state = trainer.workers.local_worker().get_filter_state()
    assert int(filter_state["count"]) >= second["timesteps_total"]  # every actor's observations merged

    # The noise table: one object in the store; every actor holds a read-only view of it.
    views = ray.get([actor.noise_info.remote() for actor in trainer._actors])
    assert views == [{"owndata": False, "writeable": False, "size": 200_000}] * 2
    assert not trainer._noise.flags.owndata and not trainer._noise.flags.writeable

    action = trainer.compute_single_action(OBSERVATIONS[0], explore=False)
    assert action in (0, 1)
    exported = trainer.export_policy_model(str(tmp_path / "model"))  # the acting policy serves without rlstack
    assert any((tmp_path / "model").iterdir()), exported
    path = trainer.save(str(tmp_path / "checkpoint"))
    expected = [trainer.compute_single_action(obs, explore=False) for obs in OBSERVATIONS]
    optimizer_state = trainer.extra_checkpoint_arrays()
    trainer.stop()
    restored = trainer_class.from_checkpoint(path)
    assert [restored.compute_single_action(obs, explore=False) for obs in OBSERVATIONS] == expected
    for group, arrays in restored.extra_checkpoint_arrays().items():
        for name, value in arrays.items():
            np.testing.assert_array_equal(value, optimizer_state[group][name], err_msg=f"{group}/{name}")
    assert restored.train()["timesteps_total"] > second["timesteps_total"]
    restored.stop()
