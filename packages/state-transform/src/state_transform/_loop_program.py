"""Compiling a traced loop body into one ``lax.scan`` / ``lax.while_loop`` program.

A program takes ``(carried state values, invariant state values, *loop args)``:
states the body writes are loop carries (their value before the loop is the
first carry), states it only reads are passed once as loop invariants.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax
import jax.extend.core as jex_core

from state_core import State
from state_core.engine import StaleTraceError, TracedCall, read_state_values, write_state_values

from ._traced_body import TracedBody, aval_str, leaf_avals, match_weak_types, same_shape_dtype

__all__ = ["StatePlan", "LoopProgram", "run_program", "check_carry_avals"]


class StatePlan:
    """Which states a set of traced calls carry and which they only read."""

    __slots__ = ("carried", "invariant", "carried_avals", "_pos")

    def __init__(self, writers: Sequence[TracedCall], readers: Sequence[TracedCall]) -> None:
        carried: list[State[Any]] = []
        seen: set[int] = set()
        for call in writers:
            for s in call.out_states:
                if id(s) not in seen:
                    seen.add(id(s))
                    carried.append(s)
        invariant: list[State[Any]] = []
        for call in readers:
            for s in call.in_states:
                if id(s) not in seen:
                    seen.add(id(s))
                    invariant.append(s)
        self.carried = carried
        self.invariant = invariant
        self._pos = {id(s): (True, k) for k, s in enumerate(carried)}
        self._pos.update({id(s): (False, k) for k, s in enumerate(invariant)})
        self.carried_avals: list[tuple[Any, ...]] = []

    def position(self, state: State[Any]) -> tuple[bool, int]:
        """``(is_carried, index)`` of ``state`` in the carried or the invariant values."""
        return self._pos[id(state)]

    def inputs_of(self, call: TracedCall) -> Callable[[Sequence[Any], Sequence[Any]], list[Any]]:
        """A function ``(carried values, invariant values) -> input state leaves of call``."""
        where = [self._pos[id(s)] for s in call.in_states]

        def gather(carried: Sequence[Any], invariant: Sequence[Any]) -> list[Any]:
            leaves: list[Any] = []
            for is_carried, k in where:
                leaves.extend(jax.tree.leaves(carried[k] if is_carried else invariant[k]))
            return leaves

        return gather

    def check_stale(self, calls: Sequence[TracedCall], carried: Sequence[Any], invariant: Sequence[Any]) -> None:
        """Raise ``StaleTraceError`` if a state changed shape/dtype since ``calls`` were traced."""
        for call in calls:
            for s, expected in zip(call.in_states, call.in_state_avals, strict=True):
                is_carried, k = self._pos[id(s)]
                value = carried[k] if is_carried else invariant[k]
                if not same_shape_dtype(leaf_avals(value), expected):
                    raise StaleTraceError()


def written_avals(call: TracedCall) -> list[tuple[Any, ...]]:
    """Per written state of ``call``: the ``leaf_avals`` of the value the body writes."""
    avals = call.closed_jaxpr.out_avals[call.n_out_leaves :]
    result = []
    i = 0
    for s in call.out_states:
        n = len(jax.tree.leaves(s._value))
        result.append(tuple((a.shape, a.dtype, a.weak_type) for a in avals[i : i + n]))
        i += n
    return result


def check_carry_avals(plan: StatePlan, writers: Sequence[TracedCall], carried: Sequence[Any], who: str) -> None:
    """Every written state must keep its shape and dtype from one iteration (branch) to the next."""
    before = [leaf_avals(v) for v in carried]
    plan.carried_avals = before
    pos = {id(s): k for k, s in enumerate(plan.carried)}
    for call in writers:
        for s, after in zip(call.out_states, written_avals(call), strict=True):
            k = pos[id(s)]
            if not same_shape_dtype(before[k], after):
                raise ValueError(
                    f"{who} writes {s.describe()} with a value of type {aval_str(after)}, but the "
                    f"state holds {aval_str(before[k])} before it. A state written inside {who} must "
                    "keep its shape and dtype: cast or reshape the new value, or resize the state "
                    "before the call."
                )


def state_outputs(plan: StatePlan, call: TracedCall, flat_written: Sequence[Any], carried: Sequence[Any]) -> list[Any]:
    """New value of every carried state after ``call`` ran (unwritten ones pass through)."""
    new = list(carried)
    defs = [jax.tree.structure(v) for v in carried]
    pos = {id(s): k for k, s in enumerate(plan.carried)}
    i = 0
    for s in call.out_states:
        k = pos[id(s)]
        n = defs[k].num_leaves  # type: ignore[attr-defined]  # jaxlib PyTreeDef stub not found
        leaves = match_weak_types(flat_written[i : i + n], plan.carried_avals[k])
        new[k] = jax.tree.unflatten(defs[k], leaves)
        i += n
    return new


class LoopProgram:
    """A compiled state-aware control-flow program and the states it reads and writes."""

    __slots__ = ("fn", "plan", "calls")

    def __init__(self, fn: Callable[..., Any], plan: StatePlan, calls: Sequence[TracedCall]) -> None:
        self.fn = fn
        self.plan = plan
        self.calls = tuple(calls)


def evaluator(call: TracedCall) -> Callable[..., list[Any]]:
    """``run(*state_leaves, *arg_leaves) -> flat outputs`` of a traced call."""
    return jex_core.jaxpr_as_fun(call.closed_jaxpr)


def run_program(
    bodies: Sequence[TracedBody],
    trace: Callable[[], Sequence[TracedCall]],
    params: Any,
    build: Callable[[Sequence[TracedCall]], LoopProgram],
    args: Sequence[Any],
    who: str,
    fast_key: Hashable | None = None,
) -> Any:
    """Trace (cached), build (cached), run once and write the carried states back.

    The program returns ``(result, new carried state values)``. Nothing is written
    if tracing, building or running raises. If a state changed shape or dtype since
    the body was traced, the traces are dropped and the body is traced again.
    ``fast_key`` describes the call signature completely (argument structure,
    shapes, dtypes and loop parameters): a repeated call finds its program by it.
    """
    for attempt in (0, 1):
        program = bodies[0].fast_program(fast_key, bodies) if fast_key is not None else None
        if program is None:
            calls = trace()
            program = bodies[0].program(calls, params, functools.partial(build, calls))
            if fast_key is not None and all(c.cacheable for c in calls):
                bodies[0].remember(fast_key, bodies, program)
        plan = program.plan
        carried = read_state_values(plan.carried)
        invariant = read_state_values(plan.invariant)
        try:
            result, new_values = program.fn(carried, invariant, *args)
        except StaleTraceError:
            if attempt:
                raise
            for body in bodies:
                body.forget()
            continue
        write_state_values(plan.carried, new_values, who)
        return result
    raise AssertionError("unreachable")
