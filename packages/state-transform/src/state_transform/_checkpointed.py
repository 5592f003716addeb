"""``checkpointed_scan`` and ``checkpointed_for_loop``: loops whose backward pass stores few carries.

A plain ``scan`` keeps every step's carry for the backward pass. These loops run
the same steps inside ``bounded_while_loop``'s nested, rematerialised scans
(blocks of ``base`` steps under ``jax.checkpoint``), so reverse mode stores about
``base * log_base(length)`` carries and recomputes the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from state_core.engine import jaxpr_evaluator

from ._bounded_while import nested_bounded_loop, rounded_steps
from ._control_flow import Carry, ControlFlow, check_body, jit_disabled, slice_spec
from ._loops import _loop_length, for_loop, scan
from ._progress import ProgressBar, as_progress_bar, progress_reporter
from ._typing import C, X, Y

__all__ = ["checkpointed_scan", "checkpointed_for_loop"]


class _CheckpointedLoop(ControlFlow):
    """``kind='scan'``: ``f(carry, x) -> (carry, y)``; ``kind='for'``: ``f(*x) -> y``. Called with ``(init, xs)``."""

    def __init__(
        self, f: Callable[..., Any], kind: str, length: int, base: int, bar: ProgressBar | None, who: str
    ) -> None:
        super().__init__([f], ["the body"], who, (kind, length, base, bar))
        self.kind, self.length, self.base, self.bar = kind, length, base, bar

    def _run(self, init: Any, xs: Any) -> Any:
        kind, who, length = self.kind, self.who, self.length
        if kind == "scan":
            spec: tuple[Any, ...] = (init, jax.tree.map(slice_spec, xs))
        else:
            spec = tuple(jax.tree.map(slice_spec, x) for x in xs)
        body = self.trace_body(0, spec)
        returned = body.out_shapes
        if kind == "scan":
            if not (isinstance(returned, tuple) and len(returned) == 2):
                raise TypeError(
                    f"{who}: the body must return a pair (carry, y), but it returned {jax.tree.structure(returned)}."
                )
            returned = returned[1]
        carry = Carry([body], [body])
        carried, invariant = carry.read()
        carry.check_avals([body], who)
        evaluate, gather = jaxpr_evaluator(body), carry.inputs_of(body)
        report = progress_reporter(self.bar, length) if self.bar is not None else None
        # The outputs are written into buffers step by step (the loop is not one scan over xs).
        ys = jax.tree.map(lambda s: jnp.zeros((length, *s.shape), s.dtype), returned)

        def cond(state: tuple[Any, ...]) -> Any:
            return state[0] < length

        def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
            i, user_carry, states, buffers = state
            x = jax.tree.map(lambda a: a[i], xs)
            args = (user_carry, x) if kind == "scan" else tuple(x)
            out, written, _ = evaluate(gather(states, invariant), jax.tree.leaves((args, {})))
            if kind == "scan":
                user_carry, y = out
            else:
                y = out
            buffers = jax.tree.map(lambda buf, v: buf.at[i].set(v), buffers, y)
            if report is not None:
                report(i, user_carry, y)
            return i + 1, user_carry, carry.outputs(body, written, states), buffers

        def skip(state: tuple[Any, ...], n: int) -> tuple[Any, ...]:
            return (state[0] + n, *state[1:])

        start = (jnp.zeros((), jnp.int32), init, carried, ys)
        _, final, states, ys = nested_bounded_loop(cond, step, start, rounded_steps(length, self.base), self.base, skip)
        carry.write(states)
        return final, ys


def _checked(length: int, base: Any, progress_bar: Any, who: str) -> ProgressBar | None:
    if isinstance(base, bool) or not isinstance(base, int) or base < 2:
        raise ValueError(f"{who}: base must be an int >= 2, got {base!r}.")
    if length < 1:
        raise ValueError(f"{who}: needs at least one step, got length {length}; use scan / for_loop for empty loops.")
    return as_progress_bar(progress_bar, who)


def checkpointed_scan(
    f: Callable[[C, X], tuple[C, Y]],
    init: C,
    xs: X | None = None,
    length: int | None = None,
    base: int = 16,
    pbar: Any = None,
    *,
    progress_bar: Any = None,
) -> tuple[C, Y]:
    """``scan`` whose reverse-mode derivative stores about ``base * log_base(length)`` carries, not ``length``.

    Same steps, results and state updates as ``scan(f, init, xs, length)``:
    ``f(carry, x) -> (carry, y)`` runs once per leading-axis slice of ``xs``, and
    the result is ``(final carry, stacked ys)``. The steps run in nested blocks of
    ``base`` under ``jax.checkpoint``, so ``grad`` through a long simulation
    recomputes intermediate steps instead of storing all of them.

    Args:
        f: the step function.
        init: the initial carry.
        xs: the values to loop over (a pytree of arrays with a common leading axis), or None.
        length: the number of steps (required when ``xs`` is None); at least 1.
        base: the block size: larger compiles faster and stores more carries.
        pbar: ``True``, a refresh interval (int) or a ``ProgressBar`` (brainstate's name).
        progress_bar: the same as ``pbar`` (the name the other loops use).

    Returns:
        ``(final carry, stacked ys)``.

    Raises:
        ValueError: no steps, the leading sizes of ``xs`` disagree, ``base < 2``, or a
            written state changes shape or dtype.
        TypeError: ``f`` does not return a ``(carry, y)`` pair.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_transform import checkpointed_scan
        >>> def decay(w):
        ...     return checkpointed_scan(lambda c, x: (c * w + x, c), 1.0, jnp.ones(50), base=4)[0]
        >>> float(decay(0.5))
        2.0
        >>> float(jax.grad(decay)(0.5))
        4.0
    """
    n = _loop_length(xs, length, "checkpointed_scan")
    bar = _checked(n, base, progress_bar if progress_bar is not None else pbar, "checkpointed_scan")
    check_body(f, "checkpointed_scan: the body")
    init = jax.tree.map(jnp.asarray, init)
    if jit_disabled():
        return scan(f, init, xs, length=n)
    return _CheckpointedLoop(f, "scan", n, base, bar, "checkpointed_scan")(init, xs)


def checkpointed_for_loop(
    f: Callable[..., Y],
    *xs: Any,
    length: int | None = None,
    base: int = 16,
    pbar: Any = None,
    progress_bar: Any = None,
) -> Y:
    """``for_loop`` whose reverse-mode derivative stores about ``base * log_base(length)`` carries.

    Same steps, outputs and state updates as ``for_loop(f, *xs, length=length)``:
    ``f(*x_t)`` runs for every leading-axis slice and the outputs are stacked.
    The steps run in nested blocks of ``base`` under ``jax.checkpoint`` (see
    ``checkpointed_scan``).

    Args:
        f: the step function, called with one slice of each of ``xs``.
        *xs: arrays (or pytrees of arrays) with a common leading axis.
        length: the number of steps when no ``xs`` are given; at least 1.
        base: the block size.
        pbar: ``True``, a refresh interval (int) or a ``ProgressBar`` (brainstate's name).
        progress_bar: the same as ``pbar``.

    Returns:
        The stacked outputs of ``f``.

    Raises:
        ValueError: no steps, the leading sizes of ``xs`` disagree, or ``base < 2``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import checkpointed_for_loop, grad
        >>> w = ParamState(jnp.array(0.9), name='w')
        >>> v = ParamState(jnp.array(0.0), name='v')
        >>> def simulate():
        ...     def step(drive):
        ...         v.value = v.value * w.value + drive
        ...         return v.value
        ...     return checkpointed_for_loop(step, jnp.ones(3)).sum()
        >>> grad(simulate, grad_states=w)()  # d/dw of 1 + (w + 1) + (w**2 + w + 1)
        Array(3.8, dtype=float32, weak_type=True)
    """
    n = _loop_length(xs, length, "checkpointed_for_loop")
    bar = _checked(n, base, progress_bar if progress_bar is not None else pbar, "checkpointed_for_loop")
    check_body(f, "checkpointed_for_loop: the body")
    if jit_disabled():
        return for_loop(f, *xs, length=n)
    return _CheckpointedLoop(f, "for", n, base, bar, "checkpointed_for_loop")(None, xs)[1]
