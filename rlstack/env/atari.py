"""Atari preprocessing: the standard (DeepMind) one, and classic RLlib's own image and RAM scaling.

Under ``preprocessor_pref="deepmind"`` ALE screen games get :func:`wrap_atari`, which does
what classic RLlib's ``wrap_deepmind`` did, on gymnasium's own wrappers where they exist:
up to 30 no-op actions after each reset, the action repeated for 4 frames (with the max of
the last two frames, against flicker), the screen grey-scaled and resized to ``dim`` x
``dim``, and the last 4 screens stacked on the channel axis, so the policy sees an
``(dim, dim, 4)`` uint8 image (HWC, the layout rlstack's vision models take). Rewards are
clipped to their sign by the rollout workers (``clip_rewards``), not here, so episode
returns in the metrics stay the game's score. The ``model`` keys ``grayscale`` and
``zero_mean`` play no part in it (1.x ignored them there too).

Every env that wrapper does not take (``preprocessor_pref`` None or "rllib", or a screen
env that is not the ALE's) gets :func:`wrap_rllib_preprocessing` instead: 1.x's
``GenericPixelPreprocessor`` for ``(210, 160, 3)`` screens (``dim``, ``grayscale``,
``zero_mean``) and its ``AtariRamPreprocessor`` for an ALE game's RAM.

The ALE comes from the ``ale-py`` package (the ``atari`` extra), which ships
the game ROMs.
"""

from __future__ import annotations

import importlib.util
import logging
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import EnvError, pip_install

logger = logging.getLogger(__name__)

# The wrapper's settings (the classic values).
NOOP_MAX = 30
FRAME_SKIP = 4
FRAME_STACK = 4

# The observation shapes 1.x's RLlib preprocessors recognised: an ALE screen (RGB) and
# an ALE game's RAM.
SCREEN_SHAPE = (210, 160, 3)
RAM_SHAPE = (128,)
# 1.x's pixel preprocessing cut this many rows off the top (the score) and the bottom.
SCREEN_CROP_ROWS = 25
# Below this side the screen is first resized to it, then to dim (a two-step shrink keeps
# thin sprites that one step to 42x42 would average away).
INTERMEDIATE_DIM = 84


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


def _require_cv2(what: str) -> None:
    try:
        import cv2  # noqa: F401
    except ImportError as exc:
        raise EnvError(f"{what} needs OpenCV: {pip_install('atari')}.") from exc


class PixelPreprocessing(gym.ObservationWrapper):
    """Classic RLlib's image preprocessing of ``(210, 160, 3)`` screens (its
    ``GenericPixelPreprocessor``), driven by the ``model`` keys ``dim``, ``grayscale``
    and ``zero_mean``.

    The score rows at the top and the border at the bottom are cut off (25 rows each),
    the screen is resized to ``dim`` x ``dim`` (by way of 84 x 84 when ``dim`` is smaller),
    averaged over its colour channels when ``grayscale``, and scaled to ``[-1, 1)``
    (``(x - 128) / 128``, ``zero_mean``) or to ``[0, 1]`` (``x / 255``). Observations are
    float32 ``(dim, dim, 1)`` grey or ``(dim, dim, 3)`` colour images.

    Args:
        env: An env whose observations are ``(210, 160, 3)`` images.
        dim: The side of the resized square screen.
        grayscale: Average the colour channels into one.
        zero_mean: Scale to ``[-1, 1)`` instead of ``[0, 1]``.

    Raises:
        EnvError: If OpenCV (which resizes the screens) is missing.
    """

    def __init__(self, env: gym.Env, dim: int = 84, grayscale: bool = False, zero_mean: bool = True) -> None:
        _require_cv2("The image preprocessing of (210, 160, 3) screens")
        super().__init__(env)
        self.dim, self.grayscale, self.zero_mean = dim, grayscale, zero_mean
        shape = (dim, dim, 1 if grayscale else 3)
        self.observation_space = gym.spaces.Box(-1.0 if zero_mean else 0.0, 1.0, shape, dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        import cv2

        screen = np.asarray(observation)[SCREEN_CROP_ROWS:-SCREEN_CROP_ROWS]
        if self.dim < INTERMEDIATE_DIM:
            screen = cv2.resize(screen, (INTERMEDIATE_DIM, INTERMEDIATE_DIM), interpolation=cv2.INTER_AREA)
        screen = cv2.resize(screen, (self.dim, self.dim), interpolation=cv2.INTER_AREA).astype(np.float32)
        if self.grayscale:
            screen = screen.mean(axis=2, keepdims=True)
        scaled = (screen - 128.0) / 128.0 if self.zero_mean else screen / 255.0
        return scaled.astype(np.float32)


class RamPreprocessing(gym.ObservationWrapper):
    """Classic RLlib's scaling of an ALE game's 128 RAM bytes (its ``AtariRamPreprocessor``):
    ``(x - 128) / 128``, float32 in ``[-1, 1)``.

    Args:
        env: An ALE env made with ``obs_type="ram"`` (``env_config: {obs_type: ram}``).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, RAM_SHAPE, dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return ((np.asarray(observation, dtype=np.float32) - 128.0) / 128.0).astype(np.float32)


def is_atari_ram(env: gym.Env) -> bool:
    """True if ``env`` is an ALE game that gives its RAM (128 bytes) as the observation."""
    unwrapped = getattr(env, "unwrapped", env)
    module = type(unwrapped).__module__ or ""
    return module.startswith("ale_py") and getattr(env.observation_space, "shape", None) == RAM_SHAPE


def wrap_rllib_preprocessing(env: gym.Env, model_config: dict[str, Any] | None = None) -> gym.Env:
    """Applies classic RLlib's own preprocessing where 1.x applied it, else returns ``env``.

    1.x ran it on every env the DeepMind wrapper had not taken (``preprocessor_pref``
    None or "rllib", or an env that is not an ALE screen game), by observation shape:
    a ``(210, 160, 3)`` Box gets :class:`PixelPreprocessing` with the ``model`` config's
    ``dim``, ``grayscale`` and ``zero_mean``; an ALE game's RAM gets
    :class:`RamPreprocessing`. 1.x scaled any ``(128,)`` Box as RAM; here only an ALE
    game's, so that a 128-wide feature vector of another env stays as it is.

    Args:
        env: A gymnasium env (after the DeepMind wrapper, if that applied).
        model_config: The ``model`` config (None: its defaults, 84 / False / True).

    Returns:
        ``env``, wrapped when one of the two applies.

    Without OpenCV (``rlstack-ray[atari]``) a screen is left as it is, with a warning:
    an env that ran before this preprocessing existed keeps running.
    """
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box):
        return env
    model_config = model_config or {}
    if tuple(space.shape) == SCREEN_SHAPE:
        if importlib.util.find_spec("cv2") is None:
            logger.warning("Observations of shape %s get RLlib 1.x's image preprocessing (resize to model.dim, "
                           "grayscale, zero_mean), which needs OpenCV: %s. Leaving them as they are.",
                           SCREEN_SHAPE, pip_install("atari"))
            return env
        return PixelPreprocessing(env, dim=int(model_config.get("dim", 84)),
                                  grayscale=bool(model_config.get("grayscale", False)),
                                  zero_mean=bool(model_config.get("zero_mean", True)))
    if is_atari_ram(env):
        return RamPreprocessing(env)
    return env
