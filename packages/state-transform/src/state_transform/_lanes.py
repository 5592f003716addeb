"""Random keys per lane, shared by the mapping engines (vmap2/pmap2 and shard_map)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import jax

from state_core import State, active_trace_stacks
from state_random import split_for_lanes

__all__ = ["give_lanes_their_keys", "advance_keys"]


def give_lanes_their_keys(
    values: list[Any], split_positions: Sequence[int], num_lanes: int, axis_name: Hashable
) -> tuple[list[Any], list[Any]]:
    """Replace the single keys at ``split_positions`` by this lane's key.

    Runs inside the mapped function: every lane splits the same key into
    ``num_lanes + 1`` parts and takes part ``1 + lane index``. Returns the new
    ``values`` and the key each split state holds afterwards (the same on every lane).
    """
    if not split_positions:
        return values, []
    values = list(values)
    index = jax.lax.axis_index(axis_name)
    next_keys = []
    for k in split_positions:
        lane_keys, next_key = split_for_lanes(values[k], num_lanes)
        values[k] = lane_keys[index]
        next_keys.append(next_key)
    return values, next_keys


def advance_keys(states: Sequence[State[Any]], keys: Sequence[Any], num_lanes: int | None) -> None:
    """Leave each RandomState with the key a successful call would have left."""
    if active_trace_stacks() or num_lanes is None:
        return  # under an outer trace the outer transformation decides
    for state, key in zip(states, keys, strict=True):
        state.restore_value(split_for_lanes(key, num_lanes)[1])
