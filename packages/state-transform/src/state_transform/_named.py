"""``named_call`` and ``named_scope``: give a function's operations a name in traces and profiles."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, overload

import jax

from state_core import environ

from ._jit import JittedFunction, jit
from ._typing import P, Q, R, S

__all__ = ["named_call", "named_scope"]

#: ``static_argnums`` of ``named_scope``: positions, or a function of the call's arguments returning them.
ArgnumsSpec: TypeAlias = int | Sequence[int] | Callable[..., int | Sequence[int] | None] | None
#: ``static_argnames`` of ``named_scope``: names, or a function of the call's arguments returning them.
ArgnamesSpec: TypeAlias = str | Sequence[str] | Callable[..., str | Sequence[str] | None] | None

#: The environment flag that makes ``named_scope`` compile its function (brainstate's key).
IR_COMPILATION = "ir_compilation"

#: How many static configurations one ``named_scope`` function keeps a ``jit`` object for.
_MAX_CONFIGURATIONS = 16


def _scoped(fun: Callable[P, R], name: str) -> Callable[P, R]:
    """``fun`` with its body run inside ``jax.named_scope(name)``, with ``fun``'s name and docstring."""

    @functools.wraps(fun)
    def scoped(*args: P.args, **kwargs: P.kwargs) -> R:
        with jax.named_scope(name):
            return fun(*args, **kwargs)

    return scoped


@overload
def named_call(fun: Callable[P, R], *, name: str | None = None) -> Callable[P, R]: ...
@overload
def named_call(fun: None = None, *, name: str | None = None) -> Callable[[Callable[Q, S]], Callable[Q, S]]: ...


def named_call(
    fun: Callable[..., Any] | None = None, *, name: str | None = None
) -> Callable[..., Any] | Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Run ``fun`` under a name that JAX records in every operation it traces.

    Each call enters ``jax.named_scope(name)``, so the equations ``fun`` adds to a
    jaxpr carry the name in ``eqn.source_info.name_stack``, and the compiled
    program and profiler traces show it. Nothing else changes: no ``jit``, the
    States ``fun`` reads and writes behave as without the name, and the result
    works inside ``grad``, ``scan``, ``vmap2``, ``jit`` and their ``jax``
    counterparts. Three spellings: ``@named_call`` (the function's own name),
    ``@named_call(name='block')`` and ``named_call(fun, name='block')``.

    Args:
        fun: the function to name; ``None`` returns a decorator.
        name: the scope's name; default ``fun.__name__``.

    Returns:
        A function with ``fun``'s signature, name and docstring (or, without
        ``fun``, a decorator that makes one).

    Raises:
        TypeError: ``fun`` is not callable, or ``name`` is not a str.

    Example:
        >>> import jax
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import named_call
        >>> calls = State(jnp.zeros(()))
        >>> @named_call(name='block')
        ... def block(x):
        ...     calls.value = calls.value + 1
        ...     return jnp.sin(x) * 2.0
        >>> block(jnp.array([0.0, 0.5])), calls.value
        (Array([0.       , 0.9588511], dtype=float32), Array(1., dtype=float32))
        >>> @named_call
        ... def double(x):
        ...     return x * 2.0
        >>> jaxpr = jax.make_jaxpr(double)(1.0)
        >>> [str(eqn.source_info.name_stack) for eqn in jaxpr.eqns]
        ['double']
    """
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: `name` must be a str or None, got {type(name).__name__} {name!r}.")
    if fun is None:
        return functools.partial(named_call, name=name)
    if not callable(fun):
        raise TypeError(
            f"named_call: `fun` must be callable, got {type(fun).__name__}."
            + (f" To name the scope, pass it by keyword: named_call(name={fun!r})." if isinstance(fun, str) else "")
        )
    return _scoped(fun, name if name is not None else getattr(fun, "__name__", "named_call"))


def _is_one(item: Any, kind: type) -> bool:
    return isinstance(item, kind) and not isinstance(item, bool)


def _check_spec(spec: Any, kind: type, what: str, origin: str) -> None:
    """Raise ``TypeError`` unless ``spec`` is None, one ``kind`` or a sequence of them (a bool is no int)."""
    if spec is None or _is_one(spec, kind):
        return
    if isinstance(spec, Sequence) and not isinstance(spec, str) and all(_is_one(item, kind) for item in spec):
        return
    expected = "an int or a sequence of ints" if kind is int else "a str or a sequence of strs"
    raise TypeError(
        f"named_scope: `{what}` must be None, {expected}, or a function of the call's arguments returning "
        f"one; {origin} {type(spec).__name__} {spec!r}."
    )


def _argnums(spec: ArgnumsSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...]:
    """The static positions of one call, counted from the start (``-1`` is the last positional argument)."""
    if callable(spec):
        spec = spec(*args, **kwargs)
        _check_spec(spec, int, "static_argnums", "its function returned")
    positions = () if spec is None else (spec,) if isinstance(spec, int) else tuple(spec)
    normalised = tuple(i + len(args) if i < 0 else i for i in positions)
    if any(i < 0 for i in normalised):
        raise ValueError(
            f"named_scope: `static_argnums` {positions} counts back past the first of the {len(args)} "
            "positional argument(s) of this call; use positions the call has, or pass the argument positionally."
        )
    return normalised


def _argnames(spec: ArgnamesSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The static keyword names of one call."""
    if callable(spec):
        spec = spec(*args, **kwargs)
        _check_spec(spec, str, "static_argnames", "its function returned")
    return () if spec is None else (spec,) if isinstance(spec, str) else tuple(spec)


def named_scope(
    name: str,
    static_argnums: ArgnumsSpec = None,
    static_argnames: ArgnamesSpec = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator that names a function's operations and, when ``ir_compilation`` is set, compiles it.

    The decorated function runs inside ``jax.named_scope(name)``. By default it is
    called directly (``static_argnums`` and ``static_argnames`` are then
    unused). While the environment setting ``ir_compilation`` is true
    (``environ.set(ir_compilation=True)`` or a ``with
    environ.context(ir_compilation=True):`` block), each call goes through
    ``jit(fun, static_argnums=..., static_argnames=..., name=name)`` instead:
    the function is traced once per call signature and its States are read and
    written as under ``jit``. One ``jit`` is kept per static configuration, so
    repeated calls reuse its compiled programs.

    ``static_argnums`` / ``static_argnames`` may be functions of the call's
    arguments (``lambda *args, **kwargs: ...``) that return the configuration
    for that call. Negative positions count from the end of the call's
    positional arguments.

    The result is a plain function, so it works as a method. Under
    ``ir_compilation`` the instance is positional argument 0 and must be marked
    static (``static_argnums=0``): ``jit`` cannot trace an arbitrary object.

    Args:
        name: the scope's name, shown in jaxprs, compiled programs and profiles.
        static_argnums: positions of the arguments that are compile-time
            constants under ``ir_compilation``: an int, a sequence of ints, or a
            function of the call's arguments returning one.
        static_argnames: names of keyword arguments that are compile-time
            constants under ``ir_compilation``: a str, a sequence of strs, or a
            function of the call's arguments returning one.

    Returns:
        A decorator; the function it returns has the decorated function's
        signature, name and docstring, and its ``fn`` attribute is the
        decorated function.

    Raises:
        TypeError: ``name`` is not a str (``@named_scope`` without a name:
            write ``@named_scope('block')``, or use ``named_call``), the
            decorated object is not callable, or a static configuration has the
            wrong type.
        ValueError: a negative static position counts back past the call's
            first positional argument.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, environ
        >>> from state_transform import named_scope
        >>> total = State(jnp.zeros(()))
        >>> traced = []
        >>> @named_scope('accumulate', static_argnums=1)
        ... def accumulate(x, scale):
        ...     traced.append(scale)
        ...     total.value = total.value + x * scale
        ...     return total.value
        >>> accumulate(1.0, 2)       # called directly
        Array(2., dtype=float32)
        >>> with environ.context(ir_compilation=True):
        ...     accumulate(1.0, 3), accumulate(2.0, 3)     # compiled: traced once
        (Array(5., dtype=float32), Array(11., dtype=float32))
        >>> traced
        [2, 3]
    """
    if not isinstance(name, str):
        raise TypeError(
            f"named_scope: `name` must be a str, got {type(name).__name__}. Write @named_scope('block') "
            "(or @named_scope(name='block')); for a scope named after the function use @named_call."
        )
    if not callable(static_argnums):
        _check_spec(static_argnums, int, "static_argnums", "got")
    if not callable(static_argnames):
        _check_spec(static_argnames, str, "static_argnames", "got")

    def decorate(fun: Callable[P, R]) -> Callable[P, R]:
        if not callable(fun):
            raise TypeError(f"named_scope({name!r}): the decorated object must be callable, got {type(fun).__name__}.")
        body = _scoped(fun, name)

        # One jit object per static configuration of this one function. A fixed
        # configuration makes a single entry; only a function-valued
        # configuration can make more, and the LRU bound caps them. Dropping an
        # entry loses no compiled program: jit objects of the same function and
        # options share state_core's program cache, so a rebuilt one finds them.
        @functools.lru_cache(maxsize=_MAX_CONFIGURATIONS)
        def compiled(argnums: tuple[int, ...], argnames: tuple[str, ...]) -> JittedFunction[P, R]:
            return jit(body, static_argnums=argnums, static_argnames=argnames, name=name)

        @functools.wraps(fun)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            if not environ.get(IR_COMPILATION, False):
                return body(*args, **kwargs)
            argnums = _argnums(static_argnums, args, kwargs)
            argnames = _argnames(static_argnames, args, kwargs)
            return compiled(argnums, argnames)(*args, **kwargs)

        call.__dict__["fn"] = fun
        return call

    return decorate
