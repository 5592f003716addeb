"""``StatefulFunction``: the one pipeline every state-aware transformation runs on.

    call -> signature (arguments, statics, trace context)
         -> cache (one ``TraceCache`` per function, shared by equal transform objects)
         -> miss: trace once (``trace_function``) -> ``Trace``
                  -> the strategy: ``analyze`` -> info, ``compile`` -> ``Program``
         -> replay (``program_runner``): check signature and object graph, read states,
            run once, wait when it may fail, write back all or nothing

A transformation is this pipeline with its own ``Strategy``, a frozen value that
says how its function is traced, what it learns from the trace and how the
program is built; the strategy never reads, checks or writes states itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

import jax

from ._cache import _NO_AVAL, FunctionRecord, register_cache_owner
from ._call_contexts import call_contexts_unchanged, recording_call_contexts
from ._call_signature import CallSignature, positions_of_names
from ._context import CTX, GENERATION, OPEN_STACKS
from ._donation import donation_gate
from ._graph import graph_roots, graph_states, snapshot_graph
from ._identity import Unshareable
from ._introspection import StatefulFunctionIntrospection
from ._jax_internals import ArrayImpl, api_boundary, open_jaxpr
from ._program import CacheEntry, Trace, jaxpr_evaluator
from ._pure_program import _shapes_kept, _written_nbytes
from ._registry import keep_alive_with, shared_record
from ._replay import (
    STATES_CHANGED,
    may_fail_at_run_time,
    program_runner,
    replay,
    runs_cheaply_op_by_op,
    spans_devices,
)
from ._signature import canonical_signature, positional_key, states_match, trace_context
from ._state import State
from ._state_io import read_state_values
from ._steady_call import DIRECT_MISS
from ._strategy import Strategy, TraceContext
from ._tracing import trace_function

__all__ = ["StatefulFunction"]

_PLAIN: Strategy[TraceContext] = Strategy()

_ArrayImpl = ArrayImpl


# The record of an object that has not looked for its shared record yet. Nothing is
# ever stored in it: every path that traces adopts a record first (``_adopt_shared_record``).
_NOT_LOOKED_UP = FunctionRecord()


class StatefulFunction(CallSignature, StatefulFunctionIntrospection):
    """Trace a function that reads and writes States into a pure, cached program.

    For every new call signature (the structure, shapes and dtypes of the dynamic
    arguments plus the values of the static ones) the user function runs exactly
    once, under a trace. The states it reads become inputs of the traced jaxpr and
    the states it writes become outputs, so the program is
    ``(state values in, dynamic args) -> (outputs, written state values)``. Calling
    the ``StatefulFunction`` runs that program compiled with ``jax.jit`` and writes
    the new values back into the states. Tracing never changes a state's value;
    States created during the call come out holding concrete values.

    Programs are kept per *function*, not per object: another ``StatefulFunction``
    (or state-aware transformation) of the same function with the same options
    finds them again, so a transformation built afresh in every step of a loop does
    not trace or compile again.

    Args:
        fun: the function to trace; it may read and write ``State.value``.
        static_argnums: positional arguments treated as compile-time constants
            (must be hashable).
        static_argnames: keyword arguments treated as compile-time constants.
        name: a label for reprs and messages.
        cache_size: how many call signatures to keep compiled (least recently used
            ones are dropped beyond it); default ``DEFAULT_CACHE_SIZE`` (64). A function
            with its own cache size keeps its programs to itself.
        donate_states: update written States in place (default True). At each
            call, the old value of a state the function writes is donated to the
            program (its buffer is reused for the new value) only when nothing but
            the State refers to it: no variable or container of yours, no other
            State, no argument or read-only state of the same call, no value an
            earlier call returned and, for a typed PRNG key, not its key data
            (``jax.random.key_data``). Otherwise the call allocates a new buffer and
            the old value stays readable. Nothing is donated inside another
            transformation, while ``jax_debug_nans`` / ``jax_debug_infs`` is on, for
            a program that calls back into Python, when the new value has another
            shape, dtype or layout, or when the written values are below
            ``state_core.engine.set_donation_min_bytes``. Not seen by the check: a
            second array object JAX made to share the buffer
            (``jax.device_put(state.value, device)`` onto the device it already lies
            on, ``state.value.addressable_data(i)``); it is deleted with the old
            value, so copy it (``jnp.copy``) or pass ``False``. ``False`` never
            donates (``state_core.donation(False)`` / ``set_donation(False)`` do so
            for a block or the process).
        strategy: how the function is traced and compiled
            (``state_core.engine.Strategy``; default: traced at the arguments' own
            shapes and compiled with ``jax.jit``). A strategy carries
            ``static_argnums``, ``static_argnames`` and ``donate_states`` itself, so
            those three are not given beside it.

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
        cache_size: int | None = None,
        donate_states: bool = True,
        strategy: Strategy[Any] | None = None,
    ) -> None:
        if not callable(fun):
            raise TypeError(f"StatefulFunction expects a callable, got {type(fun).__name__}.")
        if strategy is None:
            plain = static_argnums == () and static_argnames == () and donate_states is True
            # (a strategy is frozen: every plain function shares one, built once; a
            # strategy normalises the statics from any form it accepts, hence the casts)
            strategy = (
                _PLAIN
                if plain
                else Strategy(
                    static_argnums=cast(Any, static_argnums),
                    static_argnames=cast(Any, static_argnames),
                    donate_states=donate_states,
                )
            )
        elif static_argnums != () or static_argnames != () or donate_states is not True:
            raise TypeError(
                "StatefulFunction: give static_argnums, static_argnames and donate_states to the "
                "strategy (its fields), not beside strategy=."
            )
        elif not isinstance(strategy, Strategy):
            raise TypeError(
                f"StatefulFunction: strategy must be a state_core.engine.Strategy, got {type(strategy).__name__}."
            )
        self.fun = fun
        self.strategy = strategy
        # A static parameter is static however it is passed, as in jax.jit.
        self._static_name_positions = positions_of_names(fun, strategy.static_argnames)
        self._no_statics = not (strategy.static_argnums or strategy.static_argnames)
        self.name = name if name else getattr(fun, "__name__", type(fun).__name__)  # (sets _who)
        # A function with its own cache size does not share; others look for their
        # shared record at the first call that finds no program, and until then hold
        # one that stays empty: most are equal to a transformation built before (a
        # transform built inline for every call), so a record of their own would be
        # made and dropped for nothing.
        self._shared = cache_size is not None
        self._record = FunctionRecord(cache_size) if cache_size is not None else _NOT_LOOKED_UP
        self._cache = self._record.cache
        self._trace_lock = self._record.trace_lock
        self._last: CacheEntry[Any] | None = None
        self._called = False  # its first call may run a new program op by op

    @property
    def name(self) -> str:
        """How reprs and messages name the function (default: its ``__name__``).

        Messages name a call by the strategy's ``call_name``: ``jit(step)``.
        """
        return self._name

    @name.setter
    def name(self, name: str) -> None:
        self._name = name
        self._who = self.strategy.call_name(name)

    @property
    def static_argnums(self) -> tuple[int, ...]:  # type: ignore[override]
        """The positions of the compile-time constant arguments (the strategy's)."""
        return self.strategy.static_argnums

    @property
    def static_argnames(self) -> tuple[str, ...]:  # type: ignore[override]
        """The names of the compile-time constant keyword arguments (the strategy's)."""
        return self.strategy.static_argnames

    @property
    def donate_states(self) -> bool:
        """Whether written States are updated in place when nothing else holds them (the strategy's)."""
        return self.strategy.donate_states

    @property
    def learned(self) -> Mapping[Any, Any]:
        """What this function's traces (by any equal transformation) decided and kept, read-only.

        The pipeline hands it to every new ``TraceContext``; a strategy that runs
        the function outside the pipeline (an eager one-shot run) passes it on too,
        so it decides as a trace would.

        Example:
            >>> from state_core import StatefulFunction
            >>> dict(StatefulFunction(abs).learned)
            {}
        """
        return MappingProxyType(self._record.learned)

    # ------------------------------------------------------------------ identity
    def __engine_identity__(self) -> Hashable | None:
        """What this object computes: its strategy and its function (None: unshareable)."""
        fun_identity = self.strategy.function_identity(self.fun)
        if fun_identity is None:
            return None
        try:
            strategy = self.strategy.identity()
        except Unshareable:  # an option ``frozen`` cannot key: the programs stay this object's
            return None
        if strategy is None:
            return None
        return (type(self.strategy), strategy, fun_identity)

    def __graph_roots__(self) -> list[Any]:
        """The objects whose States the function reaches (see ``state_core.engine.graph_roots``)."""
        return graph_roots(self.fun)

    def _adopt_shared_record(self) -> None:
        """Use the programs of every equal transformation from now on (once, at the first miss)."""
        identity = self.__engine_identity__()
        record = FunctionRecord() if identity is None else shared_record(identity)
        self._record, self._cache, self._trace_lock = record, record.cache, record.trace_lock
        # Last: a thread that sees it set must find the record above, never _NOT_LOOKED_UP.
        self._shared = True

    # ------------------------------------------------------------------ tracing
    def _trace_once(
        self,
        ctx: TraceContext,
        key: Hashable,
        leaves: list[Any],
        treedef: Any,
        static_args: tuple[Any, ...],
        static_kwargs: tuple[Any, ...],
        dyn_args: tuple[Any, ...],
        dyn_kwargs: dict[str, Any],
    ) -> Trace:
        """Run the user function once under a JAX trace, as the strategy says."""
        strategy = self.strategy
        abstract = strategy.abstract_inputs(ctx, dyn_args, dyn_kwargs, leaves)
        n_args = len(dyn_args) + len(static_args)

        def rebuild(flat: Sequence[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
            return self._rebuild_args(flat, treedef, static_args, static_kwargs, n_args)

        def state_avals(state: State[Any], value: Any) -> Any:
            return strategy.state_input_avals(ctx, state, value)

        return trace_function(
            self.fun,
            self.name,
            key,
            abstract,
            rebuild,
            treedef,
            n_args,
            state_input_avals=state_avals,
            axis_env=strategy.axis_env(ctx),
            context=trace_context(),
        )

    def _new_entry(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], key: Hashable, compile_program: bool
    ) -> CacheEntry[Any]:
        """Trace a new signature, and compile it if ``compile_program`` (the caller holds the trace lock).

        An entry traced without its program (``trace``, ``make_jaxpr``, a loop body)
        gets it at the first call that runs it (``_with_program``).
        """
        _, leaves, treedef, static_args, static_kwargs, dyn_args, dyn_kwargs = self._signature(args, kwargs)
        roots = self.__graph_roots__()
        generation = GENERATION.value
        before = graph_states(*roots) if roots else None
        strategy = self.strategy
        ctx = strategy.new_trace_context(self.fun, self.name, self._record.learned)

        def trace_once() -> Trace:
            return self._trace_once(ctx, key, leaves, treedef, static_args, static_kwargs, dyn_args, dyn_kwargs)

        # Settings read while tracing (environ's dt ...) are constants of the program.
        with recording_call_contexts() as env_reads:
            trace = strategy.trace(ctx, trace_once)
        info = strategy.analyze(ctx, trace, dyn_args, dyn_kwargs)
        if ctx.learn:  # kept only once the trace and its analysis succeeded
            self._record.learned.update(ctx.learn)
        graph = snapshot_graph(before, trace.states) if before is not None else None
        entry: CacheEntry[Any] = CacheEntry(trace, info, None, graph, generation)
        entry.env_reads = env_reads or None
        entry.runner = _not_compiled
        if compile_program:
            self._add_program(entry, leaves)
        if trace.cacheable:
            self._cache.put(key, entry)
            # States the call creates are new at every call: they cannot keep programs for the next.
            created = {id(s) for s in trace.created_states}
            keep_alive_with(self._record, [s for s in trace.states if id(s) not in created])
        self._last = entry
        return entry

    def _add_program(self, entry: CacheEntry[Any], leaves: Sequence[Any]) -> None:
        """Compile ``entry``'s trace (the strategy's ``compile``), settle what the pipeline decides, set its runner."""
        trace, info = entry.trace, entry.info
        program = self.strategy.compile(trace, info, self.name)
        jaxpr = open_jaxpr(trace.closed_jaxpr)
        may_fail = may_fail_at_run_time(jaxpr)  # (one walk of the jaxpr for both uses below)
        several_devices = self.strategy.spans_devices(trace, info)
        settled: dict[str, Any] = {}
        if not program.block and (several_devices or may_fail):
            settled["block"] = True
        if program.eager is not None and not runs_cheaply_op_by_op(jaxpr):
            settled["eager"] = None  # it would compile twice
        if program.donating is not None:
            # Only a program on one device may donate from its first call (see program_runner).
            one_device = not several_devices and not spans_devices(jaxpr)
            if (
                CTX.stacks
                or _written_nbytes(trace) < donation_gate(settled.get("eager", program.eager) is not None)
                or may_fail
                or not _shapes_kept(trace, program, leaves, one_device)
            ):
                # Nested programs run on tracers; written states below the gate keep their
                # buffers (for a program whose first call may run op by op, the shape check
                # below would trace a compiled form that call never uses); a program that may
                # fail after dispatch must not have consumed the old values; a written value of
                # another shape or dtype cannot take the old buffer (XLA would warn).
                settled["donating"] = None
            elif one_device:
                settled["keeps_layout_on_one_device"] = True
        entry.program = dataclasses.replace(program, **settled) if settled else program
        entry.runner = program_runner(entry)

    # ------------------------------------------------------------------ choosing the program
    def _usable(self, entry: CacheEntry[Any], values: list[Any]) -> bool:
        """Whether a cached entry still fits: its input states keep their shapes/dtypes, the
        environment settings it read are unchanged and the object graph still holds the
        States it was traced with."""
        if not states_match(values, entry.trace.state_sigs):
            return False
        if entry.env_reads is not None and not call_contexts_unchanged(entry.env_reads):
            return False
        graph = entry.graph
        if graph is None or entry.graph_generation == GENERATION.value:
            return True
        generation = GENERATION.value
        if not graph.unchanged(graph_states(*self.__graph_roots__())):
            return False
        entry.graph_generation = generation
        return True

    def _resolve(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], compile_program: bool
    ) -> tuple[CacheEntry[Any], Sequence[Any]]:
        """``(entry, dynamic leaves)`` for a call, tracing if needed, and compiling if ``compile_program``.

        The entry is chosen by the arguments' signature, then checked against the
        current shapes/dtypes of its input states and the object graph; a mismatch
        traces again (never an exception from a failed run).
        """
        # What this path caches (its own record, ``_last``) is emptied by ``clear_caches()``;
        # the steady path stores nothing of its own, so an object only ever called
        # there is not registered (a shared record is, by itself).
        register_cache_owner(self)
        key, leaves = self._call_key(args, kwargs)
        entry = self._cache.get(key)
        if entry is None and not self._shared:
            self._adopt_shared_record()
            entry = self._cache.get(key)
        if entry is not None and self._usable(entry, read_state_values(entry.trace.in_states)):
            self._last = entry
            if compile_program and entry.program is None:
                self._with_program(entry, leaves)
            return entry, leaves
        with self._trace_lock:
            entry = self._cache.get(key)
            # (Another thread may have traced it meanwhile.)
            if entry is not None and self._usable(entry, read_state_values(entry.trace.in_states)):
                self._last = entry
                if compile_program and entry.program is None:
                    self._add_program(entry, leaves)
                return entry, leaves
            stale = entry
            try:
                # The stale entry stays readable (get_jaxpr_by_cache from another thread)
                # until the new one replaces it ...
                entry = self._new_entry(args, kwargs, key, compile_program)
            finally:
                # ... and is dropped if none does (the trace failed, or is not cacheable).
                if stale is not None and self._cache.get(key) is stale:
                    self._cache.pop(key)
        return entry, leaves

    def _with_program(self, entry: CacheEntry[Any], leaves: Sequence[Any]) -> None:
        """Compile an entry traced without its program, once (another thread may be doing it)."""
        with self._trace_lock:
            if entry.program is None:
                self._add_program(entry, leaves)

    def _lookup(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], compile_program: bool = True
    ) -> tuple[CacheEntry[Any], Sequence[Any]]:
        """``(entry, dynamic leaves)`` for a call, tracing (and compiling) if needed; writes no state.

        Nor does it record writes in enclosing traces.
        """
        stacks = CTX.stacks
        if not stacks:
            return self._resolve(args, kwargs, compile_program)
        # A trace made here records the function's writes in every enclosing block too,
        # but looking a program up writes nothing (``lower`` / ``eval_shape`` inside an
        # outer trace): forget them. A call that then runs the program records its own.
        written_before = [set(stack._written) for stack in stacks]
        found = self._resolve(args, kwargs, compile_program)
        for stack, before in zip(stacks, written_before, strict=True):
            stack._written.intersection_update(before)
        return found

    # ------------------------------------------------------------------ calling
    @api_boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The direct calls of the one or two cached signatures (lookup and steady call
        # in one frame, see ``TraceCache.use_direct``), when there are; they run nothing
        # for any other call. Then the steady case inline (cached signature, unchanged
        # object graph, eager): the same checks as _resolve, without its calls; the
        # runner checks the states. Anything else: _resolve.
        direct = self._cache._direct
        if direct is not None and not kwargs:
            out = direct(args, self._who)
            if out is not DIRECT_MISS:
                return out
            self._cache._wants_direct = True  # (new aval objects, perhaps: a steady call below renews them)
        if self._no_statics and not (OPEN_STACKS.value and CTX.stacks):
            leaves: Sequence[Any] = args
            cache = self._cache
            entry = None
            aval = None  # the one array argument's aval, when that is the whole call
            if kwargs:
                key, leaves = self._argument_key(args, kwargs)
            elif len(args) == 1 and type(args[0]) is _ArrayImpl:
                aval = args[0].aval
                # Arrays that one program makes share their aval object from call to
                # call, so the aval's identity stands for the key (see TraceCache.remember_aval).
                known = cache._aval_hit
                if known[0] is not aval:
                    known = cache._aval_hit = cache._by_aval.get(id(aval), _NO_AVAL)
                if known[0] is aval:
                    entry = known[1]
                else:
                    key = ((aval.shape, aval.dtype, aval.weak_type),)
            else:
                for a in args:
                    if type(a) is not _ArrayImpl:
                        key, leaves = self._argument_key(args, kwargs)
                        break
                else:
                    key = positional_key(args)
            if entry is None:
                entry = cache._entries.get(key)
                if entry is None and not self._shared:
                    # A transformation built inline for this call: the programs of an equal
                    # one are found without the slow path (signature and states checked again).
                    self._adopt_shared_record()
                    cache = self._cache
                    entry = cache._entries.get(key)
                if entry is not None and aval is not None:
                    cache.remember_aval(aval, entry)
            if entry is not None:
                if entry is not cache._hit[0]:
                    cache.touch(entry)
                if (entry.graph is None or entry.graph_generation == GENERATION.value) and (
                    entry.env_reads is None or call_contexts_unchanged(entry.env_reads)
                ):
                    out = entry.runner(leaves, self._who)  # type: ignore[misc]  # set before caching
                    if out is not STATES_CHANGED:
                        if cache._wants_direct and not kwargs:
                            cache.use_direct(entry, args)
                        return out
                cache.forget_avals()  # resolved again below
        first_call, self._called = not self._called, True
        while True:
            entry, leaves = self._lookup(args, kwargs)
            out = replay(entry, leaves, self._who, first_call)
            if out is not STATES_CHANGED:  # only when another thread resized a state meanwhile
                return out

    def jaxpr_call(self, state_values: Sequence[Any], *args: Any, **kwargs: Any) -> tuple[list[Any], Any]:
        """Evaluate the traced program for these arguments without touching any state.

        Args:
            state_values: one value per input state of this signature, in read order
                (``get_traced_call().in_states``: states read before any write).
            *args: the call's positional arguments.
            **kwargs: the call's keyword arguments.

        Returns:
            ``(new values of the written states, output)``.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> s = State(1.0)
            >>> def f(x):
            ...     s.value = s.value + x
            ...     return x * 2
            >>> StatefulFunction(f).jaxpr_call([10.0], 2.0)
            ([Array(12., dtype=float32, weak_type=True)], Array(4., dtype=float32, weak_type=True))
        """
        entry, leaves = self._lookup(args, kwargs, compile_program=False)
        trace = entry.trace
        state_values = list(state_values)
        if len(state_values) != len(trace.in_states):
            raise ValueError(
                f"jaxpr_call: {self.name} reads {len(trace.in_states)} state(s) for this signature "
                f"but {len(state_values)} value(s) were given (see get_traced_call().in_states)."
            )
        for state, value, expected in zip(trace.in_states, state_values, trace.in_state_avals, strict=True):
            got = tuple((sig[0], sig[1]) for sig in map(canonical_signature, jax.tree.leaves(value)))
            if got != tuple((sig[0], sig[1]) for sig in expected):
                raise ValueError(
                    f"jaxpr_call: the value given for {state.describe()} has shapes/dtypes {got}, "
                    f"but {self.name} was traced with {tuple(expected)}."
                )
        out, written, _ = jaxpr_evaluator(trace)(state_values, leaves)
        return written, out

    def trace(self, *args: Any, **kwargs: Any) -> Trace:
        """The ``Trace`` of a call with these arguments, tracing once if the signature is new.

        The record gives the closed jaxpr ``(input state leaves..., dynamic arg
        leaves...) -> (output leaves..., written state leaves..., created state
        leaves...)`` and the states it reads (``in_states``) and writes
        (``out_states``). No state is read or written by this call. A cached
        signature whose states changed shape or dtype is traced again.

        Args:
            *args: the positional arguments of the call to trace (static ones
                included).
            **kwargs: its keyword arguments.

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
        return self._lookup(args, kwargs, compile_program=False)[0].trace

    def make_jaxpr(self, *args: Any, **kwargs: Any) -> Any:
        """Trace (if needed) for these arguments and return the closed jaxpr.

        Args:
            *args: the positional arguments of the call to trace (static ones
                included).
            **kwargs: its keyword arguments.

        Example:
            >>> from state_core import StatefulFunction
            >>> print(StatefulFunction(lambda x: x * 2).make_jaxpr(1.0))
            { lambda ; a:f32[]. let b:f32[] = mul a 2.0:f32[] in (b,) }
        """
        return self._lookup(args, kwargs, compile_program=False)[0].trace.closed_jaxpr

    # ------------------------------------------------------------------ introspection
    def _entry(self, key: Hashable | None) -> CacheEntry[Any]:
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

    def _cached_calls(self) -> list[tuple[Hashable, Any]]:
        return [(key, entry.trace) for key, entry in self._cache.items()]

    def get_jaxpr_by_cache(self, key: Hashable) -> Any:
        """The closed jaxpr traced for ``key`` (from ``get_arg_cache_key``).

        Args:
            key: the cache key of a call already traced.

        Raises:
            ValueError: no program is cached for ``key``.

        Example:
            >>> from state_core import StatefulFunction
            >>> f = StatefulFunction(lambda x: x + 1)
            >>> _ = f(1.0)
            >>> f.get_jaxpr_by_cache(f.get_arg_cache_key(1.0)) is f.get_jaxpr(1.0)
            True
        """
        return self._entry(key).trace.closed_jaxpr

    def get_traced_call(self, key: Hashable | None = None) -> Trace:
        """The ``Trace`` record for ``key`` (default: the latest call's).

        Args:
            key: the cache key of a call already traced (``get_arg_cache_key``), or
                None for the latest call's trace.

        Raises:
            ValueError: nothing is cached for ``key``, or (``key=None``) the
                function has not been traced yet.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> s = State(0.0, name='s')
            >>> f = StatefulFunction(lambda: s.value + 1)
            >>> _ = f()
            >>> [st.name for st in f.get_traced_call().in_states]
            ['s']
        """
        return self._entry(key).trace

    def clear_cache(self) -> None:
        """Forget every traced signature of this function (the next call traces again).

        Example:
            >>> from state_core import StatefulFunction
            >>> f = StatefulFunction(lambda x: x + 1)
            >>> _ = f(1.0)
            >>> f.clear_cache(); len(f._cache)
            0
        """
        self._record.clear_cache()
        self._last = None

    def __repr__(self) -> str:
        return f"StatefulFunction({self.name}, {len(self._cache)} cached signature(s))"


def _not_compiled(leaves: Sequence[Any], who: str, eager_ok: bool = False) -> Any:
    """The runner of an entry traced without its program: runs nothing, so the caller resolves it (and compiles)."""
    return STATES_CHANGED
