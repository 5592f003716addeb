"""The records of the one pipeline: a ``Trace`` of a call, the ``Program`` compiled from it.

    call -> signature -> cache -> miss: trace once -> Trace
                                         -> the transform's strategy compiles it -> Program
                               -> replay: check, read, run once, write back all or nothing

Both records are frozen: a strategy reads a ``Trace`` and returns a new ``Program``,
it never changes either. ``CacheEntry`` holds the pair plus the little that changes
from call to call (the reference avals of the identity shortcut, the object-graph
check, the least-recently-used stamp).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from ._graph import GraphSnapshot
from ._invalid_values import refuse_invalid_values
from ._jax_internals import debugging_nans_or_infs, is_tracer, jaxpr_consts, open_jaxpr
from ._state import State

__all__ = ["Trace", "Program", "CacheEntry", "jaxpr_evaluator"]

InfoT = TypeVar("InfoT")


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class Trace:
    """One run of a user function under a JAX trace: what it read, wrote and returned.

    The pipeline's trace step makes it (``StatefulFunction.trace`` returns it); every
    field is also an attribute of the same name.

    Args:
        key: the cache key of the call signature (``get_arg_cache_key``).
        closed_jaxpr: ``(input state leaves..., dynamic argument leaves...) ->
            (output leaves..., written state leaves..., created state leaves...)``.
        in_states: states whose values are inputs (read before any write), in read order.
        in_state_avals: per input state, the ``(shape, dtype, weak_type)`` of its leaves.
        state_sigs: per input state, the structure, shapes and dtypes of its value
            (what a replay checks before it runs the program).
        out_states: states that were written, in first-access order.
        created_states: states created during the trace that hold traced values at its
            end; their final values are outputs too, so they come out concrete.
        states: every state accessed, in first-access order.
        read_only_states: states read and never written.
        out_treedef: the structure of the function's return value.
        out_shapes: ``jax.ShapeDtypeStruct`` tree of the return value.
        n_out_leaves: how many leaves the return value has.
        out_state_defs: per written state, then per created state, the pytree
            structure of its new value (how the jaxpr's trailing outputs regroup).
        dyn_treedef: the structure of the dynamic ``(args, kwargs)``.
        n_args: how many positional arguments the call had (static ones included).
        cacheable: False when the jaxpr closes over tracers of an enclosing trace
            (such a program is valid for this one call only).
        context: what else the program depends on (None at the top level): that it
            was traced inside another state-aware trace, the manual mesh of an enclosing
            ``shard_map``, the markers strategies push with ``pushed_context``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction
        >>> w, total = State(jnp.ones(2), name='w'), State(0.0, name='total')
        >>> def step(x):
        ...     total.value = total.value + (w.value * x).sum()
        ...     return x * 2
        >>> trace = StatefulFunction(step).trace(jnp.ones(2))
        >>> [s.name for s in trace.in_states], [s.name for s in trace.out_states]
        (['total', 'w'], ['total'])
        >>> trace.rw_index, trace.ro_index, trace.out_shapes
        ((0,), (1,), ShapeDtypeStruct(shape=(2,), dtype=float32))
    """

    key: Hashable
    closed_jaxpr: Any
    in_states: tuple[State[Any], ...]
    in_state_avals: tuple[tuple[Any, ...], ...]
    state_sigs: tuple[Any, ...]
    out_states: tuple[State[Any], ...]
    created_states: tuple[State[Any], ...]
    states: tuple[State[Any], ...]
    read_only_states: tuple[State[Any], ...]
    out_treedef: Any
    out_shapes: Any
    n_out_leaves: int
    out_state_defs: tuple[Any, ...]
    dyn_treedef: Any
    n_args: int
    cacheable: bool
    context: Hashable

    @property
    def write_states(self) -> tuple[State[Any], ...]:
        """The states the program gives new values for: written ones, then created ones.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> s = State(0.0, name='s')
            >>> def f():
            ...     s.value = s.value + 1
            >>> [t.name for t in StatefulFunction(f).trace().write_states]
            ['s']
        """
        return self.out_states + self.created_states

    @property
    def rw_index(self) -> tuple[int, ...]:
        """Positions in ``in_states`` of the states the program also writes."""
        written = {id(s) for s in self.out_states}
        return tuple(k for k, s in enumerate(self.in_states) if id(s) in written)

    @property
    def ro_index(self) -> tuple[int, ...]:
        """Positions in ``in_states`` of the states the program only reads."""
        written = {id(s) for s in self.out_states}
        return tuple(k for k, s in enumerate(self.in_states) if id(s) not in written)

    def write_state_avals(self) -> list[Any]:
        """Per state in ``write_states``, the abstract value (a pytree of avals) the program gives it."""
        import jax

        avals = self.closed_jaxpr.out_avals
        i = self.n_out_leaves
        result = []
        for treedef in self.out_state_defs:
            n = treedef.num_leaves
            result.append(jax.tree.unflatten(treedef, avals[i : i + n]))
            i += n
        return result

    def argument_labels(self) -> list[str]:
        """How messages name each dynamic argument leaf, in leaf order: ``args[0]``, ``kwargs['x']`` ...

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import StatefulFunction
            >>> f = StatefulFunction(lambda x, pair, *, scale: x + pair[1] * scale)
            >>> f.trace(1.0, (2.0, 3.0), scale=4.0).argument_labels()
            ['args[0]', 'args[1][0]', 'args[1][1]', "kwargs['scale']"]
        """
        import jax

        treedef = self.dyn_treedef
        numbered = jax.tree.unflatten(treedef, list(range(treedef.num_leaves)))
        labels = []
        for path, _ in jax.tree_util.tree_flatten_with_path(numbered)[0]:
            head = "args" if getattr(path[0], "idx", 0) == 0 else "kwargs"
            labels.append(head + jax.tree_util.keystr(path[1:]))
        return labels

    def split_values(self, values: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """``values`` (one per input state) as ``(written-state values, read-only values)``.

        Args:
            values: one value per state of ``in_states``, in that order.

        Returns:
            ``(rw, ro)``: the values of the input states the program also writes
            (``rw_index`` order), then of those it only reads (``ro_index`` order),
            the two argument lists a ``Program.run`` takes first.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> a, b = State(1.0), State(2.0)
            >>> def f():
            ...     b.value = a.value + b.value
            >>> trace = StatefulFunction(f).trace()
            >>> rw, ro = trace.split_values(['a', 'b'])
            >>> rw, ro, trace.merge_values(rw, ro)
            (['b'], ['a'], ['a', 'b'])
        """
        return [values[k] for k in self.rw_index], [values[k] for k in self.ro_index]

    def merge_values(self, rw: Sequence[Any], ro: Sequence[Any]) -> list[Any]:
        """Inverse of ``split_values``: one value per input state, in ``in_states`` order.

        Args:
            rw: the values of the written input states, in ``rw_index`` order.
            ro: the values of the read-only input states, in ``ro_index`` order.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> a, b = State(1.0), State(2.0)
            >>> def f():
            ...     a.value = a.value + b.value
            >>> StatefulFunction(f).trace().merge_values(['new a'], ['b'])
            ['new a', 'b']
        """
        return merger(self)(rw, ro)

    def __repr__(self) -> str:
        return (
            f"Trace(in_states={len(self.in_states)}, out_states={len(self.out_states)}, "
            f"created_states={len(self.created_states)}, n_out_leaves={self.n_out_leaves})"
        )


def merger(trace: Trace) -> Callable[[Sequence[Any], Sequence[Any]], list[Any]]:
    """``trace.merge_values`` as a function that does not refer to ``trace``.

    Compiled programs use it: a program that referred to its own trace would keep
    an evicted entry alive until a full garbage collection.

    Args:
        trace: the trace whose ``rw_index`` / ``ro_index`` the merge follows.

    Returns:
        ``merge(rw, ro) -> values``: one value per state of ``trace.in_states``.

    Example:
        >>> from state_core import State, StatefulFunction
        >>> from state_core.engine import merger
        >>> a, b = State(1.0), State(2.0)
        >>> def f():
        ...     b.value = a.value + b.value
        >>> merger(StatefulFunction(f).trace())(['new b'], ['a'])
        ['a', 'new b']
    """
    rw_index, ro_index = trace.rw_index, trace.ro_index

    def merge(rw: Sequence[Any], ro: Sequence[Any]) -> list[Any]:
        merged: list[Any] = [None] * (len(rw) + len(ro))
        for i, v in zip(rw_index, rw):  # noqa: B905  # hot path; lengths fixed at trace time
            merged[i] = v
        for i, v in zip(ro_index, ro):  # noqa: B905  # hot path; lengths fixed at trace time
            merged[i] = v
        return merged

    return merge


def jaxpr_evaluator(
    trace: Trace, who: str = ""
) -> Callable[[Sequence[Any], Sequence[Any]], tuple[Any, list[Any], list[Any]]]:
    """``evaluate(state_values, dyn_leaves) -> (output, written values, created values)``.

    The one evaluation of a traced jaxpr: ``state_values`` holds one value (a pytree)
    per input state, ``dyn_leaves`` the dynamic argument leaves. Every strategy builds
    its program around it (under ``jax.jit``, ``jax.vmap``, ``lax.scan`` ...). The
    function does not refer to ``trace``.

    Args:
        trace: the ``Trace`` whose ``closed_jaxpr`` to evaluate.
        who: how messages name the call (``"jit(step)"``): when JAX re-runs a
            compiled call op by op to find a NaN it saw, the evaluation refuses
            the values with a message that starts with it. Default: no name.

    Returns:
        ``evaluate(state_values, dyn_leaves)``, returning the function's output (a
        pytree like ``trace.out_shapes``), the new values of ``trace.out_states``
        and those of ``trace.created_states``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction
        >>> from state_core.engine import jaxpr_evaluator
        >>> s = State(jnp.ones(2))
        >>> def f(x):
        ...     s.value = s.value + x
        ...     return x * 2
        >>> trace = StatefulFunction(f).trace(1.0)
        >>> jaxpr_evaluator(trace)([jnp.zeros(2)], [3.0])
        (Array(6., dtype=float32, weak_type=True), [Array([3., 3.], dtype=float32)], [])
    """
    import jax

    jaxpr, consts = open_jaxpr(trace.closed_jaxpr), jaxpr_consts(trace.closed_jaxpr)
    eval_jaxpr = jax.core.eval_jaxpr
    n_out = trace.n_out_leaves
    out_treedef = trace.out_treedef
    defs = trace.out_state_defs
    n_written = len(trace.out_states)
    write_states = trace.write_states
    leaves_of = jax.tree.leaves
    unflatten = jax.tree.unflatten

    def evaluate(state_values: Sequence[Any], dyn_leaves: Sequence[Any]) -> tuple[Any, list[Any], list[Any]]:
        args = [*[leaf for v in state_values for leaf in leaves_of(v)], *dyn_leaves]
        debugging = debugging_nans_or_infs()
        if debugging and not _staged(args):
            flat = _evaluate_unchecked(eval_jaxpr, jaxpr, consts, args)
        else:
            flat = eval_jaxpr(jaxpr, consts, *args)
        out = unflatten(out_treedef, flat[:n_out])
        values = []
        i = n_out
        for treedef in defs:
            n = treedef.num_leaves
            values.append(unflatten(treedef, flat[i : i + n]))
            i += n
        if debugging and not any(map(is_tracer, flat)):
            # Evaluated on concrete values (JAX re-running a compiled call op by op to
            # find a NaN it saw, or ``jaxpr_call``): refuse it here, naming the state.
            refuse_invalid_values(who, out, write_states, values)
        return out, values[:n_written], values[n_written:]

    return evaluate


def _staged(args: list[Any]) -> bool:
    """True if every argument is a tracer of a ``jax.jit`` / ``make_jaxpr`` trace: nothing runs while evaluating."""
    from jax.interpreters.partial_eval import DynamicJaxprTracer

    return bool(args) and all(isinstance(x, DynamicJaxprTracer) for x in args)


def _evaluate_unchecked(eval_jaxpr: Callable[..., Any], jaxpr: Any, consts: Any, args: list[Any]) -> Any:
    """``eval_jaxpr`` with JAX's per-operation NaN / Inf checks off.

    Used only while a flag is on and operations run as they are evaluated (op by
    op, or under an eager ``jax.vmap`` / ``jax.vjp``): library code makes and masks
    NaNs on purpose (``jnp.var``), and a nested ``jit`` evaluated op by op under the
    flags raises JAX's internal error instead of a ``FloatingPointError``;
    ``jax.extend.core.jaxpr_as_fun`` turns the checks off for the same reasons. It
    is not used for other evaluations (the flags off, or a ``jax.jit`` trace, where
    nothing runs): leaving such a block sets the thread's NaN-check hook to None for
    good (JAX 0.10 to 0.12), after which ``jax.config.update("jax_debug_nans", True)``
    is ignored by every cached ``jax.jit`` call of the thread, the user's own included.
    """
    import jax

    with jax.debug_nans(False), jax.debug_infs(False):
        return eval_jaxpr(jaxpr, consts, *args)


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class Program:
    """A compiled program for one ``Trace``, as a transform's strategy built it.

    A strategy's ``compile`` returns it; the pipeline may replace the optional
    fields (``dataclasses.replace``). Every field is also an attribute of the same name.

    Args:
        run: ``(written state values, read-only state values, *dynamic leaves) ->
            (output, new values for write_back)``, usually a ``jax.jit`` function
            (compiled at its first call).
        write_back: the states that receive the new values, in order.
        donating: the same program with the written states' values donated
            (``donate_argnums`` on its first argument): run when nothing but their
            States refers to them, so their buffers are updated in place; None (the
            default) when the program cannot reuse them.
        donating_new_values_first: ``donating`` returns ``(new values, output)``, the
            order in which XLA gives each donated buffer to the state's own new value
            (the donating form whose fields ``Strategy.donating`` returns);
            default False, the order of ``run``.
        keeps_layout_on_one_device: set by the pipeline (strategies leave the
            default False): the program runs on one device and gives every written
            state a value of its shape and dtype, so with all its inputs on one
            device it may donate from its first call.
        eager: the same computation without ``jax.jit`` (runs op by op, no XLA compile),
            used for the first call of a program when compiling would cost more than
            running it; None (the default) when the program must always be compiled.
        block: wait for the results before writing them back (the program may fail
            after dispatch: it calls back into Python or spans several devices).
            Default False; the pipeline turns it on when either is the case.
        on_failure: called with the input state values (in ``in_states`` order) when
            the program raises, for a strategy that must release something then; it
            must not write States (a failed call leaves every State as it was). None
            (the default): nothing to do.
        prepare: ``(values, leaves) -> (values, leaves)`` before the run (places inputs
            on the devices the program expects), with one value per input state in
            ``in_states`` order; None (the default) runs on the values as they are.
        check: ``output -> output`` on the concrete output of a top-level run, after the
            results are ready and before any state is written: it raises to fail the
            call (every state keeps its value) or returns what the caller receives. A
            program with a check never donates (a failed check must find the inputs intact).
        placed_by: ``(what, sharding)`` pairs for the placements the strategy gives the
            program itself (``jit``'s ``in_shardings`` / ``out_shardings``, described as
            ``"its out_shardings"``): when a call fails because an input lies on other
            devices, the message names the input, the placement and both device sets.
            Default: none.
        explain_failure: ``(who, inputs, error) -> message or None`` for a call whose
            dispatch failed with a ``ValueError`` or ``KeyError`` (``error``; JAX
            refusing an input's layout): ``inputs`` are ``(label, value)`` pairs, one
            per input state (``"State 'w'"``) and per argument leaf (``"argument args[0]"``).
            A message replaces JAX's (which may name the program's internals); None
            leaves the error to the device check, then as it is. Default: None.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core import State, StatefulFunction
        >>> from state_core.engine import Program, pure_program
        >>> total = State(jnp.zeros(()))
        >>> def add(x):
        ...     total.value = total.value + x
        ...     return total.value * 2
        >>> trace = StatefulFunction(add).trace(jnp.ones(()))
        >>> program = Program(run=jax.jit(pure_program(trace)), write_back=trace.write_states)
        >>> out, new_values = program.run([jnp.array(1.0)], [], jnp.array(2.0))    # rw, ro, x
        >>> float(out), [float(v) for v in new_values]
        (6.0, [3.0])
    """

    run: Callable[..., Any]
    write_back: tuple[State[Any], ...]
    donating: Callable[..., Any] | None = None
    donating_new_values_first: bool = False
    keeps_layout_on_one_device: bool = False
    eager: Callable[..., Any] | None = None
    block: bool = False
    on_failure: Callable[[list[Any]], None] | None = None
    prepare: Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]] | None = None
    check: Callable[[Any], Any] | None = None
    placed_by: tuple[tuple[str, Any], ...] = ()
    explain_failure: Callable[[str, list[tuple[str, Any]], Exception], str | None] | None = None


LRU_CLOCK = itertools.count()
"""The process-wide clock of least-recently-used eviction: a cache hit stamps its entry (``last_used``)."""


class CacheEntry(Generic[InfoT]):
    """A cached ``(Trace, strategy info, Program)`` and what a replay updates.

    Args:
        trace: the frozen ``Trace``.
        info: what the transform's strategy decided about the trace (its own frozen
            type, returned by ``Strategy.analyze``).
        program: the frozen ``Program`` built from ``trace`` and ``info``, or None
            for a signature only traced so far (``StatefulFunction.trace``, a loop
            body): its first run compiles it.
        graph: the ``GraphSnapshot`` of the object graph around the function, or None
            (no object-graph check).
        generation: the State-creation count (``GENERATION.value``) when the graph
            was snapshotted; stored as ``graph_generation``.

    The four records are kept as attributes of the same names; besides them:

    Attributes:
        graph_generation: the State-creation count at the last graph check.
        runner: the closure that runs the program (``program_runner``).
        ref_avals: the avals of the input state values at the last successful check
            (the identity shortcut of ``values_unchanged``), or None.
        last_used: the least-recently-used stamp.
        env_reads: what the trace read of the registered call contexts (such as
            ``state_core.environ``'s settings; their values are constants of the
            program), as ``(unchanged, reads)`` pairs, or None; the program is reused
            only while every ``unchanged(reads)`` holds.
        direct_maker: makes the direct call of a program whose steady call is
            written out for its shape (``plain_runner``), or None.
    """

    __slots__ = (
        "trace",
        "info",
        "program",
        "graph",
        "graph_generation",
        "runner",
        "ref_avals",
        "last_used",
        "env_reads",
        "direct_maker",
    )

    def __init__(
        self, trace: Trace, info: InfoT, program: Program | None, graph: GraphSnapshot | None, generation: int
    ) -> None:
        self.trace = trace
        self.info = info
        self.program = program
        self.graph = graph
        self.graph_generation = generation
        self.runner: Callable[..., Any] | None = None
        self.ref_avals: list[Any] | None = None
        self.last_used = 0
        self.env_reads: list[tuple[Callable[[Any], bool], Any]] | None = None
        self.direct_maker: Callable[..., Any] | None = None  # (a ``_steady_call.DirectCallMaker``)

    @property
    def block(self) -> bool:
        """Whether the program waits for its results before writing them back (``Program.block``)."""
        return self.program is not None and self.program.block

    def __repr__(self) -> str:
        return f"CacheEntry({self.trace!r})"
