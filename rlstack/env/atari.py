"""The standard Atari preprocessing, applied to ALE envs when ``preprocessor_pref`` is "deepmind".

What classic RLlib's ``wrap_deepmind`` did, on gymnasium's own wrappers where they exist:
up to 30 no-op actions after each reset, the action repeated for 4 frames (with the max of
the last two frames, against flicker), the screen grey-scaled and resized to ``dim`` x
``dim``, and the last 4 screens stacked on the channel axis, so the policy sees an
``(dim, dim, 4)`` uint8 image (HWC, the layout rlstack's vision models take). Rewards are
clipped to their sign by the rollout workers (``clip_rewards``), not here, so episode
returns in the metrics stay the game's score.

The ALE comes from the ``ale-py`` package (the ``atari`` extra), which ships
the game ROMs.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import EnvError, pip_install

# The wrapper's settings (the classic values).
NOOP_MAX = 30
FRAME_SKIP = 4
FRAME_STACK = 4


def ensure_ale_registered(env_id: str) -> bool:
    """Registers the ALE's gymnasium ids if ``env_id`` looks like one and ale-py is installed.

    Returns:
        Whether ``env_id`` is now in gymnasium's registry.

    Raises:
        EnvError: If ``env_id`` names an Atari game but ale-py is not installed.
    """
    if env_id in gym.registry:
        return True
    if not looks_like_atari_id(env_id):
        return False
    try:
        import ale_py
    except ImportError as exc:
        raise EnvError(
            f"{env_id!r} is an Atari game, which needs the Arcade Learning Environment: "
            f"{pip_install('atari')} (ale-py and OpenCV)."
        ) from exc
    gym.register_envs(ale_py)
    return env_id in gym.registry


def looks_like_atari_id(env_id: str) -> bool:
    """True for ALE ids: ``ALE/Pong-v5`` and the older ``PongNoFrameskip-v4`` style."""
    return env_id.startswith("ALE/") or "NoFrameskip" in env_id or env_id.endswith(("Deterministic-v4", "-ramNoFrameskip-v4"))


def is_atari(env: gym.Env) -> bool:
    """True if ``env`` is an ALE game that gives screen images (not RAM)."""
    unwrapped = getattr(env, "unwrapped", env)
    module = type(unwrapped).__module__ or ""
    if not module.startswith("ale_py"):
        return False
    shape = getattr(env.observation_space, "shape", None) or ()
    return len(shape) == 3


def base_frameskip(env: gym.Env) -> int:
    """How many frames one step of the unwrapped ALE env already repeats its action (1: none)."""
    skip = getattr(env.unwrapped, "_frameskip", 1)
    return skip if isinstance(skip, int) else 1


def make_atari_kwargs(env_id: str, env_config: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``gym.make`` of an ALE id: one frame per step unless the user set it.

    The frame skipping is then done by the preprocessing, which max-pools the last two
    frames; ``ALE/...-v5`` would otherwise skip 4 frames itself.
    """
    kwargs = dict(env_config)
    if env_id.startswith("ALE/"):
        kwargs.setdefault("frameskip", 1)
    return kwargs


class FrameStack(gym.ObservationWrapper):
    """Stacks the last ``k`` observations on a new last axis: (h, w) frames -> (h, w, k).

    After a reset the stack holds ``k`` copies of the first frame.
    """

    def __init__(self, env: gym.Env, k: int) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 2:
            raise EnvError(f"FrameStack needs (height, width) frames, got observation space {space}.")
        self.k = k
        self._frames: deque[np.ndarray] = deque(maxlen=k)
        low = np.repeat(space.low[..., None], k, axis=-1)
        high = np.repeat(space.high[..., None], k, axis=-1)
        self.observation_space = gym.spaces.Box(low=low, high=high, dtype=space.dtype)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.k):
            self._frames.append(obs)
        return self._stacked(), info

    def observation(self, observation: np.ndarray) -> np.ndarray:
        self._frames.append(observation)
        return self._stacked()

    def _stacked(self) -> np.ndarray:
        return np.stack(self._frames, axis=-1)


def wrap_atari(env: gym.Env, dim: int = 84, framestack: bool = True) -> gym.Env:
    """Applies the standard Atari preprocessing to an ALE env.

    Args:
        env: An ALE env giving RGB screens.
        dim: Side of the square grey-scale screen (84 or 42 are the usual ones).
        framestack: Stack the last 4 screens (True) or give one (dim, dim, 1) screen.

    Returns:
        The wrapped env, observations of shape ``(dim, dim, 4)`` (or ``(dim, dim, 1)``), uint8.

    Raises:
        EnvError: If OpenCV (which gymnasium's resize uses) is missing.
    """
    try:
        import cv2  # noqa: F401 - gymnasium's AtariPreprocessing resizes with it
    except ImportError as exc:
        raise EnvError(f"The Atari preprocessing needs OpenCV: {pip_install('atari')}.") from exc
    # The ALE may already repeat actions (ALE/...-v5 made with its default frameskip=4):
    # then the wrapper must not skip again.
    skip = FRAME_SKIP if base_frameskip(env) == 1 else 1
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=NOOP_MAX, frame_skip=skip, screen_size=dim, grayscale_obs=True, grayscale_newaxis=False,
        scale_obs=False, terminal_on_life_loss=False,
    )
    if framestack:
        return FrameStack(env, FRAME_STACK)
    return gym.wrappers.TransformObservation(
        env, lambda obs: obs[..., None],
        gym.spaces.Box(0, 255, (dim, dim, 1), dtype=np.uint8),
    )
