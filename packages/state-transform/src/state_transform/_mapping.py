"""``MappingStrategy``: how ``vmap2``, ``pmap2`` and ``Map`` trace a function per lane and map its program."""

from __future__ import annotations

import dataclasses
import warnings
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

import jax

from state_core import BatchAxisError, State, collect_states, eager_first_calls_enabled, states_of_callable
from state_core.engine import (
    IdentityRef,
    Program,
    StateRules,
    Strategy,
    Trace,
    TraceContext,
    context_markers,
    named,
    open_jaxpr,
    pushed_context,
    state_label,
    user_stacklevel,
)

from ._axes import (
    check_axis,
    check_out_axes,
    check_state_in_out_axes,
    format_sizes,
    leaf_in_axes,
    remove_axis,
)
from ._dependence import varying_outputs
from ._lanes import SPLIT, lane_write_back, split_layout, splits_per_lane
from ._lanes_on_mesh import LanesOnMesh, compile_on_mesh
from ._mapping_program import MappingInfo, build_mapped_program
from ._pmap_run import committed_inputs_message, private_axis_name, refuse_context_mesh, refusing_context_mesh
from ._rules import parse_state_rules

__all__ = ["MappingStrategy", "MappingInfo"]

_POLICIES = ("raise", "warn", "ignore", "auto")
_PMAP_MARKER = "pmap2"  # in the trace context while a pmap2 traces: a nested pmap2 is vectorised
_NO_RULES: StateRules[Any] = StateRules()


def _inside_pmap2() -> int:
    """How many pmap2 traces enclose the current one."""
    return context_markers().count(_PMAP_MARKER)


@dataclasses.dataclass(eq=False)
class _MappingTrace(TraceContext):
    """What one trace of a mapping learns while the user function runs."""

    paths: dict[int, tuple[Any, ...]] = dataclasses.field(default_factory=dict)
    size_guess: int | None = None
    modes: dict[int, Any] = dataclasses.field(default_factory=dict)
    sizes: list[Any] = dataclasses.field(default_factory=list)
    size_used: int | None = None
    leaf_positions: list[Any] = dataclasses.field(default_factory=list)
    leaf_axes: list[Any] = dataclasses.field(default_factory=list)
    arg_avals: list[Any] = dataclasses.field(default_factory=list)
    # The paths of the states the call created, from the object a one-shot
    # initialisation fills (found at the first created state that needs one).
    created_paths: dict[int, tuple[Any, ...]] | None = None

    def restart(self, size_guess: int) -> None:
        """Forget the first trace before tracing again with the axis size now known (what it learned stays)."""
        fresh = _MappingTrace(self.fun, self.name, self.learned, self.learn, paths=self.paths, size_guess=size_guess)
        vars(self).update(vars(fresh))


@dataclasses.dataclass(frozen=True, kw_only=True)
class MappingStrategy(Strategy[_MappingTrace]):
    """How a ``StatefulMapping`` traces and compiles: one trace per lane, mapped by ``mapping_fn``.

    Args:
        in_axes: the mapped axis of each positional argument, as in ``jax.vmap``.
        out_axes: where the mapped axis goes in the return value, as in ``jax.vmap``.
        in_rules: the parsed ``state_in_axes`` (other forms are parsed here).
        out_rules: the parsed ``state_out_axes`` (other forms are parsed here).
        unexpected_out_state_mapping: ``'auto'``, ``'ignore'``, ``'warn'`` or ``'raise'``.
        axis_size: the mapped size when no argument or state gives it.
        axis_name: the mapped axis's name, for collectives.
        mapping_fn: ``jax.vmap``, ``jax.pmap`` or a function with their calling convention.
        mapping_kwargs: extra keyword arguments for ``mapping_fn``.
        keyword_axis: the axis keyword arguments are mapped over (None: unmapped).
        donate_argnums: positional arguments whose buffers ``mapping_fn`` may reuse
            (a tuple once built).
        max_axis_size: returns the largest mapped size allowed, asked at each trace
            (None: no limit).
        transform: as ``Strategy``'s (``vmap2: ...``, ``vmap2(f): ...``),
            ``"StatefulMapping"`` by default; ``""`` for a caller whose names
            already say what runs (``Map``).
        new_state_rules: set for a one-shot initialisation (``vmap2_new_states``,
            ``pmap2_new_states``): every state the call creates goes out on the
            axis the first matching rule names (axis 0 if none matches), and the
            first call runs op by op. None: created states follow ``out_rules``.
        created_in: the object a one-shot initialisation fills, where the created
            states' paths are looked up for path rules (None: no paths). Held weakly
            in the program key.
        lanes_on: a ``LanesOnMesh``: the lanes are split over its mesh axes, and the
            ``jax.vmap`` program is compiled with ``jax.jit`` and shardings that put
            each device's lanes on that device (``Map(behavior='shard')``). The
            mapped size must be a multiple of its ``n_shards``; ``mapping_fn`` must
            be ``jax.vmap``. None: no placement.
    """

    in_axes: Any = 0
    out_axes: Any = 0
    in_rules: StateRules[Any] = _NO_RULES
    out_rules: StateRules[Any] = _NO_RULES
    unexpected_out_state_mapping: str = "auto"
    axis_size: int | None = None
    axis_name: Hashable | None = None
    # (by identity: jax.vmap, jax.pmap or the user's own function; cheaper to key than by its code)
    mapping_fn: Callable[..., Any] = dataclasses.field(default=jax.vmap, metadata={"key": IdentityRef})
    mapping_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    keyword_axis: int | None = 0
    donate_argnums: int | Iterable[int] = ()
    max_axis_size: Callable[[], int] | None = dataclasses.field(default=None, compare=False)
    transform: str = dataclasses.field(default="StatefulMapping", compare=False)  # (messages only)
    new_state_rules: StateRules[Any] | None = None
    created_in: Any = dataclasses.field(default=None, compare=False)
    lanes_on: LanesOnMesh | None = None
    # The positions of donate_argnums, as build_mapped_program reads them.
    donate_positions: frozenset[int] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        who = self.transform or "StatefulMapping"
        if self.unexpected_out_state_mapping not in _POLICIES:
            raise ValueError(
                f"{who}: unexpected_out_state_mapping must be one of {_POLICIES}, "
                f"got {self.unexpected_out_state_mapping!r}."
            )
        axis_size = self.axis_size
        if axis_size is not None and (not isinstance(axis_size, int) or isinstance(axis_size, bool) or axis_size < 1):
            raise ValueError(f"{who}: axis_size must be a positive int or None, got {axis_size!r}.")
        keyword_axis = self.keyword_axis
        if keyword_axis is not None and (not isinstance(keyword_axis, int) or isinstance(keyword_axis, bool)):
            raise TypeError(f"{who}: keyword_axis must be an int or None, got {keyword_axis!r}.")
        # Only the parsed rules are kept (vmap2, pmap2 and Map pass them parsed already).
        object.__setattr__(self, "in_rules", parse_state_rules(self.in_rules, "state_in_axes", who))
        object.__setattr__(self, "out_rules", parse_state_rules(self.out_rules, "state_out_axes", who))
        object.__setattr__(self, "mapping_kwargs", dict(self.mapping_kwargs))
        donate_argnums = self.donate_argnums
        numbers = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        if numbers and self.mapping_fn is jax.vmap:
            raise ValueError(
                f"{who}: donate_argnums={donate_argnums!r} is passed to the mapping function, "
                "but jax.vmap takes no donate_argnums. Donate through the program instead (written "
                "States are updated in place already), or map with jax.pmap (pmap2)."
            )
        object.__setattr__(self, "donate_argnums", numbers)
        if self.lanes_on is not None and (self.mapping_fn is not jax.vmap or self.mapping_kwargs):
            raise ValueError(
                f"{who}: lanes_on places the lanes of a jax.vmap program over a mesh itself; it takes "
                "mapping_fn=jax.vmap and no mapping_kwargs. Drop one or the other."
            )
        object.__setattr__(self, "donate_positions", frozenset(numbers))

    def identity(self) -> Hashable | None:
        """Every compared option (see ``Strategy.identity``), the device limit as it is now, and ``created_in``."""
        limit = None if self.max_axis_size is None else self.max_axis_size()
        created_in = None if self.created_in is None else IdentityRef(self.created_in)
        return (super().identity(), limit, created_in)

    def _in_axis(self, ctx: _MappingTrace, state: State[Any], value: Any) -> Any:
        """The axis ``state`` is mapped on the way in, including an axis this mapping stacked it on."""
        axis = self.in_rules.value_for(ctx.paths.get(id(state), ()), state, _UNDECLARED)
        if axis is not _UNDECLARED:
            return axis
        stacked = ctx.recall(("stacked", id(state)))
        if stacked is None or stacked[0]() is not state:
            return _UNDECLARED
        _, axis, size = stacked
        leaves = jax.tree.leaves(value)
        if not leaves or axis >= len(jax.numpy.shape(leaves[0])) or jax.numpy.shape(leaves[0])[axis] != size:
            return _UNDECLARED  # the user reset it to a value that is not one per lane
        return axis

    # ------------------------------------------------------------------ tracing hooks
    def new_trace_context(self, fun: Callable[..., Any], name: str, learned: Mapping[Any, Any]) -> _MappingTrace:
        """A ``_MappingTrace`` holding the paths of the States ``fun`` reaches."""
        return _MappingTrace(fun, self.call_name(name), learned, paths=states_of_callable(fun).paths_by_state())

    def trace(self, ctx: _MappingTrace, trace_once: Callable[[], Trace]) -> Trace:
        """Trace at per-lane shapes; again when the axis size or a per-lane buffer is learned mid-trace."""
        if self.lanes_on is not None:
            # The function is replayed inside the compiled program, whose axes are all
            # Auto: trace it with that mesh in effect, so the operations it records
            # belong to the program's mesh, not the caller's.
            with jax.sharding.use_abstract_mesh(self.lanes_on.traced_mesh):
                return self._trace_lanes(ctx, trace_once)
        if self.mapping_fn is jax.pmap:
            refuse_context_mesh(ctx.name)
        return self._trace_lanes(ctx, trace_once)

    def _trace_lanes(self, ctx: _MappingTrace, trace_once: Callable[[], Trace]) -> Trace:
        trace: Trace | None = None
        buffers_learned = False
        for _ in range(3):
            # A trace that raises leaves every State as it was, random keys included.
            if self.mapping_fn is jax.pmap:
                with pushed_context(_PMAP_MARKER):
                    trace = trace_once()
            else:
                trace = trace_once()
            size = self.axis_size_for(ctx.sizes, ctx.name)
            if self.axis_name is not None and ctx.size_used is not None and ctx.size_used != size:
                # The axis size came from a state discovered mid-trace, and the function
                # used the named axis: trace again with the real size bound.
                ctx.restart(size)
                continue
            buffers = [] if buffers_learned else self._per_lane_buffers(ctx, trace, size)
            if not buffers:
                return trace
            # Read whole, these would come out with a second axis of the mapped size:
            # trace again with one slice per lane (and keep feeding them per lane).
            buffers_learned = True
            for state in buffers:
                ctx.learn[("stacked", id(state))] = (weakref.ref(state), 0, size)
            ctx.restart(size)
        assert trace is not None
        return trace

    def axis_env(self, ctx: _MappingTrace) -> list[tuple[Any, int]] | None:
        """The named mapped axis, at the size known so far."""
        if self.axis_name is None:
            return None
        size = ctx.size_guess
        if size is None:
            sizes = ctx.sizes
            size = sizes[0][0] if sizes else (self.axis_size or self._known_state_size(ctx) or 1)
        ctx.size_used = size
        return [(self.axis_name, size)]

    def _known_state_size(self, ctx: _MappingTrace) -> int | None:
        """The mapped size of the first mapped state reachable from the mapped object, if any."""
        for state in states_of_callable(ctx.fun).values():
            axis = self._in_axis(ctx, state, state._value)
            if isinstance(axis, int) and not isinstance(axis, bool):
                leaves = jax.tree.leaves(state._value)
                if leaves and -len(jax.numpy.shape(leaves[0])) <= axis < len(jax.numpy.shape(leaves[0])):
                    return int(jax.numpy.shape(leaves[0])[axis])
        return None

    def abstract_inputs(
        self, ctx: _MappingTrace, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any], leaves: list[Any]
    ) -> list[Any]:
        """Each argument leaf at its per-lane shape (its mapped axis removed)."""
        n_static = len(self.static_argnums)
        static_positions = frozenset((i + len(dyn_args) + n_static) if i < 0 else i for i in self.static_argnums)
        all_args = _interleave_statics(dyn_args, static_positions)
        axes, labels, positions = leaf_in_axes(
            self.in_axes, all_args, dyn_kwargs, static_positions, self.keyword_axis, who=ctx.name
        )
        ctx.leaf_positions = positions
        abstract = []
        checked_axes = []
        for leaf, axis, label in zip(leaves, axes, labels, strict=True):
            aval = jax.typeof(leaf)
            ctx.arg_avals.append(jax.core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type))
            axis = check_axis(axis, len(aval.shape), label, aval.shape, ctx.name)
            if axis is not None:
                ctx.sizes.append((aval.shape[axis], label))
            checked_axes.append(axis)
            abstract.append(remove_axis(aval, axis))
        ctx.leaf_axes = checked_axes
        return abstract

    def state_input_avals(self, ctx: _MappingTrace, state: State[Any], value: Any) -> Any:
        """A state's per-lane abstract value: its mapped axis removed, or whole when broadcast or split."""
        paths = ctx.paths
        axis = self._in_axis(ctx, state, value)
        if splits_per_lane(state, value, kept_whole=axis is None):
            # One value for the whole call: give every lane its own part (an explicit
            # None in state_in_axes instead broadcasts the same value to all lanes).
            ctx.modes[id(state)] = SPLIT
            return super().state_input_avals(ctx, state, value)
        if axis is _UNDECLARED or axis is None:
            ctx.modes[id(state)] = None
            return super().state_input_avals(ctx, state, value)
        # Described only if a message needs it: describing every mapped state would cost
        # a first call more than the rest of the analysis.
        label = _StateLabel(state, paths.get(id(state)))
        avals = []
        leaves, treedef = jax.tree.flatten(value)
        for leaf in leaves:
            aval = jax.typeof(leaf)
            ndim = len(aval.shape)
            in_range = type(axis) is int and -ndim <= axis < ndim
            # (Out of range, check_axis raises: only then is the label made.)
            ax = (
                axis % ndim
                if in_range
                else check_axis(axis, ndim, f"{label} (from state_in_axes)", aval.shape, ctx.name)
            )
            ctx.sizes.append((aval.shape[ax], label))
            avals.append(remove_axis(aval, ax))
        ctx.modes[id(state)] = axis if axis >= 0 else axis + len(jax.typeof(leaves[0]).shape)
        return jax.tree.unflatten(treedef, avals)

    def analyze(
        self, ctx: _MappingTrace, trace: Trace, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any]
    ) -> MappingInfo:
        """Every state's axis, the axis size and what varies across lanes.

        A call refused here writes nothing back: every State, random keys included,
        keeps its value from before the call.
        """
        paths = ctx.paths
        modes = ctx.modes
        name = ctx.name
        size = self.axis_size_for(ctx.sizes, name)
        in_modes = tuple(modes[id(s)] for s in trace.in_states)
        split_positions, lane_written_mask = split_layout(trace, in_modes)

        axis_name = self.axis_name
        if axis_name is None and self.mapping_fn is not jax.vmap:
            # Lanes find their part of a split state by axis_index, which needs a name.
            # (Under vmap the split happens before mapping: no name, so op-by-op runs
            # reuse JAX's compiled primitives, which are keyed by the axis names.)
            axis_name = private_axis_name()
        varying = self._varying(ctx, trace)
        state_varying = varying[trace.n_out_leaves :]

        read_ids = {id(s) for s in trace.in_states}
        lane_written_axes: list[Any] = []
        i = 0
        for state, treedef, lane_written in zip(
            trace.out_states, trace.out_state_defs, lane_written_mask, strict=False
        ):
            n = treedef.num_leaves
            state_varies = any(state_varying[i : i + n])
            i += n
            if not lane_written:  # a split state: written from the split
                continue
            read = id(state) in read_ids
            lane_written_axes.append(self.out_axis(ctx, state, state_varies, size, modes.get(id(state)), read))
            in_mode, out_axis = modes.get(id(state)), lane_written_axes[-1]
            if n and isinstance(in_mode, int) and isinstance(out_axis, int):
                ndim = max(1, jax.numpy.ndim(jax.tree.leaves(state._value)[0]))
                if in_mode % ndim != out_axis % ndim:  # (the label is made for the message only)
                    label = state_label(state, paths.get(id(state)))
                    check_state_in_out_axes(name, label, in_mode, out_axis, ndim)
        created_axes = []
        for state, treedef in zip(trace.created_states, trace.out_state_defs[len(trace.out_states) :], strict=True):
            n = treedef.num_leaves
            created_axes.append(self.created_axis(ctx, state, any(state_varying[i : i + n])))
            i += n
        check_out_axes(self.out_axes, trace.out_shapes, name)
        return MappingInfo(
            axis_size=size,
            axis_name=axis_name,
            in_modes=in_modes,
            split_positions=split_positions,
            lane_written_mask=lane_written_mask,
            lane_written_axes=tuple(lane_written_axes),
            created_axes=tuple(created_axes),
            leaf_axes=tuple(ctx.leaf_axes),
            leaf_positions=tuple(ctx.leaf_positions),
            mapped_inputs=bool(ctx.sizes),
            out_varying=tuple(varying[: trace.n_out_leaves]),
            arg_avals=tuple(ctx.arg_avals),
            nested_pmap=self.mapping_fn is jax.pmap and _inside_pmap2() > 0,
        )

    def _varying(self, ctx: _MappingTrace, trace: Trace) -> list[bool]:
        """Per output leaf of the jaxpr, whether its value differs between lanes (decides undeclared writes)."""
        varying_in = []
        for state in trace.in_states:
            varying_in.extend([ctx.modes[id(state)] is not None] * len(jax.tree.leaves(state._value)))
        varying_in.extend(axis is not None for axis in ctx.leaf_axes)
        return varying_outputs(open_jaxpr(trace.closed_jaxpr), varying_in, self.axis_name)

    def _per_lane_buffers(self, ctx: _MappingTrace, trace: Trace, size: int) -> list[State[Any]]:
        """Undeclared read-modify-write states to feed one slice per lane instead of whole.

        A state that no rule names, that the function reads and writes with a value
        differing between lanes, and whose leading size already equals the mapped
        size is a per-lane buffer (under ``'auto'`` only, as in brainstate):
        broadcasting it whole and stacking the result would give it a second axis
        of that size.
        """
        if self.unexpected_out_state_mapping != "auto":
            return []
        read = {id(s) for s in trace.in_states}
        candidates = []
        for state in trace.out_states:
            path = ctx.paths.get(id(state), ())
            if id(state) not in read or ctx.modes.get(id(state)) is not None:
                continue
            if self.in_rules.value_for(path, state, _UNDECLARED) is not _UNDECLARED:
                continue
            if self.out_rules.value_for(path, state, _UNDECLARED) is not _UNDECLARED:
                continue
            leaves = jax.tree.leaves(state._value)
            if leaves and all(jax.numpy.ndim(x) >= 1 and jax.numpy.shape(x)[0] == size for x in leaves):
                candidates.append(state)
        if not candidates:
            return []
        varying = self._varying(ctx, trace)[trace.n_out_leaves :]
        varies: dict[int, bool] = {}
        i = 0
        for state, treedef in zip(trace.out_states, trace.out_state_defs, strict=False):
            varies[id(state)] = any(varying[i : i + treedef.num_leaves])
            i += treedef.num_leaves
        return [s for s in candidates if varies[id(s)]]

    def spans_devices(self, trace: Trace, info: MappingInfo) -> bool:
        """Whether ``mapping_fn`` is ``jax.pmap``, or the lanes lie on a mesh of more than one device."""
        if self.lanes_on is not None:
            return self.lanes_on.mesh.size > 1
        return self.mapping_fn is jax.pmap

    def axis_size_for(self, sizes: list[tuple[int, str]], name: str) -> int:
        """The mapped size the arguments and states (and ``axis_size``) agree on.

        Args:
            sizes: ``(size, what has it)`` pairs, e.g. ``ctx.sizes`` after
                ``abstract_inputs`` (what has it is named in messages).
            name: how messages name the function.

        Raises:
            ValueError: nothing gives a size, or it exceeds the devices ``max_axis_size`` allows.
            BatchAxisError: the sizes disagree.

        Example:
            >>> from state_transform.engine import MappingStrategy
            >>> MappingStrategy().axis_size_for([(3, 'argument 0'), (3, 'state w')], 'f')
            3
            >>> MappingStrategy(axis_size=4).axis_size_for([], 'f')
            4
        """
        sizes = list(sizes)
        if self.axis_size is not None:
            sizes.append((self.axis_size, "axis_size"))
        distinct = {s for s, _ in sizes}
        if not sizes:
            raise ValueError(
                f"{name}: cannot tell the size of the mapped axis: no argument or state is "
                "mapped. Pass axis_size=..., map an argument with in_axes, or map a state with "
                "state_in_axes."
            )
        if len(distinct) > 1:
            raise BatchAxisError(
                f"{name}: the mapped axis has inconsistent sizes: {format_sizes(sizes)}. "
                "Every mapped argument and state must have the same size along its mapped axis."
            )
        size = int(sizes[0][0])
        nested = _inside_pmap2() > (self.mapping_fn is jax.pmap)
        limit = self.max_axis_size() if self.max_axis_size is not None and not nested else None
        if limit is not None and size > limit:
            raise ValueError(
                f"{name}: the mapped axis has size {size} but only {limit} "
                "device(s) are available to map over. Use at most that many lanes (or pass "
                "`devices=`), or use vmap2 to batch on one device."
            )
        return size

    def created_axis(self, ctx: _MappingTrace, state: State[Any], varies: bool) -> Any:
        """The out axis of a state created during the trace: as declared, else stacked when it varies.

        In a one-shot initialisation (``new_state_rules`` set): the axis its rule
        names, axis 0 when none does.

        Args:
            ctx: the trace's context (its ``paths`` name the states).
            state: the created state.
            varies: whether its value differs across the mapped axis.

        Raises:
            BatchAxisError: its rules declare it unmapped, but it varies.
        """
        if self.new_state_rules is not None:
            return self._initialised_axis(ctx, state, varies)
        paths = ctx.paths
        axis = self.out_rules.value_for(paths.get(id(state), ()), state, _UNDECLARED)
        if axis is _UNDECLARED:
            return 0 if varies else None
        if axis is None and varies:
            raise BatchAxisError(
                f"{ctx.name}: {state_label(state, paths.get(id(state)))} is created with a value that differs "
                "across the mapped axis, but state_out_axes declares it unmapped (None). Declare an "
                "int axis for it, or create it with the same value on every lane."
            )
        return axis

    def _initialised_axis(self, ctx: _MappingTrace, state: State[Any], varies: bool) -> Any:
        rules = self.new_state_rules
        assert rules is not None  # (created_axis asks only in a one-shot initialisation)
        if self.created_in is None:
            path: tuple[Any, ...] = ()
        else:
            if ctx.created_paths is None:
                # One walk of the object graph for all the states the run created (not one each).
                ctx.created_paths = collect_states(self.created_in).paths_by_state()
            path = ctx.created_paths.get(id(state), ())
        axis = rules.value_for(path, state, 0)
        if axis is None and varies:
            raise BatchAxisError(
                f"{ctx.name}: {state.describe()} is kept as one shared copy (a NonBatchState, "
                "or axis None in state_out_axes / state_to_exclude), but its initial value differs "
                "between copies (for example it is drawn at random, or computed from a mapped "
                "argument). Give it an int axis, or initialise it the same on every copy."
            )
        return axis

    def out_axis(
        self,
        ctx: _MappingTrace,
        state: State[Any],
        varies: bool,
        size: int,
        in_mode: Any = None,
        read: bool = False,
    ) -> Any:
        """The out axis of a written state; an undeclared one that varies follows ``unexpected_out_state_mapping``.

        Args:
            ctx: the trace's context (its ``paths`` name the states; a stacking
                decision is learned there for later traces).
            state: the written state.
            varies: whether its new value differs across the mapped axis.
            size: the mapped size.
            in_mode: how the state was fed to the lanes, if it was read (None: whole).
            read: whether the function read it before writing it.

        Raises:
            BatchAxisError: it is declared unmapped but varies, or it is undeclared,
                varies and the policy is ``'raise'``.
        """
        paths, name = ctx.paths, ctx.name
        axis = self.out_rules.value_for(paths.get(id(state), ()), state, _UNDECLARED)
        if axis is not _UNDECLARED:
            if axis is None and varies:
                raise BatchAxisError(
                    f"{name}: {state_label(state, paths.get(id(state)))} is declared unmapped (None) in "
                    "state_out_axes, but its new value differs across the mapped axis. Declare an int axis for it, or "
                    "reduce it over the axis (e.g. with jax.lax.pmean) before writing it."
                )
            return axis
        if not varies:
            return None
        label = state_label(state, paths.get(id(state)))
        policy = self.unexpected_out_state_mapping
        # A state that came in mapped goes out on the same axis; otherwise axis 0.
        axis = in_mode if isinstance(in_mode, int) else 0
        fix = f"state_out_axes={{{axis}: {type(state).__name__}}}"
        message = (
            f"{name}: {label} is written with a value that differs across the mapped axis, "
            "but no state_out_axes entry covers it"
        )
        if policy == "raise":
            raise BatchAxisError(
                f"{message}. Declare it, e.g. {fix} or {{{axis}: OfType({type(state).__name__})}}, "
                f"or pass unexpected_out_state_mapping='auto' to stack it on axis {axis}."
            )
        if policy == "warn":
            warnings.warn(
                f"{message}; it is stacked on axis {axis}. To declare it (and silence this "
                f"warning), add an entry such as {{{axis}: OfType({type(state).__name__})}} to "
                "state_out_axes.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        elif policy == "auto" and read and in_mode is None:
            # Read whole by every lane and written per lane: stacking gives it a new axis
            # (shape (3,) becomes (size, 3)), which is rarely what a read-modify-write meant.
            shapes = [tuple(jax.numpy.shape(x)) for x in jax.tree.leaves(state._value)]
            shape = shapes[0] if len(shapes) == 1 else shapes
            warnings.warn(
                f"{message}; every lane read its whole value of shape {shape}, and it is now "
                f"stacked on axis {axis}, so it gains an axis of size {size}. To keep one value "
                f"per lane, give it a leading axis of size {size} (it is then fed one slice per "
                f"lane) or declare it in state_in_axes and state_out_axes; to keep it whole, "
                "reduce the new value over the lanes before writing it.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        # Remember the decision: on later calls the now-stacked value is fed per lane,
        # so a read-modify-write state does not gain an axis on every call.
        ctx.learn[("stacked", id(state))] = (weakref.ref(state), axis, size)
        return axis

    # ------------------------------------------------------------------ compiling
    def mapped_program(
        self, trace: Trace, info: MappingInfo, donate_states: bool = False
    ) -> tuple[Callable[..., Any], bool]:
        """``build_mapped_program`` with this strategy's options: ``(program, compiled)``.

        Args:
            trace: the per-lane trace.
            info: what ``analyze`` decided for it.
            donate_states: also donate the written states' values to a ``mapping_fn``
                that compiles by itself.
        """
        return build_mapped_program(
            trace,
            info,
            self.mapping_fn,
            self.mapping_kwargs,
            self.out_axes,
            self.donate_positions,
            donate_states=donate_states,
        )

    def compile(self, trace: Trace, info: MappingInfo, name: str) -> Program:
        """``mapping_fn`` over the traced program (in ``jax.jit`` unless it compiles itself)."""
        if self.lanes_on is not None:
            if info.axis_size % self.lanes_on.n_shards:
                n = self.lanes_on.n_shards
                raise ValueError(
                    f"{self.call_name(name)}: the mapped axis has size {info.axis_size}, which does not split "
                    f"evenly over mesh axes {self.lanes_on.axes} ({n} device(s)). Use a multiple of {n}."
                )
            return compile_on_mesh(self, trace, info, self.lanes_on)
        program, compiled = self.mapped_program(trace, info)
        named(program, name)
        # jax.pmap compiles whatever runs it; a jax.vmap program can run op by op.
        # (A one-shot initialisation runs once: op by op costs far less than compiling.)
        one_shot = self.new_state_rules is not None
        eager = program if not compiled and (one_shot or eager_first_calls_enabled()) else None
        options: dict[str, Any] = {}
        if compiled:  # jax.pmap donates by itself: a second pmap with the states donated
            who = self.call_name(name)
            if self.donate_states and trace.rw_index:
                donated, _ = self.mapped_program(trace, info, donate_states=True)
                options["donating"] = refusing_context_mesh(donated, who)
            run = refusing_context_mesh(program, who)
            options["explain_failure"] = committed_inputs_message  # JAX would name the lane axis
        else:
            options = self.donating(jax.jit, program, trace)
            run = jax.jit(program)
        return Program(
            run=run,
            write_back=lane_write_back(trace, info.split_positions, info.lane_written_mask),
            eager=eager,
            **options,
        )


class _StateLabel:
    """A state's label (``state_label``), made when a message formats it."""

    __slots__ = ("_state", "_path")

    def __init__(self, state: State[Any], path: tuple[Any, ...] | None) -> None:
        self._state = state
        self._path = path

    def __str__(self) -> str:
        return state_label(self._state, self._path)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class _Undeclared:
    def __repr__(self) -> str:
        return "<undeclared>"


_UNDECLARED = _Undeclared()


def _interleave_statics(dyn_args: tuple[Any, ...], static_positions: frozenset[int]) -> tuple[Any, ...]:
    if not static_positions:
        return tuple(dyn_args)
    total = len(dyn_args) + len(static_positions)
    it = iter(dyn_args)
    return tuple(None if i in static_positions else next(it) for i in range(total))
