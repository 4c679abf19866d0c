"""RLlib 1.13's ``ray.rllib.execution.metric_ops``: the end of an execution plan, where
each training iteration's result dict is made.

``StandardMetricsReporting(train_op, workers, config)`` lets ``train_op`` run until the
iteration may report (``min_sample_timesteps_per_reporting``, 1.x's
``timesteps_per_iteration``, and ``min_time_s_per_reporting``), then yields the result
the trainer builds for every algorithm (``Trainer.iteration_result``: episode
statistics over ``metrics_smoothing_episodes``, counters, timers, ``info/learner``), so a
plan's results carry the same keys as a ``training_step``'s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlstack.execution.common import STEPS_SAMPLED_COUNTER, STEPS_TRAINED_COUNTER, _get_shared_metrics
from rlstack.execution.local_iterator import LocalIterator
from rlstack.utils.metrics.learner_info import LEARNER_INFO

if TYPE_CHECKING:
    from rlstack.evaluation.worker_set import WorkerSet

__all__ = ["CollectMetrics", "OncePerTimeInterval", "OncePerTimestepsElapsed", "StandardMetricsReporting"]


def StandardMetricsReporting(train_op: LocalIterator[Any], workers: "WorkerSet",  # noqa: N802 - 1.x's name
                             config: dict[str, Any], selected_workers: Sequence[Any] | None = None,
                             by_steps_trained: bool = False) -> LocalIterator[dict[str, Any]]:
    """``train_op``, reporting one result dict per training iteration (1.x's operator).

    Args:
        train_op: The plan's learning branch (its items are not used).
        workers: The trainer's WorkerSet.
        config: The trainer's config: ``min_sample_timesteps_per_reporting`` and
            ``min_time_s_per_reporting`` say when an iteration may report.
        selected_workers: Accepted for 1.x's sake: episodes come from all of the
            trainer's workers.
        by_steps_trained: Count trained steps for the reporting threshold and
            ``timesteps_total``.

    Returns:
        An iterator of result dicts.
    """
    steps = config.get("min_sample_timesteps_per_reporting", config.get("timesteps_per_iteration")) or 0
    seconds = config.get("min_time_s_per_reporting", config.get("min_iter_time_s")) or 0
    return (train_op.filter(OncePerTimestepsElapsed(steps, by_steps_trained=by_steps_trained))
            .filter(OncePerTimeInterval(seconds))
            .for_each(CollectMetrics(workers, selected_workers=selected_workers, by_steps_trained=by_steps_trained)))


class CollectMetrics:
    """For ``.for_each()``: the iteration's result dict (1.x's operator), built by the
    trainer running the plan (``Trainer.iteration_result``) from the learner info the last
    ``TrainOneStep`` recorded.

    Args:
        workers: The trainer's WorkerSet.
        min_history: Accepted for 1.x's sake: episodes are smoothed over the config's
            ``metrics_smoothing_episodes``.
        timeout_seconds: Accepted for 1.x's sake.
        keep_per_episode_custom_metrics: Accepted for 1.x's sake: the config's key of that
            name decides, as for every result the trainer builds.
        selected_workers: Accepted for 1.x's sake (episodes come from all workers).
        by_steps_trained: ``timesteps_total`` counts trained steps.
    """

    def __init__(self, workers: "WorkerSet", min_history: int = 100, timeout_seconds: float = 180,
                 keep_per_episode_custom_metrics: bool = False, selected_workers: Sequence[Any] | None = None,
                 by_steps_trained: bool = False) -> None:
        self.workers = workers
        self.by_steps_trained = by_steps_trained

    def __call__(self, _: Any) -> dict[str, Any]:
        """The result dict.

        Raises:
            RuntimeError: Outside a trainer's execution plan.
        """
        metrics = _get_shared_metrics()
        trainer = metrics.trainer
        if trainer is None:
            raise RuntimeError("CollectMetrics / StandardMetricsReporting run inside a trainer's execution plan: the "
                               "trainer builds the result dict.")
        result = trainer.iteration_result(metrics.info.get(LEARNER_INFO) or trainer.last_learner_info())
        if self.by_steps_trained:
            result["timesteps_total"] = metrics.counters[STEPS_TRAINED_COUNTER]
        # Counters a plan keeps beyond those the result shows already (target updates, a
        # user's own), in info as 1.x had them.
        for name, value in metrics.counters.items():
            if name not in result and name not in result["info"]:
                result["info"][name] = value
        metrics.last_result = result
        return result


class OncePerTimeInterval:
    """For ``.filter()``: true at most once per ``delay`` seconds (always without one).

    Args:
        delay: Seconds between true answers.
    """

    def __init__(self, delay: float | None = None) -> None:
        self.delay = float(delay or 0.0)
        self.last_returned_true = 0.0

    def __call__(self, item: Any) -> bool:
        """Whether ``delay`` seconds have passed since the last true answer."""
        if self.delay <= 0.0:
            return True
        now = time.time()
        if now - self.last_returned_true > self.delay:
            self.last_returned_true = now
            return True
        return False


class OncePerTimestepsElapsed:
    """For ``.filter()``: true once per ``delay_steps`` steps sampled (or trained),
    counted by the running plan (always true without a delay).

    Args:
        delay_steps: Steps between true answers.
        by_steps_trained: Count trained steps instead of sampled ones.
    """

    def __init__(self, delay_steps: int, by_steps_trained: bool = False) -> None:
        self.delay_steps = int(delay_steps or 0)
        self.metric = STEPS_TRAINED_COUNTER if by_steps_trained else STEPS_SAMPLED_COUNTER
        self.last_called = 0

    def __call__(self, item: Any) -> bool:
        """Whether ``delay_steps`` more steps were counted since the last true answer."""
        if self.delay_steps <= 0:
            return True
        now = _get_shared_metrics().counters[self.metric]
        if now - self.last_called >= self.delay_steps:
            self.last_called = now
            return True
        return False
