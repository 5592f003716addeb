"""State-aware loops: ``scan``, ``for_loop``, ``fori_loop``, ``while_loop`` and ``map``.

The body is traced once per signature; states it writes become loop carries and
states it only reads are loop invariants, so each loop compiles to one
``lax.scan`` or ``lax.while_loop``. ``RandomState`` keys are carries: every
iteration draws new numbers, exactly as the same number of eager calls would.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import jax
import jax.numpy as jnp
import numpy as np

from ._loop_program import LoopProgram, StatePlan, check_carry_avals, evaluator, run_program, state_outputs
from ._progress import ProgressBar, as_progress_bar, progress_reporter
from ._traced_body import _CLEAR_HOOKS, _hashable, is_concrete, signature_key, slice_spec, traced_body

__all__ = ["scan", "for_loop", "fori_loop", "while_loop", "map"]


def _loop_length(xs: Any, length: int | None, who: str, what: str = "xs") -> int:
    """The number of steps: the common leading size of ``xs`` (and ``length`` if given)."""
    shapes = [np.shape(leaf) for leaf in jax.tree.leaves(xs)]
    if length is not None:
        try:
            length = operator.index(length)
        except TypeError:
            raise TypeError(f"{who}: length must be an int, got {type(length).__name__}.") from None
        if length < 0:
            raise ValueError(f"{who}: length must be >= 0, got {length}.")
    sizes = {s[0] for s in shapes if s}
    if length is not None:
        sizes.add(length)
    if len(sizes) == 1 and all(shapes):
        return sizes.pop()
    _raise_bad_lengths(xs, length, who, what)


def _raise_bad_lengths(xs: Any, length: int | None, who: str, what: str) -> NoReturn:
    sizes = []
    for path, leaf in jax.tree.leaves_with_path(xs):
        shape = np.shape(leaf)
        if not shape:
            raise ValueError(
                f"{who}: every leaf of {what} needs a leading axis to loop over, but "
                f"{what}{jax.tree_util.keystr(path)} is a scalar."
            )
        sizes.append(f"{what}{jax.tree_util.keystr(path)} has {shape[0]}")
    if length is not None:
        sizes.append(f"length={length}")
    if not sizes:
        raise ValueError(f"{who}: pass {what} with a leading axis, or length=, to set the number of steps.")
    raise ValueError(f"{who}: the leading axis sizes disagree ({', '.join(sizes)}); make them equal.")


def _check_unroll(unroll: Any, who: str) -> Any:
    if isinstance(unroll, bool) or (isinstance(unroll, int) and unroll >= 1):
        return unroll
    raise ValueError(f"{who}: unroll must be a positive int or a bool, got {unroll!r}.")


def _scan_program(
    calls: Sequence[Any],
    kind: str,
    length: int,
    reverse: bool,
    unroll: Any,
    bar: ProgressBar | None,
    lower: int,
    who: str,
) -> LoopProgram:
    """Build the ``lax.scan`` program of a traced body.

    ``kind``: ``'scan'`` (``f(carry, x) -> (carry, y)``), ``'for'`` (``f(*x) -> y``)
    or ``'fori'`` (``f(i, carry) -> carry``).
    """
    (call,) = calls
    plan = StatePlan([call], [call])
    run = evaluator(call)
    gather = plan.inputs_of(call)
    n_out = call.n_out_leaves
    out_treedef = call.out_treedef
    report = progress_reporter(bar, length) if bar is not None else None

    def program(carried: list[Any], invariant: list[Any], init: Any, xs: Any) -> tuple[Any, list[Any]]:
        plan.check_stale([call], carried, invariant)
        check_carry_avals(plan, [call], carried, who)

        def step(carry: tuple[Any, ...], x: Any) -> tuple[tuple[Any, ...], Any]:
            i, user_carry, states = carry
            if kind == "scan":
                arg_leaves = jax.tree.leaves(((user_carry, x), {}))
            elif kind == "for":
                arg_leaves = jax.tree.leaves((tuple(x), {}))
            else:
                arg_leaves = jax.tree.leaves(((i + lower, user_carry), {}))
            flat = run(*gather(states, invariant), *arg_leaves)
            out = jax.tree.unflatten(out_treedef, flat[:n_out])
            new_states = state_outputs(plan, call, flat[n_out:], states)
            if kind == "scan":
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise TypeError(
                        f"{who}: the body must return a pair (carry, y), but it returned {jax.tree.structure(out)}."
                    )
                user_carry, y = out
            elif kind == "for":
                y = out
            else:
                user_carry, y = out, None
            if report is not None:
                report(i)
            return (i + 1, user_carry, new_states), y

        start = (jnp.zeros((), jnp.int32), init, carried)
        (_, final, states), ys = jax.lax.scan(step, start, xs, length=length, reverse=reverse, unroll=unroll)
        return (final, ys), states

    return LoopProgram(jax.jit(program), plan, [call])


def _run_scan(
    f: Any,
    kind: str,
    init: Any,
    xs: Any,
    length: int,
    reverse: bool,
    unroll: Any,
    progress_bar: Any,
    who: str,
    lower: int = 0,
) -> Any:
    body = traced_body(f, f"{who}: the body")
    bar = as_progress_bar(progress_bar, who)
    unroll = _check_unroll(unroll, who)

    def trace() -> list[Any]:
        if kind == "scan":
            spec = (init, jax.tree.map(slice_spec, xs))
        elif kind == "for":
            spec = tuple(jax.tree.map(slice_spec, x) for x in xs)
        else:
            spec = (jax.ShapeDtypeStruct((), jnp.int32), init)
        return [body.sf.trace(*spec)]

    params = (kind, length, bool(reverse), unroll, id(bar) if bar is not None else None, lower)

    def build(calls: Sequence[Any]) -> LoopProgram:
        return _scan_program(calls, kind, length, reverse, unroll, bar, lower, who)

    # A ProgressBar is keyed by identity; the program holds it, so its id stays unique.
    return run_program([body], trace, params, build, (init, xs), who, signature_key(params, (init, xs)))


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    reverse: bool = False,
    unroll: int | bool = 1,
    *,
    progress_bar: Any = None,
    pbar: Any = None,
) -> tuple[Any, Any]:
    """``jax.lax.scan`` for a body that reads and writes States.

    ``f(carry, x) -> (carry, y)`` runs once per leading-axis slice of ``xs``; the
    result is ``(final carry, stacked ys)``. States that ``f`` writes are carried
    from step to step and hold their final values afterwards; states it only
    reads are passed in once. The body is traced once per signature and the loop
    compiles to one ``lax.scan``.

    Args:
        f: the step function.
        init: the initial carry (a pytree of arrays).
        xs: the values to loop over (pytree of arrays with a common leading axis), or None.
        length: the number of steps (required when ``xs`` is None).
        reverse: scan from the end of ``xs`` to the start.
        unroll: how many steps to unroll in the compiled loop (as ``jax.lax.scan``).
        progress_bar: ``True``, a refresh interval (int) or a ``ProgressBar``.
        pbar: brainstate's name for ``progress_bar``.

    Raises:
        ValueError: the leading sizes of ``xs`` disagree, or a written state would
            change shape/dtype across an iteration (the message names it).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import scan
        >>> total = State(jnp.zeros(()), name='total')
        >>> def step(c, x):
        ...     total.value = total.value + x
        ...     return c * 2, total.value
        >>> scan(step, 1.0, jnp.arange(4.))
        (Array(16., dtype=float32, weak_type=True), Array([0., 1., 3., 6.], dtype=float32))
        >>> total.value
        Array(6., dtype=float32)
    """
    n = _loop_length(xs, length, "scan")
    progress_bar = pbar if progress_bar is None else progress_bar
    return _run_scan(f, "scan", init, xs, n, reverse, unroll, progress_bar, "scan")


def for_loop(
    f: Callable[..., Any],
    *xs: Any,
    length: int | None = None,
    reverse: bool = False,
    unroll: int | bool = 1,
    progress_bar: Any = None,
    pbar: Any = None,
) -> Any:
    """Run ``f(*x_t)`` for every leading-axis slice ``x_t`` of ``xs``; outputs are stacked.

    The modeller's loop: ``for_loop(lambda t: pop.update(t), jnp.arange(10_000))``
    steps a model 10,000 times inside one compiled ``lax.scan``. States written by
    ``f`` are carried from step to step; each ``RandomState`` draws new numbers at
    every step, exactly as 10,000 eager calls of ``f`` would.

    Args:
        f: the step function, called with one slice of each of ``xs``.
        *xs: arrays (or pytrees of arrays) with a common leading axis.
        length: the number of steps when no ``xs`` are given.
        reverse: loop from the last slice to the first.
        unroll: how many steps to unroll in the compiled loop.
        progress_bar: ``True``, a refresh interval (int) or a ``ProgressBar``.
        pbar: brainstate's name for ``progress_bar``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import for_loop
        >>> v = State(jnp.zeros(2), name='v')
        >>> def step(t, drive):
        ...     v.value = 0.5 * v.value + drive
        ...     return v.value.sum() + t
        >>> for_loop(step, jnp.arange(3.), jnp.ones((3, 2)))
        Array([2. , 4. , 5.5], dtype=float32)
        >>> v.value
        Array([1.75, 1.75], dtype=float32)
    """
    if pbar is not None and progress_bar is None:
        progress_bar = pbar
    n = _loop_length(xs, length, "for_loop")
    return _run_scan(f, "for", None, xs, n, reverse, unroll, progress_bar, "for_loop")[1]


def _int_bound(x: Any) -> int | None:
    """The bound as a Python int if it is known at trace time, else None."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if is_concrete(x) and np.ndim(x) == 0 and jnp.issubdtype(jnp.result_type(x), jnp.integer):
        return int(x)
    return None


def fori_loop(
    lower: Any,
    upper: Any,
    body_fun: Callable[[Any, Any], Any],
    init_val: Any,
    *,
    unroll: int | bool = 1,
    progress_bar: Any = None,
    pbar: Any = None,
) -> Any:
    """``jax.lax.fori_loop`` for a body ``body_fun(i, carry) -> carry`` that reads and writes States.

    With bounds known at trace time the loop is a ``lax.scan`` (reverse-mode
    differentiable, progress bars allowed); with traced bounds a ``lax.while_loop``.
    ``progress_bar`` (or brainstate's ``pbar``) is as in ``for_loop``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import fori_loop
        >>> acc = State(jnp.zeros(()), name='acc')
        >>> def body(i, c):
        ...     acc.value = acc.value + i
        ...     return c + 1.0
        >>> fori_loop(0, 5, body, 0.0), acc.value
        (Array(5., dtype=float32, weak_type=True), Array(10., dtype=float32))
    """
    progress_bar = pbar if progress_bar is None else progress_bar
    lo, hi = _int_bound(lower), _int_bound(upper)
    if lo is not None and hi is not None:
        length = max(hi - lo, 0)
        return _run_scan(body_fun, "fori", init_val, None, length, False, unroll, progress_bar, "fori_loop", lower=lo)[
            0
        ]
    if as_progress_bar(progress_bar, "fori_loop") is not None:
        raise ValueError(
            "fori_loop: progress_bar needs bounds known at trace time (Python ints or concrete "
            "arrays), but lower/upper are traced; pass concrete bounds or drop progress_bar."
        )
    dtype = jnp.result_type(lower, upper)
    body = traced_body(body_fun, "fori_loop: body_fun")
    spec = (jax.ShapeDtypeStruct((), dtype), init_val)

    def trace() -> list[Any]:
        return [body.sf.trace(*spec)]

    def build(calls: Sequence[Any]) -> LoopProgram:
        return _while_program(calls, "fori", "fori_loop")

    args = (init_val, jnp.asarray(lower, dtype), jnp.asarray(upper, dtype))
    params = ("fori-while", dtype)
    return run_program([body], trace, params, build, args, "fori_loop", signature_key(params, args))


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """``jax.lax.while_loop`` for functions that read and write States.

    States written by ``body_fun`` are carried; ``cond_fun`` may read states (it
    sees their current values in the loop) but must not write any.

    Raises:
        ValueError: ``cond_fun`` writes a state (the message names it).
        TypeError: ``cond_fun`` does not return a boolean scalar.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import while_loop
        >>> x = State(jnp.array(1.0), name='x')
        >>> def body(n):
        ...     x.value = x.value * 3
        ...     return n + 1
        >>> while_loop(lambda n: x.value < 100, body, 0), x.value
        (Array(5, dtype=int32, weak_type=True), Array(243., dtype=float32, weak_type=True))
    """
    who = "while_loop"
    cond_body = traced_body(cond_fun, f"{who}: cond_fun")
    body = traced_body(body_fun, f"{who}: body_fun")

    def trace() -> list[Any]:
        cond_call = cond_body.sf.trace(init_val)
        if cond_call.out_states:
            names = ", ".join(s.describe() for s in cond_call.out_states)
            raise ValueError(
                f"{who}: cond_fun writes {names}. The loop condition may read states but not write "
                "them; move the write into body_fun."
            )
        shapes = jax.tree.leaves(cond_call.out_shapes)
        if len(shapes) != 1 or shapes[0].shape != () or shapes[0].dtype != jnp.bool_:
            raise TypeError(f"{who}: cond_fun must return a boolean scalar, got {cond_call.out_shapes}.")
        return [body.sf.trace(init_val), cond_call]

    def build(calls: Sequence[Any]) -> LoopProgram:
        return _while_program(calls, "while", who)

    key = signature_key("while", init_val)
    return run_program([body, cond_body], trace, ("while",), build, (init_val,), who, key)


def _while_program(calls: Sequence[Any], kind: str, who: str) -> LoopProgram:
    """A ``lax.while_loop`` program: ``kind`` ``'while'`` (user cond) or ``'fori'`` (``i < upper``)."""
    body_call = calls[0]
    plan = StatePlan([body_call], calls)
    run_body = evaluator(body_call)
    gather_body = plan.inputs_of(body_call)
    if kind == "while":
        run_cond, gather_cond = evaluator(calls[1]), plan.inputs_of(calls[1])
    n_out = body_call.n_out_leaves
    out_treedef = body_call.out_treedef

    def program(carried: list[Any], invariant: list[Any], init: Any, *bounds: Any) -> tuple[Any, list[Any]]:
        plan.check_stale(calls, carried, invariant)
        check_carry_avals(plan, [body_call], carried, who)

        def cond(carry: tuple[Any, ...]) -> Any:
            i, c, states = carry
            if kind == "fori":
                return i < bounds[1]
            return run_cond(*gather_cond(states, invariant), *jax.tree.leaves(((c,), {})))[0]

        def step(carry: tuple[Any, ...]) -> tuple[Any, ...]:
            i, c, states = carry
            args = (c,) if kind == "while" else (i, c)
            flat = run_body(*gather_body(states, invariant), *jax.tree.leaves((args, {})))
            new_c = jax.tree.unflatten(out_treedef, flat[:n_out])
            return i + 1, new_c, state_outputs(plan, body_call, flat[n_out:], states)

        start = bounds[0] if kind == "fori" else jnp.zeros((), jnp.int32)
        _, final, states = jax.lax.while_loop(cond, step, (start, init, carried))
        return final, states

    return LoopProgram(jax.jit(program), plan, calls)


def map(f: Callable[..., Any], *xs: Any, batch_size: int | None = None) -> Any:
    """Apply ``f`` to every leading-axis slice of ``xs`` in sequence (like ``jax.lax.map``).

    ``f`` may read and write States (they are carried from slice to slice). With
    ``batch_size``, ``f`` runs on ``batch_size`` slices at a time under ``vmap2``
    (the remainder in one final batch), trading memory for speed; states written
    inside ``f`` must then not depend on the batched values.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import map
        >>> calls = State(jnp.zeros((), jnp.int32), name='calls')
        >>> def square(x):
        ...     calls.value = calls.value + 1
        ...     return x * x
        >>> map(square, jnp.arange(5.)), calls.value
        (Array([ 0.,  1.,  4.,  9., 16.], dtype=float32), Array(5, dtype=int32))
        >>> map(lambda x: x + 1, jnp.arange(5.), batch_size=2)
        Array([1., 2., 3., 4., 5.], dtype=float32)
    """
    n = _loop_length(xs, None, "map")
    if batch_size is None:
        return for_loop(f, *xs)
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"map: batch_size must be a positive int or None, got {batch_size!r}.")
    from ._vmap import vmap2  # the batched form maps f with vmap2 inside the loop

    batched = _batched(f, vmap2)
    n_main = (n // batch_size) * batch_size
    parts = []
    if n_main:
        main = [jax.tree.map(lambda a: a[:n_main].reshape((n // batch_size, batch_size, *a.shape[1:])), x) for x in xs]
        ys = for_loop(batched, *main)
        parts.append(jax.tree.map(lambda a: a.reshape((n_main, *a.shape[2:])), ys))
    if n_main < n:
        parts.append(batched(*[jax.tree.map(lambda a: a[n_main:], x) for x in xs]))
    if len(parts) == 1:
        return parts[0]
    return jax.tree.map(lambda *p: jnp.concatenate(p), *parts)


_BATCHED: dict[Any, Any] = {}
_CLEAR_HOOKS.append(_BATCHED.clear)


def _batched(f: Callable[..., Any], vmap2: Callable[..., Any]) -> Callable[..., Any]:
    """``vmap2(f)``, kept per ``f`` so repeated ``map`` calls reuse one traced body."""
    if not _hashable(f):
        return vmap2(f)
    hit = _BATCHED.get(f)
    if hit is None:
        if len(_BATCHED) >= 64:
            _BATCHED.pop(next(iter(_BATCHED)))
        hit = _BATCHED[f] = vmap2(f)
    return hit
