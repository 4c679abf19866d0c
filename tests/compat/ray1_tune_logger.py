"""A stand-in for Ray 1.x Tune's ``Logger`` and ``LegacyLoggerCallback``, which Ray 2.x
removed, written on Ray 2.x's ``LoggerCallback``: what a user whose RLlib 1.13 script
subclasses Tune's ``Logger`` writes once (a fixture of ``make test-compat``, not rlstack's).
"""

from __future__ import annotations

from typing import Any

from ray.tune.logger import LoggerCallback


class Logger:
    """Ray 1.x's Tune logger interface: built with ``(config, logdir, trial)``, then
    ``on_result(result)`` per result, ``flush()`` and ``close()`` at the end."""

    def __init__(self, config: dict, logdir: str, trial: Any = None) -> None:
        self.config = config
        self.logdir = logdir
        self.trial = trial
        self._init()

    def _init(self) -> None:
        pass

    def on_result(self, result: dict) -> None:
        pass

    def update_config(self, config: dict) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class LegacyLoggerCallback(LoggerCallback):
    """Runs 1.x ``Logger`` classes for each Tune trial."""

    def __init__(self, logger_classes: Any) -> None:
        self.logger_classes = list(logger_classes) if isinstance(logger_classes, (list, tuple)) else [logger_classes]
        self._loggers: dict[Any, list[Logger]] = {}

    def log_trial_result(self, iteration: int, trial: Any, result: dict) -> None:
        if trial not in self._loggers:
            self._loggers[trial] = [cls(trial.config, trial.local_path, trial) for cls in self.logger_classes]
        for logger in self._loggers[trial]:
            logger.on_result(result)

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        for logger in self._loggers.pop(trial, []):
            logger.flush()
            logger.close()
