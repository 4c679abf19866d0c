"""Training callbacks (classic RLlib's ``ray.rllib.agents.callbacks``, whose 1.13 path
``rlstack.trainers.callbacks`` re-exports this module).

A callbacks class subclasses :class:`DefaultCallbacks` and overrides the hooks it needs;
``config["callbacks"]`` names it. Rollout workers call the episode and sampling hooks,
policies call :meth:`DefaultCallbacks.on_learn_on_batch`, the trainer calls
:meth:`DefaultCallbacks.on_trainer_init` and :meth:`DefaultCallbacks.on_train_result`.
Only the hooks a class overrides are called (:func:`overridden_hooks`), so a run without
callbacks pays nothing per step.

``config["callbacks"]`` takes four forms:

* a :class:`DefaultCallbacks` subclass (the usual form);
* a :class:`MultiCallbacks` instance combining several classes;
* a dotted import path ``"my_module.MyCallbacks"`` (YAML files; also what a checkpoint
  records for an importable class);
* the legacy dict ``{"on_episode_end": fn, ...}`` of early 1.x scripts, whose functions
  get one ``info`` dict each (the keys classic RLlib passed: see :data:`LEGACY_HOOK_KEYS`).

The module lives with the rollout workers, which build their callbacks from it and call
most of its hooks; the trainer, a layer above, calls the rest. It imports nothing heavy.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlstack.errors import ConfigError

if TYPE_CHECKING:
    from rlstack.env.base_env import BaseEnv
    from rlstack.evaluation.episode import Episode
    from rlstack.evaluation.rollout_worker import RolloutWorker
    from rlstack.policies.policy import Policy
    from rlstack.sample_batch import SampleBatch
    from rlstack.trainers.common.trainer import Trainer

__all__ = ["DefaultCallbacks", "MemoryTrackingCallbacks", "MultiCallbacks", "callbacks_spec", "check_callbacks", "make_callbacks",
           "overridden_hooks", "restorable_callbacks", "with_callbacks_specs"]

logger = logging.getLogger(__name__)

# Every hook, in the order a run meets them.
HOOKS = (
    "on_trainer_init",
    "on_sub_environment_created",
    "on_create_policy",
    "on_episode_start",
    "on_episode_step",
    "on_episode_end",
    "on_postprocess_trajectory",
    "on_sample_end",
    "on_learn_on_batch",
    "on_train_result",
)

# The legacy dict's key for each hook it supports (classic RLlib named one differently).
LEGACY_HOOK_KEYS = {
    "on_episode_start": "on_episode_start",
    "on_episode_step": "on_episode_step",
    "on_episode_end": "on_episode_end",
    "on_postprocess_trajectory": "on_postprocess_traj",
    "on_sample_end": "on_sample_end",
    "on_train_result": "on_train_result",
}

ALLOWED_FORMS = ("a DefaultCallbacks subclass (from rlstack.trainers.callbacks import DefaultCallbacks), "
                 "a MultiCallbacks([ClassA, ClassB]) instance, a dotted import path such as "
                 "'my_module.MyCallbacks', or a legacy dict {'on_episode_end': fn, ...} with keys "
                 f"{', '.join(sorted(LEGACY_HOOK_KEYS.values()))}")


class DefaultCallbacks:
    """Base class of training callbacks; every hook is a no-op.

    Subclass it, override the hooks you need (keyword-only arguments, plus ``**kwargs``
    for arguments later versions add), and set ``config["callbacks"] = MyCallbacks``.
    Each rollout worker and the trainer build their own instance, so state kept on
    ``self`` is per process; use ``episode.user_data`` for per-episode state.

    Args:
        legacy_callbacks_dict: Classic RLlib's dict of functions, each called with one
            ``info`` dict; ``config["callbacks"] = {...}`` builds this for you.
    """

    def __init__(self, legacy_callbacks_dict: dict[str, Callable[[dict], Any]] | None = None) -> None:
        self.legacy_callbacks = dict(legacy_callbacks_dict or {})

    def on_trainer_init(self, *, trainer: "Trainer", **kwargs: Any) -> None:
        """Called at the end of the trainer's set-up (workers built, before any training).

        Args:
            trainer: The trainer.
        """

    def on_sub_environment_created(self, *, worker: "RolloutWorker", sub_environment: Any,
                                   env_context: Any, **kwargs: Any) -> None:
        """Called once for each sub-env a rollout worker builds (also a rebuilt one).

        Args:
            worker: The rollout worker.
            sub_environment: The env just built.
            env_context: Its :class:`~rlstack.env.EnvContext` (``worker_index``,
                ``vector_index``, the env config).
        """

    def on_create_policy(self, *, policy_id: str, policy: "Policy") -> None:
        """Called when a rollout worker has built its policy (``policy_id`` is
        ``"default_policy"``)."""

    def on_episode_start(self, *, worker: "RolloutWorker", base_env: "BaseEnv", policies: dict[str, "Policy"],
                         episode: "Episode", env_index: int | None = None, **kwargs: Any) -> None:
        """Called when an episode begins, after its first observation.

        Args:
            worker: The rollout worker.
            base_env: The worker's vector env (``base_env.get_sub_environments()``).
            policies: ``{"default_policy": policy}``.
            episode: The episode; ``episode.user_data`` keeps state until its end.
            env_index: Which sub-env the episode runs in.
        """
        if "on_episode_start" in self.legacy_callbacks:
            self.legacy_callbacks["on_episode_start"]({"env": base_env, "policy": policies, "episode": episode})

    def on_episode_step(self, *, worker: "RolloutWorker", base_env: "BaseEnv", policies: dict[str, "Policy"],
                        episode: "Episode", env_index: int | None = None, **kwargs: Any) -> None:
        """Called after each env step of an episode, its last step included (arguments as
        :meth:`on_episode_start`)."""
        if "on_episode_step" in self.legacy_callbacks:
            self.legacy_callbacks["on_episode_step"]({"env": base_env, "episode": episode})

    def on_episode_end(self, *, worker: "RolloutWorker", base_env: "BaseEnv", policies: dict[str, "Policy"],
                       episode: "Episode", env_index: int | None = None, **kwargs: Any) -> None:
        """Called when an episode ends, before its metrics are recorded: what this puts in
        ``episode.custom_metrics`` and ``episode.hist_data`` is reported (arguments as
        :meth:`on_episode_start`)."""
        if "on_episode_end" in self.legacy_callbacks:
            self.legacy_callbacks["on_episode_end"]({"env": base_env, "policy": policies, "episode": episode})

    def on_postprocess_trajectory(self, *, worker: "RolloutWorker", episode: "Episode", agent_id: str,
                                  policy_id: str, policies: dict[str, "Policy"], postprocessed_batch: "SampleBatch",
                                  original_batches: dict[str, tuple["Policy", "SampleBatch"]],
                                  **kwargs: Any) -> None:
        """Called for each trajectory piece right after ``Policy.postprocess_trajectory``.

        Args:
            worker: The rollout worker.
            episode: The episode the piece belongs to.
            agent_id: ``"agent0"`` (single agent).
            policy_id: ``"default_policy"``.
            policies: ``{"default_policy": policy}``.
            postprocessed_batch: The postprocessed piece; changes to it go into the batch.
            original_batches: ``{agent_id: (policy, piece before postprocessing)}``; do
                not change it.
        """
        if "on_postprocess_traj" in self.legacy_callbacks:
            self.legacy_callbacks["on_postprocess_traj"]({
                "episode": episode, "agent_id": agent_id, "pre_batch": original_batches[agent_id],
                "post_batch": postprocessed_batch, "all_pre_batches": original_batches,
            })

    def on_sample_end(self, *, worker: "RolloutWorker", samples: "SampleBatch", **kwargs: Any) -> None:
        """Called at the end of ``RolloutWorker.sample()``; ``samples`` is the batch it
        returns (changes to it are kept)."""
        if "on_sample_end" in self.legacy_callbacks:
            self.legacy_callbacks["on_sample_end"]({"worker": worker, "samples": samples})

    def on_learn_on_batch(self, *, policy: "Policy", train_batch: "SampleBatch", result: dict,
                          **kwargs: Any) -> None:
        """Called at the start of ``Policy.learn_on_batch``.

        Args:
            policy: The learning policy.
            train_batch: The batch it is about to learn on (changes to it are learned on).
            result: An empty dict; what this puts in it is reported as
                ``result["info"]["learner"][policy_id]["custom_metrics"]`` and as
                ``result["custom_metrics"][policy_id]``.
        """

    def on_train_result(self, *, trainer: "Trainer", result: dict, **kwargs: Any) -> None:
        """Called at the end of ``Trainer.train()`` with the iteration's result (evaluation
        included); what this adds to ``result`` is what ``train()`` returns."""
        if "on_train_result" in self.legacy_callbacks:
            self.legacy_callbacks["on_train_result"]({"trainer": trainer, "result": result})


class MultiCallbacks(DefaultCallbacks):
    """Several callbacks classes as one: ``config["callbacks"] = MultiCallbacks([A, B])``.

    Classic RLlib's shape: the instance goes into the config and is called (with no
    arguments) to build the combined callbacks, which call each class's hooks in order.

    Args:
        callback_class_list: DefaultCallbacks subclasses.
    """

    def __init__(self, callback_class_list: list[type[DefaultCallbacks]]) -> None:
        super().__init__()
        self._callback_class_list = list(callback_class_list)
        self._callback_list: list[DefaultCallbacks] = []

    def __call__(self, *args: Any, **kwargs: Any) -> "MultiCallbacks":
        self._callback_list = [callback_class() for callback_class in self._callback_class_list]
        return self

    def __repr__(self) -> str:
        # Stable across copies: reset_config and checkpoints compare configs by repr.
        return f"MultiCallbacks([{', '.join(_qualified_name(c) for c in self._callback_class_list)}])"

    def _each(self, hook: str, **kwargs: Any) -> None:
        for callback in self._callback_list:
            getattr(callback, hook)(**kwargs)

    def on_trainer_init(self, **kwargs: Any) -> None:  # noqa: D102 - as DefaultCallbacks
        self._each("on_trainer_init", **kwargs)

    def on_sub_environment_created(self, **kwargs: Any) -> None:  # noqa: D102
        self._each("on_sub_environment_created", **kwargs)

    def on_create_policy(self, **kwargs: Any) -> None:  # noqa: D102
        self._each("on_create_policy", **kwargs)

    def on_episode_start(self, **kwargs: Any) -> None:  # noqa: D102
        self._each("on_episode_start", **kwargs)

    def on_episode_step(self, **kwargs: Any) -> None:  # noqa: D102
        self._each("on_episode_step", **kwargs)

    def on_episode_end(self, **kwargs: Any) -> None:  # noqa: D102
        self._each("on_episode_end", **kwargs)

    def on_postprocess_trajectory(self, **kwargs: Any) -> None:  # noqa: D102
        self._each("on_postprocess_trajectory", **kwargs)

    def on_sample_end(self, **kwargs: Any) -> None:  # noqa: D102
        self._each("on_sample_end", **kwargs)

    def on_learn_on_batch(self, **kwargs: Any) -> None:  # noqa: D102
        self._each("on_learn_on_batch", **kwargs)

    def on_train_result(self, **kwargs: Any) -> None:  # noqa: D102
        self._each("on_train_result", **kwargs)


class MemoryTrackingCallbacks(DefaultCallbacks):
    """Reports each rollout worker's memory as custom metrics at every episode end
    (classic RLlib's debugging aid): the ten source lines that allocated most
    (``tracemalloc/<line>/size`` and ``/count``, tracked from this object's creation)
    and the process's ``tracemalloc/worker/rss``, ``/data`` and ``/vms`` in bytes.

    Tracing every allocation slows sampling severalfold: use it to hunt a leak, not to
    train.
    """

    def __init__(self) -> None:
        super().__init__()
        import tracemalloc

        tracemalloc.start(10)  # frames kept per allocation

    def on_episode_end(self, *, episode: "Episode", **kwargs: Any) -> None:  # noqa: D102
        import tracemalloc

        import psutil

        for stat in tracemalloc.take_snapshot().statistics("lineno")[:10]:
            episode.custom_metrics[f"tracemalloc/{stat.traceback}/size"] = stat.size
            episode.custom_metrics[f"tracemalloc/{stat.traceback}/count"] = stat.count
        memory = psutil.Process().memory_info()
        for field in ("rss", "data", "vms"):
            episode.custom_metrics[f"tracemalloc/worker/{field}"] = getattr(memory, field, 0)


def overridden_hooks(callbacks: DefaultCallbacks) -> frozenset[str]:
    """The hooks of ``callbacks`` that do something: those its class overrides, those
    its legacy dict fills, and for :class:`MultiCallbacks` those of any class in it.
    Callers call only these, so an unused hook costs nothing."""
    if isinstance(callbacks, MultiCallbacks):
        return frozenset().union(*(overridden_hooks(c) for c in callbacks._callback_list))
    cls = type(callbacks)
    hooks = {hook for hook in HOOKS if getattr(cls, hook) is not getattr(DefaultCallbacks, hook)}
    hooks |= {hook for hook, key in LEGACY_HOOK_KEYS.items() if key in callbacks.legacy_callbacks}
    return frozenset(hooks)


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _import_path(path: str) -> Any:
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ConfigError(f"callbacks={path!r} is not a dotted import path; write it as 'my_module.MyCallbacks'. "
                          f"Allowed: {ALLOWED_FORMS}.")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"callbacks={path!r}: cannot import module {module_name!r} ({exc}); make it importable "
                          "(installed, or on PYTHONPATH in every worker process) or pass the class itself.") from exc
    try:
        return getattr(module, name)
    except AttributeError:
        raise ConfigError(f"callbacks={path!r}: module {module_name!r} has no attribute {name!r}.") from None


def check_callbacks(value: Any) -> None:
    """Checks a ``config["callbacks"]`` value (imports a dotted path to check it).

    Raises:
        ConfigError: Saying what was given and the allowed forms.
    """
    if value is None:  # 1.13 scripts pass None for "no callbacks of mine"
        return
    if isinstance(value, str):
        value = _import_path(value)
    if isinstance(value, type) and issubclass(value, DefaultCallbacks):
        return
    if isinstance(value, MultiCallbacks):
        bad = [c for c in value._callback_class_list if not (isinstance(c, type) and issubclass(c, DefaultCallbacks))]
        if bad:
            raise ConfigError(f"MultiCallbacks takes DefaultCallbacks subclasses, got {bad!r}; pass the classes, "
                              "not instances: MultiCallbacks([ClassA, ClassB]).")
        return
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(LEGACY_HOOK_KEYS.values()))
        if unknown:
            raise ConfigError(f"callbacks dict has unknown keys {unknown}; the legacy dict takes "
                              f"{', '.join(sorted(LEGACY_HOOK_KEYS.values()))} (other hooks need a DefaultCallbacks "
                              "subclass).")
        not_callable = sorted(k for k, fn in value.items() if not callable(fn))
        if not_callable:
            raise ConfigError(f"callbacks dict entries {not_callable} are not callable; each must be a function "
                              "taking one info dict.")
        return
    given = f"an instance of {type(value).__name__}" if isinstance(value, DefaultCallbacks) else repr(value)
    raise ConfigError(f"callbacks={given} is not allowed; use {ALLOWED_FORMS}."
                      + (" Pass the class, not an instance." if isinstance(value, DefaultCallbacks) else ""))


def make_callbacks(value: Any) -> DefaultCallbacks:
    """Builds the callbacks object a ``config["callbacks"]`` value describes.

    Raises:
        ConfigError: For a value :func:`check_callbacks` refuses.
    """
    check_callbacks(value)
    if value is None:
        return DefaultCallbacks()
    if isinstance(value, str):
        value = _import_path(value)
    if isinstance(value, dict):
        return DefaultCallbacks(legacy_callbacks_dict=value)
    return value()


def callbacks_spec(value: Any) -> Any:
    """A JSON-able stand-in for a ``config["callbacks"]`` value, for checkpoints: the
    dotted path of an importable class (which restores as that class), the value itself
    for a path, else a ``{"__repr__": ...}`` record (restored as ``DefaultCallbacks``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, type) and "<" not in value.__qualname__ and value.__module__ != "__main__":
        path = _qualified_name(value)
        try:
            if _import_path(path) is value:
                return path
        except ConfigError:
            pass
    return {"__repr__": repr(value)}


def with_callbacks_specs(config: dict[str, Any]) -> dict[str, Any]:
    """A shallow copy of a trainer config with :func:`callbacks_spec` applied to its
    ``callbacks`` and its ``evaluation_config``'s (what a checkpoint stores)."""
    config = dict(config)
    if "callbacks" in config:
        config["callbacks"] = callbacks_spec(config["callbacks"])
    evaluation = config.get("evaluation_config")
    if isinstance(evaluation, dict) and "callbacks" in evaluation:
        config["evaluation_config"] = {**evaluation, "callbacks": callbacks_spec(evaluation["callbacks"])}
    return config


def restorable_callbacks(config: dict[str, Any]) -> list[str]:
    """Drops, in place, the callbacks entries of a config read from a checkpoint that were
    stored only as a repr (see :func:`with_callbacks_specs`); returns those reprs."""
    dropped = []
    for section in (config, config.get("evaluation_config")):
        stored = section.get("callbacks") if isinstance(section, dict) else None
        if isinstance(stored, dict) and "__repr__" in stored:
            section.pop("callbacks")
            dropped.append(str(stored["__repr__"]))
    return dropped
