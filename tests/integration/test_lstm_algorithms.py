"""A2C, A3C and IMPALA with use_lstm in trainers: two iterations each learn the LSTM's
weights, and the trainer acts with state; A3C (workers compute the gradients) and IMPALA
(a learner thread on fragments in row order) with the previous action and reward too.
(Apart from test_lstm.py, whose module-scoped trainers hold the CPUs these trainers'
workers need.)"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("algorithm", ["A2C", "A3C", "IMPALA"])
def test_a2c_a3c_and_impala_train_with_use_lstm(algorithm, ray_local):
    pytest.importorskip("torch")
    from rlstack.trainers.common.registry import get_trainer_class

    prev = algorithm != "A2C"
    config = {"num_workers": 1, "rollout_fragment_length": 50, "seed": 0, "microbatch_size": 40,
              "model": {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 10, "fcnet_hiddens": [16],
                        "lstm_use_prev_action": prev, "lstm_use_prev_reward": prev}}
    if algorithm == "A2C":
        config["train_batch_size"] = 100
    if algorithm == "IMPALA":  # a learner thread fed by an asynchronously sampling worker
        config.update(train_batch_size=100, min_time_s_per_reporting=0)
        del config["microbatch_size"]
    trainer = get_trainer_class(algorithm)(config, "StatelessCartPole")
    try:
        before = trainer.get_policy().get_weights()["lstm/kernel"].copy()
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] > 0
        assert not np.allclose(trainer.get_policy().get_weights()["lstm/kernel"], before)
        action, state, _ = trainer.compute_single_action(np.zeros(2, np.float32),
                                                         trainer.get_policy().get_initial_state(),
                                                         prev_action=1, prev_reward=1.0)
        assert [value.shape for value in state] == [(8,), (8,)]
        if prev:  # the kernel's rows of the previous action and reward learned too
            assert not np.allclose(trainer.get_policy().get_weights()["lstm/kernel"][16:], before[16:])
    finally:
        trainer.stop()
