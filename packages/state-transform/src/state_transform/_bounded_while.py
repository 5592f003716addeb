"""``bounded_while_loop``: a while loop with a step bound that reverse-mode differentiates.

``lax.while_loop`` has no reverse-mode derivative because its trip count is not
known in advance. With a bound ``max_steps`` the loop can be written as nested
``lax.scan`` s of ``lax.cond`` s (the construction of equinox's bounded while
loop): ``base`` blocks, each either skipped (the condition is false) or made of
``base`` smaller blocks, down to single steps. Every level but the lowest is
under ``jax.checkpoint``, so the backward pass stores one carry per block
instead of one per step, and costs time in proportion to the steps taken.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from state_core.engine import jaxpr_evaluator

from ._control_flow import Carry, ControlFlow, check_body, is_concrete, jit_disabled
from ._loops import check_cond_trace
from ._typing import C

__all__ = ["bounded_while_loop", "nested_bounded_loop", "rounded_steps"]


def rounded_steps(steps: int, base: int) -> int:
    """The smallest power of ``base`` that is ``>= steps`` (1 for ``steps <= 1``)."""
    rounded = 1
    while rounded < steps:
        rounded *= base
    return rounded


def nested_bounded_loop(
    cond: Callable[[Any], Any],
    body: Callable[[Any], Any],
    val: Any,
    max_steps: int,
    base: int,
    skip: Callable[[Any, int], Any],
) -> Any:
    """Apply ``body`` while ``cond(val)``, at most ``max_steps`` (a power of ``base``) times.

    Once ``cond`` is false it stays false (``skip`` leaves what ``cond`` reads
    alone), so a block whose first step would not run is skipped whole:
    ``skip(val, n)`` is the value after skipping ``n`` steps.
    """
    if max_steps == 1:
        return jax.lax.cond(cond(val), body, lambda v: skip(v, 1), val)

    def run_block(v: Any) -> Any:
        return nested_bounded_loop(cond, body, v, max_steps // base, base, skip)

    def block(v: Any, _: Any) -> tuple[Any, None]:
        return jax.lax.cond(cond(v), run_block, lambda u: skip(u, max_steps // base), v), None

    if max_steps != base:  # the lowest level is cheap to store; checkpoint the ones above it
        block = jax.checkpoint(block, prevent_cse=False)
    return jax.lax.scan(block, val, None, length=base)[0]


def _check_steps(max_steps: Any, base: Any, who: str) -> tuple[int, int]:
    if isinstance(max_steps, bool):
        raise TypeError(f"{who}: max_steps must be an int, got the bool {max_steps!r}.")
    try:
        max_steps = operator.index(max_steps)
    except TypeError:
        raise TypeError(
            f"{who}: max_steps must be an int known at trace time, got {type(max_steps).__name__}."
        ) from None
    if max_steps < 0:
        raise ValueError(f"{who}: max_steps must be >= 0, got {max_steps}.")
    if isinstance(base, bool) or not isinstance(base, int) or base < 2:
        raise ValueError(f"{who}: base must be an int >= 2, got {base!r}.")
    return max_steps, base


class _BoundedWhile(ControlFlow):
    """``bounded_while_loop``'s program: the nested scans over ``(step, carry, state values)``."""

    def __init__(self, cond_fun: Callable[..., Any], body_fun: Callable[..., Any], max_steps: int, base: int) -> None:
        super().__init__([body_fun, cond_fun], ["body_fun", "cond_fun"], "bounded_while_loop", (max_steps, base))
        self.max_steps = max_steps
        self.base = base

    def _run(self, init: Any) -> Any:
        who, max_steps = self.who, self.max_steps
        cond_trace = self.trace_body(1, (init,))
        check_cond_trace(cond_trace, who)
        body = self.trace_body(0, (init,))
        carry = Carry([body], [body, cond_trace])
        carried, invariant = carry.read()
        carry.check_avals([body], who)
        run_body, gather_body = jaxpr_evaluator(body), carry.inputs_of(body)
        run_cond, gather_cond = jaxpr_evaluator(cond_trace), carry.inputs_of(cond_trace)

        def cond(state: tuple[Any, ...]) -> Any:
            step, c, states = state
            user = run_cond(gather_cond(states, invariant), jax.tree.leaves(((c,), {})))[0]
            return jnp.logical_and(step < max_steps, user)

        def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
            i, c, states = state
            new_c, written, _ = run_body(gather_body(states, invariant), jax.tree.leaves(((c,), {})))
            return i + 1, new_c, carry.outputs(body, written, states)

        start = (jnp.zeros((), jnp.int32), init, carried)
        _, final, states = nested_bounded_loop(
            cond, step, start, rounded_steps(max_steps, self.base), self.base, lambda v, n: v
        )
        carry.write(states)
        return final


def bounded_while_loop(
    cond_fun: Callable[[C], Any],
    body_fun: Callable[[C], C],
    init_val: C,
    *,
    max_steps: int,
    base: int = 16,
) -> C:
    """A while loop that stops after at most ``max_steps`` steps and is reverse-mode differentiable.

    Runs ``val = body_fun(val)`` while ``cond_fun(val)`` is true and fewer than
    ``max_steps`` steps have run, and returns the final ``val``, as
    ``while_loop`` would (states that ``body_fun`` writes are carried and hold
    their final values; ``cond_fun`` may read states but not write them). Unlike
    ``while_loop``, ``grad`` and ``jax.grad`` work through it: the loop is nested
    ``lax.scan`` s with rematerialisation, whose backward pass costs time in
    proportion to the steps taken and memory in proportion to
    ``base * log_base(max_steps)`` carries.

    Under ``jax.vmap`` (or ``vmap2``) with a condition that differs per lane, every
    lane runs ``max_steps`` steps of work (each keeps its own result).

    Args:
        cond_fun: ``cond_fun(val) -> bool scalar``.
        body_fun: ``body_fun(val) -> val`` (same structure, shapes and dtypes).
        init_val: the initial value (converted to arrays).
        max_steps: the bound on the number of steps (an int ``>= 0``).
        base: the branching of the nested loops: larger compiles faster, smaller
            wastes fewer steps (brainstate's and equinox's default, 16).

    Returns:
        The final value.

    Raises:
        ValueError: ``max_steps < 0`` or ``base < 2``; ``cond_fun`` writes a state.
        TypeError: ``max_steps`` is not an int; ``cond_fun`` does not return a boolean scalar.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_transform import bounded_while_loop
        >>> def run(x):
        ...     return bounded_while_loop(lambda v: v < 10.0, lambda v: v * x, 1.0, max_steps=100)
        >>> run(2.0)
        Array(16., dtype=float32, weak_type=True)
        >>> jax.grad(run)(2.0)  # d(x**4)/dx = 4 x**3
        Array(32., dtype=float32, weak_type=True)
    """
    max_steps, base = _check_steps(max_steps, base, "bounded_while_loop")
    check_body(cond_fun, "bounded_while_loop: cond_fun")
    check_body(body_fun, "bounded_while_loop: body_fun")
    init_val = jax.tree.map(jnp.asarray, init_val)
    if max_steps == 0:
        return init_val
    if jit_disabled():
        value, steps = init_val, 0
        while steps < max_steps and is_concrete(keep_going := cond_fun(value)):
            if not keep_going:
                return value
            value, steps = body_fun(value), steps + 1
        if steps == max_steps:
            return value
        # A traced condition (under jax.vmap, say): the compiled loop does the remaining steps.
        init_val, max_steps = value, max_steps - steps
    return _BoundedWhile(cond_fun, body_fun, max_steps, base)(init_val)
