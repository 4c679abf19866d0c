"""Experience files (rlstack.offline): 1.13's JSON layout both ways, packed columns that
never execute code, readers over files / globs / directories / mixes, writers that roll
files and keep every batch they wrote, SampleBatchBuilder, and the importance-sampling
estimators against hand-computed values."""

from __future__ import annotations

import base64
import json
import pickle

import lz4.frame
import numpy as np
import pytest

from rlstack.evaluation.sample_batch_builder import SampleBatchBuilder
from rlstack.offline import IOContext, JsonReader, JsonWriter, MixedInput, ShuffledInput
from rlstack.offline.estimators import ImportanceSampling, WeightedImportanceSampling
from rlstack.offline.input_reader import InputReader
from rlstack.offline.json_format import from_json, pack, to_json, unpack
from rlstack.sample_batch import MultiAgentBatch, SampleBatch

B = SampleBatch


def _batch(n: int = 5, start: int = 0) -> SampleBatch:
    return SampleBatch({B.OBS: np.arange(start, start + 2 * n, dtype=np.float32).reshape(n, 2),
                        B.NEXT_OBS: np.ones((n, 2), np.float32), B.ACTIONS: np.arange(n) % 2,
                        B.REWARDS: np.ones(n, np.float32), B.TERMINATEDS: np.arange(n) == n - 1,
                        B.TRUNCATEDS: np.zeros(n, bool), B.EPS_ID: np.full(n, 7),
                        B.ACTION_LOGP: np.log(np.full(n, 0.5, np.float32))})


@pytest.mark.parametrize("compress", [("obs", "new_obs"), ()])
def test_a_batch_survives_the_round_trip(compress):
    batch = _batch()
    back = from_json(to_json(batch, compress))
    for key in batch:
        np.testing.assert_array_equal(back[key], batch[key])
        assert back[key].dtype == batch[key].dtype or key == B.ACTION_LOGP
    line = json.loads(to_json(batch, compress))
    assert line["type"] == "SampleBatch" and line["dones"][-1] is True
    assert line["action_prob"] == pytest.approx([0.5] * 5)
    assert isinstance(line["obs"], str) == bool(compress)


def test_a_multi_agent_batch_survives_the_round_trip():
    batch = MultiAgentBatch({"a": _batch(3), "b": _batch(2)}, env_steps=4)
    back = from_json(to_json(batch))
    assert isinstance(back, MultiAgentBatch) and back.count == 4
    np.testing.assert_array_equal(back.policy_batches["b"][B.OBS], batch.policy_batches["b"][B.OBS])


def test_a_113_line_is_read_with_its_dones_and_action_prob():
    obs = np.arange(6, dtype=np.float32).reshape(3, 2)
    packed = base64.b64encode(lz4.frame.compress(pickle.dumps(obs))).decode("ascii")  # as 1.13 packs
    line = json.dumps({"type": "SampleBatch", "obs": packed, "actions": [0, 1, 1], "rewards": [1.0, 1.0, 1.0],
                       "dones": [False, False, True], "action_prob": [0.5, 0.25, 1.0], "eps_id": [3, 3, 3],
                       "infos": [{}, {"x": 1}, {}], "t": [0, 1, 2]})
    batch = from_json(line)
    np.testing.assert_array_equal(batch[B.OBS], obs)
    assert batch[B.TERMINATEDS].tolist() == [False, False, True] and not batch[B.TRUNCATEDS].any()
    np.testing.assert_allclose(batch[B.ACTION_LOGP], np.log([0.5, 0.25, 1.0]), rtol=1e-6)
    assert batch["infos"][1] == {"x": 1}


class _Boom:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_a_packed_column_that_is_not_an_array_is_refused_unrun(capsys):
    evil = base64.b64encode(lz4.frame.compress(pickle.dumps(_Boom()))).decode("ascii")
    with pytest.raises(ValueError, match="numpy arrays only"):
        unpack(evil)
    assert "must never run" not in capsys.readouterr().out
    np.testing.assert_array_equal(unpack(pack(np.eye(3))), np.eye(3))


@pytest.mark.parametrize(("line", "words"), [
    ("not json", "not JSON (f.json:3)"),
    ("[1, 2]", "must be a JSON object"),
    ('{"type": "Other"}', "unknown batch type 'Other'"),
    ('{"type": "SampleBatch", "obs": [[1, 2]], "actions": [1, 2]}', "could not be read"),
])
def test_a_bad_line_is_an_error_naming_where(line, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        from_json(line, "f.json:3")


def test_the_writer_rolls_files_and_the_reader_reads_them_all(tmp_path):
    writer = JsonWriter(str(tmp_path / "out"), IOContext(worker_index=2), max_file_size=600)
    for i in range(6):
        writer.write(_batch(5, start=10 * i))
    writer.close()
    files = sorted((tmp_path / "out").glob("output-*_worker-2_*.json"))
    assert len(files) > 1
    starts = sorted(float(b[B.OBS][0, 0]) for b in JsonReader(str(tmp_path / "out")).read_all_files())
    assert starts == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    # A glob, a file and a list name the same files.
    assert JsonReader(str(tmp_path / "out" / "*.json")).files == [str(f) for f in files]
    assert JsonReader([str(f) for f in files]).files == [str(f) for f in files]


def test_the_reader_goes_round_the_files_forever(tmp_path):
    writer = JsonWriter(str(tmp_path), max_file_size=1)  # a file a batch
    for i in range(3):
        writer.write(_batch(2, start=10 * i))
    writer.close()
    reader = JsonReader(str(tmp_path), IOContext(config={"seed": 0}))
    seen = {float(reader.next()[B.OBS][0, 0]) for _ in range(30)}
    assert seen == {0.0, 10.0, 20.0}


@pytest.mark.parametrize(("inputs", "words"), [
    ("/nonexistent/dir", "neither a file, a directory nor a glob"),
    ("/nonexistent/*.json", "matches no file"),
    ([], "names no file"),
    ("s3://bucket/data", "local or mounted shared paths"),
])
def test_reading_what_is_not_there_is_an_error_naming_it(inputs, words):
    with pytest.raises(ValueError, match=words):
        JsonReader(inputs)


def test_an_empty_directory_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="holds no .json files"):
        JsonReader(str(tmp_path))


class _Counting(InputReader):
    def __init__(self, value):
        self.value = value

    def next(self):
        return SampleBatch({B.REWARDS: [float(self.value)]})


def test_mixed_input_draws_sources_by_probability():
    mixed = MixedInput({_Counting(0): 0.25, _Counting(1): 0.75}, IOContext(config={"seed": 1}))
    share = np.mean([mixed.next()[B.REWARDS][0] for _ in range(4000)])
    assert share == pytest.approx(0.75, abs=0.03)
    with pytest.raises(ValueError, match="sum to 0.5, not 1"):
        MixedInput({_Counting(0): 0.5}, IOContext())


def test_shuffled_input_hands_out_every_batch_in_another_order():
    class Seq(InputReader):
        i = 0

        def next(self):
            self.i += 1
            return SampleBatch({B.REWARDS: [float(self.i)]})

    shuffled = ShuffledInput(Seq(), n=10, seed=0)
    values = [shuffled.next()[B.REWARDS][0] for _ in range(50)]
    assert values != sorted(values) and len(set(values)) == 50


def test_sample_batch_builder_builds_1_13_rows():
    builder = SampleBatchBuilder()
    for t in range(4):
        builder.add_values(t=t, eps_id=1, obs=np.zeros(3), actions=t % 2, rewards=1.0, dones=t == 3, infos={"t": t})
    batch = builder.build_and_reset()
    assert batch.count == 4 and batch["obs"].shape == (4, 3) and batch["infos"][2] == {"t": 2}
    assert builder.count == 0
    builder.add_values(a=1)
    with pytest.raises(ValueError, match="missing \\['a'\\], new \\['b'\\]"):
        builder.add_values(b=1)


class _FixedPolicy:
    """A policy that takes action 1 with probability p in every state."""

    def __init__(self, p):
        self.p = p

    def compute_log_likelihoods(self, actions, obs):
        return np.log(np.where(np.asarray(actions) == 1, self.p, 1 - self.p))


def _episodes(actions_by_episode, behaviour_p):
    rows = []
    for eps, actions in enumerate(actions_by_episode):
        for a in actions:
            rows.append((eps, a, float(a), behaviour_p if a == 1 else 1 - behaviour_p))
    eps, actions, rewards, probs = map(np.asarray, zip(*rows))
    return SampleBatch({B.EPS_ID: eps, B.ACTIONS: actions, B.REWARDS: rewards.astype(np.float32),
                        B.OBS: np.zeros((len(rows), 1), np.float32), "action_prob": probs})


def test_importance_sampling_against_hand_computed_values():
    # Two episodes of a behaviour policy taking action 1 with p 0.5; reward = the action.
    batch = _episodes([[1, 1], [0, 1]], behaviour_p=0.5)
    estimates = ImportanceSampling("is", _FixedPolicy(0.8), gamma=0.9).estimate(batch)
    # Episode 0: ratios 1.6, 1.6 -> 1.6 * 1 + 0.9 * 2.56 * 1; episode 1: 0.4, then 0.4 * 1.6 on reward 1.
    assert [e.metrics["V_step_IS"] for e in estimates] == pytest.approx([1.6 + 0.9 * 2.56, 0.9 * 0.64])
    assert [e.metrics["V_prev"] for e in estimates] == pytest.approx([1.9, 0.9])
    wis = WeightedImportanceSampling("wis", _FixedPolicy(0.8), gamma=0.9)
    first, second = wis.estimate(batch)
    # WIS divides each step's ratio by its mean over the episodes so far.
    assert first.metrics["V_step_WIS"] == pytest.approx(1.0 + 0.9)
    assert second.metrics["V_step_WIS"] == pytest.approx(0.9 * 0.64 / ((2.56 + 0.64) / 2))


def test_importance_sampling_is_unbiased_on_a_bandit():
    # One-step episodes: IS of a target policy converges to its true value p_target.
    rng = np.random.default_rng(0)
    actions = (rng.random(20000) < 0.5).astype(int)
    batch = _episodes([[a] for a in actions], behaviour_p=0.5)
    estimates = ImportanceSampling("is", _FixedPolicy(0.9), gamma=1.0).estimate(batch)
    assert np.mean([e.metrics["V_step_IS"] for e in estimates]) == pytest.approx(0.9, abs=0.02)


def test_estimators_name_the_missing_column():
    batch = _episodes([[1]], 0.5)
    del batch["action_prob"]
    with pytest.raises(ValueError, match="'action_prob'"):
        ImportanceSampling("is", _FixedPolicy(0.5), 1.0).estimate(batch)
