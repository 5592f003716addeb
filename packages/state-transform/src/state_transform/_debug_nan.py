"""``debug_nan`` / ``debug_nan_if``: find the operation whose NaN or Inf reaches a function's results."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np

from state_core import State, StatefulFunction
from state_core.engine import is_eager, is_jaxpr, jaxpr_consts, open_jaxpr, read_state_values

__all__ = ["debug_nan", "debug_nan_if"]


def _library_dirs() -> tuple[str, ...]:
    """The directories of JAX and of this project's packages (found, not imported: no layer above is loaded)."""
    dirs = []
    for name in ("jax", "jaxlib", "state_core", "state_random", "state_transform", "state_nn"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            dirs.append(os.path.dirname(os.path.abspath(spec.origin)) + os.sep)
    return tuple(dirs)


# Frames in these directories are not the user's: a culprit's site is the first frame outside them.
_LIBRARY_DIRS = _library_dirs()


def _holds_nan(value: Any) -> bool:
    """True if a concrete floating-point or complex leaf of ``value`` holds a NaN or Inf."""
    for leaf in jax.tree.leaves(value):
        dtype = jnp.result_type(leaf)
        if jnp.issubdtype(dtype, jnp.inexact) and not np.all(np.isfinite(np.asarray(leaf))):
            return True
    return False


def _nan_flag(value: Any) -> Any:
    """A traced boolean: some floating-point or complex leaf of ``value`` holds a NaN or Inf."""
    flags = [
        jnp.any(~jnp.isfinite(leaf))
        for leaf in jax.tree.leaves(value)
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)
    ]
    return jnp.any(jnp.stack(flags)) if flags else jnp.bool_(False)


def _site(eqn: Any) -> str:
    """``file:line (function)`` of the user's code that produced ``eqn``, or ``''`` if unknown."""
    frames = getattr(getattr(getattr(eqn, "source_info", None), "traceback", None), "frames", None) or ()
    for frame in frames:
        path = os.path.abspath(frame.file_name)
        if not path.startswith(_LIBRARY_DIRS):
            function = frame.function_name.rsplit(".", 1)[-1]  # Python 3.11 gives qualified names
            return f"{frame.file_name}:{frame.line_num} ({function})"
    return ""


def _inner_jaxpr(eqn: Any, invals: list[Any]) -> tuple[Any, list[Any], list[Any]] | None:
    """``(jaxpr, consts, args)`` of the body ``eqn`` ran with ``invals`` (a call, custom rule, remat or
    the taken branch of a cond), or None when it has no single body to look into (loops)."""
    params = eqn.params
    if "branches" in params:  # cond: the first input picks the branch
        branches = params["branches"]
        index = int(np.clip(np.asarray(invals[0]), 0, len(branches) - 1))
        closed = branches[index]
        return open_jaxpr(closed), jaxpr_consts(closed), invals[1:]
    bodies = [p for p in params.values() if is_jaxpr(p)]
    if len(bodies) != 1:
        return None
    (body,) = bodies
    jaxpr, consts = open_jaxpr(body), jaxpr_consts(body)
    if len(jaxpr.invars) != len(invals) or len(jaxpr.outvars) != len(eqn.outvars):
        return None
    return jaxpr, consts, invals


def _first_source(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> tuple[Any, list[Any]] | None:
    """The first equation (in program order) whose NaN or Inf reaches a result of ``jaxpr``.

    Runs ``jaxpr`` equation by equation on concrete values, then walks back from
    the results that hold a NaN or Inf along values that hold one, to the
    equations whose inputs were clean: a NaN masked on the way (``jnp.where``)
    does not count. Returns ``(equation, its input values)``, or None when the
    NaN or Inf was already in an input.
    """
    env: dict[Any, Any] = {}

    def read(var: Any) -> Any:
        return var.val if isinstance(var, jex_core.Literal) else env[var]

    for var, value in zip(jaxpr.constvars, consts, strict=True):
        env[var] = value
    for var, value in zip(jaxpr.invars, args, strict=True):
        env[var] = value
    producer: dict[Any, int] = {}
    inputs: list[list[Any]] = []
    clean_inputs: list[bool] = []
    for i, eqn in enumerate(jaxpr.eqns):
        invals = [read(v) for v in eqn.invars]
        # JAX up to 0.10.0 returns (sub-functions, params) here, later releases params alone.
        bind_params = eqn.primitive.get_bind_params(eqn.params)
        subfuns, params = bind_params if isinstance(bind_params, tuple) else ((), bind_params)
        outs = eqn.primitive.bind(*subfuns, *invals, **params)
        for var, value in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs], strict=True):
            env[var] = value
            producer[var] = i
        inputs.append(invals)
        clean_inputs.append(not any(map(_holds_nan, invals)))
    pending = [v for v in jaxpr.outvars if not isinstance(v, jex_core.Literal) and _holds_nan(env[v])]
    seen: set[int] = set()
    sources: list[int] = []
    while pending:
        var = pending.pop()
        index = producer.get(var)
        if index is None or index in seen:
            continue  # an input of the jaxpr, or an equation already visited
        seen.add(index)
        if clean_inputs[index]:
            sources.append(index)
        else:
            bad = [v for v in jaxpr.eqns[index].invars if not isinstance(v, jex_core.Literal) and _holds_nan(env[v])]
            pending.extend(bad)
    if not sources:
        return None
    first = min(sources)
    return jaxpr.eqns[first], inputs[first]


def _culprit(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> str:
    """Names the innermost operation that first produced a NaN or Inf reaching the results, and where."""
    found = _first_source(jaxpr, consts, args)
    if found is None:
        return "it was already in the inputs (an argument or a state's value)"
    eqn, invals = found
    # Into the body of a call, a custom derivative rule, a remat or the cond branch that
    # produced it, as long as there is one: the operation inside is the one to report.
    while (inner := _inner_jaxpr(eqn, invals)) is not None:
        deeper = _first_source(*inner)
        if deeper is None:
            break
        eqn, invals = deeper
    site = _site(eqn)
    return f"it is first produced by `{eqn.primitive.name}`" + (f" at {site}" if site else "")


def _traced_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any, Any, list[Any]]:
    """``(fn's name, its Trace, its output, the new values of the states it writes)``; no state is written."""
    name = _name_of(fn)
    stateful = StatefulFunction(fn, name=name)
    trace = stateful.trace(*args)
    written, out = stateful.jaxpr_call(read_state_values(trace.in_states), *args)
    return name, trace, out, written


def _name_of(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _is_traced(tree: Any) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree))


def _what(out: Any, written: list[Any], states: Sequence[State[Any]], name: str) -> str:
    """Which results hold a NaN or Inf: the output and the new values of named states."""
    parts = [f"the output of {name}"] if _holds_nan(out) else []
    parts += [f"the new value of {s.describe()}" for s, v in zip(states, written, strict=True) if _holds_nan(v)]
    return ", ".join(parts)


def _label(phase: str) -> str:
    return f"debug_nan ({phase})" if phase else "debug_nan"


def debug_nan(fn: Callable[..., Any], *args: Any, phase: str = "") -> None:
    """Run ``fn(*args)`` as a check: raise if a NaN or Inf reaches its output or a state it writes.

    Called eagerly, the message names the operation that first produced the NaN or
    Inf and the line of your code it comes from (looking inside calls, custom
    derivative rules, ``jax.checkpoint`` and the branch a ``cond`` took); a NaN
    that is computed but masked away (``jnp.where``) does not count. Inside a
    transformed function (``jit``, ``vmap2``, a loop body) the check runs when the
    program runs: a callback raises, which surfaces as JAX's runtime error
    carrying the message (call ``debug_nan`` outside ``jit`` with the same values to
    find the operation). ``fn`` may read States; the states it writes are not
    updated (the check computes their new values only to look at them).

    Args:
        fn: the function to check; any callable (a module, ``jax.grad(f)``, ...).
        *args: its arguments.
        phase: a label for the message (e.g. ``'forward'``).

    Returns:
        None.

    Raises:
        FloatingPointError: a NaN or Inf reaches the output or a written state.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_transform import debug_nan
        >>> debug_nan(lambda x: jnp.where(x > 0, jnp.log(x), 0.0), jnp.array([-1.0, 2.0]))
        >>> try:
        ...     debug_nan(jnp.log, jnp.array([-1.0, 2.0]))
        ... except FloatingPointError as err:
        ...     print(str(err).split(';')[0])
        debug_nan: NaN or Inf in the output of log
    """
    if not callable(fn):
        raise TypeError(f"debug_nan: fn must be callable, got {type(fn).__name__}.")
    name, trace, out, written = _traced_call(fn, args)
    if not is_eager() or _is_traced((out, written)):
        _report_when_run(_nan_flag((out, written)), name, phase)
        return
    what = _what(out, written, trace.out_states, name)
    if not what:
        return
    state_leaves = jax.tree.leaves(read_state_values(trace.in_states))
    arg_leaves = jax.tree.leaves(args)
    jaxpr = open_jaxpr(trace.closed_jaxpr)
    if len(state_leaves) + len(arg_leaves) == len(jaxpr.invars):
        where = _culprit(jaxpr, jaxpr_consts(trace.closed_jaxpr), [*state_leaves, *arg_leaves])
    else:  # static arguments were folded into the program: no op-by-op search
        where = "run with jax.config.update('jax_debug_nans', True) to find the operation"
    raise FloatingPointError(f"{_label(phase)}: NaN or Inf in {what}; {where}.")


def _report_when_run(flag: Any, name: str, phase: str) -> None:
    """Raise from a callback when the traced ``flag`` is True at run time."""
    label = _label(phase)

    def report(found: Any) -> None:
        if np.any(np.asarray(found)):
            raise FloatingPointError(
                f"{label}: NaN or Inf in the output of {name} or a state it writes. To find the "
                f"operation, call debug_nan({name}, ...) outside jit with the same values."
            )

    jax.debug.callback(report, flag)


def debug_nan_if(has_nan: Any, fn: Callable[..., Any], *args: Any, phase: str = "") -> None:
    """``debug_nan(fn, *args, phase=phase)`` only when ``has_nan`` (any element of it) is true.

    Inside a transformed function with a traced ``has_nan`` the check is a
    ``jax.lax.cond``: ``fn`` runs only when the condition holds.

    Args:
        has_nan: a bool or boolean array (e.g. ``jnp.isnan(loss)``); any true element triggers the check.
        fn: the function to check.
        *args: its arguments.
        phase: a label for the message.

    Returns:
        None.

    Raises:
        FloatingPointError: the condition holds and a NaN or Inf reaches ``fn``'s results.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_transform import debug_nan_if
        >>> x = jnp.array([-1.0, 2.0])
        >>> debug_nan_if(False, jnp.log, x)   # not checked
        >>> try:
        ...     debug_nan_if(jnp.any(x < 0), jnp.log, x, phase='input')
        ... except FloatingPointError as err:
        ...     print(str(err).split(':')[0])
        debug_nan (input)
    """
    leaves = jax.tree.leaves(has_nan)
    if not _is_traced(leaves):
        if any(np.any(np.asarray(leaf)) for leaf in leaves):
            debug_nan(fn, *args, phase=phase)
        return
    pred = jnp.any(jnp.stack([jnp.any(jnp.asarray(leaf)) for leaf in leaves]))

    def check() -> None:
        name, _, out, written = _traced_call(fn, args)
        # Under vmap a batched condition runs both branches for every lane: the flag
        # keeps the lanes whose condition is false quiet.
        _report_when_run(jnp.logical_and(pred, _nan_flag((out, written))), name, phase)

    jax.lax.cond(pred, check, lambda: None)
