"""The one checked replay path every state-aware transformation runs a cached program through.

A traced signature is a ``TracedCall``. Calling it again means: read the input
states once, check their shapes/dtypes against the trace with a cheap per-leaf
comparison (a mismatch means the caller traces again; no exception is used to
decide), pass written and read-only state values as separate program arguments
(only the written ones may be donated), run the compiled program exactly once,
wait for the results when the program may fail at run time after dispatch, and
write every new value back, all or nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

import jax
import numpy as np

from ._context import CTX
from ._jax_internals import ArrayImpl, PRNGKeyArray, is_tracer, mesh_type
from ._state import State, StateLeakError

__all__ = [
    "TracedCall",
    "StaleTraceError",
    "leaf_signature",
    "canonical_signature",
    "state_signature",
    "states_match",
    "input_states_unchanged",
    "reference_avals",
    "states_changed",
    "check_state_avals",
    "unflatten_states",
    "read_state_values",
    "write_state_values",
    "replay",
    "program_runner",
    "values_unchanged",
    "STATES_CHANGED",
    "merger",
    "may_fail_at_run_time",
]

_ArrayImpl = ArrayImpl
_PRNGKeyArray = PRNGKeyArray
_PY_SCALARS = (int, float, complex, bool)
# A process-wide clock for least-recently-used eviction: a hit stamps its entry.
_CLOCK = itertools.count()
# Hot-path helpers that run their loops in C: ``map(getattr, values, _AVAL, _NONE)``
# gives each value's aval (None for values without one), ``map(_is, a, b)`` compares
# two lists element by element by identity.
_GET_VALUE = operator.attrgetter("_value")
_AVAL = itertools.repeat("aval")
_NONE = itertools.repeat(None)
_is = operator.is_


class StaleTraceError(Exception):
    """Kept for engines written against older versions; the call path no longer raises it."""


def leaf_signature(x: Any) -> Hashable:
    """A cheap hashable description of an argument leaf: shape, dtype and weak type.

    Python scalars are described by their type alone (JAX treats them as weakly typed).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core.engine import leaf_signature
        >>> leaf_signature(jnp.zeros((2, 3)))
        ((2, 3), dtype('float32'), False)
        >>> leaf_signature(1.0)
        <class 'float'>
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

    Unlike ``leaf_signature`` this canonicalises (a Python float is a weak
    float32, a float64 NumPy array is float32 unless x64 is enabled).

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
    """True if every value has the signature recorded at trace time (``state_signature``)."""
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


def input_states_unchanged(entry: TracedCall, values: list[Any]) -> bool:
    """``states_match(values, entry.state_sigs)``, in the common case without computing a signature."""
    return values_unchanged(values, entry.state_sigs, entry.ref_avals)


def values_unchanged(values: list[Any], sigs: Sequence[Any], ref: list[Any] | None) -> bool:
    """``states_match(values, sigs)``, in the common case without computing a signature.

    Arrays produced by one compiled program share their aval objects from call to
    call, so when every value is an array whose aval is the very object in ``ref``
    (the avals at the last successful check), nothing can have changed: one
    C-level identity comparison per state. Otherwise the signatures are compared,
    and on success ``ref`` is updated in place for the next call. ``ref=None``
    always compares signatures.
    """
    if ref is not None:
        avals = list(map(getattr, values, _AVAL, _NONE))
        if all(map(_is, avals, ref)):
            return True
    if not states_match(values, sigs):
        return False
    if ref is not None and not any(map(_is, avals, _NONE)):
        ref[:] = avals
    return True


def reference_avals(values: Sequence[Any]) -> list[Any] | None:
    """The initial ``TracedCall.ref_avals``: the avals of ``values`` if all are plain arrays, else None.

    None turns the identity shortcut of ``input_states_unchanged`` off for good
    (pytree values or typed keys, whose avals are not stable objects).
    """
    if all(type(v) is _ArrayImpl for v in values):
        return [v.aval for v in values]
    return None


def states_changed(entry: TracedCall, values: Sequence[Any]) -> bool:
    """True if ``values`` (one per input state) differ in shape/dtype from the trace."""
    return not states_match(values, entry.state_sigs)


def check_state_avals(entry: TracedCall, state_values: Sequence[Any], expected: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Flatten ``state_values`` after checking them against ``expected`` (``in_state_avals``).

    Raises:
        ValueError: naming the first state whose shapes/dtypes differ.
    """
    leaves: list[Any] = []
    for state, value, avals in zip(entry.in_states, state_values, expected, strict=True):
        value_leaves = jax.tree.leaves(value)
        got = tuple(canonical_signature(x) for x in value_leaves)
        if got != avals:
            raise ValueError(
                f"The value of {state.describe()} has shapes/dtypes {got}, but the program was "
                f"traced with {avals}; call the function again to trace it for the new shapes."
            )
        leaves.extend(value_leaves)
    return leaves


@dataclasses.dataclass(eq=False, slots=True)
class TracedCall:
    """Everything known about one traced call signature of a ``StatefulFunction``.

    Attributes:
        key: the cache key of the signature (``get_arg_cache_key``).
        closed_jaxpr: ``(state leaves..., dynamic arg leaves...) -> (output leaves...,
            written state leaves...)``.
        in_states: states whose values are inputs (read before any write), in read order.
        in_state_avals: per input state, the ``(shape, dtype, weak_type)`` of its leaves.
        out_states: states that were written, in first-access order.
        states: every state accessed, in first-access order.
        read_only_states: states read and never written.
        out_treedef: the structure of the function's return value.
        out_shapes: ``jax.ShapeDtypeStruct`` tree of the return value.
        n_out_leaves: how many leaves the return value has.
        plan: what the engine that traced the call decided (its own dataclass), or None.

    The remaining fields drive ``replay``: ``compiled`` is the program
    ``(written state values, read-only state values, *dynamic leaves) -> (output,
    new values)``; ``rw_index``/``ro_index`` split ``in_states`` into those two
    lists; ``write_back`` receives the new values in order; ``block`` waits for the
    results before writing them; ``on_failure`` runs when the program raises;
    ``prepare`` may move input values before the call. ``ref_avals`` are the
    avals of the input state values at the last successful check
    (``input_states_unchanged``), or None when those are not all plain arrays.
    ``runner`` (``program_runner``) is the closure built from those fields that
    runs the program.
    """

    key: Hashable
    closed_jaxpr: Any
    in_states: list[Any]
    in_state_avals: list[Any]
    out_states: list[Any]
    states: list[Any]
    read_only_states: list[Any]
    out_treedef: Any
    out_shapes: Any
    n_out_leaves: int
    n_in_state_leaves: int
    dyn_treedef: Any
    n_args: int
    cacheable: bool = True
    plan: Any = None
    compiled: Callable[..., Any] | None = None
    state_sigs: list[Any] = dataclasses.field(default_factory=list)
    rw_index: tuple[Any, ...] = ()
    ro_index: tuple[Any, ...] = ()
    write_back: list[Any] | None = None
    block: bool = False
    on_failure: Callable[[list[Any]], None] | None = None
    prepare: Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]] | None = None
    graph: tuple[Any, ...] = ()
    graph_generation: int = -1
    last_used: int = 0
    ref_avals: list[Any] | None = None
    runner: Callable[..., Any] | None = None

    def split_values(self, values: list[Any]) -> tuple[list[Any], list[Any]]:
        """``values`` (one per input state) as ``(written-state values, read-only values)``."""
        if not self.ro_index:
            return values, []
        if not self.rw_index:
            return [], values
        get = values.__getitem__
        return list(map(get, self.rw_index)), list(map(get, self.ro_index))

    def merge_values(self, rw: Sequence[Any], ro: Sequence[Any]) -> list[Any]:
        """Inverse of ``split_values``: one value per input state, in ``in_states`` order."""
        return merger(self)(rw, ro)

    def __repr__(self) -> str:
        return (
            f"TracedCall(in_states={len(self.in_states)}, out_states={len(self.out_states)}, "
            f"n_out_leaves={self.n_out_leaves})"
        )


def merger(entry: TracedCall) -> Callable[[Sequence[Any], Sequence[Any]], list[Any]]:
    """``entry.merge_values`` as a function that does not refer to ``entry``.

    Compiled programs use it: a program that referred to its own entry would form
    a reference cycle, keeping evicted programs alive until a full garbage collection.
    """
    rw_index, ro_index = entry.rw_index, entry.ro_index

    def merge(rw: Sequence[Any], ro: Sequence[Any]) -> list[Any]:
        merged: list[Any] = [None] * (len(rw) + len(ro))
        for i, v in zip(rw_index, rw):  # noqa: B905  # hot path; lengths fixed at trace time
            merged[i] = v
        for i, v in zip(ro_index, ro):  # noqa: B905  # hot path; lengths fixed at trace time
            merged[i] = v
        return merged

    return merge


def unflatten_states(defs: Sequence[Any], flat: Sequence[Any]) -> list[Any]:
    """Split a flat list of leaves into one pytree per treedef."""
    values = []
    i = 0
    for treedef in defs:
        n = treedef.num_leaves
        values.append(jax.tree.unflatten(treedef, flat[i : i + n]))
        i += n
    return values


def read_state_values(states: Sequence[State[Any]]) -> list[Any]:
    """Current values of ``states``, recording the reads on any active trace stack."""
    if CTX.stacks:
        return [s.value for s in states]
    return [s._value for s in states]


def write_state_values(states: Sequence[State[Any]], values: Sequence[Any], who: str) -> None:
    """Write results back into states, all or nothing.

    Once the first value is stored the rest are stored too, even if an
    asynchronous exception (``KeyboardInterrupt``) arrives in between, so an
    interrupted call leaves either every state written or none.
    """
    if not states:
        return
    stacks = CTX.stacks
    if not stacks:
        probe = values[0]
        if type(probe) is not _ArrayImpl and type(probe) is not _PRNGKeyArray:  # neither is a tracer
            _check_not_leaking(states[0], probe, who)
        if len(states) == 1:  # one store is all or nothing by itself
            states[0]._value = probe
            return
        done = False
        try:
            for state, value in zip(states, values):  # noqa: B905  # hot path; lengths fixed at trace time
                state._value = value
            done = True
        finally:
            if not done:  # interrupted half-way: finish, so the write is all or nothing
                for state, value in zip(states, values):  # noqa: B905  # hot path; lengths fixed at trace time
                    state._value = value
        return
    for state, value in zip(states, values):  # noqa: B905  # hot path; lengths fixed at trace time
        for stack in stacks[state._level :]:
            stack._on_write(state)
        state.restore_value(value)


def _check_not_leaking(state: State[Any], probe: Any, who: str) -> None:
    """Raise ``StateLeakError`` if ``probe`` (a first new value) is a tracer of a plain JAX transformation."""
    if not isinstance(probe, jax.Array):
        probe_leaves = jax.tree.leaves(probe)  # a pytree value: look at its first leaf
        probe = probe_leaves[0] if probe_leaves else None
    if type(probe) is not _ArrayImpl and is_tracer(probe):
        raise StateLeakError(
            f"{who} writes {state.describe()} but was called inside a JAX transformation "
            "that is not state-aware (such as jax.jit, jax.vmap or jax.grad), so the new "
            "value would leak out as a tracer. Use state_transform.jit / vmap2 / grad for "
            "the outer transformation, or do not write states in this function."
        )


def replay(entry: TracedCall, values: list[Any], leaves: Sequence[Any], who: str) -> Any:
    """Run the compiled program of ``entry`` once and write the new state values back.

    ``values`` are the current values of ``entry.in_states`` (already checked with
    ``states_match``) and ``leaves`` the dynamic argument leaves. If the program
    raises, no state is written (``entry.on_failure`` may still advance random
    keys) and the error propagates after this single run.
    """
    if entry.prepare is not None:
        values, leaves = entry.prepare(values, list(leaves))
    run = entry.runner
    if run is None:  # an entry built by hand rather than by StatefulFunction
        run = entry.runner = program_runner(entry)
    rw, ro = entry.split_values(values)
    return run(leaves, who, rw, ro)


STATES_CHANGED: Any = type("StatesChanged", (), {"__repr__": lambda self: "<states changed>"})()
"""What a ``program_runner`` closure returns, having run nothing, when an input state changed shape/dtype."""


def program_runner(entry: TracedCall) -> Callable[..., Any]:
    """``run(leaves, who, rw=None, ro=())``: run ``entry``'s compiled program once and write the results back.

    ``rw`` / ``ro`` are the written and read-only input state values
    (``split_values``). With ``rw=None`` (the repeat eager call) the closure reads
    the input states itself, straight into those two lists, and checks them
    (``values_unchanged``); when a state no longer matches the trace it returns
    ``STATES_CHANGED`` without running anything, and the caller resolves the
    program again.

    If the program raises (at dispatch, or while ``jax.block_until_ready`` waits for
    a program that may fail after dispatch) no state is written, ``entry.on_failure``
    sees the input values, and the error propagates after this single run. The
    closure does not refer to ``entry``, so an evicted entry is freed at once.
    """
    # compiled and write_back are set before an entry is cached or replayed.
    compiled = cast(Callable[..., Any], entry.compiled)
    write_back = cast(list[Any], entry.write_back)
    block = entry.block
    on_failure = entry.on_failure
    merge = merger(entry)
    # The input states, their signatures and reference avals in program order:
    # the written states first, then the read-only ones.
    order = [*entry.rw_index, *entry.ro_index]
    states = [entry.in_states[i] for i in order]
    sigs = [entry.state_sigs[i] for i in order]
    ref = entry.ref_avals
    ref_avals = None if ref is None else [ref[i] for i in order]
    n_rw = len(entry.rw_index)

    def run(leaves: Sequence[Any], who: str, rw: list[Any] | None = None, ro: Sequence[Any] = ()) -> Any:
        if rw is None:
            values = list(map(_GET_VALUE, states))
            if not values_unchanged(values, sigs, ref_avals):
                return STATES_CHANGED
            rw, ro = values[:n_rw], values[n_rw:]
        ok = False
        try:
            out, new_values = compiled(rw, ro, *leaves)
            if block and not CTX.stacks:
                # Errors raised while the program runs (a failing callback, a device
                # error) surface here, before any state sees the results.
                jax.block_until_ready((out, new_values))
            ok = True
        finally:
            if not ok and on_failure is not None:
                on_failure(merge(rw, ro))
        write_state_values(write_back, new_values, who)
        return out

    return run


_CALLBACK_PRIMITIVES = frozenset({"debug_callback", "io_callback", "pure_callback", "callback"})


def may_fail_at_run_time(jaxpr: Any) -> bool:
    """True if ``jaxpr`` (or a sub-jaxpr) calls back into Python, which may raise after dispatch."""
    import jax.extend.core as jex_core

    todo = [jaxpr]
    while todo:
        current = todo.pop()
        for eqn in current.eqns:
            if eqn.primitive.name in _CALLBACK_PRIMITIVES:
                return True
            for sub in jex_core.jaxprs_in_params(eqn.params):
                todo.append(getattr(sub, "jaxpr", sub))
    return False
