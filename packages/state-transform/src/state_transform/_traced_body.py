"""Shared plumbing of the state-aware control-flow functions.

A user function given to ``scan``/``cond``/... is wrapped once in a
``StatefulFunction`` (kept in a bounded cache keyed by the function, so calling
``for_loop(step, ...)`` again does not trace ``step`` again) and every compiled
loop or branch program built from its traces is cached next to it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from state_core import State, StatefulFunction
from state_core.engine import TracedCall, canonical_signature, leaf_signature, mesh_type

__all__ = [
    "TracedBody",
    "traced_body",
    "clear_control_flow_caches",
    "slice_spec",
    "leaf_avals",
    "same_shape_dtype",
    "aval_str",
    "match_weak_types",
    "is_concrete",
    "signature_key",
]

_MAX_BODIES = 256
_MAX_PROGRAMS = 32
_LOCK = threading.Lock()
_BODIES: OrderedDict[Any, TracedBody] = OrderedDict()


class TracedBody:
    """A user function traced by a ``StatefulFunction`` plus the programs built on its traces."""

    __slots__ = ("sf", "_programs", "_fast", "_lock")

    def __init__(self, fun: Callable[..., Any], name: str, static_argnums: tuple[int, ...] = ()) -> None:
        self.sf = StatefulFunction(fun, static_argnums, name=name)
        self._programs: OrderedDict[Hashable, tuple[tuple[TracedCall, ...], Any]] = OrderedDict()
        # Call signature -> (bodies, program): lets a repeated call skip tracing lookups.
        self._fast: dict[Hashable, tuple[tuple[TracedBody, ...], Any]] = {}
        self._lock = threading.Lock()

    def fast_program(self, key: Hashable, bodies: Sequence[TracedBody]) -> Any:
        """The program stored for this call signature and these bodies, or None."""
        hit = self._fast.get(key)
        # Plain zip: runs on every eager call and the lengths were just compared.
        if hit is not None and len(hit[0]) == len(bodies) and all(a is b for a, b in zip(hit[0], bodies)):  # noqa: B905
            return hit[1]
        return None

    def remember(self, key: Hashable, bodies: Sequence[TracedBody], program: Any) -> None:
        """Store ``program`` for a call signature (only programs free of outer tracers)."""
        with self._lock:
            if len(self._fast) >= _MAX_PROGRAMS:
                self._fast.pop(next(iter(self._fast)))
            self._fast[key] = (tuple(bodies), program)

    def program(self, calls: Sequence[TracedCall], params: Hashable, build: Callable[[], Any]) -> Any:
        """The program built by ``build`` for these traced calls and loop parameters (cached).

        A program is only cached when every trace it embeds is free of tracers of an
        enclosing transformation; otherwise it is built for this call alone.
        """
        if not all(c.cacheable for c in calls):
            return build()
        key = (tuple(id(c) for c in calls), params)
        with self._lock:
            hit = self._programs.get(key)
            if hit is not None and all(a is b for a, b in zip(hit[0], calls, strict=True)):
                self._programs.move_to_end(key)
                return hit[1]
        program = build()
        with self._lock:
            # Holding the calls keeps their ids from being reused while the entry lives.
            self._programs[key] = (tuple(calls), program)
            while len(self._programs) > _MAX_PROGRAMS:
                self._programs.popitem(last=False)
        return program

    def forget(self) -> None:
        """Drop every trace and program (a state changed shape or dtype since tracing)."""
        self.sf.clear_cache()
        with self._lock:
            self._programs.clear()
            self._fast.clear()


def traced_body(fun: Callable[..., Any], what: str) -> TracedBody:
    """The cached ``TracedBody`` of ``fun``; ``what`` names the argument in errors."""
    if not callable(fun):
        raise TypeError(f"{what} must be a callable, got {type(fun).__name__}.")
    if isinstance(fun, State):
        raise TypeError(f"{what} must be a function, got the State {fun.describe()}.")
    name = getattr(fun, "__name__", None) or type(fun).__name__
    if not _hashable(fun):
        return TracedBody(fun, name)  # unhashable callables are traced per call
    body = _BODIES.get(fun)  # a plain dict read: no lock on the hot path (eviction is FIFO)
    if body is not None:
        return body
    with _LOCK:
        body = _BODIES.get(fun)
        if body is not None:
            return body
        body = TracedBody(fun, name)
        _BODIES[fun] = body
        while len(_BODIES) > _MAX_BODIES:
            _BODIES.popitem(last=False)
    return body


def _hashable(fun: Any) -> bool:
    """True if ``fun`` can key the cache (a bound method hashes its owner too)."""
    if getattr(type(fun), "__hash__", None) is None:
        return False
    owner = getattr(fun, "__self__", None)
    return owner is None or getattr(type(owner), "__hash__", None) is not None


def clear_control_flow_caches() -> None:
    """Forget every traced loop/branch body and compiled control-flow program.

    The caches are bounded (the most recent 256 body functions), but they keep
    those functions, and what they refer to, alive; call this to release them.

    Example:
        >>> from state_transform import clear_control_flow_caches
        >>> clear_control_flow_caches()
    """
    with _LOCK:
        _BODIES.clear()
    for hook in _CLEAR_HOOKS:
        hook()


_CLEAR_HOOKS: list[Callable[[], None]] = []


def signature_key(params: Hashable, tree: Any) -> tuple[Any, ...]:
    """A hashable key describing ``tree``'s structure, shapes and dtypes, plus ``params``."""
    leaves, treedef = jax.tree.flatten(tree)
    return (params, treedef, *[leaf_signature(leaf) for leaf in leaves])


def slice_spec(x: Any) -> jax.ShapeDtypeStruct:
    """The abstract value of one leading-axis slice of ``x``.

    Inside ``shard_map`` a traced slice keeps the mesh axes ``x`` varies over, so a
    loop body is traced with the types it runs with (``check_vma``).
    """
    aval = jax.typeof(x)
    if isinstance(x, jax.core.Tracer) and mesh_type(aval) is not None:
        return jax.eval_shape(lambda v: v[0], x)
    return jax.ShapeDtypeStruct(aval.shape[1:], aval.dtype, weak_type=aval.weak_type)


def leaf_avals(value: Any) -> tuple[Any, ...]:
    """``(shape, dtype, weak_type)`` of every leaf of ``value``."""
    return tuple(canonical_signature(x) for x in jax.tree.leaves(value))


def same_shape_dtype(a: Sequence[tuple[Any, ...]], b: Sequence[tuple[Any, ...]]) -> bool:
    """True if two ``leaf_avals`` results agree on shapes and dtypes (weak types may differ)."""
    return len(a) == len(b) and all(x[:2] == y[:2] for x, y in zip(a, b, strict=True))


def aval_str(avals: Sequence[tuple[Any, ...]]) -> str:
    """``float32[3]`` (or a tuple of those) for ``leaf_avals`` output, as messages show them."""
    parts = [f"{jnp.dtype(d).name}[{','.join(map(str, s))}]" for s, d, _ in avals]
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def match_weak_types(leaves: Sequence[Any], like: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Cast each leaf to the dtype in ``like`` so a loop carry keeps one type (weak vs strong)."""
    out = []
    for leaf, (_, dtype, weak) in zip(leaves, like, strict=True):
        aval = jax.typeof(leaf)
        if aval.weak_type != weak and aval.dtype == dtype:
            leaf = jax.lax.convert_element_type(leaf, dtype) if not weak else leaf
        out.append(leaf)
    return out


def is_concrete(x: Any) -> bool:
    """True if ``x`` is a value known at trace time (not a tracer of an enclosing transformation)."""
    return not isinstance(x, jax.core.Tracer)
