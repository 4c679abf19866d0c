"""Unit tests for rlstack/utils/filters.py and rlstack/utils/schedules.py."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.utils.filters import MeanStdFilter, NoFilter, RunningStat, make_filter
from rlstack.utils.schedules import PiecewiseSchedule, make_schedule


def _data(seed: int, n: int, shape=(3,)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(loc=[1.0, -2.0, 5.0], scale=[0.5, 2.0, 10.0], size=(n, *shape))


# --- RunningStat / MeanStdFilter ------------------------------------------------------


def test_running_stat_matches_numpy_over_several_batches():
    stat = RunningStat((3,))
    chunks = [_data(0, 7), _data(1, 1), _data(2, 0), _data(3, 25)]
    for chunk in chunks:
        stat.push_batch(chunk)
    everything = np.concatenate(chunks)
    assert stat.count == 33
    np.testing.assert_allclose(stat.mean, everything.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(stat.std, everything.std(axis=0, ddof=1), rtol=1e-10)


def test_running_stat_std_is_one_before_two_values():
    stat = RunningStat((2,))
    np.testing.assert_array_equal(stat.std, [1.0, 1.0])
    stat.push_batch(np.array([[3.0, 4.0]]))
    np.testing.assert_array_equal(stat.std, [1.0, 1.0])
    np.testing.assert_array_equal(stat.mean, [3.0, 4.0])


def test_mean_std_filter_running_stats_and_output():
    f = MeanStdFilter((3,))
    a, b = _data(0, 40), _data(1, 60)
    f(a)
    out = f(b)
    everything = np.concatenate([a, b])
    np.testing.assert_allclose(f.running.mean, everything.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(f.running.std, everything.std(axis=0, ddof=1), rtol=1e-10)
    expected = (b - everything.mean(axis=0)) / (everything.std(axis=0, ddof=1) + 1e-8)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_mean_std_filter_update_false_does_not_count():
    f = MeanStdFilter((3,))
    f(_data(0, 10))
    state = f.get_state()
    f(_data(1, 10) + 100.0, update=False)
    assert f.running.count == 10
    np.testing.assert_array_equal(f.get_state()["mean"], state["mean"])


def test_mean_std_filter_clips():
    f = MeanStdFilter((1,), clip=2.0)
    f(np.array([[0.0], [1.0], [0.0], [1.0]]))
    out = f(np.array([[1000.0], [-1000.0]]), update=False)
    np.testing.assert_array_equal(out, [[2.0], [-2.0]])


def test_merging_buffers_equals_stats_of_concatenated_data():
    driver = MeanStdFilter((3,))
    worker1 = MeanStdFilter((3,))
    worker2 = MeanStdFilter((3,))
    d0, w1a, w1b, w2 = _data(0, 5), _data(1, 17), _data(2, 3), _data(3, 40)
    driver(d0)
    worker1(w1a)
    worker1(w1b)
    worker2(w2)
    driver.apply_buffer(worker1.flush_buffer())
    driver.apply_buffer(worker2.flush_buffer())
    everything = np.concatenate([d0, w1a, w1b, w2])
    assert driver.running.count == len(everything)
    np.testing.assert_allclose(driver.running.mean, everything.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(driver.running.std, everything.std(axis=0, ddof=1), rtol=1e-10)


def test_flush_buffer_holds_only_data_since_last_flush():
    f = MeanStdFilter((3,))
    first, second = _data(0, 8), _data(1, 12)
    f(first)
    buf1 = f.flush_buffer()
    assert int(buf1["count"]) == 8
    np.testing.assert_allclose(buf1["mean"], first.mean(axis=0), rtol=1e-10)
    f(second)
    buf2 = f.flush_buffer()
    assert int(buf2["count"]) == 12
    np.testing.assert_allclose(buf2["mean"], second.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(buf2["m2"], ((second - second.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-10)
    assert int(f.flush_buffer()["count"]) == 0
    # the running stats still hold everything
    assert f.running.count == 20


def test_apply_empty_buffer_is_noop():
    f = MeanStdFilter((3,))
    f(_data(0, 4))
    before = f.get_state()
    f.apply_buffer(MeanStdFilter((3,)).flush_buffer())
    after = f.get_state()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])


def test_get_state_set_state_round_trip():
    f = MeanStdFilter((3,))
    f(_data(0, 30))
    state = f.get_state()
    g = MeanStdFilter((3,))
    g(_data(5, 3))  # something to overwrite, including a non-empty buffer
    g.set_state(state)
    assert g.running.count == 30
    np.testing.assert_array_equal(g.running.mean, f.running.mean)
    np.testing.assert_array_equal(g.running.m2, f.running.m2)
    assert int(g.flush_buffer()["count"]) == 0  # set_state clears the sync buffer
    x = _data(9, 4)
    np.testing.assert_array_equal(g(x, update=False), f(x, update=False))
    # the state is a copy: later updates of f do not change it
    f(_data(1, 10))
    assert int(state["count"]) == 30


def test_no_filter_is_identity():
    f = NoFilter()
    x = _data(0, 4)
    assert f(x) is x
    assert f.get_state() == {} and f.flush_buffer() == {}


def test_make_filter():
    assert isinstance(make_filter("NoFilter", (3,)), NoFilter)
    mean_std = make_filter("MeanStdFilter", (4,))
    assert isinstance(mean_std, MeanStdFilter) and mean_std.shape == (4,)
    with pytest.raises(ConfigError, match="'MeanStd'"):
        make_filter("MeanStd", (3,))


# --- PiecewiseSchedule ----------------------------------------------------------------


def test_piecewise_schedule_interpolates_and_clamps():
    s = PiecewiseSchedule([[0, 1.0], [100, 0.0], [200, 0.5]])
    assert s.value(-10) == 1.0
    assert s.value(0) == 1.0
    assert s.value(25) == pytest.approx(0.75)
    assert s.value(100) == pytest.approx(0.0)
    assert s.value(150) == pytest.approx(0.25)
    assert s.value(200) == 0.5
    assert s.value(10_000) == 0.5


def test_piecewise_schedule_first_point_not_at_zero():
    s = PiecewiseSchedule([(1000, 2e-3), (2000, 1e-3)])
    assert s.value(0) == 2e-3
    assert s.value(1500) == pytest.approx(1.5e-3)


def test_piecewise_schedule_single_point_is_constant():
    s = PiecewiseSchedule([[50, 0.3]])
    assert s.value(0) == 0.3 and s.value(50) == 0.3 and s.value(1e9) == 0.3


def test_piecewise_schedule_rejects_decreasing_timesteps():
    with pytest.raises(ConfigError, match="lr_schedule timesteps must not decrease"):
        PiecewiseSchedule([[0, 1.0], [100, 0.5], [50, 0.1]], name="lr_schedule")


@pytest.mark.parametrize("endpoints", [[], [[0, 1.0, 2.0]], [5], [[0, 1], "ab"]])
def test_piecewise_schedule_rejects_malformed(endpoints):
    with pytest.raises(ConfigError):
        PiecewiseSchedule(endpoints, name="entropy_coeff_schedule")


def test_make_schedule_constant_and_endpoints():
    assert make_schedule(0.01, None, "lr").value(12345) == 0.01
    assert make_schedule(0.01, [[0, 1.0], [10, 0.0]], "lr").value(5) == pytest.approx(0.5)
