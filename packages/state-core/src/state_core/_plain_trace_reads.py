"""Reads and writes of a State inside a JAX transformation that is not state-aware.

Inside ``jax.jit``, ``jax.vmap``, ``jax.grad`` or the body of ``jax.lax.scan`` /
``cond``, reading ``state.value`` hands JAX the state's current, concrete value,
which JAX bakes into the traced program as a constant. The program then ignores
every later write: a cached ``jax.jit`` keeps computing with the old value, and
``jax.grad`` sees no dependence on the state. Writing a concrete value there
happens once, while JAX traces, and never again when JAX replays the program.
The state-aware transformations (``state_transform.jit`` / ``vmap2`` / ``grad`` /
``scan`` ...) make a read an input of the program and a write one of its outputs.

``State.value`` calls ``check_plain_trace_access`` only while a JAX trace runs
and no state-aware trace records the access, so eager reads and writes pay one
identity test. A state is reported once per kind of access (``'warn'``) or on
every access (``'error'``); states created inside the running trace are exempt,
since their value belongs to that trace.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

import jax

from ._context import CTX, user_stacklevel
from ._errors import StateLeakError
from ._jax_internals import in_compile_time_eval, is_tracer

if TYPE_CHECKING:
    from ._state import State

__all__ = [
    "PlainTraceStateAccessWarning",
    "PlainTracePolicy",
    "set_plain_trace_policy",
    "plain_trace_policy",
    "plain_trace_policy_in_effect",
    "check_plain_trace_access",
    "note_born_in_plain_trace",
]

PlainTracePolicy = Literal["warn", "error", "ignore"]
_MODES: tuple[PlainTracePolicy, ...] = ("warn", "error", "ignore")


class PlainTraceStateAccessWarning(UserWarning):
    """A State was read or written inside a plain JAX transformation, which froze its value into the program.

    Issued once per State (and kind of access). Filter it with the standard
    ``warnings`` machinery, or choose what happens with ``set_plain_trace_policy`` /
    ``plain_trace_policy``.

    Example:
        >>> import warnings
        >>> import jax, jax.numpy as jnp
        >>> from state_core import State, PlainTraceStateAccessWarning, plain_trace_policy
        >>> w = State(jnp.ones(2), name='w')
        >>> with warnings.catch_warnings(record=True) as caught, plain_trace_policy('warn'):
        ...     warnings.simplefilter('always')
        ...     _ = jax.jit(lambda x: w.value * x)(2.0)
        ...     _ = jax.jit(lambda x: w.value + x)(2.0)  # the same State: not again
        >>> [type(c.message).__name__ for c in caught]
        ['PlainTraceStateAccessWarning']
    """

    __module__ = "state_core"


class _Override(threading.local):
    def __init__(self) -> None:
        self.mode: PlainTracePolicy | None = None  # set by a plain_trace_policy(...) block in this thread


_OVERRIDE = _Override()
_DEFAULT: list[PlainTracePolicy] = ["warn"]
# Weakly keyed, so none of these sets keeps a State alive.
_WARNED_READ: weakref.WeakSet[State[Any]] = weakref.WeakSet()
_WARNED_WRITE: weakref.WeakSet[State[Any]] = weakref.WeakSet()
_BORN_IN_TRACE: weakref.WeakSet[State[Any]] = weakref.WeakSet()  # created while a plain trace ran


def _checked_mode(mode: object, who: str) -> PlainTracePolicy:
    for known in _MODES:
        if mode == known:
            return known
    raise ValueError(f"{who}: mode must be one of 'warn', 'error' or 'ignore', got {mode!r}.")


def set_plain_trace_policy(mode: PlainTracePolicy) -> PlainTracePolicy:
    """Choose, for the whole process, what reading or writing a State inside a plain JAX transformation does.

    Reading ``state.value`` inside ``jax.jit`` / ``jax.vmap`` / ``jax.grad`` / the body
    of ``jax.lax.scan`` or ``cond`` (while no state-aware transformation traces)
    freezes the state's current value into the program as a constant; writing a
    concrete value there happens only while JAX traces.

    Args:
        mode: ``'warn'`` (the default) issues a ``PlainTraceStateAccessWarning`` once
            per State; ``'error'`` raises ``StateLeakError`` (a ``RuntimeError``) at
            every such access; ``'ignore'`` allows them silently.

    Returns:
        The process-wide mode before the call, so it can be put back.

    Raises:
        ValueError: ``mode`` is not one of the three modes.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core import State, StateLeakError, set_plain_trace_policy
        >>> w = State(jnp.ones(2), name='w')
        >>> before = set_plain_trace_policy('error')
        >>> try:
        ...     jax.jit(lambda x: w.value * x)(2.0)
        ... except StateLeakError as err:
        ...     print(str(err)[:60])
        State 'w' was read inside a JAX transformation that is not s
        >>> set_plain_trace_policy(before)
        'error'
    """
    checked = _checked_mode(mode, "set_plain_trace_policy")
    before = _DEFAULT[0]
    _DEFAULT[0] = checked
    return before


@contextlib.contextmanager
def plain_trace_policy(mode: PlainTracePolicy) -> Iterator[None]:
    """Choose, inside the block and in this thread only, what a State access inside a plain JAX transformation does.

    Args:
        mode: ``'warn'``, ``'error'`` or ``'ignore'``, as for ``set_plain_trace_policy``.

    Raises:
        ValueError: ``mode`` is not one of the three modes.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core import State, plain_trace_policy
        >>> table = State(jnp.arange(3.0), name='table')
        >>> with plain_trace_policy('ignore'):  # a constant on purpose: no warning
        ...     jax.jit(lambda i: table.value[i])(1)
        Array(1., dtype=float32)
    """
    checked = _checked_mode(mode, "plain_trace_policy")
    before = _OVERRIDE.mode
    _OVERRIDE.mode = checked
    try:
        yield
    finally:
        _OVERRIDE.mode = before


def plain_trace_policy_in_effect() -> PlainTracePolicy:
    """The policy that applies here and now: this thread's ``plain_trace_policy`` block, else the process-wide one.

    Example:
        >>> from state_core import plain_trace_policy, plain_trace_policy_in_effect
        >>> with plain_trace_policy('ignore'):
        ...     plain_trace_policy_in_effect()
        'ignore'
    """
    override = _OVERRIDE.mode
    return _DEFAULT[0] if override is None else override


def note_born_in_plain_trace(state: State[Any]) -> None:
    """Exempt ``state``, created while a plain JAX trace runs: its value belongs to that trace."""
    _BORN_IN_TRACE.add(state)


_FIX = (
    "Use the state-aware transformations (state_transform.jit / vmap2 / grad, and "
    "state_transform.scan / for_loop / while_loop / cond for control flow), which make a read "
    "an input of the program and a write one of its outputs, or pass `state.value` to the "
    "transformed function as an argument and return the new value."
)


def check_plain_trace_access(state: State[Any], written: bool) -> None:
    """Report a read (or a write) of ``state`` made while a JAX trace runs that records no state accesses.

    ``State.value`` calls it only when a JAX trace is running and no state-aware
    trace stack records the access.

    Args:
        state: the state read or written.
        written: True for a write (of a concrete value: tracers are refused earlier).

    Raises:
        StateLeakError: in ``'error'`` mode.
    """
    if CTX.stacks:
        return  # a state-aware trace runs and the state was created inside it: its value is local
    mode = plain_trace_policy_in_effect()
    warned = _WARNED_WRITE if written else _WARNED_READ
    if mode == "ignore" or (mode == "warn" and state in warned):
        return
    if state in _BORN_IN_TRACE or in_compile_time_eval():
        return
    if written:
        problem = (
            f"{state.describe()} was written inside a JAX transformation that is not state-aware "
            "(a plain jax.jit, jax.vmap or jax.grad, or the body of jax.lax.scan / cond / "
            "while_loop), so the write happens once, while JAX traces the function, and is lost "
            "on every later call of the compiled program."
        )
    else:
        if all(is_tracer(leaf) for leaf in jax.tree.leaves(state._value)):
            return  # nothing concrete to freeze (the value belongs to a trace)
        problem = (
            f"{state.describe()} was read inside a JAX transformation that is not state-aware "
            "(a plain jax.jit, jax.vmap or jax.grad, or the body of jax.lax.scan / cond / "
            "while_loop), so its current value is captured as a constant of the traced program: "
            "the program goes on using this value after the state is written (jax.jit caches "
            "it), writes made inside it are lost, and jax.grad sees no dependence on the state."
        )
    if mode == "error":
        raise StateLeakError(f"{problem} {_FIX} (state_core.set_plain_trace_policy('warn') makes this a warning.)")
    warned.add(state)
    warnings.warn(
        f"{problem} {_FIX} state_core.set_plain_trace_policy('error') makes this an error, 'ignore' silences it.",
        PlainTraceStateAccessWarning,
        stacklevel=user_stacklevel(),
    )
