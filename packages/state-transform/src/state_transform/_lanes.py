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

from state_core import State

__all__ = ["split_before_mapping", "split_inside_lane"]


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
