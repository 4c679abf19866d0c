"""Writes a standalone trainer's results where Tune would: ``params.json``,
``result.json`` (one JSON object per line), ``progress.csv`` and TensorBoard events.

Under Tune, Tune's own logger callbacks write these files in the trial directory, and
this logger stays off. :class:`UnifiedLogger` is the same writer under classic RLlib's
name and Logger interface, for 1.x scripts that pass a ``logger_creator`` (Ray 2.x no
longer has ``ray.tune.logger.UnifiedLogger``).
"""

from __future__ import annotations

import csv
import json
import logging
import sys
import math
import numbers
import os
from collections.abc import Callable
from typing import Any

from rlstack.trainers.common.checkpoint_files import to_jsonable

logger = logging.getLogger(__name__)

# Result entries that are not metrics (the config is in params.json).
_SKIP = ("config",)


def flatten(result: dict[str, Any], prefix: str = "", sep: str = "/") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}``."""
    flat: dict[str, Any] = {}
    for key, value in result.items():
        if not prefix and key in _SKIP:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}{sep}", sep))
        else:
            flat[name] = value
    return flat


def _summary_writer_class() -> Any:
    """tensorboardX's SummaryWriter, imported without importing torch.

    tensorboardX imports torch whenever it is installed (only to accept torch tensors, which
    we never pass); in a TF run that would break framework isolation and cost seconds and
    hundreds of MiB. tensorboardX falls back cleanly when ``import torch`` fails, so torch
    is blocked while it loads, unless this process already has torch.
    """
    block = "torch" not in sys.modules
    if block:
        sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        from tensorboardX import SummaryWriter

        return SummaryWriter
    except ImportError as exc:  # TensorBoard files are optional; the JSON and CSV are not.
        logger.warning("No TensorBoard event files: tensorboardX could not be imported (%s).", exc)
        return None
    finally:
        if block and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]


class ResultLogger:
    """Appends every result of a trainer to files in ``logdir``.

    Args:
        logdir: The trainer's log directory.
        config: The merged config, written once to ``params.json``.
    """

    def __init__(self, logdir: str, config: dict[str, Any]) -> None:
        self.logdir = logdir
        os.makedirs(logdir, exist_ok=True)
        with open(os.path.join(logdir, "params.json"), "w") as f:
            json.dump(to_jsonable(config), f, indent=2, sort_keys=True)
        self._json = open(os.path.join(logdir, "result.json"), "a")
        self._csv_file = None
        self._csv_path = os.path.join(logdir, "progress.csv")
        self._csv_columns: list[str] | None = None
        self._rows: list[dict[str, Any]] = []
        self._tb = None
        writer_class = _summary_writer_class()
        if writer_class is not None:
            self._tb = writer_class(logdir, flush_secs=30)

    def log(self, result: dict[str, Any]) -> None:
        """Writes one result (as returned by ``train()``)."""
        flat = flatten(result)
        self._json.write(json.dumps(to_jsonable({k: v for k, v in result.items() if k not in _SKIP}),
                                    allow_nan=True) + "\n")
        self._json.flush()
        self._write_csv(flat)
        if self._tb is not None:
            from tensorboardX.proto.summary_pb2 import Summary

            step = int(result.get("timesteps_total") or result.get("training_iteration") or 0)
            # One event holding every scalar: add_scalar would queue one event per value,
            # which for a result's hundred-odd keys costs a sizeable share of a small
            # iteration.
            values = [Summary.Value(tag=f"ray/tune/{key}", simple_value=float(value))
                      for key, value in flat.items()
                      if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)]
            self._tb._get_file_writer().add_summary(Summary(value=values), global_step=step)

    def _write_csv(self, flat: dict[str, Any]) -> None:
        row = {k: v for k, v in flat.items() if not isinstance(v, (list, tuple))}
        self._rows.append(row)
        if self._csv_columns is None or not set(row) <= set(self._csv_columns):
            # A new column appeared: rewrite the file with the union of columns.
            columns = list(self._csv_columns or [])
            columns += [k for k in row if k not in columns]
            self._csv_columns = columns
            if self._csv_file is not None:
                self._csv_file.close()
            self._csv_file = open(self._csv_path, "w", newline="")
            self._csv_writer = csv.DictWriter(self._csv_file, fieldnames=columns)
            self._csv_writer.writeheader()
            self._csv_writer.writerows(self._rows)
        else:
            self._csv_writer.writerow(row)
        self._csv_file.flush()

    def close(self) -> None:
        """Flushes and closes the files."""
        self._json.close()
        if self._csv_file is not None:
            self._csv_file.close()
        if self._tb is not None:
            self._tb.close()


class UnifiedLogger(ResultLogger):
    """Classic RLlib's ``UnifiedLogger(config, logdir, loggers=None)``: writes
    ``params.json``, ``result.json``, ``progress.csv`` and TensorBoard events into
    ``logdir``, for ``Trainer(..., logger_creator=lambda cfg: UnifiedLogger(cfg, logdir))``.

    Args:
        config: The config written to ``params.json``.
        logdir: The directory (created if missing).
        trial: Accepted for 1.x compatibility; unused.
        loggers: Accepted for 1.x compatibility; the three kinds of files are always written.
    """

    def __init__(self, config: dict[str, Any], logdir: str, trial: Any = None, loggers: Any = None) -> None:
        super().__init__(logdir, config)

    def on_result(self, result: dict[str, Any]) -> None:
        """Writes one result (1.x's Logger interface)."""
        self.log(result)

    def flush(self) -> None:
        """Results are flushed as they are written; kept for 1.x's Logger interface."""


def create_user_logger(logger_creator: Callable[[dict[str, Any]], Any], config: dict[str, Any]) -> tuple[Any, str]:
    """Calls a 1.x ``logger_creator(config)`` and returns ``(logger, logdir)``.

    Raises:
        ConfigError: If the logger has no ``logdir``.
    """
    from rlstack.errors import ConfigError

    user_logger = logger_creator(config)
    logdir = getattr(user_logger, "logdir", None)
    if not isinstance(logdir, (str, os.PathLike)):
        raise ConfigError(
            f"logger_creator returned a {type(user_logger).__name__} without a logdir attribute (got {logdir!r}); "
            "return a logger whose .logdir is the directory for this trainer's results, e.g. "
            "lambda config: rlstack.trainers.common.result_logger.UnifiedLogger(config, '/path/to/logdir')."
        )
    os.makedirs(logdir, exist_ok=True)
    return user_logger, os.fspath(logdir)


def results_writer(user_logger: Any, logdir: str, config: dict[str, Any]) -> Any:
    """What a standalone trainer writes its results with (an object with ``log`` and
    ``close``): the ``logger_creator``'s logger if it has 1.x's ``on_result``, else a
    :class:`ResultLogger` in ``logdir``."""
    if user_logger is not None and callable(getattr(user_logger, "on_result", None)):
        return _UserLogger(user_logger)
    return ResultLogger(logdir, config)


class _UserLogger:
    """Feeds results to a ``logger_creator``'s logger through 1.x's Logger interface."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def log(self, result: dict[str, Any]) -> None:
        self.logger.on_result(result)

    def close(self) -> None:
        for method in ("flush", "close"):
            if callable(getattr(self.logger, method, None)):
                getattr(self.logger, method)()
