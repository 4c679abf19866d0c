"""ViewRequirement: classic RLlib 1.x's record of which data a model wants to see.

``ray.rllib.policy.view_requirement.ViewRequirement`` at its renamed path, so that 1.x
custom models that fill ``self.view_requirements`` in their constructor still build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
