"""Closed-form (hand-differentiated) gradients against autograd of loss(), per whole training step.

    python bench/closed_form.py [--rounds 5] [--only ppo-torch,dqn-torch,...]

For each case, builds two trainers in one process on RL-Zoo's settings (bench/ppo_cartpole.py's RL-Zoo preset and RLlib's PPO defaults,
bench/dqn_cartpole.py, bench/pendulum_offpolicy.py; ``num_workers`` 0, so an iteration is the
whole training step: sampling, replay, learning, target updates), one with its policy's
``use_fused_sgd`` on (the closed form) and one with it off (autograd of ``loss()``). After a
warm-up past ``learning_starts``, ``train()`` runs on the two alternately for ``--rounds``
rounds; each round's figure is env steps sampled per second of that call. Prints one JSON
line: per case, both paths' medians and the median (min, max) of the per-round ratios
closed form / autograd.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dqn_cartpole import RL_ZOO as DQN_RL_ZOO  # noqa: E402
from pendulum_offpolicy import RL_ZOO as PENDULUM_RL_ZOO  # noqa: E402
from ppo_cartpole import PRESETS as PPO_PRESETS  # noqa: E402

# An iteration of the off-policy cases: 400 env steps past a 1,000-step warm-up (their
# own warm-ups of 10,000 random steps would only time sampling).
OFF_POLICY_ITERATION = {"num_workers": 0, "min_sample_timesteps_per_reporting": 400, "min_time_s_per_reporting": 0,
                        "learning_starts": 1000}

CASES = {
    "ppo-torch": ("PPO", "CartPole-v1", {**PPO_PRESETS["rl-zoo"], "num_workers": 0, "framework": "torch"}),
    "ppo-tf": ("PPO", "CartPole-v1", {**PPO_PRESETS["rl-zoo"], "num_workers": 0, "framework": "tf"}),
    "ppo-defaults-torch": ("PPO", "CartPole-v1", {"num_workers": 0, "framework": "torch"}),
    "ppo-defaults-tf": ("PPO", "CartPole-v1", {"num_workers": 0, "framework": "tf"}),
    "dqn-torch": ("DQN", "CartPole-v1", {**DQN_RL_ZOO, **OFF_POLICY_ITERATION, "framework": "torch"}),
    "sac-torch": ("SAC", "Pendulum-v1", {**PENDULUM_RL_ZOO["SAC"], **OFF_POLICY_ITERATION, "framework": "torch"}),
    "td3-torch": ("TD3", "Pendulum-v1", {**PENDULUM_RL_ZOO["TD3"], **OFF_POLICY_ITERATION, "framework": "torch",
                                         "exploration_config": {**PENDULUM_RL_ZOO["TD3"]["exploration_config"],
                                                                "random_timesteps": 1000}}),
    "ddpg-torch": ("DDPG", "Pendulum-v1", {**PENDULUM_RL_ZOO["DDPG"], **OFF_POLICY_ITERATION, "framework": "torch",
                                           "exploration_config": {**PENDULUM_RL_ZOO["DDPG"]["exploration_config"],
                                                                  "random_timesteps": 1000}}),
}


def measure(algorithm: str, env: str, config: dict, rounds: int) -> dict:
    from rlstack.trainers.common.registry import get_trainer_class

    trainer_class = get_trainer_class(algorithm)
    trainers = {}
    for closed_form in (True, False):
        trainer = trainer_class(dict(config, seed=0), env=env)
        trainer.get_policy().use_fused_sgd = closed_form  # read at each learn_on_batch / first trace
        while trainer.train()["timesteps_total"] < config.get("learning_starts", 0) + 400:
            pass  # warm-up: past learning_starts, Adam state, TF tracing
        trainer.train()
        trainers[closed_form] = trainer
    rates: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for closed_form, trainer in trainers.items():
            start = time.perf_counter()
            result = trainer.train()
            rates[closed_form].append(result["timesteps_this_iter"] / (time.perf_counter() - start))
    for trainer in trainers.values():
        trainer.stop()
    ratios = [a / b for a, b in zip(rates[True], rates[False])]
    return {"closed_form": round(statistics.median(rates[True]), 1),
            "autograd": round(statistics.median(rates[False]), 1),
            "ratio": round(statistics.median(ratios), 3),
            "ratio_min_max": [round(min(ratios), 3), round(max(ratios), 3)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default=",".join(CASES))
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    out = {}
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        out[name] = measure(*CASES[name], args.rounds)
        print(name, out[name], file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "closed_form", "unit": "env steps sampled / s of a whole train()",
                      "summary": out}))


if __name__ == "__main__":
    main()
