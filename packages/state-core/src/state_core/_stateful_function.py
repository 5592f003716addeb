"""``StatefulFunction``: the one tracing engine behind every state-aware transformation."""

from __future__ import annotations

import operator
import threading
import types
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import jax
import jax.extend.core as jex_core

from ._cache import DEFAULT_CACHE_SIZE, TraceCache, register_cache_owner
from ._collection import collect_states
from ._context import CTX, GENERATION
from ._introspection import StatefulFunctionIntrospection
from ._jax_internals import ArrayImpl, api_boundary, current_trace, is_tracer, new_trace_input
from ._replay import (
    _GET_VALUE,
    STATES_CHANGED,
    TracedCall,
    canonical_signature,
    input_states_unchanged,
    leaf_signature,
    may_fail_at_run_time,
    merger,
    program_runner,
    read_state_values,
    reference_avals,
    replay,
    state_signature,
    unflatten_states,
)
from ._state import State, check_not_state
from ._trace import StateTraceStack, private_state_values

__all__ = ["StatefulFunction"]

_tree_flatten = jax.tree_util.tree_flatten
_ArrayImpl = ArrayImpl


def _aval_of(x: Any) -> Any:
    aval = jax.typeof(x)
    if is_tracer(x) or type(x) is jax.ShapeDtypeStruct:
        # A value of an enclosing trace (or its abstract stand-in) keeps its whole type: inside shard_map that
        # records the mesh axes it varies over, and a program traced without them
        # lacks the pvary (whose transpose is the psum of gradients) JAX inserts
        # where varying and replicated values meet.
        return aval
    return jax.core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _normalize_argnums(argnums: int | Iterable[int] | None, what: str) -> tuple[int, ...]:
    if argnums is None:
        return ()
    if isinstance(argnums, int):
        return (argnums,)
    try:
        result = tuple(operator.index(a) for a in argnums)
    except TypeError:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {argnums!r}.") from None
    return result


def _normalize_argnames(argnames: str | Iterable[str] | None) -> tuple[str, ...]:
    if argnames is None:
        return ()
    if isinstance(argnames, str):
        return (argnames,)
    return tuple(argnames)


class StatefulFunction(StatefulFunctionIntrospection):
    """Trace a function that reads and writes States into a pure, cached program.

    For every new call signature (the structure, shapes and dtypes of the dynamic
    arguments plus the values of the static ones) the user function runs exactly
    once, under a trace. The states it reads become inputs of the traced jaxpr and
    the states it writes become outputs, so the program is
    ``(state values in, dynamic args) -> (outputs, written state values)``. Calling
    the ``StatefulFunction`` runs that program compiled with ``jax.jit`` and writes
    the new values back into the states. Tracing never changes a state's value.

    Args:
        fun: the function to trace; it may read and write ``State.value``.
        static_argnums: positional arguments treated as compile-time constants
            (must be hashable).
        static_argnames: keyword arguments treated as compile-time constants.
        name: a label for reprs and messages.
        cache_size: how many call signatures to keep compiled (least recently used
            ones are dropped beyond it); default ``DEFAULT_CACHE_SIZE`` (64).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction
        >>> counter = State(jnp.zeros(()), name='counter')
        >>> def step(x):
        ...     counter.value = counter.value + x
        ...     return counter.value * 2
        >>> f = StatefulFunction(step)
        >>> f(1.0), f(2.0)
        (Array(2., dtype=float32), Array(6., dtype=float32))
        >>> counter.value
        Array(3., dtype=float32)
        >>> [s.name for s in f.get_write_states()]
        ['counter']
    """

    def __init__(
        self,
        fun: Callable[..., Any],
        static_argnums: int | Iterable[int] = (),
        static_argnames: str | Iterable[str] = (),
        *,
        name: str | None = None,
        return_only_write: bool = True,
        ir_optimizations: Any = None,
        cache_size: int | None = None,
    ) -> None:
        self._init_compat_options(return_only_write, ir_optimizations)
        if not callable(fun):
            raise TypeError(f"StatefulFunction expects a callable, got {type(fun).__name__}.")
        self.fun = fun
        self.static_argnums = _normalize_argnums(static_argnums, "static_argnums")
        self.static_argnames = _normalize_argnames(static_argnames)
        self._no_statics = not (self.static_argnums or self.static_argnames)
        self.name = name if name else getattr(fun, "__name__", type(fun).__name__)
        self._cache = TraceCache(DEFAULT_CACHE_SIZE if cache_size is None else cache_size)
        self._last: TracedCall | None = None
        # Serialises tracing of this function; cached calls never take it. Re-entrant,
        # because the function may call itself (with other arguments) while traced.
        self._trace_lock = threading.RLock()
        register_cache_owner(self)

    # ------------------------------------------------------------------ signatures
    def _split_args(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], tuple[Any, ...], tuple[Any, ...]]:
        if self.static_argnums:
            n = len(args)
            static_pos = set()
            for i in self.static_argnums:
                j = i + n if i < 0 else i
                if not 0 <= j < n:
                    raise ValueError(
                        f"static_argnums contains {i}, but {self.name} was called with only "
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
                        f"Static argument {i!r} of {self.name} must be hashable, got a "
                        f"{type(value).__name__}; pass it as a tuple or make it a dynamic argument."
                    ) from None
            raise

    def _raise_bad_leaf(self, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any]) -> None:
        named = [(f"positional argument {i}", a) for i, a in enumerate(dyn_args)]
        named += [(f"keyword argument '{k}'", v) for k, v in dyn_kwargs.items()]
        for label, value in named:
            check_not_state(value, f"{label} of {self.name}")
            for path, leaf in jax.tree.leaves_with_path(value):
                try:
                    leaf_signature(leaf)
                except TypeError:
                    raise TypeError(
                        f"{label}{jax.tree_util.keystr(path)} of {self.name} is a "
                        f"{type(leaf).__name__}, which JAX cannot trace. Pass arrays or numbers, "
                        "or mark the argument static with static_argnums / static_argnames."
                    ) from None

    def get_arg_cache_key(self, *args: Any, **kwargs: Any) -> Hashable:
        """The cache key of a call with these arguments (see ``get_jaxpr_by_cache``)."""
        return self._call_key(args, kwargs)[0]

    def _call_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Hashable, Sequence[Any]]:
        """The cache key and dynamic leaves of a call (see ``_argument_key``).

        Under a state-aware trace inside ``shard_map`` the key also names the mesh
        whose axes are manual there: a program traced in that context (say, with a
        ``psum``) is not reused outside it, nor the other way round. Traced
        arguments carry their mesh type in their own signatures.
        """
        key, leaves = self._argument_key(args, kwargs)
        if CTX.stacks:
            mesh = jax.sharding.get_abstract_mesh()
            if mesh.manual_axes:
                key = (key, mesh)
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
                return _positional_key(args), args
        leaves, treedef = _tree_flatten((args, kwargs))
        try:
            sig = tuple(map(leaf_signature, leaves))
        except TypeError:
            self._raise_bad_leaf(args, kwargs)
            raise
        return (len(args), (), (), treedef, sig), leaves

    # ------------------------------------------------------------------ hooks for subclasses
    def _new_trace_context(self) -> Any:
        """A fresh object that the hooks below share during one trace (None by default).

        Engines keep everything they learn while tracing in it, never on ``self``, so
        that traces of one function in several threads do not interfere.
        """
        return None

    def _abstract_inputs(
        self, ctx: Any, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any], leaves: list[Any]
    ) -> list[Any]:
        """The abstract values the user function is traced with (one per dynamic leaf)."""
        return [_aval_of(x) for x in leaves]

    def _state_input_avals(self, ctx: Any, state: State[Any], value: Any) -> Any:
        """The abstract value the traced code sees when it first reads ``state``."""
        return jax.tree.map(_aval_of, value)

    def _axis_env(self, ctx: Any) -> list[tuple[Any, int]] | None:
        """Named axes (``(name, size)`` pairs) bound while tracing; used by mapping engines."""
        return None

    def _after_trace(self, ctx: Any, entry: TracedCall, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any]) -> None:
        """Called once per new signature, after tracing, before compiling (sets ``entry.plan``)."""

    def _compile(self, entry: TracedCall) -> Callable[..., Any]:
        """Build the program ``(written state values, read-only state values, *dyn_leaves)
        -> (output, new values of entry.write_back)``."""
        return jax.jit(self._pure_function(entry))

    def _runs_on_several_devices(self, entry: TracedCall) -> bool:
        """Whether the compiled program of ``entry`` spans several devices (blocks before write-back)."""
        return False

    # ------------------------------------------------------------------ tracing
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

    def _trace(
        self,
        ctx: Any,
        key: Hashable,
        leaves: list[Any],
        treedef: Any,
        static_args: tuple[Any, ...],
        static_kwargs: tuple[Any, ...],
        dyn_args: tuple[Any, ...],
        dyn_kwargs: dict[str, Any],
    ) -> TracedCall:
        """Run the user function once under a JAX trace and record what it did."""
        abstract = self._abstract_inputs(ctx, dyn_args, dyn_kwargs, leaves)
        n_args = len(dyn_args) + len(static_args)
        in_states: list[State[Any]] = []
        in_state_avals: list[Any] = []
        # Everything below is local to this trace (closures), never stored on self.
        jax_trace: list[Any] = []
        recorded: list[Any] = []

        def first_read(state: State[Any]) -> Any:
            value = state._value
            avals = self._state_input_avals(ctx, state, value)
            aval_leaves, aval_def = jax.tree.flatten(avals)
            tracers = [new_trace_input(jax_trace[-1], a) for a in aval_leaves]
            in_states.append(state)
            in_state_avals.append(tuple(canonical_signature(x) for x in jax.tree.leaves(value)))
            return jax.tree.unflatten(aval_def, tracers)

        def traced(*flat: Any) -> Any:
            jax_trace.append(current_trace())
            args, kwargs = self._rebuild_args(flat, treedef, static_args, static_kwargs, n_args)
            stack = StateTraceStack(self.name)
            stack._first_read_hook = first_read
            stack._is_jaxpr_trace = True
            # The tracers swapped into states are visible to this thread only.
            with private_state_values():
                try:
                    with stack:
                        out = self.fun(*args, **kwargs)
                    written = stack.get_write_states()
                    written_values = [s._value for s in written]
                finally:
                    stack.restore_original_values()
            check_not_state(out, f"The return value of {self.name}")
            recorded[:] = [stack, written]
            return out, written_values

        axis_env = self._axis_env(ctx)
        if axis_env:
            closed, shapes = jax.make_jaxpr(traced, return_shape=True, axis_env=axis_env)(*abstract)
        else:
            closed, shapes = jax.make_jaxpr(traced, return_shape=True)(*abstract)
        stack, written = recorded
        jaxpr = closed.jaxpr
        n_dyn = len(abstract)
        # Put state inputs first: (state values, dynamic args) is the documented order.
        debug_info = jaxpr.debug_info
        if debug_info is not None:
            debug_info = debug_info._replace(arg_names=None)  # the inputs were reordered
        jaxpr = jaxpr.replace(invars=list(jaxpr.invars[n_dyn:]) + list(jaxpr.invars[:n_dyn]), debug_info=debug_info)
        closed = jex_core.ClosedJaxpr(jaxpr, closed.consts)
        out_shapes, _ = shapes
        written_ids = {id(s) for s in written}
        return TracedCall(
            key=key,
            closed_jaxpr=closed,
            in_states=in_states,
            in_state_avals=in_state_avals,
            out_states=written,
            states=list(stack.states),
            read_only_states=stack.get_read_states(),
            out_treedef=jax.tree.structure(out_shapes),
            out_shapes=out_shapes,
            n_out_leaves=len(jax.tree.leaves(out_shapes)),
            n_in_state_leaves=sum(len(a) for a in in_state_avals),
            dyn_treedef=treedef,
            n_args=n_args,
            cacheable=not any(is_tracer(c) for c in closed.consts),
            state_sigs=[state_signature(s._value) for s in in_states],
            ref_avals=reference_avals([s._value for s in in_states]),
            rw_index=tuple(k for k, s in enumerate(in_states) if id(s) in written_ids),
            ro_index=tuple(k for k, s in enumerate(in_states) if id(s) not in written_ids),
        )

    def _new_entry(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TracedCall:
        """Trace and compile a new signature (the caller holds the trace lock)."""
        _, leaves, treedef, static_args, static_kwargs, dyn_args, dyn_kwargs = self._signature(args, kwargs)
        key = self._call_key(args, kwargs)[0]
        ctx = self._new_trace_context()
        generation = GENERATION.value
        entry = self._trace(ctx, key, leaves, treedef, static_args, static_kwargs, dyn_args, dyn_kwargs)
        entry.graph, entry.graph_generation = self._graph_snapshot(entry), generation
        self._after_trace(ctx, entry, dyn_args, dyn_kwargs)
        if entry.write_back is None:
            entry.write_back = entry.out_states
        entry.compiled = self._compile(entry)
        entry.block = (
            entry.block or self._runs_on_several_devices(entry) or may_fail_at_run_time(entry.closed_jaxpr.jaxpr)
        )
        entry.runner = program_runner(entry)
        if entry.cacheable:
            self._cache.put(key, entry)
        self._last = entry
        return entry

    # ------------------------------------------------------------------ object graph changes
    def _graph_roots(self) -> list[Any]:
        """Objects whose attributes the function reaches: a bound method's owner, the
        callable object itself, or the cells a closure captured."""
        fun = self.fun
        if isinstance(fun, types.MethodType):
            return [fun.__self__]
        if isinstance(fun, types.FunctionType):
            return [c.cell_contents for c in (fun.__closure__ or ()) if _cell_is_set(c)]
        if hasattr(fun, "__dict__") and not isinstance(fun, type):
            return [fun]
        return []

    def _graph_snapshot(self, entry: TracedCall) -> tuple[Any, ...]:
        """``(path, state)`` for every state the trace used that the object graph holds."""
        roots = self._graph_roots()
        if not roots:
            return ()
        used = {id(s) for s in entry.states}
        return tuple((path, s) for path, s in collect_states(roots).items() if id(s) in used)

    def _graph_unchanged(self, entry: TracedCall) -> bool:
        """True if the object graph still holds, at the same paths, the states the trace used.

        Walks the graph only when a State was created since the last check.
        """
        generation = GENERATION.value
        now = collect_states(self._graph_roots())
        for path, state in entry.graph:
            if now.get(path) is not state:
                return False
        entry.graph_generation = generation
        return True

    # ------------------------------------------------------------------ choosing the program
    def _resolve(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[TracedCall, list[Any], Sequence[Any]]:
        """``(entry, input state values, dynamic leaves)`` for a call, tracing if needed.

        The entry is chosen by the arguments' signature, then checked against the
        current shapes/dtypes of its input states and the object graph; a mismatch
        traces again (never an exception from a failed run).
        """
        key, leaves = self._call_key(args, kwargs)
        entry = self._cache.get(key)
        if entry is not None:
            values = read_state_values(entry.in_states)
            if input_states_unchanged(entry, values) and (
                not entry.graph or entry.graph_generation == GENERATION.value or self._graph_unchanged(entry)
            ):
                return entry, values, leaves
        with self._trace_lock:
            entry = self._cache.get(key)
            if entry is not None:  # another thread may have traced it meanwhile
                values = read_state_values(entry.in_states)
                if input_states_unchanged(entry, values) and (not entry.graph or self._graph_unchanged(entry)):
                    return entry, values, leaves
                self._cache.pop(key)
            entry = self._new_entry(args, kwargs)
        return entry, read_state_values(entry.in_states), leaves

    def _lookup(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[TracedCall, Sequence[Any]]:
        """``(entry, dynamic leaves)`` for a call, tracing if needed; reads no state."""
        entry, _, leaves = self._resolve(args, kwargs)
        return entry, leaves

    # ------------------------------------------------------------------ pure program
    def _pure_function(self, entry: TracedCall) -> Callable[..., Any]:
        """``(rw values, ro values, *dyn_leaves) -> (out, [new state values])`` evaluating the jaxpr."""
        run = jex_core.jaxpr_as_fun(entry.closed_jaxpr)
        n_out = entry.n_out_leaves
        out_treedef = entry.out_treedef
        out_defs = [jax.tree.structure(s._value) for s in entry.out_states]
        merge = merger(entry)

        def pure(rw: list[Any], ro: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any]]:
            state_leaves = jax.tree.leaves(merge(rw, ro))
            flat = run(*state_leaves, *dyn_leaves)
            out = jax.tree.unflatten(out_treedef, flat[:n_out])
            return out, unflatten_states(out_defs, flat[n_out:])

        return pure

    # ------------------------------------------------------------------ calling
    @api_boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The steady case inline (cached signature, unchanged states and object graph,
        # eager): the same checks as _resolve, without its calls. Anything else: _resolve.
        if self._no_statics and not CTX.stacks:
            leaves: Sequence[Any] = args
            # No trace is active here, so _call_key's mesh part does not apply.
            if kwargs:
                key, leaves = self._argument_key(args, kwargs)
            elif len(args) == 1 and type(args[0]) is _ArrayImpl:
                aval = args[0].aval
                key = ((aval.shape, aval.dtype, aval.weak_type),)
            else:
                for a in args:
                    if type(a) is not _ArrayImpl:
                        key, leaves = self._argument_key(args, kwargs)
                        break
                else:
                    key = _positional_key(args)
            cache = self._cache
            entry = cache._entries.get(key)
            if entry is not cache._hit and entry is not None:
                cache.touch(entry)
            if entry is not None and (not entry.graph or entry.graph_generation == GENERATION.value):
                run = entry.runner
                if run is not None and entry.prepare is None:
                    out = run(leaves, self.name)
                    if out is not STATES_CHANGED:
                        return out
                else:
                    values = list(map(_GET_VALUE, entry.in_states))
                    if input_states_unchanged(entry, values):
                        return replay(entry, values, leaves, self.name)
        entry, values, leaves = self._resolve(args, kwargs)
        return replay(entry, values, leaves, self.name)

    def jaxpr_call(self, state_values: Sequence[Any], *args: Any, **kwargs: Any) -> tuple[list[Any], Any]:
        """Evaluate the traced program for these arguments without touching any state.

        Args:
            state_values: one value per input state of this signature, in read order
                (``get_traced_call().in_states``: states read before any write).

        Returns:
            ``(new values of the written states, output)``.
        """
        entry, leaves = self._lookup(args, kwargs)
        state_values = list(state_values)
        if len(state_values) != len(entry.in_states):
            raise ValueError(
                f"jaxpr_call: {self.name} reads {len(entry.in_states)} state(s) for this signature "
                f"but {len(state_values)} value(s) were given (see get_traced_call().in_states)."
            )
        for state, value, expected in zip(entry.in_states, state_values, entry.in_state_avals, strict=True):
            got = tuple((sig[0], sig[1]) for sig in map(canonical_signature, jax.tree.leaves(value)))
            if got != tuple((sig[0], sig[1]) for sig in expected):
                raise ValueError(
                    f"jaxpr_call: the value given for {state.describe()} has shapes/dtypes {got}, "
                    f"but {self.name} was traced with {tuple(expected)}."
                )
        run = jex_core.jaxpr_as_fun(entry.closed_jaxpr)
        state_leaves = [leaf for v in state_values for leaf in jax.tree.leaves(v)]
        flat = run(*state_leaves, *leaves)
        out = jax.tree.unflatten(entry.out_treedef, flat[: entry.n_out_leaves])
        out_defs = [jax.tree.structure(s._value) for s in entry.out_states]
        return unflatten_states(out_defs, flat[entry.n_out_leaves :]), out

    def trace(self, *args: Any, **kwargs: Any) -> TracedCall:
        """The ``TracedCall`` for a call with these arguments, tracing once if the signature is new.

        This is the entry point for engines built on ``StatefulFunction`` (loops,
        conditionals, custom mappings): the record gives the closed jaxpr
        ``(input state leaves..., dynamic arg leaves...) -> (output leaves...,
        written state leaves...)`` and the states it reads (``in_states``) and
        writes (``out_states``). No state is read or written by this call. A
        cached signature whose states changed shape or dtype is traced again.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State, StatefulFunction
            >>> s = State(jnp.zeros(2), name='s')
            >>> def inc(x):
            ...     s.value = s.value + x
            >>> call = StatefulFunction(inc).trace(1.0)
            >>> [st.name for st in call.in_states], [st.name for st in call.out_states]
            (['s'], ['s'])
        """
        return self._lookup(args, kwargs)[0]

    def make_jaxpr(self, *args: Any, **kwargs: Any) -> Any:
        """Trace (if needed) for these arguments and return the closed jaxpr."""
        return self._lookup(args, kwargs)[0].closed_jaxpr

    # ------------------------------------------------------------------ introspection
    def _entry(self, key: Hashable | None) -> TracedCall:
        if key is None:
            if self._last is None:
                raise ValueError(
                    f"{self.name} has not been traced yet: call it (or make_jaxpr) with example arguments first."
                )
            return self._last
        entry = self._cache.get(key)
        if entry is None:
            raise ValueError(
                f"{self.name} has no traced program for this cache key; call it with those "
                "arguments first (keys come from get_arg_cache_key)."
            )
        return entry

    def get_jaxpr_by_cache(self, key: Hashable) -> Any:
        """The closed jaxpr traced for ``key`` (from ``get_arg_cache_key``)."""
        return self._entry(key).closed_jaxpr

    def get_traced_call(self, key: Hashable | None = None) -> TracedCall:
        """The ``TracedCall`` record for ``key`` (default: the latest trace)."""
        return self._entry(key)

    def get_states(self, *args: Any, **kwargs: Any) -> list[State[Any]]:
        """Every state the function accessed for a call with these arguments, in first-access order.

        Without arguments, the latest trace is described; ``compile_if_miss=False``
        raises instead of tracing a new signature. ``get_states_by_cache(key)`` takes
        a key from ``get_arg_cache_key``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State, StatefulFunction
            >>> a, b = State(jnp.zeros(2), name='a'), State(jnp.ones(2), name='b')
            >>> def step(x):
            ...     b.value = a.value + x
            >>> f = StatefulFunction(step)
            >>> [s.name for s in f.get_states(jnp.ones(2))]
            ['a', 'b']
            >>> [s.name for s in f.get_read_states(jnp.ones(2))], [s.name for s in f.get_write_states()]
            (['a'], ['b'])
        """
        return list(self._traced_for(args, kwargs).states)

    def get_read_states(self, *args: Any, **kwargs: Any) -> list[State[Any]]:
        """States the function read but never wrote (arguments as for ``get_states``)."""
        return list(self._traced_for(args, kwargs).read_only_states)

    def get_write_states(self, *args: Any, **kwargs: Any) -> list[State[Any]]:
        """States the function wrote (arguments as for ``get_states``)."""
        return list(self._traced_for(args, kwargs).out_states)

    def get_out_shapes(self, *args: Any, **kwargs: Any) -> Any:
        """``jax.ShapeDtypeStruct`` tree of the function's output (arguments as for ``get_states``)."""
        return self._traced_for(args, kwargs).out_shapes

    def clear_cache(self) -> None:
        """Forget every traced signature (the next call traces again)."""
        with self._trace_lock:
            self._cache.clear()
            self._last = None

    def __repr__(self) -> str:
        return f"StatefulFunction({self.name}, {len(self._cache)} cached signature(s))"


def _positional_key(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The cache key of a call whose arguments are all concrete arrays: their avals' triples."""
    if len(args) == 1:
        aval = args[0].aval
        return ((aval.shape, aval.dtype, aval.weak_type),)
    return tuple([(aval.shape, aval.dtype, aval.weak_type) for aval in map(_GET_AVAL, args)])


_GET_AVAL = operator.attrgetter("aval")


def _cell_is_set(cell: Any) -> bool:
    try:
        _ = cell.cell_contents  # reading it is the test
    except ValueError:  # a closure variable that is not bound yet
        return False
    return True
