"""The peer systems, each run in its own child process by bench/ppo_cartpole.py.

* RLlib 2.60 (new API stack), ``PPOConfig`` defaults with ``num_env_runners`` runners.
* Stable-Baselines3 with RL-Zoo's CartPole-v1 PPO hyper-parameters.

Each prints one JSON line in the same shape as rlstack's child.
"""

from __future__ import annotations

import json
import os
import time

from harness import seconds_since_process_start


def rllib_returns_recorder(last_n: int):  # noqa: ANN201 - (callback class, function)
    """An RLlib callback class that appends every finished episode's end time and return
    to a file per env runner, and a function that reads the mean of the last ``last_n``
    returns in the order the episodes ended (see :func:`rllib_child` for why RLlib's own
    metric is not used). Also used by bench/ppo_lstm.py."""
    import glob
    import tempfile

    from ray.rllib.callbacks.callbacks import RLlibCallback

    returns_dir = tempfile.mkdtemp(prefix="rllib-returns-")

    class RecordReturns(RLlibCallback):
        def on_episode_end(self, *, episode, prev_episode_chunks=None, **kwargs) -> None:  # noqa: ANN001
            import os as _os
            import time as _time

            # get_return() counts only this chunk's rewards: an episode that spanned
            # several sample() calls has its earlier chunks in prev_episode_chunks.
            total = float(episode.get_return()) + sum(float(c.get_return()) for c in prev_episode_chunks or [])
            with open(_os.path.join(returns_dir, f"{_os.getpid()}.txt"), "a") as f:
                f.write(f"{_time.time()!r} {total!r}\n")

    def last_n_mean() -> float:
        ended = []
        for path in glob.glob(os.path.join(returns_dir, "*.txt")):
            with open(path) as f:
                ended += [tuple(map(float, line.split())) for line in f if line.strip()]
        ended.sort()
        return sum(r for _, r in ended[-last_n:]) / len(ended[-last_n:]) if ended else float("nan")

    return RecordReturns, last_n_mean


def rllib_child(workers: int, target: float, max_steps: int, seed: int, max_wall: float = float("inf")) -> None:
    """RLlib 2.60 PPO with its defaults on CartPole-v1, until the mean return of the last
    100 episodes >= target.

    RLlib's own ``episode_return_mean`` is not that mean: each env runner keeps a window
    of ``100 / num_env_runners`` episodes and the algorithm merges the runners' windows,
    and it reports >= 450 with fewer env steps than 100 episodes of ~450 steps take. So
    every finished episode's return is recorded here (a callback appends it to a file
    per env runner) and the run stops when the last 100 of them, in the order they
    ended, average >= target: the criterion rlstack (``metrics_smoothing_episodes``
    100) and SB3 (``ep_info_buffer``) stop on. The first time RLlib's own metric
    reached the target is reported too (``own_metric_*``). ``max_wall`` bounds the
    training seconds (the run then reports ``reached: false``).
    """
    from ray.rllib.algorithms.ppo import PPOConfig

    RecordReturns, last_100_mean = rllib_returns_recorder(100)

    try:
        from rlstack.trainers.common.ray_start import init_local_ray
    except ImportError:  # bench/check.py's REF builds from before trainers/common/
        from rlstack.trainers.ray_start import init_local_ray

    init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=workers)
        .framework("torch")
        .callbacks(RecordReturns)
        .debugging(seed=seed)
    )
    algo = config.build_algo()
    ready = seconds_since_process_start()
    train_start = time.time()
    ret, steps, iterations = float("nan"), 0, 0
    own_metric = None
    while True:
        result = algo.train()
        iterations += 1
        runners = result.get("env_runners", {})
        steps = result.get("num_env_steps_sampled_lifetime") or runners.get("num_env_steps_sampled_lifetime", 0)
        if own_metric is None and runners.get("episode_return_mean", float("nan")) >= target:
            own_metric = {"own_metric_wall_s": round(seconds_since_process_start(), 2),
                          "own_metric_env_steps": int(steps)}
        ret = last_100_mean()
        if ret >= target or steps >= max_steps or time.time() - train_start >= max_wall:
            break
    wall = seconds_since_process_start()
    print(json.dumps({
        "reached": bool(ret >= target), "wall_s": round(wall, 2), "start_to_ready_s": round(ready, 2),
        "env_steps": int(steps), "iterations": iterations,
        "env_steps_per_s": round(steps / (time.time() - train_start), 1), "final_reward": round(float(ret), 1),
        **(own_metric or {"own_metric_wall_s": None, "own_metric_env_steps": None}),
    }))
    algo.stop()


def sb3_child(target: float, max_steps: int, seed: int) -> None:
    """SB3 PPO with RL-Zoo's CartPole-v1 hyper-parameters, until the mean return of the
    last 100 episodes >= target (SB3's own ep_info_buffer)."""
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    def linear(start: float):
        return lambda progress_remaining: progress_remaining * start

    class StopAtReward(BaseCallback):
        def _on_step(self) -> bool:
            buffer = self.model.ep_info_buffer
            return not (len(buffer) > 0 and np.mean([e["r"] for e in buffer]) >= target)

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2), seed=seed, device="cpu", verbose=0)
    ready = seconds_since_process_start()
    train_start = time.time()
    # RL-Zoo trains CartPole-v1 for 1e5 steps; the schedules run over that horizon.
    model.learn(total_timesteps=min(max_steps, 100_000), callback=StopAtReward())
    wall = seconds_since_process_start()
    buffer = model.ep_info_buffer
    ret = float(np.mean([e["r"] for e in buffer])) if buffer else float("nan")
    steps = int(model.num_timesteps)
    print(json.dumps({
        "reached": bool(ret >= target), "wall_s": round(wall, 2), "start_to_ready_s": round(ready, 2),
        "env_steps": steps, "iterations": steps // 256,
        "env_steps_per_s": round(steps / (time.time() - train_start), 1), "final_reward": round(ret, 1),
    }))
