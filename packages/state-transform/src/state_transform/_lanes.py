"""States that give each mapped lane its own value, through the State protocol.

A state whose ``splits_across_lanes(value)`` is True (a ``RandomState`` holding one
key) is not broadcast to the lanes of ``vmap2`` / ``pmap2`` / ``shard_map``: its
``split_across_lanes(value, n)`` gives one value per lane and the value the state
holds afterwards. Mapping strategies call these helpers; none of them knows what
kind of state it splits.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import jax

from state_core import State, active_trace_stacks

__all__ = ["split_before_mapping", "split_inside_lane", "advance_after_failure"]


def split_before_mapping(
    states: Sequence[State[Any]], values: list[Any], positions: Sequence[int], num_lanes: int
) -> list[Any]:
    """Replace ``values[k]`` (k in ``positions``) by its per-lane values; return the next values.

    For ``jax.vmap``: the per-lane values are mapped on axis 0.
    """
    next_values = []
    for state, k in zip(states, positions, strict=True):
        values[k], after = state.split_across_lanes(values[k], num_lanes)
        next_values.append(after)
    return next_values


def split_inside_lane(
    states: Sequence[State[Any]], values: list[Any], positions: Sequence[int], num_lanes: int, axis_name: Hashable
) -> tuple[list[Any], list[Any]]:
    """Inside a lane (``jax.pmap`` / ``shard_map``): this lane's value of each split state.

    Every lane splits the same value and takes its part by ``axis_index``; the
    next values (the same on every lane) are returned too.
    """
    if not positions:
        return values, []
    values = list(values)
    index = jax.lax.axis_index(axis_name)
    next_values = []
    for state, k in zip(states, positions, strict=True):
        lane_values, after = state.split_across_lanes(values[k], num_lanes)
        values[k] = lane_values[index]
        next_values.append(after)
    return values, next_values


def advance_after_failure(states: Sequence[State[Any]], values: Sequence[Any], num_lanes: int | None) -> None:
    """Leave each split state with the value a successful call would have left (random keys advance).

    Eager only: under an outer trace the outer transformation decides.
    """
    if active_trace_stacks() or num_lanes is None:
        return
    for state, value in zip(states, values, strict=True):
        state.restore_value(state.split_across_lanes(value, num_lanes)[1])
