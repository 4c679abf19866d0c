"""Rendering and video recording of a rollout worker's sub-envs (1.x's ``render_env`` and
``record_env`` keys).

:class:`RenderAndRecord` wraps one sub-env. With ``render`` it calls the env's
``render()`` after every reset and step (an env that draws in a window of its own). With
a ``folder`` it keeps each episode's frames (``render()`` returning an RGB array) and
writes them as ``<folder>/<prefix>-episode-<n>.mp4`` when the episode ends, with
moviepy (the ``video`` extra).

A 1.x env renders with ``render(mode=...)``; a gymnasium env with the ``render_mode``
it was made with. Both are asked for an RGB array where a video is recorded.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.legacy import LegacyEnvAdapter
from rlstack.errors import ConfigError, pip_install

__all__ = ["RenderAndRecord"]


class RenderAndRecord(gym.Wrapper):
    """Renders a sub-env each step and/or records its episodes as mp4 files.

    Args:
        env: The sub-env (a gymnasium env, possibly adapting a 1.x one).
        render: Call ``render()`` after every reset and step.
        folder: Where the episodes' videos go (None: no recording).
        prefix: The start of each video's file name (which worker and sub-env).

    Raises:
        ConfigError: If a folder is given and moviepy is not installed.
    """

    # get_sub_environments() gives the env inside, the object the user's creator built.
    wraps_user_env = True

    def __init__(self, env: gym.Env, render: bool = False, folder: str | None = None,
                 prefix: str = "rlstack") -> None:
        super().__init__(env)
        self.render_each_step = render
        self.folder = folder
        self.prefix = prefix
        self.episodes_recorded = 0
        self._frames: list[np.ndarray] = []
        if folder is not None:
            try:
                import moviepy  # noqa: F401 - only checked here; used when an episode ends
            except ImportError as exc:
                raise ConfigError(f"record_env needs moviepy to write mp4 files: {pip_install('video')} "
                                  f"({exc}).") from exc
            os.makedirs(folder, exist_ok=True)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        result = self.env.reset(**kwargs)
        self._frames = []
        self._after_transition()
        return result

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        result = self.env.step(action)
        self._after_transition()
        if (result[2] or result[3]) and self.folder is not None:
            self._write_episode()
        return result

    def _after_transition(self) -> None:
        if self.folder is not None:
            frame = self._rgb_frame()
            if frame is not None:
                self._frames.append(frame)
        elif self.render_each_step:
            self._render()

    def _render(self) -> Any:
        if isinstance(self.env, LegacyEnvAdapter):
            return self.env.env.render()
        return self.env.render()

    def _rgb_frame(self) -> np.ndarray | None:
        # 1.x envs take the mode as an argument; gymnasium envs were made with theirs.
        if isinstance(self.env, LegacyEnvAdapter):
            try:
                frame = self.env.env.render(mode="rgb_array")
            except TypeError:
                frame = self.env.env.render()
        else:
            frame = self.env.render()
        if isinstance(frame, np.ndarray) and frame.ndim == 3:
            return frame.astype(np.uint8, copy=False)
        return None

    def _write_episode(self) -> None:
        frames, self._frames = self._frames, []
        if not frames:
            return
        from moviepy import ImageSequenceClip

        fps = int(self.env.metadata.get("render_fps") or self.env.metadata.get("video.frames_per_second") or 30)
        path = os.path.join(self.folder, f"{self.prefix}-episode-{self.episodes_recorded}.mp4")
        ImageSequenceClip(list(frames), fps=fps).write_videofile(path, logger=None, audio=False)
        self.episodes_recorded += 1
