"""Classic RLlib 1.x's test helpers (``ray.rllib.utils.test_utils``) that example scripts use.

* :func:`check_learning_achieved`: did a Tune run reach a reward? (the last line of
  most 1.13 example scripts, run under ``--as-test``).
* :func:`check`: compare nested structures of numbers, arrays and tensors.
* :func:`framework_iterator`: run a test body once per installed framework.

Neither imports torch or TensorFlow: tensors are recognised by their methods.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["check", "check_learning_achieved", "framework_iterator"]

_REWARD = "episode_reward_mean"


def _last_results(tune_results: Any) -> list[tuple[str, dict[str, Any]]]:
    # ExperimentAnalysis (tune.run) has .trials with .last_result; ResultGrid
    # (tune.Tuner.fit) iterates over Results with .metrics.
    if hasattr(tune_results, "trials"):
        return [(getattr(t, "trainable_name", "") or "", t.last_result or {}) for t in tune_results.trials]
    if hasattr(tune_results, "get_best_result"):
        # A trial's directory starts with its trainable's name: PPO_CartPole-v1_....
        results = [tune_results[i] for i in range(len(tune_results))]
        return [(os.path.basename(str(r.path or "")).split("_")[0], r.metrics or {}) for r in results]
    raise TypeError(
        f"check_learning_achieved takes what tune.run() returns (an ExperimentAnalysis) or tune.Tuner.fit()'s "
        f"ResultGrid; got {type(tune_results).__name__}."
    )


def _reward_of(result: dict[str, Any], evaluation: bool) -> float | None:
    if evaluation:
        value = (result.get("evaluation") or {}).get(_REWARD, result.get(f"evaluation/{_REWARD}"))
    else:
        value = result.get(_REWARD)
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return float(value)


def check_learning_achieved(tune_results: Any, min_reward: float | None = None, evaluation: bool = False,
                            *, min_value: float | None = None) -> None:
    """Raises unless the best trial reached ``min_reward`` (1.13's check, also under 2.x's name).

    Reads each trial's last ``episode_reward_mean`` (or ``evaluation/episode_reward_mean``
    with ``evaluation=True``) and compares the best of them with ``min_reward``.

    Args:
        tune_results: What ``tune.run(...)`` returns (an ``ExperimentAnalysis``) or
            ``tune.Tuner(...).fit()``'s ``ResultGrid``.
        min_reward: The reward the best trial must have reached.
        evaluation: Read the evaluation results' reward instead of the training one.
        min_value: 2.x's name of ``min_reward``.

    Raises:
        ValueError: If no trial reached ``min_reward`` (or none reported the reward).
        TypeError: If ``tune_results`` is neither of the above, or no threshold is given.
    """
    threshold = min_reward if min_reward is not None else min_value
    if threshold is None:
        raise TypeError("check_learning_achieved needs the reward to reach: check_learning_achieved(results, 150.0).")
    rows = _last_results(tune_results)
    key = f"evaluation/{_REWARD}" if evaluation else _REWARD
    rewards = [(name, _reward_of(result, evaluation)) for name, result in rows]
    reported = [(name, r) for name, r in rewards if r is not None]
    names = sorted({name for name, _ in rows if name}) or ["the trainer"]
    algorithm = ", ".join(f"`{n}`" for n in names)
    if not reported:
        raise ValueError(f"{algorithm} not learnt to return {threshold} ({key}): no trial reported {key}"
                         + (" (is evaluation_interval set?)" if evaluation else "") + ".")
    best = max(r for _, r in reported)
    if best < threshold:
        raise ValueError(f"{algorithm} not learnt to return {threshold} ({key}): `stop-reward` of {threshold} not "
                         f"reached; the best of {len(reported)} trial(s) reached {best:.3f}.")
    print(f"ok: {key} {best:.3f} >= {threshold}")


def _to_numpy(value: Any) -> Any:
    # torch tensors (detach), TF eager tensors and variables (numpy), without importing either.
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu().numpy()
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray) and callable(value.numpy):
        return value.numpy()
    return value


def check(x: Any, y: Any, decimals: int = 5, atol: float | None = None, rtol: float | None = None,
          false: bool = False) -> None:
    """Asserts that two nested structures hold the same values (1.13's ``check``).

    Dicts are compared key by key, lists and tuples item by item; numbers, numpy arrays
    and torch/TF tensors numerically (to ``decimals`` places, or with ``atol``/``rtol``
    when either is given); bools, strings and None exactly.

    Args:
        x: The value computed.
        y: The value expected.
        decimals: Decimal places that must agree (when neither ``atol`` nor ``rtol`` is given).
        atol: Absolute tolerance (``np.testing.assert_allclose``).
        rtol: Relative tolerance (``np.testing.assert_allclose``).
        false: Assert that the two are NOT equal instead.

    Raises:
        AssertionError: If they differ (or, with ``false=True``, if they are equal).
    """
    if false:
        try:
            check(x, y, decimals=decimals, atol=atol, rtol=rtol)
        except AssertionError:
            return
        raise AssertionError(f"check(..., false=True): expected a difference, but {x!r} equals {y!r}.")
    x, y = _to_numpy(x), _to_numpy(y)
    if isinstance(x, Mapping):
        assert isinstance(y, Mapping), f"x is a dict, y is a {type(y).__name__}: {y!r}"
        assert set(x) == set(y), f"the dicts' keys differ: {sorted(map(str, set(x) ^ set(y)))} in one only"
        for key in x:
            try:
                check(x[key], y[key], decimals=decimals, atol=atol, rtol=rtol)
            except AssertionError as exc:
                raise AssertionError(f"at key {key!r}: {exc}") from None
        return
    if isinstance(x, (list, tuple)):
        assert isinstance(y, (list, tuple, np.ndarray)), f"x is a {type(x).__name__}, y is a {type(y).__name__}"
        assert len(x) == len(y), f"lengths differ: {len(x)} vs {len(y)}"
        for i, (a, b) in enumerate(zip(x, y)):
            try:
                check(a, b, decimals=decimals, atol=atol, rtol=rtol)
            except AssertionError as exc:
                raise AssertionError(f"at index {i}: {exc}") from None
        return
    if x is None or y is None or isinstance(x, (bool, str, np.bool_)) or isinstance(y, (bool, str, np.bool_)):
        assert x == y, f"{x!r} != {y!r}"
        return
    if isinstance(x, (numbers.Number, np.ndarray, np.generic)):
        x_arr, y_arr = np.asarray(x), np.asarray(y)
        if x_arr.dtype.kind in "OUS" or y_arr.dtype.kind in "OUS":
            np.testing.assert_array_equal(x_arr, y_arr)
        elif atol is None and rtol is None:
            np.testing.assert_almost_equal(x_arr, y_arr, decimal=decimals)
        else:
            np.testing.assert_allclose(x_arr, y_arr, atol=0.0 if atol is None else atol,
                                       rtol=1e-7 if rtol is None else rtol)
        return
    assert x == y, f"{x!r} != {y!r}"


def framework_iterator(config: dict[str, Any] | None = None, frameworks: Sequence[str] = ("tf2", "tf", "tfe", "torch"),
                       session: bool = False, with_eager_tracing: bool = False,
                       time_iterations: dict[str, Any] | None = None) -> Iterator[str]:
    """Yields each framework rlstack runs, setting ``config["framework"]`` to it (1.13's helper).

    rlstack's TF policies are TF 2 code (``"tf2"`` and 1.x's eager ``"tfe"`` are the same
    as ``"tf"`` here), so each of them is yielded once, as ``"tf"``; a framework that is
    not installed is skipped.

    Args:
        config: A config dict whose ``"framework"`` is set before each yield (and restored after).
        frameworks: The frameworks to run, as 1.x spelled them.
        session: 1.x's TF1 session mode; rlstack has no TF1 sessions, so only False.
        with_eager_tracing: Accepted; rlstack's TF policies always run as ``tf.function``.
        time_iterations: Accepted for 1.x tests; not filled in.

    Yields:
        ``"tf"`` or ``"torch"``.

    Raises:
        ValueError: For ``session=True`` or a framework name rlstack does not know.
    """
    from rlstack.utils.framework import _is_installed

    if session:
        raise ValueError("framework_iterator(session=True): rlstack has no TF1 sessions (its TF policies are TF 2 "
                         "code); leave session out.")
    canonical = []
    for name in frameworks:
        if name not in ("tf", "tf2", "tfe", "torch"):
            raise ValueError(f"Unknown framework {name!r}; framework_iterator takes 'tf', 'tf2', 'tfe' or 'torch'.")
        framework = "torch" if name == "torch" else "tf"
        if framework not in canonical and _is_installed("torch" if framework == "torch" else "tensorflow"):
            canonical.append(framework)
    previous = (config or {}).get("framework")
    try:
        for framework in canonical:
            if config is not None:
                config["framework"] = framework
            yield framework
    finally:
        if config is not None and previous is not None:
            config["framework"] = previous
