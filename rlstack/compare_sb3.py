"""Stable-Baselines3 reference rows for ``rlstack compare --with-sb3``.

Each SB3 run is a child process (``python -m rlstack.compare_sb3 JSON``, so its memory is
its own) that trains SB3's algorithm of the same name with RL-Zoo's hyper-parameters where
RL-Zoo has them for the env (:data:`RL_ZOO`), SB3's defaults otherwise, and writes what an
rlstack trial writes for :mod:`rlstack.analysis`: ``params.json`` and one ``result.json``
row every :data:`REPORT_EVERY` env steps and one when it stops (``timesteps_total``, ``time_total_s``,
``episode_reward_mean`` over the last 100 episodes as rlstack and SB3 both smooth it,
``perf/rss_mb``) into ``<out>/sb3/SB3-<ALGO>_<env>_seed<k>/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rlstack.errors import ConfigError, pip_install

SB3_ALGORITHMS = ("PPO", "A2C", "DQN", "SAC", "TD3", "DDPG")
REPORT_EVERY = 1000  # env steps between two result rows
STOP_KEYS = ("episode_reward_mean", "timesteps_total", "time_total_s")

# RL-Zoo's tuned hyper-parameters (rl-baselines3-zoo's hyperparams/*.yml) for the pairs
# rlstack's tuned examples cover: (n_envs, SB3 keyword arguments). "lin_X" is a linear
# decay from X to 0 over the run, as RL-Zoo writes it.
RL_ZOO: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {
    ("PPO", "CartPole-v1"): (8, {"n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98,
                                 "n_epochs": 20, "ent_coef": 0.0, "learning_rate": "lin_0.001",
                                 "clip_range": "lin_0.2"}),
    ("A2C", "CartPole-v1"): (8, {"ent_coef": 0.0}),
    ("DQN", "CartPole-v1"): (1, {"learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
                                 "learning_starts": 1000, "gamma": 0.99, "target_update_interval": 10,
                                 "train_freq": 256, "gradient_steps": 128, "exploration_fraction": 0.16,
                                 "exploration_final_eps": 0.04, "policy_kwargs": {"net_arch": [256, 256]}}),
    ("SAC", "Pendulum-v1"): (1, {"learning_rate": 1e-3}),
}


def check_available(algorithms: list[str], stop: dict[str, Any]) -> list[str]:
    """The algorithms of ``algorithms`` SB3 has; raises when SB3 is missing or ``stop``
    cannot end an SB3 run."""
    try:
        import stable_baselines3  # noqa: F401
    except ImportError as err:
        raise ConfigError(f"--with-sb3 needs Stable-Baselines3: {pip_install('sb3')}.") from err
    unknown = sorted(set(stop) - set(STOP_KEYS))
    if unknown:
        raise ConfigError(f"--with-sb3: SB3 runs stop on {', '.join(STOP_KEYS)}; the stop criteria also name "
                          f"{unknown}. Drop those keys or leave out --with-sb3.")
    if "timesteps_total" not in stop and "time_total_s" not in stop:
        raise ConfigError("--with-sb3: the stop criteria need timesteps_total or time_total_s, or an SB3 run that "
                          "never reaches the reward would not end.")
    return [a for a in algorithms if a.upper() in SB3_ALGORITHMS]


def source(algorithm: str, env: str) -> str:
    """Where an SB3 row's hyper-parameters come from (the table's ``config`` column)."""
    return "RL-Zoo" if (algorithm.upper(), env) in RL_ZOO else "SB3 defaults"


def run(algorithm: str, env: str, seed: int, stop: dict[str, Any], out_dir: str | os.PathLike,
        timeout_s: float = 3600) -> Path:
    """Trains one SB3 run in a child process; returns its trial directory."""
    trial = Path(out_dir) / "sb3" / f"SB3-{algorithm.upper()}_{env}_seed{seed}"
    spec = {"algorithm": algorithm.upper(), "env": env, "seed": seed, "stop": stop, "trial": str(trial)}
    completed = subprocess.run([sys.executable, "-m", "rlstack.compare_sb3", json.dumps(spec)],
                               capture_output=True, text=True, timeout=timeout_s)
    if completed.returncode != 0:
        raise RuntimeError(f"SB3 {algorithm} on {env} (seed {seed}) failed:\n{completed.stderr[-3000:]}")
    return trial


def _schedule(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress_remaining: progress_remaining * start  # SB3 counts progress from 1 down to 0
    return value


def _child(spec: dict[str, Any]) -> None:
    import numpy as np
    import psutil
    import stable_baselines3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    algorithm, env, seed, stop = spec["algorithm"], spec["env"], spec["seed"], spec["stop"]
    n_envs, kwargs = RL_ZOO.get((algorithm, env), (1, {}))
    trial = Path(spec["trial"])
    trial.mkdir(parents=True, exist_ok=True)
    config = {"framework": "torch", "seed": seed, "env": env, "library": "stable-baselines3 "
              + stable_baselines3.__version__, "n_envs": n_envs, "hyperparameters": source(algorithm, env), **kwargs}
    (trial / "params.json").write_text(json.dumps(config, default=str))
    results = open(trial / "result.json", "w")
    start = time.time()
    process = psutil.Process()
    state = {"reported": 0, "iteration": 0}

    class Report(BaseCallback):
        def _on_step(self) -> bool:
            steps = int(self.model.num_timesteps)
            buffer = self.model.ep_info_buffer
            reward = float(np.mean([e["r"] for e in buffer])) if buffer else float("nan")
            elapsed = time.time() - start
            done = (reward >= stop.get("episode_reward_mean", float("inf"))
                    or steps >= stop.get("timesteps_total", float("inf"))
                    or elapsed >= stop.get("time_total_s", float("inf")))
            if not done and steps - state["reported"] < REPORT_EVERY:
                return True
            state["reported"], state["iteration"] = steps, state["iteration"] + 1
            results.write(json.dumps({"training_iteration": state["iteration"], "timesteps_total": steps,
                                      "time_total_s": elapsed, "episode_reward_mean": reward,
                                      "episodes_total": len(buffer), "perf": {"rss_mb": process.memory_info().rss
                                                                             / 2**20},
                                      "config": config}) + "\n")
            results.flush()
            return not done

    model = getattr(stable_baselines3, algorithm)(
        "MlpPolicy", make_vec_env(env, n_envs=n_envs, seed=seed), seed=seed, device="cpu", verbose=0,
        **{k: _schedule(v) for k, v in kwargs.items()})
    model.learn(total_timesteps=int(stop.get("timesteps_total", 10**9)) + REPORT_EVERY, callback=Report())
    results.close()


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
