"""``StatefulFunction``: the one tracing engine behind every state-aware transformation."""

from __future__ import annotations

import operator
from typing import Any, Callable, Hashable, Iterable, Sequence

import jax
import jax.extend.core as jex_core
import numpy as np

from ._context import CTX
from ._jax_internals import ArrayImpl, current_trace, is_tracer, new_trace_input
from ._state import State, StateLeakError, check_not_state
from ._introspection import StatefulFunctionIntrospection
from ._trace import StateTraceStack, private_state_values

__all__ = [
    "StatefulFunction",
    "TracedCall",
    "StaleTraceError",
    "leaf_signature",
    "canonical_signature",
    "check_state_avals",
    "states_changed",
    "unflatten_states",
    "read_state_values",
    "write_state_values",
]

_ArrayImpl = ArrayImpl
_tree_flatten = jax.tree_util.tree_flatten
# Leaves whose aval JAX derives from the type alone (numbers) or carries itself (arrays).
_FAST_LEAF_TYPES = frozenset({ArrayImpl, float, int, bool})
_PY_SCALARS = (int, float, complex, bool)


class StaleTraceError(Exception):
    """Raised while JAX re-traces a compiled program whose states changed shape or dtype.

    Engines catch it, forget the cached trace and trace the user function again.
    """


def leaf_signature(x: Any) -> Hashable:
    """A cheap hashable description of an argument leaf: shape, dtype and weak type.

    Python scalars are described by their type alone (JAX treats them as weakly typed).
    """
    if type(x) is _ArrayImpl:
        return (x.shape, x.dtype, x.weak_type)
    t = type(x)
    if t in _PY_SCALARS:
        return t
    if isinstance(x, (np.ndarray, np.generic)):
        return (x.shape, x.dtype, False)
    aval = jax.typeof(x)  # tracers and other jax values; raises TypeError for the rest
    return (aval.shape, aval.dtype, aval.weak_type)


def canonical_signature(x: Any) -> tuple:
    """``(shape, dtype, weak_type)`` of the value JAX would trace for ``x``.

    Unlike ``leaf_signature`` this canonicalises (a Python float is a weak
    float32, a float64 NumPy array is float32 unless x64 is enabled).
    """
    aval = jax.typeof(x)
    return (aval.shape, aval.dtype, aval.weak_type)


def _aval_of(x: Any) -> Any:
    aval = jax.typeof(x)
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


class TracedCall:
    """Everything known about one traced call signature of a ``StatefulFunction``.

    Attributes:
        closed_jaxpr: ``(state leaves..., dynamic arg leaves...) -> (output leaves...,
            written state leaves...)``.
        in_states: states whose values are inputs (read before any write), in read order.
        out_states: states that were written, in first-access order.
        states: every state accessed, in first-access order.
        out_treedef: the structure of the function's return value.
        out_shapes: ``jax.ShapeDtypeStruct`` tree of the return value.
    """

    __slots__ = (
        "key",
        "closed_jaxpr",
        "in_states",
        "in_state_avals",
        "out_states",
        "states",
        "read_only_states",
        "out_treedef",
        "out_shapes",
        "n_out_leaves",
        "n_in_state_leaves",
        "dyn_treedef",
        "cacheable",
        "compiled",
        "extra",
    )

    def __init__(self, **kwargs: Any) -> None:
        self.compiled: Callable[..., Any] | None = None
        self.extra: dict[str, Any] = {}
        for name, value in kwargs.items():
            setattr(self, name, value)


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
    ) -> None:
        self._init_compat_options(return_only_write, ir_optimizations)
        if not callable(fun):
            raise TypeError(f"StatefulFunction expects a callable, got {type(fun).__name__}.")
        self.fun = fun
        self.static_argnums = _normalize_argnums(static_argnums, "static_argnums")
        self.static_argnames = _normalize_argnames(static_argnames)
        self.name = name or getattr(fun, "__name__", type(fun).__name__)
        self._cache: dict[Hashable, TracedCall] = {}
        self._last: TracedCall | None = None

    # ------------------------------------------------------------------ signatures
    def _split_args(
        self, args: tuple, kwargs: dict
    ) -> tuple[tuple, dict, tuple, tuple]:
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

    def _signature(self, args: tuple, kwargs: dict) -> tuple[Hashable, list, Any, tuple, tuple, tuple, dict]:
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

    def _check_static_hashable(self, key: tuple, static_args: tuple, static_kwargs: tuple) -> None:
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

    def _raise_bad_leaf(self, dyn_args: tuple, dyn_kwargs: dict) -> None:
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
        return self._signature(args, kwargs)[0]

    # ------------------------------------------------------------------ hooks for subclasses
    def _abstract_inputs(self, dyn_args: tuple, dyn_kwargs: dict, leaves: list) -> list:
        """The abstract values the user function is traced with (one per dynamic leaf)."""
        return [_aval_of(x) for x in leaves]

    def _state_input_avals(self, state: State, value: Any) -> Any:
        """The abstract value the traced code sees when it first reads ``state``."""
        return jax.tree.map(_aval_of, value)

    def _axis_env(self) -> list[tuple[Any, int]] | None:
        """Named axes (``(name, size)`` pairs) bound while tracing; used by mapping engines."""
        return None

    def _after_trace(self, entry: TracedCall, dyn_args: tuple, dyn_kwargs: dict) -> None:
        """Called once per new signature, after tracing, before compiling."""

    def _compile(self, entry: TracedCall) -> Callable[..., Any]:
        """Build the callable ``(state_values, *dyn_leaves) -> (out, new_state_values)``."""
        return jax.jit(self._pure_function(entry))

    # ------------------------------------------------------------------ tracing
    def _rebuild_args(
        self, leaves: Sequence[Any], treedef: Any, static_args: tuple, static_kwargs: tuple, n_args: int
    ) -> tuple[tuple, dict]:
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
        key: Hashable,
        leaves: list,
        treedef: Any,
        static_args: tuple,
        static_kwargs: tuple,
        dyn_args: tuple,
        dyn_kwargs: dict,
    ) -> TracedCall:
        abstract = self._abstract_inputs(dyn_args, dyn_kwargs, leaves)
        n_args = key[0]
        in_states: list[State] = []
        in_state_avals: list[Any] = []
        box: dict[str, Any] = {}

        def first_read(state: State) -> Any:
            value = state._value
            avals = self._state_input_avals(state, value)
            aval_leaves, aval_def = jax.tree.flatten(avals)
            tracers = [new_trace_input(box["trace"], a) for a in aval_leaves]
            in_states.append(state)
            in_state_avals.append(tuple(canonical_signature(x) for x in jax.tree.leaves(value)))
            return jax.tree.unflatten(aval_def, tracers)

        def traced(*flat: Any) -> Any:
            box["trace"] = current_trace()
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
            box["stack"] = stack
            box["written"] = written
            return out, written_values

        axis_env = self._axis_env()
        if axis_env:
            closed, shapes = jax.make_jaxpr(traced, return_shape=True, axis_env=axis_env)(*abstract)
        else:
            closed, shapes = jax.make_jaxpr(traced, return_shape=True)(*abstract)
        stack: StateTraceStack = box["stack"]
        jaxpr = closed.jaxpr
        n_dyn = len(abstract)
        # Put state inputs first: (state values, dynamic args) is the documented order.
        debug_info = jaxpr.debug_info
        if debug_info is not None:
            debug_info = debug_info._replace(arg_names=None)  # the inputs were reordered
        jaxpr = jaxpr.replace(
            invars=list(jaxpr.invars[n_dyn:]) + list(jaxpr.invars[:n_dyn]), debug_info=debug_info
        )
        closed = jex_core.ClosedJaxpr(jaxpr, closed.consts)
        out_shapes, _ = shapes
        written: list[State] = box["written"]
        entry = TracedCall(
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
            cacheable=not any(is_tracer(c) for c in closed.consts),
        )
        return entry

    def _lookup(self, args: tuple, kwargs: dict) -> tuple[TracedCall, list]:
        key, leaves, treedef, static_args, static_kwargs, dyn_args, dyn_kwargs = self._signature(args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._trace(key, leaves, treedef, static_args, static_kwargs, dyn_args, dyn_kwargs)
            self._after_trace(entry, dyn_args, dyn_kwargs)
            entry.compiled = self._compile(entry)
            if entry.cacheable:
                self._cache[key] = entry
            self._last = entry
        return entry, leaves

    # ------------------------------------------------------------------ pure program
    def _pure_function(self, entry: TracedCall) -> Callable[..., Any]:
        """``(state_values, dyn_leaves) -> (out, [new state values])`` evaluating the jaxpr."""
        run = jex_core.jaxpr_as_fun(entry.closed_jaxpr)
        n_out = entry.n_out_leaves
        out_treedef = entry.out_treedef
        out_defs = [jax.tree.structure(s._value) for s in entry.out_states]
        expected = entry.in_state_avals
        arg_avals = [
            (v.aval.shape, v.aval.dtype, v.aval.weak_type)
            for v in entry.closed_jaxpr.jaxpr.invars[entry.n_in_state_leaves :]
        ]
        # The argument check below lets a call reuse this entry without its cache key.
        entry.extra["validates_args"] = True

        def pure(state_values: list, *dyn_leaves: Any) -> tuple[Any, list]:
            state_leaves = check_state_avals(entry, state_values, expected)
            if [canonical_signature(x) for x in dyn_leaves] != arg_avals:
                raise StaleTraceError()
            flat = run(*state_leaves, *dyn_leaves)
            out = jax.tree.unflatten(out_treedef, flat[:n_out])
            return out, unflatten_states(out_defs, flat[n_out:])

        return pure

    # ------------------------------------------------------------------ calling
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hit, out = self._call_last_program(args, kwargs)
        if hit:
            return out
        entry, leaves = self._lookup(args, kwargs)
        try:
            out, new_values = self._run(entry, read_state_values(entry.in_states), leaves)
        except StaleTraceError:
            entry, leaves = self._retrace(entry, args, kwargs)
            out, new_values = self._run(entry, read_state_values(entry.in_states), leaves)
        write_state_values(self._states_to_write(entry), new_values, self.name)
        self._remember(entry)
        return out

    # The last program used, tried first: when the arguments have the same structure
    # and plain array/number leaves, JAX's dispatch compares their avals and the
    # program's trace-time checks reject a mismatch, so no cache key is needed.
    _last_program: TracedCall | None = None

    def _call_last_program(self, args: tuple, kwargs: dict) -> tuple[bool, Any]:
        """``(True, output)`` if the last program accepted these arguments, else ``(False, None)``."""
        entry = self._last_program
        if entry is None:
            return False, None
        if not kwargs and len(args) == entry.extra["flat_args"]:
            leaves = args  # positional leaves only: the structure is known without flattening
        else:
            leaves, treedef = _tree_flatten((args, kwargs))
            if treedef != entry.dyn_treedef:
                return False, None
        if not _FAST_LEAF_TYPES.issuperset(map(type, leaves)):
            return False, None
        values = read_state_values(entry.in_states)
        try:
            out, new_values = self._run(entry, values, leaves)
        except Exception:
            return False, None  # stale, or JAX rejected the arguments: the keyed path decides
        write_state_values(self._states_to_write(entry), new_values, self.name)
        return True, out

    def _remember(self, entry: TracedCall) -> None:
        if entry.extra.get("validates_args") and not (self.static_argnums or self.static_argnames):
            n = entry.dyn_treedef.num_leaves
            flat = entry.dyn_treedef == _tree_flatten((tuple(range(n)), {}))[1]
            entry.extra["flat_args"] = n if flat else -1  # n positional leaves, no pytrees
            self._last_program = entry

    def _run(self, entry: TracedCall, values: list, leaves: list) -> tuple[Any, list]:
        """Call the compiled program of ``entry``."""
        return entry.compiled(values, *leaves)

    def _states_to_write(self, entry: TracedCall) -> list[State]:
        """The states that receive the program's new state values, in order."""
        return entry.extra.get("write_back", entry.out_states)

    def _retrace(self, entry: TracedCall, args: tuple, kwargs: dict) -> tuple[TracedCall, list]:
        """Forget a trace whose states changed shape/dtype and trace again."""
        self._cache.pop(entry.key, None)
        return self._lookup(args, kwargs)

    def jaxpr_call(self, state_values: Sequence[Any], *args: Any, **kwargs: Any) -> tuple[list, Any]:
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
        for state, value, expected in zip(entry.in_states, state_values, entry.in_state_avals):
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
        writes (``out_states``). No state is read or written by this call.

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
                    f"{self.name} has not been traced yet: call it (or make_jaxpr) with example "
                    "arguments first."
                )
            return self._last
        try:
            return self._cache[key]
        except KeyError:
            raise ValueError(
                f"{self.name} has no traced program for this cache key; call it with those "
                "arguments first (keys come from get_arg_cache_key)."
            ) from None

    def get_jaxpr_by_cache(self, key: Hashable) -> Any:
        """The closed jaxpr traced for ``key`` (from ``get_arg_cache_key``)."""
        return self._entry(key).closed_jaxpr

    def get_traced_call(self, key: Hashable | None = None) -> TracedCall:
        """The ``TracedCall`` record for ``key`` (default: the latest trace)."""
        return self._entry(key)

    def get_states(self, key: Hashable | None = None) -> list[State]:
        """Every state the function accessed, in first-access order."""
        return list(self._entry(key).states)

    def get_read_states(self, key: Hashable | None = None) -> list[State]:
        """States the function read but never wrote."""
        return list(self._entry(key).read_only_states)

    def get_write_states(self, key: Hashable | None = None) -> list[State]:
        """States the function wrote."""
        return list(self._entry(key).out_states)

    def get_out_shapes(self, key: Hashable | None = None) -> Any:
        """``jax.ShapeDtypeStruct`` tree of the function's output."""
        return self._entry(key).out_shapes

    def clear_cache(self) -> None:
        """Forget every traced signature."""
        self._cache.clear()
        self._last = None
        self._last_program = None

    def __repr__(self) -> str:
        return f"StatefulFunction({self.name}, {len(self._cache)} cached signature(s))"


# ---------------------------------------------------------------------- shared helpers
def check_state_avals(entry: TracedCall, state_values: Sequence[Any], expected: Sequence[tuple]) -> list:
    """Flatten ``state_values``; raise ``_StaleTrace`` if they differ from the traced avals.

    Runs only while JAX traces the compiled program, i.e. when JAX itself saw new
    avals, so the check costs nothing on a cache hit.
    """
    leaves: list[Any] = []
    for value, avals in zip(state_values, expected):
        value_leaves = jax.tree.leaves(value)
        if tuple(canonical_signature(x) for x in value_leaves) != avals:
            raise StaleTraceError()
        leaves.extend(value_leaves)
    return leaves


def states_changed(entry: TracedCall, values: Sequence[Any]) -> bool:
    """True if ``values`` (one per input state) differ in shape/dtype from the trace."""
    for value, expected in zip(values, entry.in_state_avals):
        if tuple(canonical_signature(x) for x in jax.tree.leaves(value)) != expected:
            return True
    return False


def unflatten_states(defs: Sequence[Any], flat: Sequence[Any]) -> list:
    """Split a flat list of leaves into one pytree per treedef."""
    values = []
    i = 0
    for treedef in defs:
        n = treedef.num_leaves
        values.append(jax.tree.unflatten(treedef, flat[i : i + n]))
        i += n
    return values


def read_state_values(states: Sequence[State]) -> list:
    """Current values of ``states``, recording the reads on any active trace stack."""
    if CTX.stacks:
        return [s.value for s in states]
    return [s._value for s in states]


def write_state_values(states: Sequence[State], values: Sequence[Any], who: str) -> None:
    """Write results back into states, recording the writes on any active trace stack."""
    if not states:
        return
    stacks = CTX.stacks
    if not stacks:
        probe = values[0]
        if type(probe) is not _ArrayImpl and not is_tracer(probe) and not isinstance(probe, jax.Array):
            probe_leaves = jax.tree.leaves(probe)  # a pytree value: look at its first leaf
            probe = probe_leaves[0] if probe_leaves else None
        if type(probe) is not _ArrayImpl and is_tracer(probe):
            raise StateLeakError(
                f"{who} writes {states[0].describe()} but was called inside a JAX transformation "
                "that is not state-aware (such as jax.jit, jax.vmap or jax.grad), so the new "
                "value would leak out as a tracer. Use state_transform.jit / vmap2 / grad for "
                "the outer transformation, or do not write states in this function."
            )
        for state, value in zip(states, values):
            state._value = value
        return
    for state, value in zip(states, values):
        for stack in stacks[state._level :]:
            stack._on_write(state)
        state.restore_value(value)
