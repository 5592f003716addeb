"""Random keys per lane, and the call path shared by the mapping engines."""

from __future__ import annotations

from typing import Any, Hashable, Sequence

import jax
from state_core import (
    StaleTraceError,
    State,
    TracedCall,
    active_trace_stacks,
    read_state_values,
    states_changed,
    write_state_values,
)
from state_random import split_for_lanes

__all__ = ["give_lanes_their_keys", "LaneProgramCalls"]


def give_lanes_their_keys(
    values: list, split_positions: Sequence[int], num_lanes: int, axis_name: Hashable
) -> tuple[list, list]:
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


class LaneProgramCalls:
    """The call path of an engine whose compiled program splits random keys per lane.

    Mixed into ``StatefulFunction`` subclasses (``StatefulMapping``, ``shard_map``)
    whose traced entries carry ``extra["split_positions"]`` and
    ``extra["write_back"]``. A call gathers the state values, runs the cached
    program and writes the results back. If the program fails because the states
    changed shape since the trace, it traces again; any other failure leaves every
    state as it was, except that split random keys advance (a retry never reuses
    the same randomness).
    """

    def _num_lanes(self, entry: TracedCall) -> int:
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hit, out = self._call_last_program(args, kwargs)
        if hit:
            return out
        out, entry = self._call_by_key(args, kwargs)
        self._remember(entry)
        return out

    def _call_by_key(self, args: tuple, kwargs: dict) -> tuple[Any, TracedCall]:
        entry, leaves = self._lookup(args, kwargs)
        values = read_state_values(entry.in_states)
        try:
            out, new_values = self._run(entry, values, leaves)
        except Exception as err:
            if not isinstance(err, StaleTraceError) and not states_changed(entry, values):
                self._advance_random_states(entry, values)
                raise
            entry, leaves = self._retrace(entry, args, kwargs)
            values = read_state_values(entry.in_states)
            try:
                out, new_values = self._run(entry, values, leaves)
            except Exception:
                self._advance_random_states(entry, values)
                raise
        write_state_values(self._states_to_write(entry), new_values, self.name)
        return out, entry

    def _advance_random_states(self, entry: TracedCall, values: list) -> None:
        advance_keys(
            [entry.in_states[k] for k in entry.extra["split_positions"]],
            [values[k] for k in entry.extra["split_positions"]],
            self._num_lanes(entry),
        )


def advance_keys(states: Sequence[State], keys: Sequence[Any], num_lanes: int | None) -> None:
    """Leave each RandomState with the key a successful call would have left."""
    if active_trace_stacks() or num_lanes is None:
        return  # under an outer trace the outer transformation decides
    for state, key in zip(states, keys):
        state.restore_value(split_for_lanes(key, num_lanes)[1])
