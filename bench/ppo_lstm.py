"""PPO with an LSTM (256 cells) on StatelessCartPole: wall seconds from process start to a
mean return of 150, sampling env steps/s and learner samples/s — rlstack (torch and tf)
and RLlib 2.60 (new API stack, ``DefaultModelConfig(use_lstm=True)``) side by side
(the bar: sampling >= 3x RLlib's, time to 150 <= 1/3 of RLlib's).

    python bench/ppo_lstm.py --runs 3 --max-wall 900                 # the comparison BENCHMARKS.md quotes
    python bench/ppo_lstm.py --smoke --systems rllib --runs 1        # plumbing check, tiny step counts
    python bench/ppo_lstm.py --frameworks torch --parts sampling,learner --runs 3   # throughput only

Run it with the bench venv's Python (RLlib 2.60 installed beside rlstack). Each round runs,
for every system in turn (``--systems``, default ``rlstack-torch,rlstack-tf,rllib``;
interleaved so that machine noise hits every system alike; round *i* uses seed *i − 1*),
three fresh child processes through bench/harness.py:

* **learning**: PPO with ``model: {use_lstm: True, lstm_cell_size: 256, max_seq_len: 20}``
  and ``--workers`` rollout workers / env runners (2, the same for both) until the mean
  return of the last ``--last-n`` (100) finished episodes is >= ``--target`` (150), or
  ``--max-steps`` env steps, or ``--max-wall`` seconds of training (then ``reached:
  false``). rlstack's own ``episode_reward_mean`` is that mean (``metrics_smoothing_episodes``
  set to N); for RLlib a callback records every finished episode's return, as in
  bench/peers.py, and the last N in the order they ended are averaged (RLlib's own
  ``episode_return_mean``, a merge of per-runner windows, is reported beside it as
  ``own_metric_*``). rlstack runs ``tune_configs/stateless-cartpole-ppo-lstm.yaml`` where
  that file exists (``config_source`` in its record says which), else PPO's defaults; RLlib
  runs ``PPOConfig`` defaults. Wall time and peak RSS as everywhere (bench/harness.py).
* **sampling** (no learning, as bench/sampling.py): one rollout worker / env runner in the
  child's own process, one env, the LSTM policy acting, one thread (OMP_NUM_THREADS=1, as
  Ray gives a one-CPU worker); a warm-up round, then ``--sample-rounds`` rounds of
  ``--sample-steps`` env steps each (2,000: what each of 2 workers gives a 4,000-step PPO
  iteration). rlstack: ``RolloutWorker.sample()`` (PPO's postprocessing, GAE, included)
  until the round's steps are in; RLlib: ``SingleAgentEnvRunner.sample(num_timesteps=...)``
  (its env-to-module / module-to-env connectors included; GAE runs in RLlib's learner).
* **learner** (as bench/learner.py): one batch of ``train_batch_size`` (4,000) steps
  recorded once with the LSTM policy, then ``--learner-rounds`` timed updates on it
  (after a warm-up update) with PPO's default SGD settings for both systems (30 epochs,
  minibatch 128, max_seq_len 20): samples x epochs / s. rlstack: ``learn_on_batch`` (the
  padding into sequences included); RLlib: ``LearnerGroup.update(episodes=...)`` as
  ``PPO.training_step`` calls it, on a fresh deep copy of the recorded episodes each time
  (its learner connector, GAE's value forward pass and the padding included). The records
  also give gradient steps per update and per second and the real (unpadded) rows per
  gradient step, because the two cut minibatches of sequences differently: rlstack (as
  classic RLlib) takes ``minibatch // max_seq_len`` = 6 whole sequences (<= 120 real
  steps, fewer where episodes are short), RLlib 2.60 takes about ``minibatch`` = 128 real
  steps' worth of sequences, so it makes fewer, larger gradient steps per epoch.

Both models are the classic LSTM wrapper: the observation through the 256x256 tanh
encoder, one LSTM layer of 256 cells, linear policy and value heads on the LSTM's output
(one LSTM shared by policy and value function), no previous action / reward inputs; the
records give each model's trainable parameter count so that this can be checked. RLlib's
StatelessCartPole has no time limit (it subclasses CartPoleEnv, registered without
max_episode_steps); it runs here under the same 500-step TimeLimit as rlstack's (and
CartPole-v1's). Both drop the same two velocities (observations: cart position, pole angle).

Prints one JSON line: per system the medians (min-max) of every figure, and per round the
ratios rlstack / RLlib for sampling, learner and time to target, against the issue's bar.
``--smoke`` shrinks every step count (batch 256, 2 epochs, a few hundred steps) to check
the plumbing in about a minute per system; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import ratios_to_peer, run_child, seconds_since_process_start, summarise_systems  # noqa: E402
from peers import rllib_returns_recorder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TUNED_YAML = ROOT / "tune_configs" / "stateless-cartpole-ppo-lstm.yaml"
# The model under test: 1.13's keys, the same values given to RLlib's DefaultModelConfig.
LSTM_MODEL = {"use_lstm": True, "lstm_cell_size": 256, "max_seq_len": 20}
# CartPole-v1's time limit, applied to RLlib's StatelessCartPole too.
MAX_EPISODE_STEPS = 500
# PPO's default SGD settings (classic RLlib, rlstack and RLlib 2.60 alike), used by the
# learner measurement for both systems; --smoke shrinks them.
LEARNER_SETTINGS = {"train_batch_size": 4000, "minibatch_size": 128, "num_epochs": 30}
SMOKE_LEARNER_SETTINGS = {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 2}
# The learning runs under --smoke: two tiny iterations.
SMOKE_TRAINING = {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 2}
EXIT_UNSUPPORTED = 3


# ----- rlstack --------------------------------------------------------------------------


def rlstack_lstm_unsupported() -> str | None:
    """Why the rlstack imported here cannot run this benchmark (None: it can): the LSTM
    support (``model.use_lstm``, ``rlstack.examples.env.stateless_cartpole``) must be
    in the checkout. Imports neither Ray nor a framework."""
    import rlstack

    where = os.path.dirname(rlstack.__file__)
    try:
        from rlstack.examples.env.stateless_cartpole import StatelessCartPole  # noqa: F401
    except ImportError as exc:
        return (f"the rlstack at {where} has no StatelessCartPole ({exc}); this benchmark needs a build with LSTM "
                "support. Run it with --systems rllib there.")
    from rlstack.errors import ConfigError
    from rlstack.models.catalog import MODEL_DEFAULTS, validate_model_config

    try:
        validate_model_config({**copy.deepcopy(MODEL_DEFAULTS), **LSTM_MODEL})
    except ConfigError as exc:
        return (f"the rlstack at {where} refuses model.use_lstm ({exc}); this benchmark needs a build with LSTM "
                "support. Run it with --systems rllib there.")
    return None


def _fail_unsupported(reason: str) -> None:
    print(json.dumps({"error": reason}))
    sys.exit(EXIT_UNSUPPORTED)


def rlstack_training_config(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The learning run's config: the tuned YAML's (if it exists) or PPO's defaults, with
    the LSTM model, the worker count, framework, seed and the last-N window on top."""
    base: dict[str, Any] = {}
    source = "PPO defaults"
    if TUNED_YAML.exists():
        import yaml

        spec = next(iter(yaml.safe_load(TUNED_YAML.read_text()).values()))
        base = dict(spec.get("config", {}))
        base.pop("env", None)
        source = str(TUNED_YAML.relative_to(ROOT))
    config = {**base, "model": {**base.get("model", {}), **LSTM_MODEL}, "num_workers": args.workers,
              "framework": args.framework, "seed": args.seed, "metrics_smoothing_episodes": args.last_n}
    if args.smoke:
        config.update(train_batch_size=SMOKE_TRAINING["train_batch_size"],
                      sgd_minibatch_size=SMOKE_TRAINING["minibatch_size"], num_sgd_iter=SMOKE_TRAINING["num_epochs"],
                      rollout_fragment_length=SMOKE_TRAINING["train_batch_size"] // max(1, args.workers))
    return config, source


def rlstack_learning_child(args: argparse.Namespace) -> None:
    reason = rlstack_lstm_unsupported()
    if reason:
        _fail_unsupported(reason)
    from rlstack.errors import ConfigError
    from rlstack.trainers.ppo import PPOTrainer

    if args.workers > 0:
        import ray

        from rlstack.trainers.common.ray_start import init_local_ray

        init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    config, source = rlstack_training_config(args)
    try:
        trainer = PPOTrainer(config, "StatelessCartPole")
    except ConfigError as exc:
        _fail_unsupported(f"rlstack's PPOTrainer refuses the LSTM config: {exc}")
    ready = seconds_since_process_start()
    train_start = time.time()
    sample_s = learn_s = 0.0
    while True:
        result = trainer.train()
        sample_s += result["timers"]["sample_time_ms"] / 1000
        learn_s += result["timers"]["learn_time_ms"] / 1000
        ret = result["episode_reward_mean"]
        if ret >= args.target or result["timesteps_total"] >= args.max_steps or time.time() - train_start >= args.max_wall:
            break
    wall = seconds_since_process_start()
    train_s = time.time() - train_start
    steps = result["timesteps_total"]
    print(json.dumps({
        "reached": bool(ret >= args.target), "wall_s": round(wall, 2), "start_to_ready_s": round(ready, 2),
        "env_steps": int(steps), "iterations": result["training_iteration"],
        "env_steps_per_s": round(steps / train_s, 1), "sample_s": round(sample_s, 2), "learn_s": round(learn_s, 2),
        "final_reward": round(float(ret), 1), "config_source": source,
    }))
    trainer.stop()


def _rlstack_parts(framework: str, overrides: dict[str, Any]):
    """(full config, policy class path) of PPO with the LSTM model, validated as PPOTrainer
    validates a user's config (so a refused use_lstm fails here, clearly)."""
    reason = rlstack_lstm_unsupported()
    if reason:
        _fail_unsupported(reason)
    from rlstack.errors import ConfigError
    from rlstack.trainers.ppo import PPOTrainer

    try:
        config = PPOTrainer.merge_and_validate({"model": dict(LSTM_MODEL), "framework": framework, **overrides})
    except ConfigError as exc:
        _fail_unsupported(f"rlstack's PPOTrainer refuses the LSTM config: {exc}")
    path = {"torch": "rlstack.trainers.ppo.ppo_torch_policy:PPOTorchPolicy",
            "tf": "rlstack.trainers.ppo.ppo_tf_policy:PPOTFPolicy"}[framework]
    return config, path


def _rlstack_worker(config: dict[str, Any], policy_path: str):
    from rlstack.evaluation.rollout_worker import RolloutWorker
    from rlstack.trainers.ppo import PPOTrainer

    # worker_index=1: a rollout worker as Ray would build it (acting as the trainer's
    # remote workers act), in this process.
    return RolloutWorker("StatelessCartPole", policy_path, config, worker_index=1, num_workers=1,
                         postprocess_fn=PPOTrainer.postprocess_fn,
                         numpy_policy_class=getattr(PPOTrainer, "numpy_policy_class", None))


def _num_params(weights: dict[str, Any]) -> int:
    return int(sum(getattr(value, "size", 0) for value in weights.values()))


def rlstack_sampling_child(args: argparse.Namespace) -> None:
    config, path = _rlstack_parts(args.framework, {"seed": args.seed})
    worker = _rlstack_worker(config, path)
    worker.sample()  # warm-up
    done, start = 0, time.perf_counter()
    for _ in range(args.sample_rounds):
        got = 0
        while got < args.sample_steps:
            got += worker.sample().count
        done += got
    elapsed = time.perf_counter() - start
    print(json.dumps({
        "sampling_env_steps_per_s": round(done / elapsed, 1), "env_steps": done, "rounds": args.sample_rounds,
        "rollout_fragment_length": config["rollout_fragment_length"], "acting_policy": type(worker.policy).__name__,
        "params": _num_params(worker.get_weights()),
    }))


def rlstack_learner_child(args: argparse.Namespace) -> None:
    """learn_on_batch on one recorded train batch; PPO's default SGD settings."""
    import importlib
    import math

    import numpy as np

    settings = SMOKE_LEARNER_SETTINGS if args.smoke else LEARNER_SETTINGS
    n = settings["train_batch_size"]
    config, path = _rlstack_parts(args.framework, {
        "seed": args.seed, "train_batch_size": n, "sgd_minibatch_size": settings["minibatch_size"],
        "num_sgd_iter": settings["num_epochs"]})
    from rlstack.policies.postprocessing import standardize
    from rlstack.sample_batch import SampleBatch, concat_samples

    # The batch: n steps from a rollout worker with the LSTM policy (state columns, eps_id,
    # GAE), advantages standardised as PPOTrainer.training_step does.
    worker = _rlstack_worker(config, path)
    pieces, got = [], 0
    while got < n:
        piece = worker.sample()
        pieces.append(piece)
        got += piece.count
    batch = standardize(concat_samples(pieces), SampleBatch.ADVANTAGES)
    module_name, class_name = path.split(":")
    # Same seed, same initial weights as the worker's policy that recorded the batch.
    policy = getattr(importlib.import_module(module_name), class_name)(worker.observation_space, worker.action_space,
                                                                      config)
    # The minibatch plan over whole sequences, as learn_on_batch cuts it.
    sequences = policy.learner_batch(batch)
    num_sequences = sequences.count
    minibatch, epochs = policy.minibatch_plan(num_sequences)
    grad_steps = epochs * math.ceil(num_sequences / minibatch)
    policy.learn_on_batch(batch)  # warm-up (and TF tracing)
    seconds = []
    for _ in range(args.learner_rounds):
        start = time.perf_counter()
        policy.learn_on_batch(batch)
        seconds.append(time.perf_counter() - start)
    update_s = float(np.median(seconds))
    print(json.dumps({
        "learner_samples_per_s": round(batch.count * epochs / update_s, 1),
        "grad_steps_per_s": round(grad_steps / update_s, 2), "update_s": [round(t, 3) for t in seconds],
        "batch_rows": int(batch.count), "sequences": int(num_sequences), "epochs": int(epochs),
        "grad_steps_per_update": int(grad_steps), "rows_per_grad_step": round(batch.count * epochs / grad_steps, 1),
        "params": _num_params(policy.get_weights()),
    }))


# ----- RLlib 2.60 -----------------------------------------------------------------------


RLLIB_ENV_NAME = "StatelessCartPole-TimeLimit500"


def rllib_stateless_cartpole(config: Any = None) -> Any:
    """RLlib's StatelessCartPole under CartPole-v1's 500-step TimeLimit (RLlib registers
    it without one)."""
    from gymnasium.wrappers import TimeLimit
    from ray.rllib.examples.envs.classes.stateless_cartpole import StatelessCartPole

    return TimeLimit(StatelessCartPole(config), max_episode_steps=MAX_EPISODE_STEPS)


def rllib_config(workers: int, seed: int, training: dict[str, Any] | None = None):
    """``PPOConfig`` defaults on the new API stack with the LSTM model.

    ``vf_share_layers=True`` is stated although it is what ``DefaultModelConfig`` gives:
    PPO's auto-included model default is False (separate value network), which applies
    when the model config is a dict without the key, and would give RLlib a second LSTM
    for the value function. The classic LSTM wrapper (rlstack's) has one LSTM shared by
    both heads; so does RLlib's model here.
    """
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env

    # A registered name (RLlib takes an env class or a name, not a creator function); the
    # env runners read the creator from Ray's registry.
    register_env(RLLIB_ENV_NAME, rllib_stateless_cartpole)
    config = (
        PPOConfig()
        .environment(RLLIB_ENV_NAME)
        .env_runners(num_env_runners=workers)
        .framework("torch")
        .rl_module(model_config=DefaultModelConfig(
            use_lstm=True, lstm_cell_size=LSTM_MODEL["lstm_cell_size"], max_seq_len=LSTM_MODEL["max_seq_len"],
            lstm_use_prev_action=False, lstm_use_prev_reward=False, vf_share_layers=True,
            fcnet_hiddens=[256, 256], fcnet_activation="tanh", head_fcnet_hiddens=[]))
        .debugging(seed=seed)
    )
    if training:
        config = config.training(**training)
    return config


def _rllib_params(module: Any) -> int:
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))


def rllib_learning_child(args: argparse.Namespace) -> None:
    """Until the mean return of the last N finished episodes >= target (bench/peers.py's rule)."""

    RecordReturns, last_n_mean = rllib_returns_recorder(args.last_n)

    from rlstack.trainers.common.ray_start import init_local_ray

    init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    training = None
    if args.smoke:
        training = {"train_batch_size": SMOKE_TRAINING["train_batch_size"],
                    "minibatch_size": SMOKE_TRAINING["minibatch_size"], "num_epochs": SMOKE_TRAINING["num_epochs"]}
    algo = rllib_config(args.workers, args.seed, training).callbacks(RecordReturns).build_algo()
    ready = seconds_since_process_start()
    train_start = time.time()
    ret, steps, iterations = float("nan"), 0, 0
    own_metric = None
    while True:
        result = algo.train()
        iterations += 1
        runners = result.get("env_runners", {})
        steps = result.get("num_env_steps_sampled_lifetime") or runners.get("num_env_steps_sampled_lifetime", 0)
        if own_metric is None and runners.get("episode_return_mean", float("nan")) >= args.target:
            own_metric = {"own_metric_wall_s": round(seconds_since_process_start(), 2),
                          "own_metric_env_steps": int(steps)}
        ret = last_n_mean()
        if ret >= args.target or steps >= args.max_steps or time.time() - train_start >= args.max_wall:
            break
    wall = seconds_since_process_start()
    print(json.dumps({
        "reached": bool(ret >= args.target), "wall_s": round(wall, 2), "start_to_ready_s": round(ready, 2),
        "env_steps": int(steps), "iterations": iterations,
        "env_steps_per_s": round(steps / (time.time() - train_start), 1), "final_reward": round(float(ret), 1),
        **(own_metric or {"own_metric_wall_s": None, "own_metric_env_steps": None}),
    }))
    algo.stop()


def _rllib_local_algo(args: argparse.Namespace, training: dict[str, Any] | None = None):
    """An algorithm with no remote env runners: its local env runner (in this process,
    with an env) samples, its local learner learns."""

    from rlstack.trainers.common.ray_start import init_local_ray

    init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return rllib_config(0, args.seed, training).build_algo()


def rllib_sampling_child(args: argparse.Namespace) -> None:
    algo = _rllib_local_algo(args)
    runner = algo.env_runner
    runner.sample(num_timesteps=args.sample_steps)  # warm-up
    done, start = 0, time.perf_counter()
    for _ in range(args.sample_rounds):
        episodes = runner.sample(num_timesteps=args.sample_steps)
        done += sum(len(e) for e in episodes)
    elapsed = time.perf_counter() - start
    print(json.dumps({
        "sampling_env_steps_per_s": round(done / elapsed, 1), "env_steps": done, "rounds": args.sample_rounds,
        "params": _rllib_params(runner.module), "inference_module": type(runner.module).__name__,
    }))
    algo.stop()


def rllib_learner_child(args: argparse.Namespace) -> None:
    """LearnerGroup.update on deep copies of one recorded set of episodes."""
    import numpy as np
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

    settings = SMOKE_LEARNER_SETTINGS if args.smoke else LEARNER_SETTINGS
    n = settings["train_batch_size"]
    algo = _rllib_local_algo(args, {"train_batch_size": n, "minibatch_size": settings["minibatch_size"],
                                    "num_epochs": settings["num_epochs"]})
    episodes = algo.env_runner.sample(num_timesteps=n)
    rows = sum(len(e) for e in episodes)
    learner = algo.learner_group._learner  # the local learner (num_learners=0), in this process
    counts = {"steps": 0, "rows": 0, "sequences": 0}
    update = learner._update

    def counting_update(batch, **kwargs):  # noqa: ANN001, ANN202
        counts["steps"] += 1
        for module_batch in batch.values():
            # Real steps: the loss mask (padding and the connector's extra step at each
            # episode piece's end are False), else the sequence lengths.
            mask, seq_lens = module_batch.get("loss_mask"), module_batch.get("seq_lens")
            if mask is not None or seq_lens is not None:
                counts["rows"] += int((mask if mask is not None else seq_lens).sum())
            if seq_lens is not None:
                counts["sequences"] += int(len(seq_lens))
        return update(batch, **kwargs)

    learner._update = counting_update

    def one_update() -> float:
        fresh = copy.deepcopy(episodes)  # the learner connector adds a step to each episode
        start = time.perf_counter()
        algo.learner_group.update(episodes=fresh, timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: rows},
                                  num_epochs=settings["num_epochs"], minibatch_size=settings["minibatch_size"],
                                  shuffle_batch_per_epoch=True)
        return time.perf_counter() - start

    one_update()  # warm-up
    counts.update(steps=0, rows=0, sequences=0)
    seconds = [one_update() for _ in range(args.learner_rounds)]
    update_s = float(np.median(seconds))
    grad_steps = counts["steps"] // max(1, args.learner_rounds)
    print(json.dumps({
        "learner_samples_per_s": round(rows * settings["num_epochs"] / update_s, 1),
        "grad_steps_per_s": round(grad_steps / update_s, 2), "update_s": [round(t, 3) for t in seconds],
        "batch_rows": int(rows), "episodes": len(episodes), "epochs": settings["num_epochs"],
        "grad_steps_per_update": grad_steps,
        "rows_per_grad_step": round(counts["rows"] / max(1, counts["steps"]), 1),
        "sequences_per_grad_step": round(counts["sequences"] / max(1, counts["steps"]), 1),
        "params": _rllib_params(learner.module[DEFAULT_MODULE_ID]),
    }))
    algo.stop()


# ----- the parent -----------------------------------------------------------------------

CHILDREN = {
    ("rlstack", "learning"): rlstack_learning_child,
    ("rlstack", "sampling"): rlstack_sampling_child,
    ("rlstack", "learner"): rlstack_learner_child,
    ("rllib", "learning"): rllib_learning_child,
    ("rllib", "sampling"): rllib_sampling_child,
    ("rllib", "learner"): rllib_learner_child,
}
# The measurements, and the figures of each compared round by round (rlstack / RLlib):
# the bar reads sampling env steps/s (>= 3) and wall seconds to the target (<= 1/3).
PARTS = ("sampling", "learner", "learning")
RATIO_KEYS = {"sampling": ("sampling_env_steps_per_s",), "learner": ("learner_samples_per_s", "grad_steps_per_s"),
              "learning": ("wall_s", "env_steps")}
# A one-thread worker (Ray sets OMP_NUM_THREADS=1 for a one-CPU actor); the learner and
# the learning runs keep the machine's threads, as in training.
PART_ENV = {"sampling": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="rlstack-torch,rlstack-tf,rllib",
                        help="comma-separated: rlstack-torch, rlstack-tf, rllib")
    parser.add_argument("--frameworks", default=None,
                        help="rlstack frameworks, e.g. torch,tf (replaces the rlstack-* entries of --systems)")
    parser.add_argument("--parts", default="sampling,learner,learning", help="which measurements to run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="rollout workers / env runners, both systems")
    parser.add_argument("--target", type=float, default=150.0)
    parser.add_argument("--last-n", type=int, default=100, help="episodes the stop rule averages, both systems")
    parser.add_argument("--max-steps", type=int, default=2_000_000)
    parser.add_argument("--max-wall", type=float, default=900.0, help="seconds of training per learning run, at most")
    parser.add_argument("--sample-steps", type=int, default=2000, help="env steps per sampling round")
    parser.add_argument("--sample-rounds", type=int, default=5)
    parser.add_argument("--learner-rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="tiny step counts: checks the plumbing only")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--system", default="rlstack", choices=["rlstack", "rllib"], help=argparse.SUPPRESS)
    parser.add_argument("--part", default="learning", choices=PARTS, help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="torch", choices=["torch", "tf"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        CHILDREN[(args.system, args.part)](args)
        return
    if args.smoke:
        args.sample_steps, args.sample_rounds, args.learner_rounds = 200, 2, 1
        args.max_steps, args.max_wall = 512, min(args.max_wall, 60.0)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.frameworks:
        systems = [f"rlstack-{f.strip()}" for f in args.frameworks.split(",") if f.strip()] + \
                  [s for s in systems if not s.startswith("rlstack")]
    for system in systems:
        if system not in ("rlstack-torch", "rlstack-tf", "rllib"):
            parser.error(f"unknown system {system!r}; choose from rlstack-torch, rlstack-tf, rllib")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    for part in parts:
        if part not in PARTS:
            parser.error(f"unknown part {part!r}; choose from {', '.join(PARTS)}")
    if any(s.startswith("rlstack") for s in systems):
        reason = rlstack_lstm_unsupported()
        if reason:
            sys.exit(f"bench/ppo_lstm.py: cannot run rlstack: {reason}")
    records: dict[str, dict[str, list[dict]]] = {s: {p: [] for p in parts} for s in systems}
    for run in range(args.runs):
        for system in systems:
            for part in parts:
                name, _, framework = system.partition("-")
                child_args = [os.path.abspath(__file__), "--child", "--system", name, "--part", part,
                              "--framework", framework or "torch", "--workers", str(args.workers),
                              "--seed", str(args.seed + run), "--target", str(args.target),
                              "--last-n", str(args.last_n), "--max-steps", str(args.max_steps),
                              "--max-wall", str(args.max_wall), "--sample-steps", str(args.sample_steps),
                              "--sample-rounds", str(args.sample_rounds), "--learner-rounds", str(args.learner_rounds),
                              *(["--smoke"] if args.smoke else [])]
                record = run_child(child_args, timeout=args.max_wall + 300, env=PART_ENV.get(part))
                if "error" in record:
                    sys.exit(f"bench/ppo_lstm.py: {system} {part}: {record['error']}")
                print(f"round {run + 1}/{args.runs} {system} {part}: {record}", file=sys.stderr, flush=True)
                records[system][part].append(record)
    print(json.dumps(report(args, systems, parts, records)))


def report(args: argparse.Namespace, systems: list[str], parts: list[str],
           records: dict[str, dict[str, list[dict]]]) -> dict[str, Any]:
    keys = {
        "learning": ("wall_s", "start_to_ready_s", "env_steps", "env_steps_per_s", "peak_rss_mib", "final_reward",
                     "own_metric_wall_s", "own_metric_env_steps"),
        "sampling": ("sampling_env_steps_per_s", "peak_rss_mib"),
        "learner": ("learner_samples_per_s", "grad_steps_per_s", "grad_steps_per_update", "rows_per_grad_step",
                    "peak_rss_mib"),
    }
    summary = summarise_systems(records, systems, parts, keys)
    ratios: dict[str, Any] = {}
    if "rllib" in systems:
        ratios = ratios_to_peer(records, systems, parts, RATIO_KEYS)
        for label in ratios:
            system = label.split(" / ")[0]
            bar = {}
            if "sampling_env_steps_per_s" in ratios[label]:
                bar["sampling >= 3x"] = ratios[label]["sampling_env_steps_per_s"]["median"] >= 3.0
            if "wall_s" in ratios[label]:
                reached = all(r["reached"] for r in records[system]["learning"])
                # Against an RLlib run that did not reach the target the ratio is a bound.
                bar["time to target <= 1/3"] = reached and ratios[label]["wall_s"]["median"] <= 1 / 3
                bar["rllib_all_reached"] = all(r["reached"] for r in records["rllib"]["learning"])
            ratios[label]["bar"] = bar
    return {"benchmark": "ppo_lstm", "env": "StatelessCartPole", "model": LSTM_MODEL, "workers": args.workers,
            "target": args.target, "last_n": args.last_n, "smoke": args.smoke, "summary": summary,
            "ratios": ratios, "runs": records}


if __name__ == "__main__":
    main()
