"""Splitting a call into static and dynamic arguments and keying it: the front of the pipeline."""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import jax

from ._jax_internals import ArrayImpl
from ._signature import leaf_signature, positional_key, trace_context
from ._state import check_not_state

__all__ = ["CallSignature", "normalize_argnums", "normalize_argnames", "positions_of_names"]

_tree_flatten = jax.tree_util.tree_flatten
_ArrayImpl = ArrayImpl


def normalize_argnums(argnums: int | Iterable[int] | None, what: str) -> tuple[int, ...]:
    """``argnums`` as a tuple of ints; ``TypeError`` naming ``what`` otherwise."""
    if argnums is None:
        return ()
    if isinstance(argnums, int):
        return (argnums,)
    try:
        result = tuple(operator.index(a) for a in argnums)
    except TypeError:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {argnums!r}.") from None
    return result


def positions_of_names(fun: Callable[..., Any], names: Iterable[str]) -> tuple[int, ...]:
    """The positions at which ``fun`` takes the parameters ``names`` when they are passed positionally.

    ``jax.jit`` treats a ``static_argnames`` (or ``donate_argnames``) parameter the
    same whether the caller passes it by keyword or by position; adding these
    positions to the ``*_argnums`` gives the same. Keyword-only parameters and names
    ``fun`` does not have add nothing; a callable without a signature adds nothing.

    Args:
        fun: the user's function.
        names: parameter names, e.g. a transformation's ``static_argnames``.

    Example:
        >>> from state_core.engine import positions_of_names
        >>> def f(x, n, *, k=0): ...
        >>> positions_of_names(f, ('n', 'k', 'missing'))
        (1,)
    """
    wanted = set(names)
    if not wanted:
        return ()
    try:
        parameters = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable without a signature
        return ()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(
        i
        for i, p in enumerate(q for q in parameters if q.kind in positional)
        if p.name in wanted and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    )


def normalize_argnames(argnames: str | Iterable[str] | None) -> tuple[str, ...]:
    """``argnames`` as a tuple of str."""
    if argnames is None:
        return ()
    if isinstance(argnames, str):
        return (argnames,)
    return tuple(argnames)


class CallSignature:
    """How a transformed function turns a call into a cache key and traced inputs.

    Mixed into ``StatefulFunction``; subclasses set ``name``, ``_who`` (how
    messages name a call: ``jit(f)``), ``static_argnums`` and ``static_argnames``.
    """

    name: str
    _who: str
    static_argnums: tuple[int, ...]
    static_argnames: tuple[str, ...]
    #: where the ``static_argnames`` parameters sit when passed positionally
    _static_name_positions: tuple[int, ...] = ()
    trace: Callable[..., Any]

    def _split_args(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], tuple[Any, ...], tuple[Any, ...]]:
        if self.static_argnums or self._static_name_positions:
            n = len(args)
            static_pos = {i for i in self._static_name_positions if i < n}
            for i in self.static_argnums:
                j = i + n if i < 0 else i
                if not 0 <= j < n:
                    raise ValueError(
                        f"{self._who}: static_argnums contains {i}, but it was called with only "
                        f"{n} positional argument(s); pass that argument positionally."
                    )
                static_pos.add(j)
            dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
            static_args = tuple((i, args[i]) for i in sorted(static_pos))
        else:
            dyn_args, static_args = args, ()
        if self.static_argnames and kwargs:
            dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
            static_kwargs = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        else:
            dyn_kwargs, static_kwargs = kwargs, ()
        return dyn_args, dyn_kwargs, static_args, static_kwargs

    def _signature(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Hashable, list[Any], Any, tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], dict[str, Any]]:
        if self.static_argnums or self.static_argnames:
            dyn_args, dyn_kwargs, static_args, static_kwargs = self._split_args(args, kwargs)
        else:
            dyn_args, dyn_kwargs, static_args, static_kwargs = args, kwargs, (), ()
        leaves, treedef = _tree_flatten((dyn_args, dyn_kwargs))
        try:
            sig = tuple(map(leaf_signature, leaves))
        except TypeError:
            self._raise_bad_leaf(dyn_args, dyn_kwargs)
            raise
        key = (len(args), static_args, static_kwargs, treedef, sig)
        if static_args or static_kwargs:
            self._check_static_hashable(key, static_args, static_kwargs)
        return key, leaves, treedef, static_args, static_kwargs, dyn_args, dyn_kwargs

    def _check_static_hashable(
        self, key: tuple[Any, ...], static_args: tuple[Any, ...], static_kwargs: tuple[Any, ...]
    ) -> None:
        try:
            hash(key)
        except TypeError:
            for i, value in static_args + static_kwargs:
                try:
                    hash(value)
                except TypeError:
                    raise TypeError(
                        f"{self._who}: static argument {i!r} must be hashable, got a "
                        f"{type(value).__name__}; pass it as a tuple or make it a dynamic argument."
                    ) from None
            raise

    def _raise_bad_leaf(self, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any]) -> None:
        named = [(f"positional argument {i}", a) for i, a in enumerate(dyn_args)]
        named += [(f"keyword argument '{k}'", v) for k, v in dyn_kwargs.items()]
        for label, value in named:
            check_not_state(value, f"{self._who}: {label}")
            for path, leaf in jax.tree.leaves_with_path(value):
                try:
                    leaf_signature(leaf)
                except TypeError:
                    raise TypeError(
                        f"{self._who}: {label}{jax.tree_util.keystr(path)} is a "
                        f"{type(leaf).__name__}, which JAX cannot trace. Pass arrays or numbers, "
                        "or mark the argument static with static_argnums / static_argnames."
                    ) from None

    def get_arg_cache_key(self, *args: Any, compile_if_miss: bool = False, **kwargs: Any) -> Hashable:
        """The cache key of a call with these arguments (see ``get_jaxpr_by_cache``).

        The key holds the arguments' structure, shapes, dtypes and weak types, the
        values of the static arguments and the trace context; nothing is traced
        unless ``compile_if_miss`` asks for it.

        Args:
            *args: the positional arguments of a call (static ones included).
            compile_if_miss: trace the call now if this signature has no traced
                program yet, so that the ``*_by_cache(key)`` lookups find one
                (no state is read or written). False (the default) only computes
                the key.
            **kwargs: the keyword arguments of a call.

        Raises:
            TypeError: an argument is not a value JAX can trace (mark it static),
                or a static argument is not hashable.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import StatefulFunction
            >>> f = StatefulFunction(lambda x: x + 1)
            >>> f.get_arg_cache_key(jnp.zeros(2)) == f.get_arg_cache_key(jnp.ones(2))
            True
            >>> f.get_arg_cache_key(jnp.zeros(2)) == f.get_arg_cache_key(jnp.zeros(3))
            False
            >>> key = f.get_arg_cache_key(jnp.zeros(2), compile_if_miss=True)
            >>> f.get_jaxpr_by_cache(key).out_avals
            [ShapedArray(float32[2])]
        """
        key = self._call_key(args, kwargs)[0]
        if compile_if_miss:
            self.trace(*args, **kwargs)
        return key

    def _call_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Hashable, Sequence[Any]]:
        """The cache key and dynamic leaves of a call: its signature and its trace context.

        A program traced inside another state-aware trace is never replayed outside
        one, nor the other way round (``trace_context``).
        """
        key, leaves = self._argument_key(args, kwargs)
        context = trace_context()
        if context is not None:
            key = (key, context)
        return key, leaves

    def _argument_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Hashable, Sequence[Any]]:
        """The cache key and dynamic leaves of a call: the hot-path subset of ``_signature``.

        Positional arrays alone (the common case) are keyed by their avals without
        flattening; any other call by its pytree structure and leaf signatures. The
        two kinds of key never collide (a tuple of aval triples, a 5-tuple starting
        with an int), and a call always gets the same kind.
        """
        if self.static_argnums or self.static_argnames:
            signature = self._signature(args, kwargs)
            return signature[0], signature[1]
        if not kwargs:
            for a in args:
                if type(a) is not _ArrayImpl:
                    break
            else:
                return positional_key(args), args
        leaves, treedef = _tree_flatten((args, kwargs))
        try:
            sig = tuple(map(leaf_signature, leaves))
        except TypeError:
            self._raise_bad_leaf(args, kwargs)
            raise
        return (len(args), (), (), treedef, sig), leaves

    def _rebuild_args(
        self,
        leaves: Sequence[Any],
        treedef: Any,
        static_args: tuple[Any, ...],
        static_kwargs: tuple[Any, ...],
        n_args: int,
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        dyn_args, dyn_kwargs = jax.tree.unflatten(treedef, leaves)
        if static_args:
            merged: list[Any] = []
            statics = dict(static_args)
            it = iter(dyn_args)
            for i in range(n_args):
                merged.append(statics[i] if i in statics else next(it))
            args = tuple(merged)
        else:
            args = tuple(dyn_args)
        kwargs = dict(dyn_kwargs)
        kwargs.update(static_kwargs)
        return args, kwargs
