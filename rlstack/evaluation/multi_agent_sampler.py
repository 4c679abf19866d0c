"""MultiAgentSampler: a multi-agent rollout worker's sampling loop.

Per env step: one ``compute_actions`` per policy over every (sub-env, agent) that
observed something and maps to it; one step of every sub-env with its action dict; the
new observations preprocessed and filtered per policy, in one batch each. An agent's row
(observation, action, extras) is written when it acts and closed when its next
observation arrives or it is done, holding every reward it received in between (agents
that act in turns collect their rewards while they wait). Each agent's rows form its own
trajectory, cut into pieces at its end (or the episode's) and, with
``batch_mode="truncate_episodes"``, at the fragment's end (bootstrapped from V of its
latest observation); each piece goes through its policy's ``postprocess_trajectory``.
``sample()`` returns a :class:`~rlstack.sample_batch.MultiAgentBatch` of
``rollout_fragment_length * num_envs`` env steps (agent steps with
``count_steps_by: agent_steps``); ``"complete_episodes"`` returns only whole episodes.

Episode metrics are the sum of all agents' rewards (``episode_reward_*``) and each
agent's own (``policy_reward_*``, by policy); callbacks get a :class:`MultiAgentRunningEpisode`.
"""

from __future__ import annotations

import inspect
import math
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from rlstack.env.multi_agent_env import ALL, DEFAULT_AGENT_ID
from rlstack.errors import ConfigError, EnvError, NonFiniteError
from rlstack.evaluation import recurrent_states
from rlstack.evaluation.episode import EPISODE_HOOKS, Episode
from rlstack.evaluation.metrics import EpisodeStats
from rlstack.evaluation.recurrent_states import SubEnvMemory
from rlstack.models.prev_inputs import PREV_ACTIONS, PREV_REWARDS
from rlstack.policies.policy import Policy
from rlstack.policies.rnn_sequencing import state_out_key
from rlstack.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from rlstack.utils.imports import import_object

if TYPE_CHECKING:
    from rlstack.evaluation.rollout_worker import RolloutWorker

__all__ = ["MultiAgentRunningEpisode", "MultiAgentSampler"]

_B = SampleBatch
# An episode longer than this in complete_episodes mode is taken as one that never ends.
_MAX_PENDING_STEPS = 1_000_000


class _Agent:
    """One agent in one episode: its policy, its open step and its rows not yet cut."""

    __slots__ = ("agent_id", "index", "policy_id", "open", "reward", "rows", "last_obs", "done", "memory")

    def __init__(self, agent_id: Any, index: int, policy_id: str, memory: SubEnvMemory | None = None) -> None:
        self.agent_id, self.index, self.policy_id = agent_id, index, policy_id
        # For a policy with a state (a recurrent model, a hand-written policy's
        # get_initial_state()): the agent's state and, if the model reads them, its
        # previous action and reward, one row, carried from its step to its next.
        self.memory = memory
        self.open: tuple[np.ndarray, Any, dict[str, Any]] | None = None  # (obs, action, extras) awaiting its end
        self.reward = 0.0  # rewards since the open step's action
        # Closed rows: [obs, action, reward, terminated, truncated, extras, next_obs, bootstrap_value].
        self.rows: list[list[Any]] = []
        self.last_obs: np.ndarray | None = None  # the latest observation, preprocessed and filtered
        self.done = False


class MultiAgentRunningEpisode(Episode):
    """The running episode of one multi-agent sub-env, as callbacks see it (an
    :class:`Episode`, 1.13's ``MultiAgentEpisode``): every ``*_for(agent_id)`` accessor
    answers for that agent; ``agent_rewards`` sums each ``(agent_id, policy_id)``'s rewards."""

    def __init__(self, episode_id: int, env_id: int) -> None:
        super().__init__(episode_id, env_id, zero_action=None)
        self.agents: dict[Any, _Agent] = {}
        self.to_act: dict[Any, np.ndarray] = {}  # agents that act next, with their observations
        self._raw: dict[Any, Any] = {}
        self._infos: dict[Any, dict] = {}
        self._actions: dict[Any, list[Any]] = {}  # agent -> [previous action, last action]
        self._rewards: dict[Any, list[float]] = {}  # agent -> [previous reward, last reward]

    def policy_for(self, agent_id: Any = DEFAULT_AGENT_ID) -> str:  # type: ignore[override]
        """The policy id acting for ``agent_id`` in this episode."""
        return self.agents[agent_id].policy_id

    def get_agents(self) -> list[Any]:
        """The ids of the agents seen so far in this episode, in order of appearance."""
        return list(self.agents)

    def last_observation_for(self, agent_id: Any = DEFAULT_AGENT_ID) -> Any:
        """The agent's last observation as its policy saw it (preprocessed, filtered)."""
        agent = self.agents.get(agent_id)
        return None if agent is None else agent.last_obs

    def last_raw_obs_for(self, agent_id: Any = DEFAULT_AGENT_ID) -> Any:
        """The agent's last observation as the env returned it."""
        return self._raw.get(agent_id)

    def last_info_for(self, agent_id: Any = DEFAULT_AGENT_ID) -> dict:
        """The agent's last info dict (empty before its first)."""
        return self._infos.get(agent_id, {})

    def last_action_for(self, agent_id: Any = DEFAULT_AGENT_ID) -> Any:
        """The agent's last action (None before its first)."""
        return self._actions.get(agent_id, [None, None])[1]

    def prev_action_for(self, agent_id: Any = DEFAULT_AGENT_ID) -> Any:
        """The agent's action before its last one."""
        return self._actions.get(agent_id, [None, None])[0]

    def last_reward_for(self, agent_id: Any = DEFAULT_AGENT_ID) -> float:
        """The reward of the agent's last completed step (0.0 before)."""
        return self._rewards.get(agent_id, [0.0, 0.0])[1]

    def prev_reward_for(self, agent_id: Any = DEFAULT_AGENT_ID) -> float:
        """The reward of the agent's step before that."""
        return self._rewards.get(agent_id, [0.0, 0.0])[0]

    def last_done_for(self, agent_id: Any = DEFAULT_AGENT_ID) -> bool:
        """Whether the agent is done."""
        agent = self.agents.get(agent_id)
        return bool(agent is not None and agent.done)


def _memory_columns(memories: list[SubEnvMemory]) -> dict[str, np.ndarray]:
    # The agents' one-row memories stacked: {state_in_<i>, prev_actions, prev_rewards}.
    columns = [memory.columns() for memory in memories]
    return {key: np.concatenate([c[key] for c in columns]) for key in columns[0]}


def _memory_inputs(columns: dict[str, np.ndarray]) -> dict[str, Any]:
    # compute_actions / compute_values keyword arguments of _memory_columns' result.
    states = [value for key, value in columns.items() if key.startswith("state_in_")]
    inputs: dict[str, Any] = {"state_batches": states}
    if PREV_ACTIONS in columns:
        inputs["prev_action_batch"] = columns[PREV_ACTIONS]
    if PREV_REWARDS in columns:
        inputs["prev_reward_batch"] = columns[PREV_REWARDS]
    return inputs


def _bootstraps(policy: Policy) -> bool:
    # Rows bootstrap from V(s) where the policy wants it and has a value function (a
    # hand-written policy that does not learn need not).
    return policy.needs_bootstrap_value and type(policy).compute_values is not Policy.compute_values


# Policy class -> whether its postprocess_trajectory takes 1.13's (other_agent_batches,
# episode) after the batch: read once per class.
_TAKES_OTHER_BATCHES: dict[type, bool] = {}


def _takes_other_batches(policy: Policy) -> bool:
    cls = type(policy)
    found = _TAKES_OTHER_BATCHES.get(cls)
    if found is None:
        try:
            parameters = list(inspect.signature(policy.postprocess_trajectory).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        found = len(parameters) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in parameters)
        _TAKES_OTHER_BATCHES[cls] = found
    return found


class MultiAgentSampler:
    """Steps a worker's multi-agent sub-envs with its policies (see the module docstring).

    Args:
        worker: The rollout worker (its env, policies, filters, callbacks and episode
            bookkeeping).
        training: Record rows and update the observation filters (False: evaluation
            episodes, nothing recorded, filters read only).
    """

    def __init__(self, worker: RolloutWorker, training: bool = True) -> None:
        self.worker = worker
        self.env = worker.async_env
        self.policies = worker.policies
        self.training = training
        multiagent = worker.config["multiagent"]
        self.by_agent_steps = multiagent["count_steps_by"] == "agent_steps"
        fn = multiagent["observation_fn"]
        self.observation_fn = import_object(fn, "multiagent.observation_fn") if isinstance(fn, str) else fn
        hooks = worker._hooks
        self.track = bool(hooks & EPISODE_HOOKS)
        self.call_start, self.call_step = "on_episode_start" in hooks, "on_episode_step" in hooks
        self.call_end, self.call_postprocess = "on_episode_end" in hooks, "on_postprocess_trajectory" in hooks
        self.episodes: list[MultiAgentRunningEpisode] | None = None
        self._next_eval_id = worker.worker_index * 10**9 + 5 * 10**8  # evaluation episodes' own ids
        self._finished: list[tuple[MultiAgentRunningEpisode, EpisodeStats]] = []

    def reset(self) -> None:
        """Forgets the running episodes (the envs reset at the next sample)."""
        self.policies = self.worker.policies
        self.episodes = None

    def drop_episodes_of(self, policy_id: str) -> None:
        """After ``remove_policy``: forgets the running episodes (the envs reset at the
        next sample) if an agent of one of them acts for ``policy_id``."""
        if self.episodes and any(agent.policy_id == policy_id for episode in self.episodes
                                 for agent in episode.agents.values()):
            self.episodes = None

    # ----- sampling -----------------------------------------------------------------------

    def sample(self) -> MultiAgentBatch:
        """Collects and postprocesses one fragment (see the module docstring).

        Raises:
            EnvError, ConfigError: For obs of an agent that left, or an agent the mapping
                cannot place (naming the agent and the policy).
            NonFiniteError: For a NaN or inf observation or reward.
        """
        config = self.worker.config
        complete = config["batch_mode"] == "complete_episodes"
        target = int(config["rollout_fragment_length"]) * self.env.num_envs
        pieces: dict[str, list[SampleBatch]] = defaultdict(list)
        collected = env_steps = 0
        if self.episodes is None:
            self._start(self.env.reset())
        while collected < target:
            acted = self._step(pieces, complete)
            if complete and max(episode.length for episode in self.episodes) > _MAX_PENDING_STEPS:
                raise EnvError(
                    f"batch_mode='complete_episodes' but an episode on rollout worker {self.worker.worker_index} has "
                    f"run {_MAX_PENDING_STEPS} steps without ending. Set 'horizon', give the env a time limit, or "
                    "use batch_mode='truncate_episodes'.")
            if complete:
                for episode, stats in self._finished:
                    collected += sum(len(a.rows) for a in episode.agents.values()) if self.by_agent_steps \
                        else stats.length
                    env_steps += stats.length
                    self._flush_episode(episode, pieces)
                self._finished = []
            else:
                collected += acted if self.by_agent_steps else self.env.num_envs
                env_steps += self.env.num_envs
        if not complete:
            self._cut_fragment(pieces)
        batch = MultiAgentBatch({pid: concat_samples(parts) for pid, parts in pieces.items()}, env_steps)
        if "on_sample_end" in self.worker._hooks:
            self.worker.callbacks.on_sample_end(worker=self.worker, samples=batch)
        return batch

    def run_episodes(self, num_episodes: int | None = None, num_steps: int | None = None) -> list[EpisodeStats]:
        """Plays whole episodes for evaluation (nothing recorded, filters not updated);
        stops after ``num_episodes`` episodes or once ``num_steps`` env steps were taken."""
        sampler = MultiAgentSampler(self.worker, training=False)
        sampler._start(self.env.reset())
        self.episodes = None  # the envs were reset: sampling starts its episodes over
        episodes: list[EpisodeStats] = []
        steps = 0
        while True:
            if num_episodes is not None and len(episodes) >= num_episodes:
                return episodes[:num_episodes]
            if num_steps is not None and steps >= num_steps:
                return episodes
            sampler._step({}, complete=True)
            episodes.extend(stats for _, stats in sampler._finished)
            sampler._finished = []
            steps += self.env.num_envs

    # ----- one env step -----------------------------------------------------------------------

    def _start(self, first_obs: list[dict]) -> None:
        self.episodes = [self._new_episode(i) for i in range(self.env.num_envs)]
        self._observe([(episode, obs, None) for episode, obs in zip(self.episodes, first_obs)])
        for episode in self.episodes:
            self._hook("on_episode_start", self.call_start, episode)

    def _new_episode(self, env_index: int) -> MultiAgentRunningEpisode:
        worker = self.worker
        if self.training:
            episode_id = worker._next_eps_id
            worker._next_eps_id += 1
        else:
            episode_id, self._next_eval_id = self._next_eval_id, self._next_eval_id + 1
        return MultiAgentRunningEpisode(episode_id, env_index)

    def _step(self, pieces: dict[str, list[SampleBatch]], complete: bool) -> int:
        """One step of every sub-env; returns how many agents acted. Pieces of agents
        whose trajectory ended go into ``pieces`` (truncate mode); episodes that ended go
        to ``self._finished``."""
        perf, t0 = self.worker._perf, time.perf_counter()
        actions, acted = self._compute_actions()
        t1 = time.perf_counter()
        obs, rewards, terminateds, truncateds, final_obs, infos = self.env.step(actions)
        t2 = time.perf_counter()
        self.worker._env_steps += self.env.num_envs
        ended: list[MultiAgentRunningEpisode] = []
        observed: list[tuple[MultiAgentRunningEpisode, dict, dict | None]] = []
        for i, episode in enumerate(self.episodes):
            if i in self.env.broken:
                # The sub-env raised and was rebuilt: its episode is dropped, rows and metrics.
                self.episodes[i] = self._new_episode(i)
                observed.append((self.episodes[i], obs[i], None))
                continue
            episode.length += 1
            self._reward(episode, rewards[i])
            episode._infos.update(infos[i])
            done_flags = (terminateds[i], truncateds[i])
            if i in final_obs:
                observed.append((episode, final_obs[i], done_flags))
                ended.append(episode)
                self.episodes[i] = self._new_episode(i)
                observed.append((self.episodes[i], obs[i], None))
            else:
                observed.append((episode, obs[i], done_flags))
        self._observe(observed)
        bootstrap: dict[str, list] = defaultdict(list)
        for episode, step_obs, done_flags in observed:
            if done_flags is not None:
                self._close_rows(episode, step_obs, *done_flags, bootstrap)
        self._compute_bootstraps(bootstrap)
        for episode, _, done_flags in observed:
            if done_flags is None:
                self._hook("on_episode_start", self.call_start, episode)
            elif episode not in ended:
                self._hook("on_episode_step", self.call_step, episode)
        for episode in ended:
            self._hook("on_episode_step", self.call_step, episode)
            self._hook("on_episode_end", self.call_end, episode)
            stats = EpisodeStats(episode.total_reward, episode.length, episode.custom_metrics, episode.hist_data,
                                 dict(episode.agent_rewards))
            if self.training:
                self.worker._episodes.append(stats)
            if complete or not self.training:
                self._finished.append((episode, stats))  # for sample() / run_episodes() to take
            else:
                self._flush_episode(episode, pieces)
        perf["inference"] += t1 - t0
        perf["env_wait"] += t2 - t1
        perf["obs_processing"] += time.perf_counter() - t2
        self.worker._perf_steps += self.env.num_envs
        return acted

    def _compute_actions(self) -> tuple[list[dict], int]:
        # One compute_actions per policy over every (sub-env, agent) it acts for.
        groups: dict[str, list[tuple[MultiAgentRunningEpisode, Any]]] = defaultdict(list)
        for episode in self.episodes:
            for agent_id in episode.to_act:
                groups[episode.agents[agent_id].policy_id].append((episode, agent_id))
        actions: list[dict] = [{} for _ in self.episodes]
        for pid, members in groups.items():
            policy = self.policies.acting[pid]
            obs = np.stack([episode.to_act[agent_id] for episode, agent_id in members])
            memories = [episode.agents[agent_id].memory for episode, agent_id in members]
            if memories[0] is None:
                policy_actions, extras = policy.compute_actions(obs)
            else:
                # Each agent's state (and previous action / reward) in, its new state out;
                # rows record what they acted from (state_in_<i>, prev_*) and state_out_<i>.
                inputs = _memory_columns(memories)
                policy_actions, extras = policy.compute_actions(obs, **_memory_inputs(inputs))
                n_states = len(memories[0].states)
                if any(state_out_key(i) not in extras for i in range(n_states)):
                    raise ConfigError(
                        f"Policy {pid!r} ({type(policy).__name__}) has {n_states} state tensor(s) "
                        "(get_initial_state()) but its compute_actions returned fewer state outputs; return "
                        "(actions, state_outs, extras) with one state_out per state tensor.")
                for k, memory in enumerate(memories):
                    memory.states = [extras[state_out_key(i)][k:k + 1].copy() for i in range(n_states)]
                extras.update(inputs)
            env_actions = policy.unsquash_actions(policy_actions)
            if env_actions.ndim == 1 and env_actions.dtype.kind in "iu":
                env_actions = env_actions.tolist()  # the env checks Python ints faster
            for k, (episode, agent_id) in enumerate(members):
                episode.agents[agent_id].open = (obs[k], policy_actions[k], {key: v[k] for key, v in extras.items()})
                actions[episode.env_id][agent_id] = env_actions[k]
                if self.track:
                    episode._actions[agent_id] = [episode.last_action_for(agent_id), policy_actions[k]]
        for episode in self.episodes:
            episode.to_act = {}
        return actions, sum(len(members) for members in groups.values())

    def _agent(self, episode: MultiAgentRunningEpisode, agent_id: Any) -> _Agent:
        agent = episode.agents.get(agent_id)
        if agent is None:
            env = self.env.envs[episode.env_id]
            policy_id = self.policies.policy_for(agent_id, episode, self.worker, env)
            memory = recurrent_states.initial_states(self.policies.acting[policy_id], 1)
            agent = episode.agents[agent_id] = _Agent(agent_id, len(episode.agents), policy_id, memory)
        return agent

    def _reward(self, episode: MultiAgentRunningEpisode, rewards: dict) -> None:
        for agent_id, reward in rewards.items():
            reward = float(reward)
            if not math.isfinite(reward):
                raise NonFiniteError(
                    f"Non-finite reward ({reward}) for agent {agent_id!r} from sub-env {episode.env_id} of rollout "
                    f"worker {self.worker.worker_index}, at step {episode.length} of its episode. A NaN or inf from "
                    "an env is a bug in the env and would corrupt the weights: fix the env or wrap it.")
            agent = self._agent(episode, agent_id)
            agent.reward += reward
            episode.total_reward += reward
            episode.agent_rewards[(agent_id, agent.policy_id)] += reward

    def _observe(self, observed: list[tuple[MultiAgentRunningEpisode, dict, Any]]) -> None:
        """Preprocesses and filters the step's observations, one batch per policy; agents
        that are not done act on theirs next."""
        by_policy: dict[str, list[tuple[MultiAgentRunningEpisode, _Agent, Any, bool]]] = defaultdict(list)
        for episode, step_obs, done_flags in observed:
            if self.observation_fn is not None:
                step_obs = self.observation_fn(agent_obs=step_obs, worker=self.worker, base_env=self.env,
                                               policies=self.policies.policies, episode=episode)
            episode._raw.update(step_obs)
            terminateds, truncateds = done_flags or ({}, {})
            ends = done_flags is not None and (terminateds[ALL] or truncateds[ALL])
            for agent_id, raw in step_obs.items():
                agent = self._agent(episode, agent_id)
                if agent.done:
                    raise EnvError(
                        f"{type(self.env.envs[episode.env_id]).__name__} returned an observation for agent {agent_id!r} "
                        f"(policy {agent.policy_id!r}) after it was done in this episode (terminateds or truncateds "
                        "was True for it); an agent that leaves does not come back in the same episode: give a new "
                        "agent a new id.")
                final = ends or bool(terminateds.get(agent_id)) or bool(truncateds.get(agent_id))
                by_policy[agent.policy_id].append((episode, agent, raw, final))
        for pid, items in by_policy.items():
            policy = self.policies.policies[pid]
            array = policy.preprocessor.transform_batch([raw for _, _, raw, _ in items])
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                row = int(np.flatnonzero(~np.isfinite(array.reshape(len(array), -1)).all(axis=1))[0])
                episode, agent = items[row][0], items[row][1]
                raise NonFiniteError(
                    f"Non-finite observation for agent {agent.agent_id!r} (policy {pid!r}) from sub-env "
                    f"{episode.env_id} of rollout worker {self.worker.worker_index}, at step {episode.length} of its "
                    "episode. A NaN or inf from an env is a bug in the env: fix the env or wrap it.")
            filt = self.policies.filters[pid]
            finals = np.array([final for *_, final in items])
            processed = np.empty_like(array, dtype=np.float32)
            if (~finals).any():
                processed[~finals] = filt(array[~finals], update=self.training)
            if finals.any():
                processed[finals] = filt(array[finals], update=False)
            for k, (episode, agent, _, final) in enumerate(items):
                agent.last_obs = processed[k]
                if not final:
                    episode.to_act[agent.agent_id] = processed[k]

    def _close_rows(self, episode: MultiAgentRunningEpisode, step_obs: dict, terminateds: dict, truncateds: dict,
                    bootstrap: dict[str, list]) -> None:
        """Ends the open steps of agents that observe again or are done (by their own flag
        or the episode's end); a row then holds every reward since its action. A done
        agent's rows wait for the episode's end or the fragment's cut, where every agent's
        piece is postprocessed together (1.13's other_agent_batches)."""
        all_terminated, all_truncated = terminateds[ALL], truncateds[ALL]
        ends = all_terminated or all_truncated
        for agent_id, agent in episode.agents.items():
            if agent.done:
                continue
            own_terminated, own_truncated = bool(terminateds.get(agent_id)), bool(truncateds.get(agent_id))
            terminated = own_terminated or (ends and all_terminated and not own_truncated)
            truncated = not terminated and (own_truncated or ends)
            observed = agent_id in step_obs
            if agent.open is None:
                agent.done = terminated or truncated  # done before it ever acted (no row)
                continue
            if not (observed or terminated or truncated):
                continue  # still waiting for its turn
            obs, action, extras = agent.open
            next_obs = agent.last_obs if observed else obs
            row = [obs, action, agent.reward, terminated, truncated, extras, next_obs, 0.0]
            if self.track:
                previous = episode._rewards.get(agent_id, [0.0, 0.0])[1]
                episode._rewards[agent_id] = [previous, agent.reward]
            if agent.memory is not None:
                recurrent_states.after_step(agent.memory, np.asarray(action)[None],
                                            self.worker.clip_rewards(np.float32([agent.reward])))
            agent.open, agent.reward = None, 0.0
            if self.training:
                agent.rows.append(row)
                if truncated and _bootstraps(self.policies.acting[agent.policy_id]):
                    # A cut, not the end of the task: bootstrap from V(its last observation).
                    bootstrap[agent.policy_id].append((row, next_obs, agent))
            if terminated or truncated:
                agent.done = True

    def _compute_bootstraps(self, requests: dict[str, list]) -> None:
        # requests: {policy_id: [(row, obs, agent)]}; a recurrent policy's V reads each
        # agent's memory after its last step.
        for pid, items in requests.items():
            obs = np.stack([obs for _, obs, _ in items])
            memories = [agent.memory for _, _, agent in items]
            if memories[0] is None:
                values = self.policies.acting[pid].compute_values(obs)
            else:
                values = self.policies.acting[pid].compute_values(obs, **_memory_inputs(_memory_columns(memories)))
            for (row, _, _), value in zip(items, values):
                row[7] = float(value)

    def _cut_fragment(self, pieces: dict[str, list[SampleBatch]]) -> None:
        # truncate_episodes: every agent's rows so far become a piece that bootstraps from
        # V(the agent's latest observation), unless its last row ended its trajectory.
        requests: dict[str, list] = defaultdict(list)
        for episode in self.episodes:
            for agent in episode.agents.values():
                if agent.rows and not (agent.rows[-1][3] or agent.rows[-1][4]) \
                        and _bootstraps(self.policies.acting[agent.policy_id]):
                    requests[agent.policy_id].append((agent.rows[-1], agent.last_obs, agent))
        self._compute_bootstraps(requests)
        for episode in self.episodes:
            self._flush_episode(episode, pieces)

    def _flush_episode(self, episode: MultiAgentRunningEpisode, pieces: dict[str, list[SampleBatch]]) -> None:
        # Each agent's closed rows become one trajectory piece, postprocessed by its policy.
        # As in 1.13, a policy whose postprocess_trajectory takes other_agent_batches (a
        # centralized critic) and the on_postprocess_trajectory callback see every agent of
        # the episode: {agent_id: (policy, its piece before postprocessing)}.
        flushing = [agent for agent in episode.agents.values() if agent.rows]
        if not flushing:
            return
        raw = {agent.agent_id: self._piece(episode, agent) for agent in flushing}
        wants_others = {agent.agent_id: _takes_other_batches(self.policies.acting[agent.policy_id])
                        for agent in flushing}
        originals: dict[Any, tuple[Any, SampleBatch]] = {}
        if self.call_postprocess or any(wants_others.values()):
            originals = {agent.agent_id: (self.policies.policies[agent.policy_id],
                                          SampleBatch(dict(raw[agent.agent_id]))) for agent in flushing}
        for agent in flushing:
            agent.rows = []
            acting = self.policies.acting[agent.policy_id]
            piece = raw[agent.agent_id]
            if wants_others[agent.agent_id]:
                others = {aid: pair for aid, pair in originals.items() if aid != agent.agent_id}
                piece = acting.postprocess_trajectory(piece, others, episode)
            else:
                piece = acting.postprocess_trajectory(piece)
            if self.call_postprocess:
                self.worker.callbacks.on_postprocess_trajectory(
                    worker=self.worker, episode=episode, agent_id=agent.agent_id, policy_id=agent.policy_id,
                    policies=self.policies.policies, postprocessed_batch=piece, original_batches=originals)
            pieces[agent.policy_id].append(piece)

    def _piece(self, episode: MultiAgentRunningEpisode, agent: _Agent) -> SampleBatch:
        # The agent's closed rows as columns (its rows stay where they are).
        rows = agent.rows
        acting = self.policies.acting[agent.policy_id]
        n = len(rows)
        columns: dict[str, Any] = {
            _B.OBS: np.stack([row[0] for row in rows]),
            _B.ACTIONS: np.stack([np.asarray(row[1]) for row in rows]),
            _B.REWARDS: self.worker.clip_rewards(np.array([row[2] for row in rows], dtype=np.float32)),
            _B.TERMINATEDS: np.array([row[3] for row in rows], dtype=bool),
            _B.TRUNCATEDS: np.array([row[4] for row in rows], dtype=bool),
            _B.EPS_ID: np.full(n, episode.episode_id, dtype=np.int64),
            _B.AGENT_INDEX: np.full(n, agent.index, dtype=np.int64),
            _B.BOOTSTRAP_VALUE: np.array([row[7] for row in rows], dtype=np.float32),
        }
        if acting.needs_next_obs:
            columns[_B.NEXT_OBS] = np.stack([row[6] for row in rows])
        for key in rows[0][5]:
            columns[key] = np.stack([row[5][key] for row in rows])
        return SampleBatch(columns)

    def _hook(self, name: str, call: bool, episode: MultiAgentRunningEpisode) -> None:
        if call:
            getattr(self.worker.callbacks, name)(worker=self.worker, base_env=self.env,
                                                 policies=self.policies.policies, episode=episode,
                                                 env_index=episode.env_id)
