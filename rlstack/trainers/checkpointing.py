"""Trainer checkpoints: ``save`` / ``restore`` / ``from_checkpoint`` and what goes into a
checkpoint directory (the format itself is :mod:`rlstack.trainers.checkpoint`'s): the
manifest's metadata and config, each policy's state and observation-filter statistics
(one file per policy in a multi-agent run), and the algorithm's own arrays. A mixin of
:class:`~rlstack.trainers.trainer.Trainer`, which supplies ``config``, ``workers``,
``learner_policy``, ``_counters``, ``global_timestep`` and Tune's ``Trainable`` state.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray import tune

import rlstack
from rlstack.env.registry import env_spec_name
from rlstack.errors import CheckpointError
from rlstack.evaluation.callbacks import restorable_callbacks, with_callbacks_specs
from rlstack.policies.policy import Policy
from rlstack.trainers import checkpoint as ckpt
from rlstack.trainers.multi_agent import restorable_multiagent, with_multiagent_paths

logger = logging.getLogger(__name__)

__all__ = ["CheckpointMixin"]


class CheckpointMixin:
    """Saving and restoring a trainer (see the module docstring)."""

    config: dict[str, Any]
    workers: Any
    learner_policy: Policy
    _counters: dict[str, int]
    _name: str
    _default_config: dict[str, Any]

    @classmethod
    def from_checkpoint(cls, checkpoint: Any, env: Any = None, config_overrides: dict[str, Any] | None = None) -> "Trainer":
        """Builds a trainer from a checkpoint's stored config and restores it.

        Args:
            checkpoint: A path from :meth:`save`, a ``tune.Checkpoint`` or a Tune result.
            env: The env, needed when the checkpoint's env was an object rather than a
                name (objects are stored only as their repr).
            config_overrides: Config keys to change (e.g. ``{"num_workers": 0}``).

        Raises:
            CheckpointError: If the checkpoint cannot be read or is of another algorithm.
        """
        checkpoint = getattr(checkpoint, "checkpoint", checkpoint)
        if isinstance(checkpoint, tune.Checkpoint):
            with checkpoint.as_directory() as directory:
                metadata, _ = ckpt.read_checkpoint(directory)
        else:
            metadata, _ = ckpt.read_checkpoint(checkpoint)
        if metadata.get("algorithm") != cls._name:
            raise CheckpointError(
                f"Checkpoint was written by {metadata.get('algorithm')!r}; load it with "
                f"{metadata.get('algorithm')}'s trainer, not {cls._name}'s."
            )
        config = {k: v for k, v in metadata["config"].items() if k in cls._default_config}
        if env is not None:
            config["env"] = env
        elif isinstance(config.get("env"), dict):
            raise CheckpointError(
                f"The checkpoint's env was an object ({config['env'].get('__repr__')}); pass it again: "
                f"{cls.__name__}.from_checkpoint(path, env=...)."
            )
        config.update(config_overrides or {})
        restorable_multiagent(config)
        # After the overrides: they may carry the stored config back (rlstack evaluate does).
        dropped = restorable_callbacks(config)
        if dropped:  # callbacks that could not be stored as an import path
            logger.warning("The checkpoint's callbacks (%s) were not importable and are not restored; pass them "
                           "with config_overrides={'callbacks': ...}.", ", ".join(dropped))
        trainer = cls(config)
        trainer.restore(checkpoint)
        return trainer


    def save(self, checkpoint_dir: str | None = None) -> Any:
        """Writes a checkpoint and returns its directory.

        Outside Tune this returns the checkpoint's path (a ``str``), by default
        ``<logdir>/checkpoint_<iteration>``, written atomically. Under Tune it returns
        what Tune expects (Tune manages the directory and its upload).
        """
        if self._storage is not None:
            return super().save(checkpoint_dir)
        target = checkpoint_dir or os.path.join(self.logdir, f"checkpoint_{self.iteration:06d}")
        return ckpt.save_atomic(target, self.save_checkpoint)

    def restore(self, checkpoint_path: Any) -> None:
        """Loads a checkpoint from :meth:`save`: a path, a ``tune.Checkpoint`` or a Tune result.

        Unlike ``Trainable.restore`` this never unpickles anything: a directory that holds
        Ray's pickled dict checkpoint is refused.

        Raises:
            CheckpointError: If the checkpoint is missing, incomplete, corrupt, or from
                another algorithm, framework or model config.
        """
        checkpoint = getattr(checkpoint_path, "checkpoint", checkpoint_path)  # a Tune result
        if isinstance(checkpoint, tune.Checkpoint):  # (it is also os.PathLike, to refuse that use)
            with checkpoint.as_directory() as directory:
                self._restore_from_directory(directory)
            return
        if isinstance(checkpoint, (str, os.PathLike)):
            # A missing or foreign directory is described by read_checkpoint.
            self._restore_from_directory(str(Path(checkpoint).absolute()))
            return
        raise CheckpointError(
            f"Cannot restore from a {type(checkpoint).__name__}; pass the path returned by save(), "
            "a ray.tune.Checkpoint or a Tune result."
        )

    def _restore_from_directory(self, directory: str) -> None:
        if (Path(directory) / "_dict_checkpoint.pkl").exists():
            raise CheckpointError(
                f"{directory!r} holds a pickled Tune dict checkpoint, which rlstack never loads (unpickling "
                "runs code); restore from a checkpoint written by an rlstack trainer."
            )
        self.load_checkpoint(directory)
        self._time_since_restore = 0.0
        self._timesteps_since_restore = 0
        self._iterations_since_restore = 0
        self._restored = True

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        policy = self.learner_policy
        metadata = {
            "rlstack_version": rlstack.__version__,
            "ray_version": ray.__version__,
            "algorithm": self._name,
            "framework": self.config["framework"],
            "framework_version": ckpt.framework_version(self.config["framework"]),
            "policy_class": f"{type(policy).__module__}.{type(policy).__qualname__}",
            "iteration": self.iteration,
            "time_total_s": self._time_total,
            "counters": dict(self._counters),
            "env": env_spec_name(self.config["env"]),
            "config": ckpt.to_jsonable(with_multiagent_paths(with_callbacks_specs(self.config))),
        }
        policy_metadata, arrays = self.policy_checkpoint_arrays()
        ckpt.write_checkpoint(checkpoint_dir, {**metadata, **policy_metadata},
                              {**arrays, **self.extra_checkpoint_arrays()})
        return None

    def extra_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """Algorithm state beyond the policy's (e.g. a replay buffer), as groups of arrays."""
        return {}

    def restore_extra_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        """Restores what :meth:`extra_checkpoint_arrays` saved (groups may be missing)."""

    def load_checkpoint(self, checkpoint: Any) -> None:
        if isinstance(checkpoint, dict):
            raise CheckpointError("This is a Tune dict checkpoint, not an rlstack checkpoint directory.")
        metadata, arrays = ckpt.read_checkpoint(checkpoint)
        if metadata.get("algorithm") != self._name:
            raise CheckpointError(
                f"Checkpoint {checkpoint!r} was written by {metadata.get('algorithm')!r}, not {self._name!r}; "
                f"restore it with the {metadata.get('algorithm')} trainer: "
                f"rlstack.get_trainer_class({metadata.get('algorithm')!r}).from_checkpoint(path)."
            )
        if metadata.get("framework") != self.config["framework"]:
            raise CheckpointError(
                f"Checkpoint {checkpoint!r} holds a {metadata.get('framework')!r} policy but this trainer uses "
                f"framework={self.config['framework']!r}; set config['framework'] = {metadata.get('framework')!r}."
            )
        saved_model = (metadata.get("config") or {}).get("model") or {}
        differing = [key for key in _MODEL_SHAPE_KEYS
                     if ckpt.to_jsonable(self.config["model"].get(key)) != saved_model.get(key)]
        if differing:
            details = ", ".join(f"{key}: checkpoint {saved_model.get(key)!r} vs trainer "
                                f"{self.config['model'].get(key)!r}" for key in differing)
            raise CheckpointError(
                f"Checkpoint {checkpoint!r} was saved with another network ({details}); build the trainer with "
                "the checkpoint's model config, e.g. with the config stored in its rlstack_checkpoint.json."
            )
        self.restore_policy_arrays(metadata, arrays, checkpoint)
        self.restore_extra_arrays(arrays)
        self._counters.update(metadata.get("counters", {}))
        self._iteration = int(metadata.get("iteration", 0))
        self._time_total = float(metadata.get("time_total_s", 0.0))
        self._timesteps_total = self._counters["num_env_steps_sampled"]
        self.workers.sync_weights(self.global_timestep())

    # ----- policies and filters in a checkpoint ------------------------------------------------

    def policy_checkpoint_arrays(self) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
        """``(manifest entries, array groups)`` holding every policy's state and filter.

        Single-agent: ``policy_state`` and ``filters``. Multi-agent: ``policy_state_<i>``
        per policy, the manifest's ``policies`` mapping each id to its file, and
        ``filters`` with each policy's statistics under ``<i>/<name>``.
        """
        local = self.workers.local_worker()
        if local.policies is None:
            return {}, {"policy_state": self.learner_policy.get_state(), "filters": local.get_filter_state()}
        files = {pid: f"policy_state_{i}" for i, pid in enumerate(local.policy_map)}
        arrays = {files[pid]: policy.get_state() for pid, policy in local.policy_map.items()}
        filters = local.get_filter_state()
        arrays["filters"] = {f"{files[pid][len('policy_state_'):]}/{name}": value
                             for pid, state in filters.items() for name, value in state.items()}
        return {"policies": files}, arrays

    def restore_policy_arrays(self, metadata: dict[str, Any], arrays: dict[str, dict[str, np.ndarray]],
                              checkpoint: Any) -> None:
        """Loads what :meth:`policy_checkpoint_arrays` wrote.

        Raises:
            CheckpointError: If the checkpoint's policies are not this trainer's.
        """
        local = self.workers.local_worker()
        files = metadata.get("policies")
        if (local.policies is None) != (files is None):
            kind = "a multi-agent" if files is not None else "a single-agent"
            raise CheckpointError(f"Checkpoint {checkpoint!r} is {kind} checkpoint but this trainer is not; build it "
                                  "with the checkpoint's multiagent config (rlstack_checkpoint.json).")
        if files is None:
            if "policy_state" not in arrays:
                raise CheckpointError(f"Checkpoint {checkpoint!r} has no policy_state.npz; it is incomplete.")
            self.learner_policy.set_state(arrays["policy_state"])
            if arrays.get("filters"):
                self.workers.set_filter_state(arrays["filters"])
            return
        if set(files) != set(local.policy_map):
            raise CheckpointError(f"Checkpoint {checkpoint!r} holds policies {sorted(files)} but this trainer has "
                                  f"{sorted(local.policy_map)}; build it with the checkpoint's multiagent.policies.")
        missing = [name for name in files.values() if name not in arrays]
        if missing:
            raise CheckpointError(f"Checkpoint {checkpoint!r} has no {', '.join(missing)}.npz; it is incomplete.")
        for pid, name in files.items():
            local.get_policy(pid).set_state(arrays[name])
        saved = arrays.get("filters") or {}
        filters = {pid: {key.split("/", 1)[1]: value for key, value in saved.items()
                         if key.split("/", 1)[0] == name[len("policy_state_"):]} for pid, name in files.items()}
        if any(filters.values()):
            self.workers.set_filter_state({pid: state for pid, state in filters.items() if state})


# Model keys that decide the network's layers and shapes.
_MODEL_SHAPE_KEYS = ("fcnet_hiddens", "conv_filters", "post_fcnet_hiddens", "vf_share_layers", "free_log_std",
                     "custom_model", "custom_action_dist")
