"""States that give each mapped lane its own value, through the State protocol.

A state whose ``splits_across_lanes(value)`` is True (a ``RandomState`` holding one
key) is not broadcast to the lanes of ``vmap2`` / ``pmap2`` / ``shard_map``: its
``split_across_lanes(value, n)`` gives one value per lane and the value the state
holds afterwards. Mapping strategies call these helpers; none of them knows what
kind of state it splits. The split mode itself (which states split, which written
states the lanes return, the order of the write-back) is decided here once for
every mapping strategy.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import jax

from state_core import State
from state_core.engine import Trace

__all__ = [
    "SPLIT",
    "splits_per_lane",
    "split_layout",
    "lane_write_back",
    "kept_writes",
    "split_before_mapping",
    "split_inside_lane",
]

SPLIT = "split"  # the mode of an input state that gives each lane its own part (a random key)


def splits_per_lane(state: State[Any], value: Any, kept_whole: bool) -> bool:
    """Whether ``state`` gives each lane its own part of ``value`` (mode ``SPLIT``).

    It does when no rule keeps it whole (``kept_whole``: an explicit broadcast axis
    ``None`` for ``vmap2`` / ``pmap2``, any spec for ``shard_map``) and the State
    says its value splits across lanes (a ``RandomState`` holding one key).
    """
    return not kept_whole and state.splits_across_lanes(value)


def split_layout(trace: Trace, in_modes: Sequence[Any]) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """``(split_positions, written_mask)`` of a mapped trace.

    ``split_positions`` are the indices into ``trace.in_states`` whose mode is
    ``SPLIT``; ``written_mask`` says, per ``trace.out_states``, whether the lanes
    return its new value (a split state is written from the split instead).
    """
    positions = tuple(k for k, mode in enumerate(in_modes) if mode is SPLIT)
    split_ids = {id(trace.in_states[k]) for k in positions}
    return positions, tuple(id(s) not in split_ids for s in trace.out_states)


def lane_write_back(
    trace: Trace, split_positions: Sequence[int], written_mask: Sequence[bool]
) -> tuple[State[Any], ...]:
    """``Program.write_back`` of a mapped program: lane-written states, created states, then split states."""
    written = tuple(s for s, keep in zip(trace.out_states, written_mask, strict=True) if keep)
    return written + trace.created_states + tuple(trace.in_states[k] for k in split_positions)


def kept_writes(written: Sequence[Any], written_mask: Sequence[bool]) -> list[Any]:
    """The new values a lane returns: those of the written states ``written_mask`` keeps."""
    return [v for v, keep in zip(written, written_mask, strict=True) if keep]


def split_before_mapping(
    states: Sequence[State[Any]], values: list[Any], positions: Sequence[int], num_lanes: int
) -> list[Any]:
    """Replace ``values[k]`` (k in ``positions``) by its per-lane values; return the next values.

    For ``jax.vmap``: the per-lane values are mapped on axis 0.

    Args:
        states: the states that split across lanes (``splits_across_lanes`` is
            True), one per entry of ``positions``.
        values: the values of all the mapped call's input states, changed in
            place: the entries at ``positions`` become per-lane values (a
            leading axis of length ``num_lanes``).
        positions: where each of ``states`` sits in ``values``.
        num_lanes: the size of the mapped axis.

    Returns:
        The value each split state holds after the call, in ``states`` order.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_random import RandomState
        >>> from state_transform.engine import split_before_mapping
        >>> rng = RandomState(0)
        >>> values = [jnp.zeros(3), rng.value]
        >>> after = split_before_mapping([rng], values, [1], num_lanes=4)
        >>> values[1].shape[0], len(after)
        (4, 1)
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
    next values (the same on every lane) are returned too. Call it inside the
    mapped function, where ``axis_name`` is bound.

    Args:
        states: the states that split across lanes, one per entry of ``positions``.
        values: the values of all the lane's input states (not changed).
        positions: where each of ``states`` sits in ``values``.
        num_lanes: the number of lanes (the size of the mapped axis).
        axis_name: the name of the mapped axis, as given to ``jax.pmap`` /
            ``shard_map``.

    Returns:
        ``(values, next_values)``: a copy of ``values`` with this lane's part at
        ``positions``, and the value each split state holds after the call.
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
