"""The Ray Serve deployment that answers HTTP requests with a trained policy's actions.

Each replica restores the trainer once (``Trainer.from_checkpoint`` without rollout
workers) and answers on its route:

* ``GET``: a JSON description of the policy (algorithm, framework, spaces, recurrent
  state) and of this replica's batching (requests and batches so far, batch sizes):
  a health check.
* ``POST``: a request body as :mod:`rlstack.serve.codec` reads it; the answer is
  ``{"actions": ...}`` (and ``"state_out"`` for a recurrent policy).

A request is read and checked on its own first (size, JSON, observation against the
space: :class:`~rlstack.serve.codec.RequestError` answers 4xx), and only then joins a
``@serve.batch`` batch with the requests that arrived with it: one ``compute_actions``
on their stacked observations. An exception there answers 500 to that batch's requests
only; the replica keeps serving.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import shutil
import tempfile
from typing import Any

import numpy as np

from rlstack.serve.codec import ParsedRequest, RequestError, RequestParser, space_to_json, to_jsonable

logger = logging.getLogger(__name__)

__all__ = ["PolicyServer"]


class PolicyServer:
    """One replica: a restored trainer and the batching around its ``compute_actions``.

    Args:
        checkpoint: The checkpoint directory (on this replica's node).
        env: The env to restore the trainer with (None: the checkpoint's).
        policy_id: The policy that acts.
        explore: Sample actions (True) or take the most likely ones (False).
        max_batch_size: The most requests one ``compute_actions`` call serves.
        batch_wait_timeout_s: How long the first request of a batch waits for others.
        max_body_bytes: The largest request body accepted (larger: 413).
    """

    def __init__(self, checkpoint: str, env: Any = None, policy_id: str = "default_policy", explore: bool = False,
                 max_batch_size: int = 64, batch_wait_timeout_s: float = 0.002,
                 max_body_bytes: int = 1 << 20) -> None:
        from ray import serve

        from rlstack.trainers.common import checkpoint_files as ckpt
        from rlstack.trainers.common.registry import get_trainer_class

        metadata, _ = ckpt.read_checkpoint(checkpoint)
        trainer_class = get_trainer_class(metadata["algorithm"])
        # A standalone trainer writes its results under RLSTACK_RESULTS_DIR; a replica
        # never trains, so its (empty) log directory goes to a temporary one it removes.
        self._logdir_root = tempfile.mkdtemp(prefix="rlstack-serve-")
        previous = os.environ.get("RLSTACK_RESULTS_DIR")
        os.environ["RLSTACK_RESULTS_DIR"] = self._logdir_root
        try:
            self.trainer = trainer_class.from_checkpoint(checkpoint, env=env, config_overrides={
                "num_workers": 0, "num_envs_per_worker": 1, "evaluation_num_workers": 0, "evaluation_interval": None,
                "num_gpus": 0})
        finally:
            if previous is None:
                os.environ.pop("RLSTACK_RESULTS_DIR", None)
            else:
                os.environ["RLSTACK_RESULTS_DIR"] = previous
        self.policy = self.trainer.get_policy(policy_id)
        self.policy_id = policy_id
        self.explore = explore
        self.max_body_bytes = max_body_bytes
        initial = self.policy.get_initial_state()
        self._initial_state = initial
        # The previous actions / rewards the model reads (one row each; a window of n for
        # attention_use_n_prev_*), as clients send them: in the env's action form.
        columns = self.policy.prev_inputs.columns() if self.policy.prev_inputs is not None else {}
        prev_shapes = {key: tuple(columns[column][0]) for key, column in
                       (("prev_action", "prev_actions"), ("prev_reward", "prev_rewards")) if column in columns}
        self.parser = RequestParser(self.policy.observation_space, [value.shape for value in initial], prev_shapes)
        self._description = {
            "algorithm": metadata["algorithm"],
            "framework": metadata.get("framework"),
            "policy_id": policy_id,
            "observation_space": space_to_json(self.policy.observation_space),
            "action_space": space_to_json(self.policy.action_space),
            "recurrent": bool(initial),
            "state_shapes": [list(value.shape) for value in initial],
            "reads_prev": sorted(prev_shapes),
            "explore": explore,
            "max_batch_size": max_batch_size,
            "batch_wait_timeout_s": batch_wait_timeout_s,
            "max_body_bytes": max_body_bytes,
        }
        self._batch_sizes: collections.Counter[int] = collections.Counter()
        self._requests = 0
        self._act_batched = serve.batch(max_batch_size=max_batch_size,
                                        batch_wait_timeout_s=batch_wait_timeout_s)(self._act_on_batch)

    def __del__(self) -> None:
        shutil.rmtree(getattr(self, "_logdir_root", ""), ignore_errors=True)

    async def __call__(self, request: Any) -> Any:
        """Answers one HTTP request (Serve hands it over as a Starlette ``Request``)."""
        method = request.method
        if not _at_route_root(request.scope):
            return _json_response({"error": f"No endpoint at {request.url.path}; the policy answers on "
                                            f"{request.scope.get('root_path') or '/'} only."}, 404)
        if method == "POST":
            try:
                parsed = self.parser.parse(await self._read_body(request))
                self._check_prev(parsed)
            except RequestError as exc:
                return _json_response({"error": str(exc)}, exc.status)
            answer = await self._act_batched(parsed)
            return _json_response(answer, 500 if "error" in answer else 200)
        if method in ("GET", "HEAD"):
            return _json_response(self.describe(), 200)
        return _json_response({"error": f"Method {method} is not allowed; POST {{\"obs\": ...}} for actions, GET for "
                                        "the policy's description."}, 405, headers={"Allow": "GET, HEAD, POST"})

    def describe(self) -> dict[str, Any]:
        """The policy and this replica's batching so far, as the GET answer."""
        return {**self._description, "replica_stats": {
            "requests": self._requests,
            "batches": sum(self._batch_sizes.values()),
            "largest_batch": max(self._batch_sizes, default=0),
            "batch_sizes": {str(size): count for size, count in sorted(self._batch_sizes.items())},
        }}

    def _check_prev(self, parsed: ParsedRequest) -> None:
        # The codec checked the shapes; the values (an action outside the action space)
        # are the policy's to check, here, before the request joins a batch.
        if not parsed.prev:
            return
        try:
            self.policy.prev_input_batches(parsed.rows, self.policy.squash_actions(parsed.prev.get("prev_action")),
                                           parsed.prev.get("prev_reward"))
        except ValueError as exc:
            raise RequestError(422, str(exc)) from None

    async def _read_body(self, request: Any) -> bytes:
        limit = self.max_body_bytes
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise RequestError(400, f"Content-Length {length!r} is not a number of bytes.")
            if int(length) > limit:
                raise RequestError(413, f"The body is {int(length)} bytes; this server accepts at most {limit} "
                                        "(rlstack serve --max-body-bytes). Send fewer observations per request.")
            return await request.body()  # (the server stops reading at Content-Length)
        chunks, size = [], 0  # chunked transfer: counted as it arrives
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(413, f"The body is over {limit} bytes, the most this server accepts (rlstack "
                                        "serve --max-body-bytes). Send fewer observations per request.")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _act_on_batch(self, requests: list[ParsedRequest]) -> list[dict[str, Any]]:
        # Runs once per batch. Requests that send the same optional inputs (previous
        # actions / rewards) share one compute_actions call: a missing one means zeros
        # for every row of the call.
        self._batch_sizes[len(requests)] += 1
        self._requests += len(requests)
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(tuple(sorted(request.prev)), []).append(i)
        answers: list[dict[str, Any]] = [{} for _ in requests]
        for keys, members in groups.items():
            group = [requests[i] for i in members]
            try:
                for i, answer in zip(members, self._act(group, keys)):
                    answers[i] = answer
            except Exception as exc:  # noqa: BLE001 - answer 500 for this group, keep serving
                logger.exception("compute_actions failed for a batch of %d requests", len(group))
                for i in members:
                    answers[i] = {"error": f"The policy failed on this batch: {type(exc).__name__}: {exc}"}
        return answers

    def _act(self, requests: list[ParsedRequest], prev_keys: tuple[str, ...]) -> list[dict[str, Any]]:
        observations = [obs for request in requests for obs in request.observations]
        prev = {key: np.concatenate([request.prev[key] for request in requests]) for key in prev_keys}
        if self._initial_state:
            state = [np.concatenate([request.state[i] if request.state is not None
                                     else np.repeat(initial[None], request.rows, axis=0) for request in requests])
                     for i, initial in enumerate(self._initial_state)]
            actions, state_out, _ = self.trainer.compute_actions(
                observations, state=state, prev_action=prev.get("prev_action"), prev_reward=prev.get("prev_reward"),
                policy_id=self.policy_id, explore=self.explore)
        else:
            actions = self.trainer.compute_actions(observations, policy_id=self.policy_id, explore=self.explore)
            state_out = []
        answers, start = [], 0
        for request in requests:
            stop = start + request.rows
            rows = _take_rows(actions, start, stop)
            states = [value[start:stop] for value in state_out]
            if not request.batched:
                rows = _take_rows(rows, 0, None, single=True)
                states = [value[0] for value in states]
            answer = {"actions": to_jsonable(rows)}
            if self._initial_state:
                answer["state_out"] = to_jsonable(states)
            answers.append(answer)
            start = stop
        return answers


def _at_route_root(scope: dict[str, Any]) -> bool:
    # Serve hands over every path under the route prefix; the policy answers on the
    # prefix itself ("/cartpole" or "/cartpole/"), not below it.
    path, root = scope.get("path") or "/", scope.get("root_path") or ""
    if root and path.startswith(root):
        path = path[len(root):]
    return path.strip("/") == ""


def _take_rows(actions: Any, start: int, stop: int | None, single: bool = False) -> Any:
    # Rows [start, stop) of a batch of actions (an array, or a dict / tuple of arrays for
    # a Dict / Tuple action space); `single`: row `start` alone.
    if isinstance(actions, dict):
        return {key: _take_rows(value, start, stop, single) for key, value in actions.items()}
    if isinstance(actions, tuple):
        return tuple(_take_rows(value, start, stop, single) for value in actions)
    return actions[start] if single else actions[start:stop]


def _json_response(body: dict[str, Any], status: int, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    # allow_nan=False: a NaN action (a broken policy) is a server error, not invalid JSON.
    try:
        content = json.dumps(body, allow_nan=False, separators=(",", ":"))
    except ValueError as exc:
        content, status = json.dumps({"error": f"The answer cannot be written as JSON: {exc}"}), 500
    return Response(content, status_code=status, media_type="application/json", headers=headers)
