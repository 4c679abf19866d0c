"""ViewRequirement: classic RLlib 1.x's record of which data a model wants to see.

``ray.rllib.policy.view_requirement.ViewRequirement`` at its renamed path, so that 1.x
custom models that fill ``self.view_requirements`` in their constructor still build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlstack.errors import ConfigError


@dataclass
class ViewRequirement:
    """Which column (and which time steps of it) a model's ``forward`` reads.

    rlstack's models read the current observation (``input_dict["obs"]`` /
    ``"obs_flat"``) and, recurrent ones, the previous action and reward
    (``input_dict["prev_actions"]`` / ``["prev_rewards"]``, see
    ``rlstack.models.prev_inputs``): rlstack keeps this record so 1.x models that declare
    view requirements construct unchanged, but its samplers do not build other shifted
    or repeated views from it (no frame windows; stack frames with ``model.framestack``
    for Atari instead).

    Args:
        data_col: The column the view is made from (None: the key it is stored under).
        space: The gymnasium space of one item of the view.
        shift: Time shift relative to the current step (-1: the previous step), or a
            range such as ``"-3:0"``, or a list of shifts.
        index: An absolute time index instead of a shift.
        batch_repeat_value: Repeat the view only every this many rows (RNN states).
        used_for_compute_actions: Whether acting needs the view.
        used_for_training: Whether the loss needs the view.
    """

    data_col: str | None = None
    space: Any = None
    shift: int | str | list[int] = 0
    index: int | None = None
    batch_repeat_value: int = 1
    used_for_compute_actions: bool = True
    used_for_training: bool = True


# Shifted views that rlstack's samplers do build, under other names: the previous action
# and reward (recurrent models' prev_actions / prev_rewards), the next observation and a
# recurrent state carried from the previous step.
_BUILT_SHIFTS = {("prev_actions", "actions", -1), ("prev_rewards", "rewards", -1), ("new_obs", "obs", 1),
                 ("next_obs", "obs", 1)}


def check_views(view_requirements: dict[str, Any], owner: str) -> None:
    """Raises a ConfigError naming the first view in ``view_requirements`` that asks for
    other time steps than rlstack's samplers give (a window such as ``shift="-3:0"``, or a
    shift of a column rlstack does not shift), so that a 1.x model or policy that reads
    one fails when it is built instead of with a KeyError while sampling.

    Args:
        view_requirements: ``{key: ViewRequirement}`` of a model or hand-written policy.
        owner: What declared them, for the message (e.g. ``"custom_model FrameStackingModel"``).
    """
    for key, view in view_requirements.items():
        shift = getattr(view, "shift", 0)
        if shift in (0, None) or getattr(view, "index", None) is not None:
            continue
        column = view.data_col or key
        if isinstance(shift, int) and ((key, column, shift) in _BUILT_SHIFTS
                                       or (key.startswith("state_in_") and column == key.replace("_in_", "_out_")
                                           and shift == -1)):
            continue
        raise ConfigError(
            f"{owner} declares the view {key!r} = {column!r} at shift {shift!r}; rlstack's samplers give a "
            "model the current step's columns (obs, and prev_actions / prev_rewards / state_in_* from the "
            "previous step) but do not build windows or other shifted views. Stack past observations in the "
            "env (gymnasium.wrappers.FrameStackObservation) or keep them in the model's recurrent state "
            "(get_initial_state).")
