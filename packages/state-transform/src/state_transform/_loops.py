"""State-aware loops: ``scan``, ``for_loop``, ``fori_loop``, ``while_loop`` and ``map``.

The body is traced once per signature; states it writes become loop carries and
states it only reads are loop invariants, so each loop compiles to one
``lax.scan`` or ``lax.while_loop``. ``RandomState`` keys are carries: every
iteration draws new numbers, exactly as the same number of eager calls would.
Under ``jax.disable_jit()`` the loops run as plain Python, as JAX's own do.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NoReturn

import jax
import jax.numpy as jnp
import numpy as np

from state_core.engine import Trace, jaxpr_evaluator

from ._control_flow import Carry, ControlFlow, check_body, is_concrete, jit_disabled, slice_spec
from ._progress import ProgressBar, as_progress_bar, progress_reporter
from ._typing import C, X, Y

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
        return int(sizes.pop())
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


class _ScanLoop(ControlFlow):
    """``scan`` / ``for_loop`` / ``fori_loop`` with known bounds: one ``lax.scan``.

    ``kind``: ``'scan'`` (``f(carry, x) -> (carry, y)``), ``'for'`` (``f(*x) -> y``)
    or ``'fori'`` (``f(i, carry) -> carry``); called with ``(init, xs)``.
    """

    def __init__(
        self,
        f: Callable[..., Any],
        kind: str,
        length: int,
        reverse: bool,
        unroll: Any,
        bar: ProgressBar | None,
        who: str,
        lower: int = 0,
    ) -> None:
        super().__init__([f], ["the body"], who, (kind, length, bool(reverse), unroll, bar, lower))
        self.kind, self.length, self.reverse, self.unroll, self.bar, self.lower = (
            kind,
            length,
            bool(reverse),
            unroll,
            bar,
            lower,
        )

    def _run(self, init: Any, xs: Any) -> Any:
        kind, who, lower = self.kind, self.who, self.lower
        if kind == "scan":
            spec: tuple[Any, ...] = (init, jax.tree.map(slice_spec, xs))
        elif kind == "for":
            spec = tuple(jax.tree.map(slice_spec, x) for x in xs)
        else:
            spec = (jax.ShapeDtypeStruct((), jnp.int32), init)
        body = self.trace_body(0, spec)
        carry = Carry([body], [body])
        carried, invariant = carry.read()
        carry.check_avals([body], who)
        evaluate = jaxpr_evaluator(body)
        gather = carry.inputs_of(body)
        report = progress_reporter(self.bar, self.length) if self.bar is not None else None

        def step(state: tuple[Any, ...], x: Any) -> tuple[tuple[Any, ...], Any]:
            i, user_carry, states = state
            if kind == "scan":
                arg_leaves = jax.tree.leaves(((user_carry, x), {}))
            elif kind == "for":
                arg_leaves = jax.tree.leaves((tuple(x), {}))
            else:
                arg_leaves = jax.tree.leaves(((i + lower, user_carry), {}))
            out, written, _ = evaluate(gather(states, invariant), arg_leaves)
            new_states = carry.outputs(body, written, states)
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
                report(i, user_carry, y)
            return (i + 1, user_carry, new_states), y

        start = (jnp.zeros((), jnp.int32), init, carried)
        (_, final, states), ys = jax.lax.scan(
            step, start, xs, length=self.length, reverse=self.reverse, unroll=self.unroll
        )
        carry.write(states)
        return final, ys


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
    bar = as_progress_bar(progress_bar, who)
    unroll = _check_unroll(unroll, who)
    return _ScanLoop(f, kind, length, reverse, unroll, bar, who, lower)(init, xs)


def scan(
    f: Callable[[C, X], tuple[C, Y]],
    init: C,
    xs: X | None = None,
    length: int | None = None,
    reverse: bool = False,
    unroll: int | bool = 1,
    *,
    progress_bar: Any = None,
    pbar: Any = None,
) -> tuple[C, Y]:
    """``jax.lax.scan`` for a body that reads and writes States.

    ``f(carry, x) -> (carry, y)`` runs once per leading-axis slice of ``xs``; the
    result is ``(final carry, stacked ys)``. States that ``f`` writes are carried
    from step to step and hold their final values afterwards; states it only
    reads are passed in once. The body is traced once per signature and the loop
    compiles to one ``lax.scan``.

    Args:
        f: the step function ``f(carry, x) -> (carry, y)``; the carry it returns
            must have the structure, shapes and dtypes of the one it receives.
            It may read and write States.
        init: the initial carry (a pytree of arrays).
        xs: the values to loop over: a pytree of arrays with a common leading
            axis of length T, sliced along it (``f32[T, 3]`` gives ``f`` one
            ``f32[3]`` per step). ``None`` (the default) gives ``f`` ``x=None``
            and needs ``length``.
        length: the number of steps T; required when ``xs`` is ``None``, and
            must equal the leading size of ``xs`` otherwise.
        reverse: run from the last slice of ``xs`` to the first (the ys are
            still stacked in the order of ``xs``).
        unroll: how many steps each iteration of the compiled loop runs (a
            positive int, or ``True`` to unroll the whole loop), as in
            ``jax.lax.scan``; it changes compile time and speed, not results.
        progress_bar: ``None`` / ``False`` (the default) for none, ``True``
            for a tqdm bar with default settings, a positive int to refresh it
            every that many steps, or a ``ProgressBar``.
        pbar: brainstate's name for ``progress_bar`` (give one of the two).

    Returns:
        ``(final carry, ys)``: the ys of every step stacked on a new leading
        axis of length T.

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
    if jit_disabled():
        check_body(f, "scan: the body")
        carry, ys = init, []
        steps = range(n - 1, -1, -1) if reverse else range(n)
        for i in steps:
            carry, y = f(carry, jax.tree.map(lambda a, i=i: a[i], xs))
            ys.append(y)
        if reverse:
            ys.reverse()
        return carry, _stack(ys)
    return _run_scan(f, "scan", init, xs, n, reverse, unroll, progress_bar, "scan")


def _stack(ys: list[Any]) -> Any:
    if not ys:
        return None
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *ys)


def for_loop(
    f: Callable[..., Y],
    *xs: Any,
    length: int | None = None,
    reverse: bool = False,
    unroll: int | bool = 1,
    progress_bar: Any = None,
    pbar: Any = None,
) -> Y:
    """Run ``f(*x_t)`` for every leading-axis slice ``x_t`` of ``xs``; outputs are stacked.

    The modeller's loop: ``for_loop(lambda t: pop.update(t), jnp.arange(10_000))``
    steps a model 10,000 times inside one compiled ``lax.scan``. States written by
    ``f`` are carried from step to step; each ``RandomState`` draws new numbers at
    every step, exactly as 10,000 eager calls of ``f`` would.

    Args:
        f: the step function, called as ``f(*x_t)`` with one slice of each of
            ``xs`` (with no ``xs``, as ``f()``); it may read and write States.
        *xs: arrays (or pytrees of arrays) with a common leading axis of length
            T, the number of steps; ``f32[T, 3]`` gives ``f`` one ``f32[3]``
            per step.
        length: the number of steps when no ``xs`` are given (else it must
            equal their leading size).
        reverse: loop from the last slice to the first (outputs stay in the
            order of ``xs``).
        unroll: how many steps each iteration of the compiled loop runs (a
            positive int, or ``True`` for all), as in ``jax.lax.scan``.
        progress_bar: ``None`` / ``False`` (the default) for none, ``True``
            for a tqdm bar with default settings, a positive int to refresh it
            every that many steps, or a ``ProgressBar``.
        pbar: brainstate's name for ``progress_bar`` (give one of the two).

    Returns:
        ``f``'s outputs stacked on a new leading axis of length T (``None`` if
        ``f`` returns ``None``).

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
    if jit_disabled():
        check_body(f, "for_loop: the body")
        steps = range(n - 1, -1, -1) if reverse else range(n)
        ys = [f(*[jax.tree.map(lambda a, i=i: a[i], x) for x in xs]) for i in steps]
        if reverse:
            ys.reverse()
        return _stack(ys)
    return _run_scan(f, "for", None, xs, n, reverse, unroll, progress_bar, "for_loop")[1]


def _int_bound(x: Any, what: str) -> int | None:
    """The bound as a Python int if it is known at trace time, else None (a traced integer bound).

    Raises:
        TypeError: the bound is not an integer (as ``jax.lax.fori_loop`` does).
    """
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"fori_loop: {what} must be an integer, got the bool {x!r}.")
    if isinstance(x, (int, np.integer)):
        return int(x)
    dtype = jnp.result_type(x)
    if not jnp.issubdtype(dtype, jnp.integer) or np.ndim(x) != 0:
        raise TypeError(
            f"fori_loop: {what} must be an integer scalar (a Python int or an integer array), got "
            f"{type(x).__name__} of dtype {dtype} and shape {np.shape(x)}; use an int, e.g. {what}=int(n)."
        )
    if isinstance(x, jax.core.Tracer):
        return None
    return int(x)


def check_cond_trace(cond_trace: Trace, who: str) -> None:
    """Raise unless a traced ``cond_fun`` returns a boolean scalar and writes no state.

    Raises:
        ValueError: ``cond_fun`` writes a state (the message names it).
        TypeError: ``cond_fun`` does not return a boolean scalar.
    """
    if cond_trace.out_states:
        names = ", ".join(s.describe() for s in cond_trace.out_states)
        raise ValueError(
            f"{who}: cond_fun writes {names}. The loop condition may read states but not write "
            "them; move the write into body_fun."
        )
    shapes = jax.tree.leaves(cond_trace.out_shapes)
    if len(shapes) != 1 or shapes[0].shape != () or shapes[0].dtype != jnp.bool_:
        raise TypeError(f"{who}: cond_fun must return a boolean scalar, got {cond_trace.out_shapes}.")


class _WhileLoop(ControlFlow):
    """``while_loop`` (``kind='while'``, called with ``(init,)``) or ``fori_loop`` with traced
    bounds (``kind='fori'``, called with ``(init, lower, upper)``): one ``lax.while_loop``."""

    def __init__(self, kind: str, body_fun: Callable[..., Any], cond_fun: Callable[..., Any] | None, who: str) -> None:
        if cond_fun is None:
            super().__init__([body_fun], ["body_fun"], who, (kind,))
        else:
            super().__init__([body_fun, cond_fun], ["body_fun", "cond_fun"], who, (kind,))
        self.kind = kind

    def _run(self, init: Any, *bounds: Any) -> Any:
        kind, who = self.kind, self.who
        if kind == "fori":
            body = self.trace_body(0, (jax.ShapeDtypeStruct((), bounds[0].dtype), init))
            calls = [body]
        else:
            cond_trace = self.trace_body(1, (init,))
            check_cond_trace(cond_trace, who)
            body = self.trace_body(0, (init,))
            calls = [body, cond_trace]
        carry = Carry([body], calls)
        carried, invariant = carry.read()
        carry.check_avals([body], who)
        run_body, gather_body = jaxpr_evaluator(body), carry.inputs_of(body)
        if kind == "while":
            run_cond, gather_cond = jaxpr_evaluator(calls[1]), carry.inputs_of(calls[1])

        def cond(state: tuple[Any, ...]) -> Any:
            i, c, states = state
            if kind == "fori":
                return i < bounds[1]
            return run_cond(gather_cond(states, invariant), jax.tree.leaves(((c,), {})))[0]

        def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
            i, c, states = state
            args = (c,) if kind == "while" else (i, c)
            new_c, written, _ = run_body(gather_body(states, invariant), jax.tree.leaves((args, {})))
            return i + 1, new_c, carry.outputs(body, written, states)

        start = bounds[0] if kind == "fori" else jnp.zeros((), jnp.int32)
        _, final, states = jax.lax.while_loop(cond, step, (start, init, carried))
        carry.write(states)
        return final


def fori_loop(
    lower: Any,
    upper: Any,
    body_fun: Callable[[Any, C], C],
    init_val: C,
    *,
    unroll: int | bool = 1,
    progress_bar: Any = None,
    pbar: Any = None,
) -> C:
    """``jax.lax.fori_loop`` for a body ``body_fun(i, carry) -> carry`` that reads and writes States.

    With bounds known at trace time the loop is a ``lax.scan`` (reverse-mode
    differentiable, progress bars allowed); with traced bounds a ``lax.while_loop``.

    Args:
        lower: the first value of ``i``: an int, or a traced integer scalar.
        upper: the loop stops before ``i`` reaches it (an int or a traced
            integer scalar); ``upper <= lower`` runs no step.
        body_fun: ``body_fun(i, carry) -> carry``; the carry it returns must
            have the structure, shapes and dtypes of the one it receives. It
            may read and write States.
        init_val: the initial carry (a pytree of arrays).
        unroll: how many steps each iteration of the compiled loop runs (a
            positive int, or ``True`` for all); used with known bounds only.
        progress_bar: as in ``for_loop``; with known bounds only.
        pbar: brainstate's name for ``progress_bar`` (give one of the two).

    Returns:
        The final carry.

    Raises:
        TypeError: a bound is not an integer (as ``jax.lax.fori_loop``).

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
    lo, hi = _int_bound(lower, "lower"), _int_bound(upper, "upper")
    if jit_disabled() and lo is not None and hi is not None:
        check_body(body_fun, "fori_loop: body_fun")
        value = init_val
        for i in range(lo, hi):
            value = body_fun(i, value)
        return value
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
    return _WhileLoop("fori", body_fun, None, "fori_loop")(
        init_val, jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
    )


def while_loop(cond_fun: Callable[[C], Any], body_fun: Callable[[C], C], init_val: C) -> C:
    """``jax.lax.while_loop`` for functions that read and write States.

    States written by ``body_fun`` are carried; ``cond_fun`` may read states (it
    sees their current values in the loop) but must not write any.

    Args:
        cond_fun: ``cond_fun(carry) -> bool scalar``; the loop runs while it
            is true. It may read States, not write them.
        body_fun: ``body_fun(carry) -> carry``; the carry it returns must have
            the structure, shapes and dtypes of the one it receives. It may
            read and write States.
        init_val: the initial carry (a pytree of arrays).

    Returns:
        The carry when ``cond_fun`` first returns false (``init_val`` if it is
        false from the start).

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
    if jit_disabled():
        check_body(cond_fun, "while_loop: cond_fun")
        check_body(body_fun, "while_loop: body_fun")
        value = init_val
        while is_concrete(keep_going := cond_fun(value)):
            if not keep_going:
                return value
            value = body_fun(value)
        # A traced condition (under jax.vmap, say): the compiled loop goes on from here.
        init_val = value
    return _WhileLoop("while", body_fun, cond_fun, "while_loop")(init_val)


def map(f: Callable[..., Y], *xs: Any, batch_size: int | None = None) -> Y:
    """Apply ``f`` to every leading-axis slice of ``xs`` in sequence (like ``jax.lax.map``).

    ``f`` may read and write States (they are carried from slice to slice). With
    ``batch_size``, ``f`` runs on ``batch_size`` slices at a time under ``vmap2``
    (the remainder in one final batch), trading memory for speed; states written
    inside ``f`` must then not depend on the batched values.

    Args:
        f: the function applied to each slice, called as ``f(*x_t)``; it may
            read and write States.
        *xs: arrays (or pytrees of arrays) with a common leading axis of
            length T.
        batch_size: how many slices to process at once, vectorised;
            ``None`` (the default) processes one slice per step.

    Returns:
        ``f``'s outputs stacked on a new leading axis of length T.

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

    batched = vmap2(f)
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
