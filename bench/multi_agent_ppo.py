"""Multi-agent PPO on MultiAgentCartPole (4 agents, 2 policies): env steps/s while
sampling and while learning, and wall seconds from process start until every policy's
mean return is 150 — rlstack (torch and tf) and RLlib 2.60 (new API stack, its
multi-agent PPO with the same hyper-parameters) side by side (the bar: rlstack's
env steps/s >= 3x RLlib's).

    python bench/multi_agent_ppo.py --runs 3 --max-wall 120            # the comparison BENCHMARKS.md quotes
    python bench/multi_agent_ppo.py --parts sampling --runs 3          # sampling throughput only
    python bench/multi_agent_ppo.py --smoke --runs 1                   # plumbing check, tiny step counts

Run it with the bench venv's Python (``make .venv/.installed-bench``: RLlib 2.60 beside
rlstack). Each round runs, for every system in turn (``--systems``, default
``rlstack-torch,rlstack-tf,rllib``; interleaved so that machine noise hits every system
alike; round *i* uses seed *i − 1*), two fresh child processes through bench/harness.py:

* **learning**: rlstack runs the tuned example ``tune_configs/multi-agent-cartpole-ppo.yaml``
  (read with ``rlstack.experiments.load_experiments``; only ``framework``, ``seed`` and
  ``metrics_smoothing_episodes`` = ``--last-n`` are set on top) with a plain loop:
  ``PPOTrainer(config, env)``, ``trainer.train()`` until every policy's
  ``policy_reward_mean`` is >= ``--target`` (150, the YAML's own stop value) in the same
  iteration, or ``--max-steps`` env steps, or ``--max-wall`` seconds of training (then
  ``reached: false``). That YAML: 4 agents, policies pol0 / pol1 (agent i -> pol<i % 2>),
  one rollout worker, train batch 2,000 env steps, 6 SGD epochs of minibatch 128, lr 3e-4,
  gamma 0.99, vf_loss_coeff 0.01, MeanStdFilter, a 32-unit linear layer shared by policy
  and value heads; PPO's other values are classic 1.13's (PPOTrainer's DEFAULT_CONFIG).
  RLlib runs ``PPOConfig`` with every one of those values under RLlib's names (the table
  is :func:`rllib_settings`; the parent reads the values from rlstack's merged config, so
  ``--smoke``'s shrunken settings reach both). Per-policy returns for RLlib: a callback
  records, for every finished episode, each agent's return (summed over the episode's
  chunks: ``on_episode_end`` gets the last chunk and ``prev_episode_chunks``) under the
  policy it was mapped to; a policy's figure is the mean over its agents' returns in the
  last N episodes that ended — what rlstack's ``policy_reward_mean`` is (1.13's: one
  value per agent per episode, over the ``metrics_smoothing_episodes`` window). RLlib's own
  ``module_episode_returns_mean`` sums the returns of the agents mapped to a module (two
  here), so the first time it reached 2 x target for every module is reported beside it
  (``own_metric_*``). The record gives wall seconds from process start, env steps sampled
  (rlstack ``num_env_steps_sampled``, RLlib ``num_env_steps_sampled_lifetime``), env
  steps/s over the training loop, and per policy the wall seconds and env steps when its
  mean first reached the target (``<policy>_wall_s``, ``<policy>_env_steps``).
* **sampling** (no learning, as bench/sampling.py): one rollout worker / env runner in the
  child's own process, one env (4 agents), the untrained policies acting, one thread
  (OMP_NUM_THREADS=1, as Ray gives a one-CPU worker); a warm-up round, then
  ``--sample-rounds`` rounds of ``--sample-steps`` env steps (2,000: one train batch).
  rlstack: a ``RolloutWorker`` built as the trainer's remote worker is (worker_index 1, the
  YAML's config, ``policy_specs`` from ``rlstack.trainers.common.multi_agent.policy_specs``; so it
  acts in numpy as a remote worker does), ``sample()`` (200-step fragments, PPO's
  postprocessing and GAE included) until the round's steps are in; RLlib:
  ``MultiAgentEnvRunner.sample(num_timesteps=...)`` of an algorithm with no remote env
  runners (its env-to-module connectors, MeanStdFilter among them, and module-to-env
  connectors included; GAE runs in RLlib's learner). Agent steps/s are reported beside env
  steps/s.

An env step is one ``step()`` of the multi-agent env (all agents still running act in it),
the unit both systems count ``train_batch_size`` and their step counters in (both
``count_steps_by: env_steps``).

The env: rlstack's MultiAgentCartPole is 1.13's — 4 independent CartPole-v1 dynamics
under a 200-step time limit (1.13's CartPole-v0); the episode ends when every agent is
done. RLlib's ``ray.rllib.examples.envs.classes.multi_agent.MultiAgentCartPole`` is
``make_multi_agent("CartPole-v1")``, 500-step episodes; RLlib runs here
``make_multi_agent(lambda cfg: gym.make("CartPole-v1", max_episode_steps=200))``, the same
env as rlstack's, registered as ``MultiAgentCartPole-200``.

What RLlib 2.60 cannot be given as rlstack has it:

* MeanStdFilter: rlstack (as 1.13) keeps one filter per policy; RLlib's MeanStdFilter
  connector (``multi_agent=True``) keeps one per agent (four here). Both clip at 10.
* Initial weights: rlstack's fully connected net initialises as 1.13's (normc, std 1.0
  for the hidden layer, 0.01 for the heads); RLlib's default model keeps torch's default
  initialisers (not set here: ``fcnet_kernel_initializer`` and its head counterpart take
  none of 1.13's normc). The layers are the same (4 -> 32 linear, then a 2-logit and a
  1-value head on it; 259 trainable parameters per policy in both, given in the records
  as ``params``).
* Minibatches: rlstack runs each policy's SGD on its own rows (128-row minibatches,
  ``num_sgd_iter`` passes); RLlib steps all modules together, 128 rows of each module per
  minibatch, until the module with the fewest rows has had ``num_epochs`` passes (so a
  module with more rows gets a few more minibatches).
* Env seeds: RLlib's ``make_multi_agent`` resets all four CartPoles with the same seed on
  the first reset (identical first states); rlstack seeds each sub-env.

Prints one JSON line: per system the medians (min-max) of every figure, and per round the
ratios rlstack / RLlib (sampling env steps/s, learning env steps/s, wall seconds) against
the issue's bar. ``--smoke`` shrinks every step count (batch 400, 2 epochs of 64, 800 env
steps of training, 2 x 200 sampled) to check the plumbing in about a minute per system;
its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import ratios_to_peer, run_child, seconds_since_process_start, summarise_systems  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TUNED_YAML = ROOT / "tune_configs" / "multi-agent-cartpole-ppo.yaml"
POLICIES = ("pol0", "pol1")
# 1.13's CartPole-v0 time limit (rlstack's MultiAgentCartPole), applied to RLlib's env too.
MAX_EPISODE_STEPS = 200
# The learning runs under --smoke: two tiny iterations.
SMOKE_TRAINING = {"train_batch_size": 400, "sgd_minibatch_size": 64, "num_sgd_iter": 2}
POLICY_PATHS = {"torch": "rlstack.trainers.ppo.ppo_torch_policy:PPOTorchPolicy",
                "tf": "rlstack.trainers.ppo.ppo_tf_policy:PPOTFPolicy"}


# ----- rlstack --------------------------------------------------------------------------


def tuned_experiment() -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(env, config, stop) of the tuned YAML's one experiment."""
    from rlstack.experiments import load_experiments

    spec = next(iter(load_experiments(str(TUNED_YAML)).values()))
    return spec["env"], dict(spec.get("config", {})), dict(spec.get("stop", {}))


def rlstack_training_config(framework: str, seed: int, last_n: int, smoke: bool) -> tuple[str, dict[str, Any]]:
    """(env, config) of the learning run: the tuned YAML's config with the framework, the
    round's seed and the last-N window on top (and --smoke's tiny batches)."""
    env, config, _ = tuned_experiment()
    config.update(framework=framework, seed=seed, metrics_smoothing_episodes=last_n)
    if smoke:
        config.update(SMOKE_TRAINING)
    return env, config


def _num_params(weights: dict[str, Any]) -> int:
    return int(sum(getattr(value, "size", 0) for value in weights.values()))


def rlstack_learning_child(args: argparse.Namespace) -> None:
    from rlstack.trainers.ppo import PPOTrainer

    env, config = rlstack_training_config(args.framework, args.seed, args.last_n, args.smoke)
    if config.get("num_workers", 0) > 0:
        from rlstack.trainers.common.ray_start import init_local_ray

        init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    trainer = PPOTrainer(config, env)
    ready = seconds_since_process_start()
    train_start = time.time()
    sample_s = learn_s = 0.0
    first: dict[str, dict[str, Any]] = {}
    means: dict[str, float] = {}
    while True:
        result = trainer.train()
        sample_s += result["timers"]["sample_time_ms"] / 1000
        learn_s += result["timers"]["learn_time_ms"] / 1000
        steps = result["num_env_steps_sampled"]
        means = {pid: float(result["policy_reward_mean"].get(pid, float("nan"))) for pid in POLICIES}
        for pid, value in means.items():
            if pid not in first and value >= args.target:
                first[pid] = {"wall_s": round(seconds_since_process_start(), 2), "env_steps": int(steps)}
        reached = all(value >= args.target for value in means.values())
        if reached or steps >= args.max_steps or time.time() - train_start >= args.max_wall:
            break
    train_s = time.time() - train_start
    wall = seconds_since_process_start()
    print(json.dumps({
        "reached": bool(reached), "wall_s": round(wall, 2), "start_to_ready_s": round(ready, 2),
        "env_steps": int(steps), "agent_steps": int(result.get("num_agent_steps_sampled", 0)),
        "iterations": result["training_iteration"], "env_steps_per_s": round(steps / train_s, 1),
        "sample_s": round(sample_s, 2), "learn_s": round(learn_s, 2),
        "final_reward": {pid: round(value, 1) for pid, value in means.items()},
        **_first_reached(first), "params": _num_params(trainer.get_policy(POLICIES[0]).get_weights()),
        "config_source": str(TUNED_YAML.relative_to(ROOT)),
    }))
    trainer.stop()


def _first_reached(first: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per policy the wall seconds and env steps when its mean first reached the target
    (None where it never did)."""
    out: dict[str, Any] = {}
    for pid in POLICIES:
        out[f"{pid}_wall_s"] = first.get(pid, {}).get("wall_s")
        out[f"{pid}_env_steps"] = first.get(pid, {}).get("env_steps")
    return out


def rlstack_sampling_child(args: argparse.Namespace) -> None:
    from rlstack.evaluation.rollout_worker import RolloutWorker
    from rlstack.trainers.common.multi_agent import policy_specs
    from rlstack.trainers.ppo import PPOTrainer

    env, config = rlstack_training_config(args.framework, args.seed, args.last_n, smoke=False)
    config = PPOTrainer.merge_and_validate(config)
    # worker_index=1: a rollout worker as the trainer's WorkerSet builds its remote
    # workers (acting in numpy where that applies), in this process.
    worker = RolloutWorker(env, POLICY_PATHS[args.framework], config, worker_index=1, num_workers=1,
                           postprocess_fn=PPOTrainer.postprocess_fn,
                           numpy_policy_class=getattr(PPOTrainer, "numpy_policy_class", None),
                           policy_specs=policy_specs(config, "PPO"))
    worker.sample()  # warm-up
    done = agent_steps = 0
    start = time.perf_counter()
    for _ in range(args.sample_rounds):
        got = 0
        while got < args.sample_steps:
            batch = worker.sample()
            got += batch.env_steps()
            agent_steps += batch.agent_steps()
        done += got
    elapsed = time.perf_counter() - start
    weights = worker.get_weights()
    print(json.dumps({
        "sampling_env_steps_per_s": round(done / elapsed, 1),
        "sampling_agent_steps_per_s": round(agent_steps / elapsed, 1),
        "env_steps": done, "agent_steps": agent_steps, "rounds": args.sample_rounds,
        "rollout_fragment_length": config["rollout_fragment_length"],
        "acting_policies": sorted({type(policy).__name__ for policy in worker.policies.acting.values()}),
        "params": _num_params(weights[POLICIES[0]]),
    }))


# ----- RLlib 2.60 -----------------------------------------------------------------------


RLLIB_ENV_NAME = "MultiAgentCartPole-200"


def rllib_multi_agent_cartpole(config: Any = None) -> Any:
    """``num_agents`` CartPole-v1s under a 200-step time limit: rlstack's (1.13's)
    MultiAgentCartPole, built with RLlib's ``make_multi_agent`` (RLlib's own
    MultiAgentCartPole has CartPole-v1's 500-step episodes)."""
    import gymnasium as gym
    from ray.rllib.env.multi_agent_env import make_multi_agent

    cls = make_multi_agent(lambda _: gym.make("CartPole-v1", max_episode_steps=MAX_EPISODE_STEPS))
    return cls(config)


def agent_id_mod_2(agent_id: Any, episode: Any = None, **kwargs: Any) -> str:
    """Agent ``i`` -> ``"pol<i % 2>"``, rlstack.examples.policy_mapping's, with RLlib
    2.60's signature."""
    return f"pol{int(agent_id) % 2}"


def rllib_settings(cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """rlstack's merged PPO config (1.13 names) as RLlib 2.60 ``PPOConfig`` arguments, per
    method: ``{"training": {...}, "env_runners": {...}, "model": {...}, "env_config":
    {...}}`` (JSON-able; the parent computes it and hands it to the RLlib children)."""
    model = cfg["model"]
    return {
        "training": {
            "gamma": cfg["gamma"], "lr": cfg["lr"],
            # One local learner: the per-learner batch is the whole train batch (env steps).
            "train_batch_size_per_learner": cfg["train_batch_size"],
            "minibatch_size": cfg["sgd_minibatch_size"], "num_epochs": cfg["num_sgd_iter"],
            "shuffle_batch_per_epoch": True,
            "clip_param": cfg["clip_param"], "lambda_": cfg["lambda"], "kl_coeff": cfg["kl_coeff"],
            "kl_target": cfg["kl_target"], "use_kl_loss": cfg["kl_coeff"] > 0,
            "vf_loss_coeff": cfg["vf_loss_coeff"], "vf_clip_param": cfg["vf_clip_param"],
            "entropy_coeff": cfg["entropy_coeff"], "grad_clip": cfg["grad_clip"],
            "use_critic": cfg["use_critic"], "use_gae": cfg["use_gae"],
        },
        "env_runners": {
            "num_env_runners": cfg["num_workers"], "num_envs_per_env_runner": cfg["num_envs_per_worker"],
            "rollout_fragment_length": cfg["rollout_fragment_length"], "batch_mode": cfg["batch_mode"],
        },
        "model": {
            "fcnet_hiddens": list(model["fcnet_hiddens"]), "fcnet_activation": model["fcnet_activation"],
            "vf_share_layers": bool(model["vf_share_layers"]), "head_fcnet_hiddens": [],
        },
        "env_config": dict(cfg["env_config"]),
        "observation_filter": cfg["observation_filter"],
        "count_steps_by": cfg["multiagent"]["count_steps_by"],
        "metrics_smoothing_episodes": cfg["metrics_smoothing_episodes"],
    }


def rllib_config(settings: dict[str, Any], seed: int, num_env_runners: int | None = None):
    """``PPOConfig`` on the new API stack with ``settings`` (:func:`rllib_settings`)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env

    # A registered name (RLlib takes an env class or a name, not a creator function); the
    # env runners read the creator from Ray's registry.
    register_env(RLLIB_ENV_NAME, rllib_multi_agent_cartpole)
    runners = dict(settings["env_runners"])
    if num_env_runners is not None:
        runners["num_env_runners"] = num_env_runners
    if settings["observation_filter"] == "MeanStdFilter":
        from ray.rllib.connectors.env_to_module import MeanStdFilter

        # One filter per agent (RLlib's connector; rlstack's are per policy).
        runners["env_to_module_connector"] = lambda env, spaces=None, device=None: MeanStdFilter(multi_agent=True)
    elif settings["observation_filter"] != "NoFilter":
        raise ValueError(f"no RLlib counterpart for observation_filter {settings['observation_filter']!r}")
    return (
        PPOConfig()
        .environment(RLLIB_ENV_NAME, env_config=settings["env_config"])
        .multi_agent(policies=set(POLICIES), policy_mapping_fn=agent_id_mod_2,
                     count_steps_by=settings["count_steps_by"])
        .env_runners(**runners)
        .framework("torch")
        .rl_module(model_config=DefaultModelConfig(**settings["model"]))
        .training(**settings["training"])
        .reporting(metrics_num_episodes_for_smoothing=settings["metrics_smoothing_episodes"])
        .debugging(seed=seed)
    )


def rllib_policy_returns_recorder(last_n: int):  # noqa: ANN201 - (callback class, function)
    """An RLlib callback class that appends, for every finished episode, its end time and
    each agent's return by policy to a file per env runner, and a function that gives per
    policy the mean over its agents' returns in the last ``last_n`` episodes that ended
    (rlstack's ``policy_reward_mean``)."""
    import glob
    import tempfile

    from ray.rllib.callbacks.callbacks import RLlibCallback

    returns_dir = tempfile.mkdtemp(prefix="rllib-ma-returns-")

    class RecordPolicyReturns(RLlibCallback):
        def on_episode_end(self, *, episode, prev_episode_chunks=None, **kwargs) -> None:  # noqa: ANN001
            import json as _json
            import os as _os
            import time as _time

            # The episode's last chunk and its earlier chunks (each get_return() counts
            # only its own chunk's rewards).
            by_agent: dict[str, list] = {}
            for chunk in [episode, *(prev_episode_chunks or [])]:
                for agent_id, agent_episode in chunk.agent_episodes.items():
                    entry = by_agent.setdefault(str(agent_id), [agent_episode.module_id, 0.0])
                    entry[1] += float(agent_episode.get_return())
            returns: dict[str, list[float]] = {}
            for module_id, value in by_agent.values():
                returns.setdefault(str(module_id), []).append(value)
            with open(_os.path.join(returns_dir, f"{_os.getpid()}.txt"), "a") as f:
                f.write(_json.dumps({"t": _time.time(), "returns": returns}) + "\n")

    def last_n_means() -> dict[str, float]:
        ended = []
        for path in glob.glob(os.path.join(returns_dir, "*.txt")):
            with open(path) as f:
                ended += [json.loads(line) for line in f if line.strip()]
        ended.sort(key=lambda e: e["t"])
        values: dict[str, list[float]] = {pid: [] for pid in POLICIES}
        for episode in ended[-last_n:]:
            for pid, returns in episode["returns"].items():
                values.setdefault(pid, []).extend(returns)
        return {pid: sum(v) / len(v) if v else float("nan") for pid, v in values.items()}

    return RecordPolicyReturns, last_n_means


def _rllib_params(module: Any) -> int:
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))


def rllib_learning_child(args: argparse.Namespace) -> None:
    """Until every policy's mean over the last N episodes is >= target (rlstack's rule)."""

    settings = json.loads(args.rllib_settings)
    RecordPolicyReturns, last_n_means = rllib_policy_returns_recorder(args.last_n)
    from rlstack.trainers.common.ray_start import init_local_ray

    init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    algo = rllib_config(settings, args.seed).callbacks(RecordPolicyReturns).build_algo()
    ready = seconds_since_process_start()
    train_start = time.time()
    steps = iterations = 0
    agents_per_policy = {pid: sum(1 for i in range(int(settings["env_config"]["num_agents"]))
                                  if agent_id_mod_2(i) == pid) for pid in POLICIES}
    first: dict[str, dict[str, Any]] = {}
    own_metric = None
    means: dict[str, float] = {}
    while True:
        result = algo.train()
        iterations += 1
        runners = result.get("env_runners", {})
        steps = int(result.get("num_env_steps_sampled_lifetime") or runners.get("num_env_steps_sampled_lifetime", 0))
        own = runners.get("module_episode_returns_mean", {})
        if own_metric is None and all(own.get(pid, float("nan")) >= args.target * agents_per_policy[pid]
                                      for pid in POLICIES):
            own_metric = {"own_metric_wall_s": round(seconds_since_process_start(), 2), "own_metric_env_steps": steps}
        means = last_n_means()
        for pid in POLICIES:
            if pid not in first and means[pid] >= args.target:
                first[pid] = {"wall_s": round(seconds_since_process_start(), 2), "env_steps": steps}
        reached = all(means[pid] >= args.target for pid in POLICIES)
        if reached or steps >= args.max_steps or time.time() - train_start >= args.max_wall:
            break
    train_s = time.time() - train_start
    wall = seconds_since_process_start()
    agent_steps = runners.get("num_agent_steps_sampled_lifetime", {})
    print(json.dumps({
        "reached": bool(reached), "wall_s": round(wall, 2), "start_to_ready_s": round(ready, 2),
        "env_steps": steps, "agent_steps": int(sum(agent_steps.values())) if isinstance(agent_steps, dict) else None,
        "iterations": iterations, "env_steps_per_s": round(steps / train_s, 1),
        "final_reward": {pid: round(means[pid], 1) for pid in POLICIES}, **_first_reached(first),
        **(own_metric or {"own_metric_wall_s": None, "own_metric_env_steps": None}),
        "params": _rllib_params(algo.learner_group._learner.module[POLICIES[0]]),
    }))
    algo.stop()


def rllib_sampling_child(args: argparse.Namespace) -> None:
    """``MultiAgentEnvRunner.sample`` of an algorithm with no remote env runners (its
    local env runner, in this process, has the env)."""

    settings = json.loads(args.rllib_settings)
    from rlstack.trainers.common.ray_start import init_local_ray

    init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    algo = rllib_config(settings, args.seed, num_env_runners=0).build_algo()
    runner = algo.env_runner
    runner.sample(num_timesteps=args.sample_steps)  # warm-up
    done = agent_steps = 0
    start = time.perf_counter()
    for _ in range(args.sample_rounds):
        episodes = runner.sample(num_timesteps=args.sample_steps)
        done += sum(e.env_steps() for e in episodes)
        agent_steps += sum(e.agent_steps() for e in episodes)
    elapsed = time.perf_counter() - start
    print(json.dumps({
        "sampling_env_steps_per_s": round(done / elapsed, 1),
        "sampling_agent_steps_per_s": round(agent_steps / elapsed, 1),
        "env_steps": done, "agent_steps": agent_steps, "rounds": args.sample_rounds,
        "runner": type(runner).__name__,
        # The env runner's module is inference-only (no value head): the learner's is the full one.
        "params": _rllib_params(algo.learner_group._learner.module[POLICIES[0]]),
    }))
    algo.stop()


# ----- the parent -----------------------------------------------------------------------

CHILDREN = {
    ("rlstack", "learning"): rlstack_learning_child,
    ("rlstack", "sampling"): rlstack_sampling_child,
    ("rllib", "learning"): rllib_learning_child,
    ("rllib", "sampling"): rllib_sampling_child,
}
PARTS = ("sampling", "learning")
# The figures compared round by round (rlstack / RLlib); the bar reads the env steps/s.
RATIO_KEYS = {"sampling": ("sampling_env_steps_per_s", "sampling_agent_steps_per_s"),
              "learning": ("env_steps_per_s", "wall_s", "env_steps", *(f"{pid}_wall_s" for pid in POLICIES))}
# A one-thread worker (Ray sets OMP_NUM_THREADS=1 for a one-CPU actor); the learning runs
# keep the machine's threads, as in training.
PART_ENV = {"sampling": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}


def shared_settings(smoke: bool) -> dict[str, Any]:
    """The RLlib settings, from rlstack's merged config of the learning run (the YAML's
    values over PPO's 1.13 defaults)."""
    from rlstack.trainers.ppo import PPOTrainer

    _, config = rlstack_training_config("torch", 0, 100, smoke)
    return rllib_settings(PPOTrainer.merge_and_validate(config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="rlstack-torch,rlstack-tf,rllib",
                        help="comma-separated: rlstack-torch, rlstack-tf, rllib")
    parser.add_argument("--parts", default="sampling,learning", help="which measurements to run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--target", type=float, default=None,
                        help="per-policy mean return to reach (default: the YAML's stop, 150)")
    parser.add_argument("--last-n", type=int, default=100, help="episodes the per-policy means span, both systems")
    parser.add_argument("--max-steps", type=int, default=1_000_000)
    parser.add_argument("--max-wall", type=float, default=600.0, help="seconds of training per learning run, at most")
    parser.add_argument("--sample-steps", type=int, default=2000, help="env steps per sampling round")
    parser.add_argument("--sample-rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="tiny step counts: checks the plumbing only")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--system", default="rlstack", choices=["rlstack", "rllib"], help=argparse.SUPPRESS)
    parser.add_argument("--part", default="learning", choices=PARTS, help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="torch", choices=["torch", "tf"], help=argparse.SUPPRESS)
    parser.add_argument("--rllib-settings", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        CHILDREN[(args.system, args.part)](args)
        return
    if args.target is None:
        args.target = float(tuned_experiment()[2].get("policy_reward_mean", 150.0))
    if args.smoke:
        args.sample_steps, args.sample_rounds = 200, 2
        args.max_steps, args.max_wall = 800, min(args.max_wall, 60.0)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for system in systems:
        if system not in ("rlstack-torch", "rlstack-tf", "rllib"):
            parser.error(f"unknown system {system!r}; choose from rlstack-torch, rlstack-tf, rllib")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    for part in parts:
        if part not in PARTS:
            parser.error(f"unknown part {part!r}; choose from {', '.join(PARTS)}")
    settings = {part: shared_settings(args.smoke and part == "learning") for part in parts}
    records: dict[str, dict[str, list[dict]]] = {s: {p: [] for p in parts} for s in systems}
    for run in range(args.runs):
        for system in systems:
            for part in parts:
                name, _, framework = system.partition("-")
                child_args = [os.path.abspath(__file__), "--child", "--system", name, "--part", part,
                              "--framework", framework or "torch", "--seed", str(args.seed + run),
                              "--target", str(args.target), "--last-n", str(args.last_n),
                              "--max-steps", str(args.max_steps), "--max-wall", str(args.max_wall),
                              "--sample-steps", str(args.sample_steps), "--sample-rounds", str(args.sample_rounds),
                              "--rllib-settings", json.dumps(settings[part]), *(["--smoke"] if args.smoke else [])]
                record = run_child(child_args, timeout=args.max_wall + 300, env=PART_ENV.get(part))
                if "error" in record:
                    sys.exit(f"bench/multi_agent_ppo.py: {system} {part}: {record['error']}")
                print(f"round {run + 1}/{args.runs} {system} {part}: {record}", file=sys.stderr, flush=True)
                records[system][part].append(record)
    print(json.dumps(report(args, systems, parts, records, settings)))


def report(args: argparse.Namespace, systems: list[str], parts: list[str], records: dict[str, dict[str, list[dict]]],
           settings: dict[str, Any]) -> dict[str, Any]:
    keys = {
        "learning": ("wall_s", "start_to_ready_s", "env_steps", "agent_steps", "env_steps_per_s", "peak_rss_mib",
                     *(f"{pid}_{key}" for pid in POLICIES for key in ("wall_s", "env_steps")),
                     "own_metric_wall_s", "own_metric_env_steps"),
        "sampling": ("sampling_env_steps_per_s", "sampling_agent_steps_per_s", "peak_rss_mib"),
    }
    summary = summarise_systems(records, systems, parts, keys, listed=("reached", "final_reward"))
    ratios: dict[str, Any] = {}
    if "rllib" in systems:
        ratios = ratios_to_peer(records, systems, parts, RATIO_KEYS)
        for label in ratios:
            system = label.split(" / ")[0]
            bar = {}
            if "sampling_env_steps_per_s" in ratios[label]:
                bar["sampling env steps/s >= 3x"] = ratios[label]["sampling_env_steps_per_s"]["median"] >= 3.0
            if "env_steps_per_s" in ratios[label]:
                bar["learning env steps/s >= 3x"] = ratios[label]["env_steps_per_s"]["median"] >= 3.0
            if "learning" in parts:
                # Time to target: reported, not part of the bar; against an RLlib run that
                # did not reach the target the wall ratio is a bound.
                bar["rlstack_all_reached"] = all(r["reached"] for r in records[system]["learning"])
                bar["rllib_all_reached"] = all(r["reached"] for r in records["rllib"]["learning"])
            ratios[label]["bar"] = bar
    return {"benchmark": "multi_agent_ppo", "env": "MultiAgentCartPole (4 agents, 200-step episodes)",
            "policies": list(POLICIES), "config": str(TUNED_YAML.relative_to(ROOT)), "target": args.target,
            "last_n": args.last_n, "max_wall": args.max_wall, "max_steps": args.max_steps, "smoke": args.smoke,
            "rllib_settings": settings, "summary": summary, "ratios": ratios, "runs": records}


if __name__ == "__main__":
    main()
