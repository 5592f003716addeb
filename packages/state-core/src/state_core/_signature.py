"""Call signatures: the cheap descriptions that pick a cached program before anything runs.

A call is keyed by its arguments' structure, shapes, dtypes and weak types (plus
the values of static arguments) and by the trace context it is made in; a cached
program is then checked against the current shapes and dtypes of the states it
reads. Every comparison here is a tuple or identity comparison: no exception ever
decides which program runs.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Hashable, Sequence
from typing import Any

import jax
import numpy as np

from ._context import CTX
from ._jax_internals import KEY_TOKEN, ArrayImpl, PRNGKeyArray, is_tracer, mesh_type

__all__ = [
    "leaf_signature",
    "canonical_signature",
    "state_signature",
    "states_match",
    "values_unchanged",
    "value_token",
    "reference_avals",
    "positional_key",
    "trace_context",
    "pushed_context",
    "context_markers",
]

_ArrayImpl = ArrayImpl
_PRNGKeyArray = PRNGKeyArray
_PY_SCALARS = (int, float, complex, bool)
# Hot-path helpers that run their loops in C: ``map(getattr, values, _AVAL, _NONE)``
# gives each value's aval (None for values without one), ``map(_is, a, b)`` compares
# two lists element by element by identity.
_AVAL = itertools.repeat("aval")
_NONE = itertools.repeat(None)
_is = operator.is_
_GET_AVAL = operator.attrgetter("aval")


def leaf_signature(x: Any) -> Hashable:
    """A cheap hashable description of an argument leaf: shape, dtype and weak type.

    Python scalars are described by their type alone (JAX treats them as weakly typed).

    Args:
        x: one leaf of a call's dynamic arguments: a JAX or NumPy array, a Python
            number, a tracer or a ``jax.ShapeDtypeStruct``.

    Returns:
        ``(shape, dtype, weak_type)`` (plus the mesh type of a traced value inside
        ``shard_map``), or the type of a Python scalar.

    Raises:
        TypeError: ``x`` is not a value JAX can trace (a string, an arbitrary object).
    """
    if type(x) is _ArrayImpl:
        aval = x.aval  # one attribute; ``x.shape`` etc. are properties that each read it
        return (aval.shape, aval.dtype, aval.weak_type)
    t = type(x)
    if t in _PY_SCALARS:
        return t  # type: ignore[return-value]  # a class is hashable; mypy's Hashable protocol misses metaclass __hash__
    if isinstance(x, (np.ndarray, np.generic)):
        return (x.shape, x.dtype, False)
    return _typed_signature(x)  # tracers and other jax values; raises TypeError for the rest


def _typed_signature(x: Any) -> tuple[Any, ...]:
    """``(shape, dtype, weak_type)`` of a JAX value, plus its mesh type when it is traced.

    A traced value inside ``shard_map`` has a type that records the mesh axes it
    varies over; a program traced for one such type must not be reused for
    another, so that part of the type belongs in the signature.
    """
    aval = jax.typeof(x)
    sig = (aval.shape, aval.dtype, aval.weak_type)
    if is_tracer(x) or type(x) is jax.ShapeDtypeStruct:
        context = mesh_type(aval)
        if context is not None:
            return (*sig, context)
    return sig


def canonical_signature(x: Any) -> tuple[Any, ...]:
    """``(shape, dtype, weak_type)`` of the value JAX would trace for ``x``.

    It canonicalises as tracing does (a Python float is a weak float32, a
    float64 NumPy array is float32 unless x64 is enabled), so two values with
    the same signature give the same program.

    Args:
        x: an array, a Python or NumPy number, a tracer or a ``jax.ShapeDtypeStruct``.

    Example:
        >>> from state_core.engine import canonical_signature
        >>> canonical_signature(1.0)
        ((), dtype('float32'), True)
    """
    aval = jax.typeof(x)
    return (aval.shape, aval.dtype, aval.weak_type)


def state_signature(value: Any) -> Any:
    """What ``states_match`` compares for one state value.

    A single array gives its ``(shape, dtype, weak_type)``; a pytree gives the
    tuple of its leaves' signatures.

    Args:
        value: a state's value: an array, a typed PRNG key, a number or a pytree
            of those.
    """
    if type(value) is _ArrayImpl:
        aval = value.aval
        return (aval.shape, aval.dtype, aval.weak_type)
    if type(value) is _PRNGKeyArray:
        return _key_signature(value)
    leaves, treedef = jax.tree.flatten(value)
    if treedef.num_nodes == 1 and len(leaves) == 1:  # type: ignore[attr-defined]  # jaxlib PyTreeDef stub not found
        return _typed_signature(leaves[0])
    return tuple(map(_typed_signature, leaves))


def _key_signature(key: Any) -> tuple[Any, ...]:
    # A typed key's aval is rebuilt on every ``.aval`` / ``jax.typeof`` (tens of
    # microseconds); its shape and dtype properties give the same triple cheaply.
    return (key.shape, key.dtype, False)


def states_match(values: Sequence[Any], signatures: Sequence[Any]) -> bool:
    """True if every value has the signature recorded at trace time (``state_signature``).

    Args:
        values: the input states' current values.
        signatures: one ``state_signature`` per value, in the same order (a
            ``Trace``'s ``state_sigs``); the lengths are not checked.
    """
    for value, sig in zip(values, signatures):  # noqa: B905  # hot path; lengths fixed at trace time
        t = type(value)
        if t is _ArrayImpl:
            aval = value.aval
            if (aval.shape, aval.dtype, aval.weak_type) != sig:
                return False
        elif t is _PRNGKeyArray:
            if _key_signature(value) != sig:
                return False
        elif isinstance(value, jax.Array):  # tracers: one leaf, no flattening
            if _typed_signature(value) != sig:
                return False
        elif state_signature(value) != sig:
            return False
    return True


def values_unchanged(values: list[Any], sigs: Sequence[Any], ref: list[Any] | None) -> bool:
    """``states_match(values, sigs)``, in the common case without computing a signature.

    Arrays produced by one compiled program share their aval objects from call to
    call, so when every value is an array whose aval is the very object in ``ref``
    (the avals at the last successful check), nothing can have changed: one
    C-level identity comparison per state. Typed keys are compared the same way by
    their implementation and the aval of their key data. Otherwise the signatures
    are compared, and on success ``ref`` is updated in place for the next call.

    Args:
        values: the input states' current values.
        sigs: one ``state_signature`` per value, in the same order.
        ref: the reference tokens, one per value (``reference_avals``), updated in
            place when the signatures match; None always compares signatures.
    """
    if ref is not None:
        # A plain list: plain arrays only (their avals); else typed keys are among them.
        tokens = list(map(getattr, values, _AVAL, _NONE)) if type(ref) is list else list(map(value_token, values))
        if tokens == ref:  # identity first, element by element; equal tokens mean equal signatures
            return True
    if not states_match(values, sigs):
        return False
    if ref is not None and not any(map(_is, tokens, _NONE)):
        ref[:] = tokens
    return True


class _TokensWithKeys(list):  # type: ignore[type-arg]
    """Reference tokens of values that include typed keys (``values_unchanged`` reads them one by one)."""


def value_token(value: Any) -> Any:
    """What stands for ``value``'s signature in ``values_unchanged``: an aval, a key token, or None."""
    t = type(value)
    if t is _ArrayImpl:
        return value.aval
    if t is _PRNGKeyArray and KEY_TOKEN is not None:
        return KEY_TOKEN(value)
    return None


def reference_avals(values: Sequence[Any]) -> list[Any] | None:
    """The first reference tokens for ``values_unchanged``, or None when some value has none.

    A plain array's token is its aval; a typed key's is its implementation and
    the aval of its key data. None turns the identity shortcut off for good
    (pytree values, whose avals are not stable objects).
    """
    if all(type(v) is _ArrayImpl for v in values):
        return [v.aval for v in values]
    tokens = _TokensWithKeys(map(value_token, values))
    if any(token is None for token in tokens):
        return None
    return tokens


def positional_key(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The cache key of a call whose arguments are all concrete arrays: their avals' triples.

    Args:
        args: the call's positional arguments, every one a concrete ``jax.Array``
            (not a tracer, NumPy array or number: the caller checks).
    """
    if len(args) == 1:
        aval = args[0].aval
        return ((aval.shape, aval.dtype, aval.weak_type),)
    return tuple([(aval.shape, aval.dtype, aval.weak_type) for aval in map(_GET_AVAL, args)])


def trace_context() -> Hashable:
    """What a program traced right now depends on besides its signature (None at the top level).

    A program traced inside another state-aware trace is only replayed inside one
    (its new states come out as the outer trace's values, not concrete arrays); inside
    ``shard_map`` the mesh whose axes are manual is part of it; engines add their own
    markers with ``pushed_context`` (a nested ``pmap2`` is compiled differently).
    """
    if not CTX.stacks:
        return None
    mesh = jax.sharding.get_abstract_mesh()
    return ("nested", mesh if mesh.manual_axes else None, CTX.markers)


def context_markers() -> tuple[Hashable, ...]:
    """The markers engines pushed in this thread (``pushed_context``), outermost first.

    Example:
        >>> from state_core.engine import context_markers
        >>> context_markers()
        ()
    """
    return CTX.markers


class pushed_context:
    """Add ``marker`` to the context programs are traced in while the ``with`` block runs (this thread only).

    A program traced inside another state-aware trace records the markers in its
    ``Trace.context``, so it is cached apart from one traced without them.

    Args:
        marker: a hashable value naming what the engine does differently in this
            context (``'pmap2'``); programs traced inside are cached apart from
            those traced without it.

    Example:
        >>> from state_core.engine import context_markers, pushed_context
        >>> with pushed_context('pmap'):
        ...     context_markers()
        ('pmap',)
        >>> context_markers()
        ()
    """

    __slots__ = ("marker",)

    def __init__(self, marker: Hashable) -> None:
        self.marker = marker

    def __enter__(self) -> None:
        CTX.markers = (*CTX.markers, self.marker)

    def __exit__(self, *exc: object) -> None:
        CTX.markers = CTX.markers[:-1]
