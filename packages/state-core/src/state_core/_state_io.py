"""Reading and writing state values: the one read and the one write-back of every transformation.

A transformation reads its input states with ``read_state_values`` (recorded on
any active trace stack) and stores its results with ``write_state_values``, all
or nothing, refusing a tracer that would leak out of a plain JAX transformation.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import jax

from ._context import CTX, OPEN_STACKS
from ._jax_internals import ArrayImpl, PRNGKeyArray, is_tracer
from ._state import State, StateLeakError

__all__ = ["read_state_values", "write_state_values", "STORED_VALUE", "CONCRETE_VALUES"]

_ArrayImpl = ArrayImpl
_PRNGKeyArray = PRNGKeyArray

STORED_VALUE = operator.attrgetter("_value")
"""``STORED_VALUE(state)``: the value a State holds, read without recording it (no trace in progress)."""

CONCRETE_VALUES = (ArrayImpl, PRNGKeyArray)
"""The value types that are never tracers: a program's concrete results."""


def read_state_values(states: Sequence[State[Any]]) -> list[Any]:
    """Current values of ``states``, recording the reads on any active trace stack.

    Args:
        states: the States to read, in the order wanted.

    Returns:
        One value per state, in the same order.

    Example:
        >>> from state_core import State
        >>> from state_core.engine import read_state_values
        >>> read_state_values([State(1.0), State(2.0)])
        [1.0, 2.0]
    """
    if OPEN_STACKS.value and CTX.stacks:
        return [s.value for s in states]
    return list(map(STORED_VALUE, states))


def write_state_values(
    states: Sequence[State[Any]],
    values: Sequence[Any],
    who: str,
    *,
    every_value: bool = False,
    created: Sequence[State[Any]] = (),
) -> None:
    """Write results back into states, all or nothing: the one write-back of every transformation.

    Once the first value is stored the rest are stored too, even if an
    asynchronous exception (``KeyboardInterrupt``) arrives in between, so an
    interrupted call leaves either every state written or none. Inside a
    state-aware trace the writes are recorded on the active trace stacks.

    Args:
        states: the States to write.
        values: one new value per state, in the same order.
        who: names the transformation (or function) in the error message.
        every_value: check every value for a leaking tracer, not just the first.
            A compiled program's results are all tracers or none, so its
            replay checks the first; values made one by one (some may be
            constants) are checked each.
        created: the states among ``states`` that the call created. While it was
            traced they held tracers, so they refuse to be read; once their
            concrete values are stored here they are usable again.

    Raises:
        StateLeakError: outside any state-aware trace, the first new value (or,
            with ``every_value``, any) is a tracer of a plain JAX transformation
            (``jax.jit`` around a state-aware call): writing it would leak the
            tracer. No state is written.

    Example:
        >>> from state_core import State
        >>> from state_core.engine import write_state_values
        >>> a, b = State(0.0), State(0.0)
        >>> write_state_values([a, b], [1.0, 2.0], 'example')
        >>> a.value, b.value
        (1.0, 2.0)
    """
    stacks = CTX.stacks if OPEN_STACKS.value else ()  # (no thread traces: no thread-local lookup)
    if states and not stacks:
        probe = values[0]
        if type(probe) is not _ArrayImpl and type(probe) is not _PRNGKeyArray:  # neither is a tracer
            _check_not_leaking(states[0], probe, who)
        if every_value:
            for state, value in zip(states, values, strict=True):
                for leaf in jax.tree.leaves(value):
                    _check_not_leaking(state, leaf, who)
        if len(states) == 1:  # one store is all or nothing by itself
            states[0]._value = probe
        else:
            done = False
            try:
                for state, value in zip(states, values):  # noqa: B905  # hot path; lengths fixed at trace time
                    state._value = value
                done = True
            finally:
                if not done:  # interrupted half-way: finish, so the write is all or nothing
                    for state, value in zip(states, values):  # noqa: B905  # hot path; lengths fixed at trace time
                        state._value = value
    else:
        for state, value in zip(states, values):  # noqa: B905  # hot path; lengths fixed at trace time
            for stack in stacks[state._level :]:
                stack._on_write(state)
            state.restore_value(value)
    for state in created:
        if state._leaked_at is not None:
            state.restore_value(state._value)  # (restore_value clears the mark of a concrete value)


def _check_not_leaking(state: State[Any], probe: Any, who: str) -> None:
    """Raise ``StateLeakError`` if ``probe`` (a first new value) is a tracer of a plain JAX transformation."""
    if not isinstance(probe, jax.Array):
        probe_leaves = jax.tree.leaves(probe)  # a pytree value: look at its first leaf
        probe = probe_leaves[0] if probe_leaves else None
    if type(probe) is not _ArrayImpl and is_tracer(probe):
        raise StateLeakError(
            f"{who} writes {state.describe()} but was called inside a JAX transformation "
            "that is not state-aware (such as jax.jit, jax.vmap or jax.grad), so the new "
            "value would leak out as a tracer. Use state_transform.jit / vmap2 / grad for "
            "the outer transformation, or do not write states in this function."
        )
