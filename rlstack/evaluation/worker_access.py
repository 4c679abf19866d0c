"""RLlib 1.13's accessors of a rollout worker's policies and sub-envs: ``policy_map``,
``get_policy``, ``foreach_policy``, ``foreach_trainable_policy``, ``foreach_env`` and
``foreach_env_with_context`` (a mixin of :class:`~rlstack.evaluation.rollout_worker.RolloutWorker`,
which supplies ``policy``, ``env``, ``config``, ``worker_index`` and ``num_workers``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlstack.env.env_context import EnvContext
from rlstack.sample_batch import DEFAULT_POLICY_ID

if TYPE_CHECKING:
    from rlstack.policies.policy import Policy


__all__ = ["DEFAULT_POLICY_ID", "WorkerAccessMixin"]


class WorkerAccessMixin:
    """Policy and sub-env accessors of a rollout worker, under RLlib 1.13's names."""

    policy: Policy
    env: Any
    config: dict
    worker_index: int
    num_workers: int

    @property
    def policy_map(self) -> dict[str, Policy]:
        """``{"default_policy": policy}`` (rlstack's workers hold one policy).

        On a remote worker acting in numpy (``rollout_inference="auto"`` with a built-in
        dense model, or ``"numpy"``) the policy is that worker's
        :class:`~rlstack.policies.numpy_policy.NumpyPolicy`: it acts and holds the
        learner's weights, but does not learn. The driver's worker holds the learner.
        """
        return {DEFAULT_POLICY_ID: self.policy}

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """The policy ``policy_id`` of this worker (see :attr:`policy_map`).

        Raises:
            KeyError: For an unknown policy id, naming the known ones.
        """
        policy_map = self.policy_map
        if policy_id not in policy_map:
            raise KeyError(f"Unknown policy id {policy_id!r}; this worker has {sorted(policy_map)} "
                           "(rlstack trains one policy per trainer).")
        return policy_map[policy_id]

    def foreach_policy(self, func: Callable[..., Any], **kwargs: Any) -> list[Any]:
        """``[func(policy, policy_id, **kwargs)]`` for every policy of this worker."""
        return [func(policy, policy_id, **kwargs) for policy_id, policy in self.policy_map.items()]

    def foreach_trainable_policy(self, func: Callable[..., Any], **kwargs: Any) -> list[Any]:
        """Like :meth:`foreach_policy` for the policies being trained (all of them here)."""
        return self.foreach_policy(func, **kwargs)

    def foreach_env(self, func: Callable[[Any], Any]) -> list[Any]:
        """``[func(sub_env)]`` for each of this worker's sub-envs, in vector-index order
        (``[]`` for a worker without envs, such as the driver's when ``num_workers > 0``).

        The sub-envs are the objects the env creator returned (e.g. for the curriculum
        pattern ``worker.foreach_env(lambda env: env.set_task(task))``); a sub-env that
        ``restart_failed_sub_environments`` rebuilds is a new object.
        """
        if self.env is None:
            return []
        return [func(env) for env in self.env.envs]

    def foreach_env_with_context(self, func: Callable[[Any, EnvContext], Any]) -> list[Any]:
        """``[func(sub_env, env_context)]`` for each sub-env, the context carrying
        ``env_config`` and this sub-env's ``worker_index`` / ``vector_index``."""
        if self.env is None:
            return []
        context = EnvContext(self.config.get("env_config"), self.worker_index, 0, self.num_workers)
        return [func(env, context.copy_with(vector_index=i)) for i, env in enumerate(self.env.envs)]
