"""A2C and IMPALA train use_attention (GTrXL) models through the same sequences as LSTMs
(IMPALA: whole fragments in row order, time-major; its GTrXL also reads the last 2
actions and 3 rewards). Its own module: test_attention.py's trainers hold the 2 CPUs
while its module lasts."""

from __future__ import annotations

import numpy as np
import pytest

from tests.integration.test_attention import _config
from tests.integration.test_lstm import FRAMEWORK_MODULES


@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.parametrize("algorithm", ["A2C", "IMPALA"])
def test_a2c_and_impala_train_with_attention(ray_local, framework, algorithm):
    pytest.importorskip(FRAMEWORK_MODULES[framework])
    from rlstack.trainers.common.registry import get_trainer_class

    config = _config(framework, num_workers=1 if algorithm == "IMPALA" else 0, rollout_fragment_length=50,
                     train_batch_size=200, evaluation_interval=None, evaluation_num_workers=0,
                     min_time_s_per_reporting=0)
    for key in ("sgd_minibatch_size", "num_sgd_iter"):
        config.pop(key)
    if algorithm == "IMPALA":
        config["model"].update(attention_use_n_prev_actions=2, attention_use_n_prev_rewards=3)
    trainer = get_trainer_class(algorithm)(config, "RepeatAfterMeEnv")
    try:
        before = trainer.get_policy().model.canonical_weights()
        for _ in range(20):  # IMPALA's learner thread may not have learned after the first iteration
            result = trainer.train()
            if result["info"]["num_env_steps_trained"] >= 200:
                break
        after = trainer.get_policy().model.canonical_weights()
    finally:
        trainer.stop()
    assert result["info"]["num_env_steps_trained"] >= 200
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    assert not np.allclose(before["unit0/query"], after["unit0/query"])  # the attention itself learned
    if algorithm == "IMPALA":  # the embedding's rows of the previous actions and rewards learned too
        features = config["model"]["fcnet_hiddens"][-1]
        assert before["embed/kernel"].shape[0] == features + 2 * 2 + 3
        assert not np.allclose(before["embed/kernel"][features:], after["embed/kernel"][features:])
