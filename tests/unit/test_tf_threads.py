"""TensorFlow's thread pools: the learner takes one intra-op thread for models over vector
observations (faster on this project's machines, BENCHMARKS.md) and TF's default for
image models; rollout workers take one of each; ``local_tf_session_args`` /
``tf_session_args`` override, and a size the user set with ``tf.config.threading`` before
the first policy was built wins over all of them. TF sets its pools once per process, so each case runs in
a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import gymnasium as gym
    import numpy as np
    from rlstack.trainers.common.config import merge_config
    from rlstack.trainers.ppo import DEFAULT_CONFIG
    from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy
    from rlstack.models.tf.framework import tf
    case = json.loads(sys.argv[1])
    config = merge_config(DEFAULT_CONFIG, {"framework": "tf", **case["config"]}, "PPO")
    space = (gym.spaces.Box(0, 255, (42, 42, 3), np.uint8) if case["images"]
             else gym.spaces.Box(-1, 1, (4,), np.float32))
    if case["user"]:
        tf.config.threading.set_intra_op_parallelism_threads(case["user"])
    if case["remote"]:
        PPOTFPolicy.pin_threads(config)  # what a rollout worker does before building its policy
    PPOTFPolicy(space, gym.spaces.Discrete(2), config)  # builds variables: TF is running now
    print(json.dumps([tf.config.threading.get_intra_op_parallelism_threads(),
                      tf.config.threading.get_inter_op_parallelism_threads()]))
    """
)

CASES = {
    # name: (images, remote, config, user's intra-op threads, (intra, inter)); 0 is TF's
    # default of one per core.
    "learner, vector observations": (False, False, {}, None, (1, 0)),
    "learner, image observations": (True, False, {"model": {"dim": 42}}, None, (0, 0)),
    "learner, configured": (False, False, {"local_tf_session_args": {"intra_op_parallelism_threads": 2,
                                                                     "inter_op_parallelism_threads": 3}}, None, (2, 3)),
    "rollout worker": (False, True, {"local_tf_session_args": {"intra_op_parallelism_threads": 2}}, None, (1, 1)),
    "learner, the user's tf.config.threading": (False, False, {}, 2, (2, 0)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_thread_pools(name):
    pytest.importorskip("tensorflow")
    images, remote, config, user, expected = CASES[name]
    case = json.dumps({"images": images, "remote": remote, "config": config, "user": user})
    proc = subprocess.run([sys.executable, "-c", SCRIPT, case], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tuple(json.loads(proc.stdout.splitlines()[-1])) == expected
