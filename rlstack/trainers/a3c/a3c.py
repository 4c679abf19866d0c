"""A3CTrainer: asynchronous advantage actor-critic (Mnih et al. 2016).

Every rollout worker samples a fragment, computes the gradients of the actor-critic
loss on it (GAE on the worker) and sends them; the driver applies each worker's
gradients as they arrive (``ray.wait``) and sends fresh weights back to that worker only.
"""

from __future__ import annotations

from typing import Any

import ray

from rlstack.errors import ConfigError
from rlstack.policies.postprocessing import postprocess_advantages
from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config, require_stochastic_sampling
from rlstack.trainers.common.trainer import DEFAULT_POLICY_ID, Trainer

# Classic RLlib 1.x A3C defaults, on top of COMMON_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # Use a value function (critic) as baseline; False gives REINFORCE-style returns.
        "use_critic": True,
        # Use generalised advantage estimation (GAE).
        "use_gae": True,
        # GAE lambda.
        "lambda": 1.0,
        # Weight of the value loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus, and its [[timestep, coeff], ...] schedule.
        "entropy_coeff": 0.01,
        # [[timestep, coeff], ...]: entropy_coeff piecewise-linear over sampled steps.
        "entropy_coeff_schedule": None,
        # Workers learn asynchronously (A3C); kept for old configs: A2C is the synchronous one.
        "sample_async": True,
        # Accumulate gradients over this many rows at a time (None: the whole batch).
        "microbatch_size": None,
    },
    {
        "rollout_fragment_length": 10,
        "min_time_s_per_reporting": 5,
        "grad_clip": 40.0,
        "lr": 0.0001,
        # Workers act in numpy (built-in dense models) and compute gradients with the
        # torch/TF policy: see A3CTrainer.remote_workers_learn.
        "rollout_inference": "auto",
    },
    "A3C",
))


def validate_actor_critic_config(config: dict[str, Any], algorithm: str) -> None:
    """Checks the keys A2C and A3C share.

    Raises:
        ConfigError: Naming the key, the value and the fix.
    """
    require_stochastic_sampling(config)
    for key in ("vf_loss_coeff", "entropy_coeff", "lambda"):
        value = config[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{key} must be a number >= 0, got {value!r}.")
    if config["lambda"] > 1.0:
        raise ConfigError(f"lambda must be in [0, 1], got {config['lambda']!r}.")
    if config["use_gae"] and not config["use_critic"]:
        raise ConfigError("use_gae=True needs use_critic=True (GAE uses the value function); set use_gae=False.")
    size = config["microbatch_size"]
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        raise ConfigError(f"microbatch_size must be None or an integer >= 1, got {size!r}.")



class A3CTrainer(Trainer):
    """A3C with the classic RLlib API (needs ``num_workers >= 1``)."""

    _name = "A3C"
    _default_config = DEFAULT_CONFIG
    # GAE on the workers, in numpy, for workers that act through a numpy copy of the policy.
    postprocess_fn = staticmethod(postprocess_advantages)
    supports_recurrent_models = True
    # Workers compute the gradients: they keep the framework policy beside the numpy copy.
    remote_workers_learn = True
    # Multi-agent workers compute each trained policy's gradients on its own rows.

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        validate_actor_critic_config(config, cls._name)
        if config["num_workers"] < 1:
            raise ConfigError("A3C learns from gradients computed on remote rollout workers: set num_workers >= 1 "
                              "(or use A2C, which can sample in the driver with num_workers=0).")

    policy_classes = {"torch": "rlstack.trainers.a3c.a3c_torch_policy:A3CTorchPolicy",
                      "tf": "rlstack.trainers.a3c.a3c_tf_policy:A3CTFPolicy"}

    @classmethod
    def learns_asynchronously(cls, config: dict[str, Any]) -> bool:
        # One worker waits for the weights its gradients produced: a sequential loop.
        return merge_config(cls._default_config, config, cls._name)["num_workers"] > 1

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        self._in_flight: dict[Any, int] = {}
        self._counters.update(num_gradient_updates=0)
        for index in range(self.workers.num_remote_workers):
            self._request(index)

    def _request(self, index: int, weights: dict[str, Any] | None = None, global_timestep: int | None = None) -> None:
        worker = self.workers.remote_workers()[index]
        self._in_flight[worker.sample_and_compute_gradients.remote(weights, global_timestep)] = index

    def training_step(self) -> dict[str, Any]:
        local = self.workers.local_worker()
        with self._timers["sample"]:
            ready, _ = ray.wait(list(self._in_flight), num_returns=1, timeout=1.0)
        for ref in ready:
            index = self._in_flight.pop(ref)
            ok, result = self.workers.fetch(ref, index)
            if not ok:
                # One request per worker: a recreated worker (with the current weights)
                # gets a new one; a dropped one none.
                self.workers.replace_requests(self._in_flight, index, self._request, 1)
                continue
            grads, stats, env_steps, agent_steps = result
            # Multi-agent workers send gradients and statistics by policy id.
            if not self.is_multi_agent:
                grads, stats = {DEFAULT_POLICY_ID: grads}, {DEFAULT_POLICY_ID: stats}
            with self._timers["learn"]:
                for policy_id, policy_grads in grads.items():
                    local.get_policy(policy_id).apply_gradients(policy_grads)
            for counter, steps in (("env", env_steps), ("agent", agent_steps)):
                self._counters[f"num_{counter}_steps_sampled"] += steps
                self._counters[f"num_{counter}_steps_trained"] += steps
            self._counters["num_gradient_updates"] += 1
            for policy in local.policy_map.values():
                policy.on_global_var_update(self.global_timestep())
            if stats:
                self._last_learner_stats = {pid: {"learner_stats": s} for pid, s in stats.items()}
            with self._timers["synch_weights"]:
                # This worker only (the others keep sampling with what they have), with its
                # next request: one actor call per round trip, not two.
                weights = local.get_weights(list(grads)) if self.is_multi_agent else self.learner_policy.get_weights()
                self._request(index, weights, self.global_timestep())
        return self.last_learner_info()

    def extra_results(self) -> dict[str, Any]:
        return {"num_gradient_updates": self._counters["num_gradient_updates"]}

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return False
