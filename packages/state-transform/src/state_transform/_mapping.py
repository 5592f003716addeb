"""``StatefulMapping``: the cached engine behind ``vmap2``, ``pmap2`` and ``Map``."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import warnings
import weakref
from collections.abc import Callable, Hashable, Iterable
from typing import Any, cast

import jax
import jax.extend.core as jex_core

from state_core import BatchAxisError, State, StatefulFunction, states_of_callable
from state_core.engine import TracedCall, merger, unflatten_states
from state_random import is_random_state, is_single_key, split_for_lanes

from ._axes import (
    check_axis,
    check_out_axes,
    check_state_in_out_axes,
    first_match,
    format_sizes,
    leaf_in_axes,
    normalize_state_axes,
    remove_axis,
)
from ._dependence import varying_outputs
from ._lanes import advance_keys, give_lanes_their_keys

__all__ = ["StatefulMapping"]

_POLICIES = ("raise", "warn", "ignore", "auto")
_SPLIT = "split"  # mode of a RandomState whose single key is split into one key per lane


def _private_axis_name() -> str:
    """A fresh axis name, used to find the lane index when the user gave none."""
    return f"_state_lane_{next(_AXIS_COUNTER)}"


_AXIS_COUNTER = itertools.count()


class _PmapTraces(threading.local):
    depth = 0  # how many pmap2 traces are running (a nested pmap2 is vectorised)


_PMAP_TRACES = _PmapTraces()


@dataclasses.dataclass
class _MappingTrace:
    """What one trace of a ``StatefulMapping`` learns while the user function runs."""

    paths: dict[int, tuple[Any, ...]]
    size_guess: int | None = None
    modes: dict[int, Any] = dataclasses.field(default_factory=dict)
    sizes: list[Any] = dataclasses.field(default_factory=list)
    split: list[Any] = dataclasses.field(default_factory=list)
    size_used: int | None = None
    leaf_positions: list[Any] = dataclasses.field(default_factory=list)
    leaf_axes: list[Any] = dataclasses.field(default_factory=list)
    arg_avals: list[Any] = dataclasses.field(default_factory=list)

    def restart(self, size_guess: int) -> None:
        """Forget the first trace before tracing again with the axis size now known."""
        self.__init__(paths=self.paths, size_guess=size_guess)  # type: ignore[misc]


@dataclasses.dataclass
class MappingPlan:
    """How a traced signature of a ``StatefulMapping`` is mapped (``TracedCall.plan``).

    Attributes:
        axis_size: the number of lanes.
        axis_name: the axis name bound in the program (a private one if the user gave none).
        in_modes: per input state: its mapped axis, None (broadcast) or ``'split'``
            (a RandomState whose key is split into one key per lane).
        split_positions: indices into ``in_states`` of the split RandomStates.
        lane_written_mask: per written state, whether the lanes return it.
        lane_written_axes: the out axis of each lane-written state.
        leaf_axes: the mapped axis of each dynamic argument leaf.
        leaf_positions: the positional index of each dynamic leaf (None for keywords).
        mapped_inputs: whether any argument or state is mapped (else a lane index is).
        out_varying: per output leaf, whether it differs across lanes.
        arg_avals: the (batched) abstract value of each dynamic argument leaf.
        program: the mapped program before ``jax.jit`` (set when compiling).
    """

    axis_size: int
    axis_name: Hashable
    in_modes: list[Any]
    split_positions: list[Any]
    lane_written_mask: list[Any]
    lane_written_axes: list[Any]
    leaf_axes: list[Any]
    leaf_positions: list[Any]
    mapped_inputs: bool
    out_varying: list[Any]
    arg_avals: list[Any]
    program: Callable[..., Any] | None = None


class StatefulMapping(StatefulFunction):
    """Map a function that reads and writes States over an axis, with a cached compiled program.

    This is the engine behind ``vmap2`` and ``pmap2``. On the first call with a
    new argument signature it traces ``fun`` once at per-lane shapes, discovers
    the states it touches, decides each state's mapped axis, and builds
    ``mapping_fn(pure_fn, in_axes=..., out_axes=..., axis_name=..., axis_size=...)``
    (wrapped in ``jax.jit`` unless ``mapping_fn`` already compiles, as ``jax.pmap``
    does). Later calls with the same signature only gather the state values, run
    that cached program once and write the results back.

    Args:
        fun: the function (or Module, or bound method) to map.
        in_axes: as in ``jax.vmap``: an int, None, or a tuple with one entry per
            positional argument. Keyword arguments follow ``keyword_axis``.
        out_axes: as in ``jax.vmap``, for the return value.
        state_in_axes: which states are mapped on the way in: ``{axis: filter}``
            (``axis`` may be None = broadcast), a single filter (= ``{0: filter}``),
            a State, a list of States, or None. The first matching entry wins.
            States no entry claims are broadcast.
        state_out_axes: the same, for the new values of written states.
        unexpected_out_state_mapping: what to do with a written state that no
            ``state_out_axes`` entry covers and whose new value differs across
            lanes: ``'raise'`` (error naming the state), ``'warn'`` (warn, then
            stack it), ``'ignore'`` or ``'auto'`` (stack it silently; brainstate's
            name). A stacked state goes out on the axis it came in on, else on axis
            0, and later calls feed its stacked value per lane, so it keeps its
            shape. A written state whose new value is the same on every lane is
            written back as is.
        static_argnums: positions of arguments that are compile-time constants.
        static_argnames: names of arguments that are compile-time constants.
        axis_size: the size of the mapped axis when no argument or state gives it.
        axis_name: the name of the mapped axis, for collectives such as ``psum``.
        name: a label for messages.
        mapping_fn: the mapping primitive (``jax.vmap`` by default, or ``jax.pmap``
            or any function with that calling convention).
        mapping_kwargs: extra keyword arguments for ``mapping_fn``.
        keyword_axis: the axis every keyword argument is mapped over: 0 (the
            default, as in ``jax.vmap``) or None to pass keyword arguments
            unmapped, the same value to every lane (``state_nn.Map`` does this).

    RandomStates (from ``state_random``) that the function reads and whose value is
    a single key get one independent key per lane, split inside the compiled
    program; afterwards the state holds a fresh key.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ShortTermState
        >>> from state_core.filter import OfType
        >>> from state_transform import StatefulMapping
        >>> count = ShortTermState(jnp.zeros(3))
        >>> def bump(x):
        ...     count.value = count.value + x
        ...     return count.value
        >>> f = StatefulMapping(bump, state_in_axes={0: OfType(ShortTermState)},
        ...                     state_out_axes={0: OfType(ShortTermState)})
        >>> f(jnp.array([1., 2., 3.]))
        Array([1., 2., 3.], dtype=float32)
        >>> count.value
        Array([1., 2., 3.], dtype=float32)
    """

    __module__ = "state_transform"

    def __init__(
        self,
        fun: Callable[..., Any],
        in_axes: Any = 0,
        out_axes: Any = 0,
        state_in_axes: Any = None,
        state_out_axes: Any = None,
        unexpected_out_state_mapping: str = "ignore",
        static_argnums: int | Iterable[int] = (),
        static_argnames: str | Iterable[str] = (),
        axis_size: int | None = None,
        axis_name: Hashable | None = None,
        name: str | None = None,
        mapping_fn: Callable[..., Any] = jax.vmap,
        mapping_kwargs: dict[str, Any] | None = None,
        *,
        keyword_axis: int | None = 0,
    ) -> None:
        if isinstance(fun, State):
            raise TypeError("StatefulMapping maps a callable, not a State; read the state inside a function.")
        super().__init__(fun, static_argnums, static_argnames, name=name)
        if unexpected_out_state_mapping not in _POLICIES:
            raise ValueError(
                f"unexpected_out_state_mapping must be one of {_POLICIES}, got {unexpected_out_state_mapping!r}."
            )
        if axis_size is not None and (not isinstance(axis_size, int) or axis_size < 1):
            raise ValueError(f"axis_size must be a positive int or None, got {axis_size!r}.")
        if keyword_axis is not None and (not isinstance(keyword_axis, int) or isinstance(keyword_axis, bool)):
            raise TypeError(f"keyword_axis must be an int or None, got {keyword_axis!r}.")
        self.keyword_axis = keyword_axis
        self.origin_fun = fun
        self.in_axes = in_axes
        self.out_axes = out_axes
        self.state_in_axes = normalize_state_axes(state_in_axes, "state_in_axes")
        self.state_out_axes = normalize_state_axes(state_out_axes, "state_out_axes")
        self.unexpected_out_state_mapping = unexpected_out_state_mapping
        self.axis_size = axis_size
        self.axis_name = axis_name
        self.mapping_fn = mapping_fn
        self.mapping_kwargs = dict(mapping_kwargs or {})
        # Set by pmap2: how many devices there are to map over, and which user
        # positional arguments to donate.
        self._device_limit: Callable[[], int] | None = None
        self._donate_positions: frozenset[int] = frozenset()
        # Undeclared written states this mapping stacked on an axis: id -> (weakref, axis).
        self._stacked: dict[int, tuple[Any, int]] = {}

    # ------------------------------------------------------------------ naming states
    def _state_label(self, state: State[Any], paths: dict[int, tuple[Any, ...]]) -> str:
        path = paths.get(id(state))
        if path:
            return f"{type(state).__name__} at path '{'.'.join(map(str, path))}'"
        return state.describe()

    def _resolve_axis(self, state: State[Any], axes: dict[Any, Any], paths: dict[int, tuple[Any, ...]]) -> Any:
        return first_match(axes.items(), paths.get(id(state), ()), state, _UNDECLARED)

    def _in_axis(self, state: State[Any], value: Any, paths: dict[int, tuple[Any, ...]]) -> Any:
        """The axis ``state`` is mapped on the way in, including an axis this mapping stacked it on."""
        axis = self._resolve_axis(state, self.state_in_axes, paths)
        if axis is not _UNDECLARED:
            return axis
        stacked = self._stacked.get(id(state))
        if stacked is None or stacked[0]() is not state:
            return _UNDECLARED
        leaves = jax.tree.leaves(value)
        if not leaves or stacked[1] >= len(jax.numpy.shape(leaves[0])):
            return _UNDECLARED  # the user reset it to an unstacked value
        return stacked[1]

    # ------------------------------------------------------------------ tracing hooks
    def _new_trace_context(self) -> _MappingTrace:
        return _MappingTrace(paths=states_of_callable(self.origin_fun).paths_by_state())

    def _trace(
        self,
        ctx: _MappingTrace,
        key: Hashable,
        leaves: list[Any],
        treedef: Any,
        static_args: tuple[Any, ...],
        static_kwargs: tuple[Any, ...],
        dyn_args: tuple[Any, ...],
        dyn_kwargs: dict[str, Any],
    ) -> TracedCall:
        is_pmap = self.mapping_fn is jax.pmap
        for _ in range(2):
            _PMAP_TRACES.depth += is_pmap
            ok = False
            try:
                entry = super()._trace(ctx, key, leaves, treedef, static_args, static_kwargs, dyn_args, dyn_kwargs)
                ok = True
            finally:
                _PMAP_TRACES.depth -= is_pmap
                if not ok:
                    self._advance_after_failed_trace(ctx)
            size = self._decide_axis_size(ctx.sizes)
            if self.axis_name is None or ctx.size_used is None or ctx.size_used == size:
                return entry
            # The axis size came from a state discovered mid-trace, and the function
            # used the named axis: trace again with the real size bound.
            ctx.restart(size)
        return entry

    def _advance_after_failed_trace(self, ctx: _MappingTrace) -> None:
        # Randomness is consumed even by a failed call, so a retry draws new numbers.
        sizes = list(ctx.sizes)
        if self.axis_size is not None:
            sizes.append((self.axis_size, "axis_size"))
        if len({s for s, _ in sizes}) != 1:
            return  # no consistent size: the error being raised says why
        advance_keys(ctx.split, [s._value for s in ctx.split], sizes[0][0])

    def _axis_env(self, ctx: _MappingTrace) -> list[tuple[Any, int]] | None:
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
        for state in states_of_callable(self.origin_fun).values():
            axis = self._in_axis(state, state._value, ctx.paths)
            if isinstance(axis, int) and not isinstance(axis, bool):
                leaves = jax.tree.leaves(state._value)
                if leaves and -len(jax.numpy.shape(leaves[0])) <= axis < len(jax.numpy.shape(leaves[0])):
                    return jax.numpy.shape(leaves[0])[axis]
        return None

    def _abstract_inputs(
        self, ctx: _MappingTrace, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any], leaves: list[Any]
    ) -> list[Any]:
        n_static = len(self.static_argnums)
        static_positions = frozenset((i + len(dyn_args) + n_static) if i < 0 else i for i in self.static_argnums)
        all_args = _interleave_statics(dyn_args, static_positions)
        axes, labels, positions = leaf_in_axes(self.in_axes, all_args, dyn_kwargs, static_positions, self.keyword_axis)
        ctx.leaf_positions = positions
        abstract = []
        checked_axes = []
        for leaf, axis, label in zip(leaves, axes, labels, strict=True):
            aval = jax.typeof(leaf)
            ctx.arg_avals.append(jax.core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type))
            axis = check_axis(axis, len(aval.shape), label, aval.shape)
            if axis is not None:
                ctx.sizes.append((aval.shape[axis], label))
            checked_axes.append(axis)
            abstract.append(remove_axis(aval, axis))
        ctx.leaf_axes = checked_axes
        return abstract

    def _state_input_avals(self, ctx: _MappingTrace, state: State[Any], value: Any) -> Any:
        paths = ctx.paths
        axis = self._in_axis(state, value, paths)
        if axis is not None and is_random_state(state) and is_single_key(value):
            # One key for the whole call: give every lane its own key (an explicit
            # None in state_in_axes instead broadcasts the same key to all lanes).
            ctx.modes[id(state)] = _SPLIT
            ctx.split.append(state)
            return super()._state_input_avals(ctx, state, value)
        if axis is _UNDECLARED or axis is None:
            ctx.modes[id(state)] = None
            return super()._state_input_avals(ctx, state, value)
        label = self._state_label(state, paths)
        avals = []
        leaves, treedef = jax.tree.flatten(value)
        for leaf in leaves:
            aval = jax.typeof(leaf)
            ax = check_axis(axis, len(aval.shape), f"{label} (from state_in_axes)", aval.shape)
            ctx.sizes.append((aval.shape[ax], label))
            avals.append(remove_axis(aval, ax))
        ctx.modes[id(state)] = axis if axis >= 0 else axis + len(jax.typeof(leaves[0]).shape)
        return jax.tree.unflatten(treedef, avals)

    def _after_trace(
        self, ctx: _MappingTrace, entry: TracedCall, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any]
    ) -> None:
        paths = ctx.paths
        modes = ctx.modes
        size = self._decide_axis_size(ctx.sizes)
        in_modes = [modes[id(s)] for s in entry.in_states]
        split_positions = [k for k, m in enumerate(in_modes) if m == _SPLIT]
        split_states = [entry.in_states[k] for k in split_positions]
        split_ids = {id(s) for s in split_states}

        # Which written values differ between lanes (decides undeclared writes).
        varying_in = []
        for state, mode in zip(entry.in_states, in_modes, strict=True):
            varying_in.extend([mode is not None] * len(jax.tree.leaves(state._value)))
        varying_in.extend(axis is not None for axis in ctx.leaf_axes)
        axis_name = self.axis_name if self.axis_name is not None else _private_axis_name()
        varying = varying_outputs(entry.closed_jaxpr.jaxpr, varying_in, self.axis_name)
        written_varying = varying[entry.n_out_leaves :]

        lane_written: list[State[Any]] = []
        lane_written_axes: list[Any] = []
        lane_written_mask: list[bool] = []
        i = 0
        for state in entry.out_states:
            n = jax.tree.structure(state._value).num_leaves  # type: ignore[attr-defined]  # jaxlib PyTreeDef stub not found
            state_varies = any(written_varying[i : i + n])
            i += n
            if id(state) in split_ids:
                lane_written_mask.append(False)
                continue
            lane_written_mask.append(True)
            lane_written.append(state)
            lane_written_axes.append(self._out_axis(state, state_varies, paths, modes.get(id(state))))
            if n:
                ndim = max(1, jax.numpy.ndim(jax.tree.leaves(state._value)[0]))
                label = self._state_label(state, paths)
                check_state_in_out_axes(self.name, label, modes.get(id(state)), lane_written_axes[-1], ndim)
        check_out_axes(self.out_axes, entry.out_shapes, self.name)
        entry.plan = MappingPlan(
            axis_size=size,
            axis_name=axis_name,
            in_modes=in_modes,
            split_positions=split_positions,
            lane_written_mask=lane_written_mask,
            lane_written_axes=lane_written_axes,
            leaf_axes=list(ctx.leaf_axes),
            leaf_positions=list(ctx.leaf_positions),
            mapped_inputs=bool(ctx.sizes),
            out_varying=varying[: entry.n_out_leaves],
            arg_avals=list(ctx.arg_avals),
        )
        entry.write_back = lane_written + split_states
        if split_positions:

            def advance_on_failure(values: list[Any]) -> None:
                advance_keys(split_states, [values[k] for k in split_positions], size)

            entry.on_failure = advance_on_failure

    def _runs_on_several_devices(self, entry: TracedCall) -> bool:
        return self.mapping_fn is jax.pmap

    def _decide_axis_size(self, sizes: list[tuple[int, str]]) -> int:
        sizes = list(sizes)
        if self.axis_size is not None:
            sizes.append((self.axis_size, "axis_size"))
        distinct = {s for s, _ in sizes}
        if not sizes:
            raise ValueError(
                f"{self.name}: cannot tell the size of the mapped axis: no argument or state is "
                "mapped. Pass axis_size=..., map an argument with in_axes, or map a state with "
                "state_in_axes."
            )
        if len(distinct) > 1:
            raise BatchAxisError(
                f"{self.name}: the mapped axis has inconsistent sizes: {format_sizes(sizes)}. "
                "Every mapped argument and state must have the same size along its mapped axis."
            )
        size = sizes[0][0]
        nested = _PMAP_TRACES.depth > (self.mapping_fn is jax.pmap)
        limit = self._device_limit() if self._device_limit is not None and not nested else None
        if limit is not None and size > limit:
            raise ValueError(
                f"{self.name}: the mapped axis has size {size} but only {limit} "
                "device(s) are available to map over. Use at most that many lanes (or pass "
                "`devices=`), or use vmap2 to batch on one device."
            )
        return size

    def _out_axis(self, state: State[Any], varies: bool, paths: dict[int, tuple[Any, ...]], in_mode: Any = None) -> Any:
        axis = self._resolve_axis(state, self.state_out_axes, paths)
        label = self._state_label(state, paths)
        if axis is not _UNDECLARED:
            if axis is None and varies:
                raise BatchAxisError(
                    f"{self.name}: {label} is declared unmapped (None) in state_out_axes, but its "
                    "new value differs across the mapped axis. Declare an int axis for it, or "
                    "reduce it over the axis (e.g. with jax.lax.pmean) before writing it."
                )
            return axis
        if not varies:
            return None
        policy = self.unexpected_out_state_mapping
        # A state that came in mapped goes out on the same axis; otherwise axis 0.
        axis = in_mode if isinstance(in_mode, int) else 0
        fix = f"state_out_axes={{{axis}: {type(state).__name__}}}"
        message = (
            f"{self.name}: {label} is written with a value that differs across the mapped axis, "
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
                stacklevel=5,
            )
        # Remember the decision: on later calls the now-stacked value is fed per lane,
        # so a read-modify-write state does not gain an axis on every call.
        self._stacked[id(state)] = (weakref.ref(state), axis)
        return axis

    # ------------------------------------------------------------------ compiling
    def _compile(self, entry: TracedCall) -> Callable[..., Any]:
        plan: MappingPlan = entry.plan
        run = jex_core.jaxpr_as_fun(entry.closed_jaxpr)
        n_out = entry.n_out_leaves
        out_treedef = entry.out_treedef
        out_defs = [jax.tree.structure(s._value) for s in entry.out_states]
        size = plan.axis_size
        axis_name = plan.axis_name
        split_positions = plan.split_positions
        mask = plan.lane_written_mask

        kwargs = dict(self.mapping_kwargs)
        mapping_fn = self.mapping_fn
        if mapping_fn is jax.pmap and _PMAP_TRACES.depth > 0:
            # jax.pmap cannot be nested in another pmap on current JAX; inside an
            # outer pmap2 the inner axis is vectorised on each outer device instead
            # (collectives over both axis names still work).
            mapping_fn = jax.vmap
            kwargs = {}
        # Under vmap the keys are split once, before mapping (a slice per lane); other
        # mapping primitives split inside each lane and pick the lane's key by index.
        split_before = mapping_fn is jax.vmap
        # When nothing is mapped (the size comes from axis_size alone) a dummy lane
        # index array is mapped instead: jax.pmap needs at least one mapped input.
        lanes = None if plan.mapped_inputs else jax.numpy.arange(size, dtype=jax.numpy.int32)

        def lane(state_values: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any], list[Any]]:
            next_keys: list[Any]
            if split_before:
                values, next_keys = state_values, []
            else:
                values, next_keys = give_lanes_their_keys(state_values, split_positions, size, axis_name)
            leaves = []
            for value in values:
                leaves.extend(jax.tree.leaves(value))
            if lanes is not None:
                dyn_leaves = dyn_leaves[:-1]
            flat = run(*leaves, *dyn_leaves)
            out = jax.tree.unflatten(out_treedef, flat[:n_out])
            written = [v for v, keep in zip(unflatten_states(out_defs, flat[n_out:]), mask, strict=True) if keep]
            return out, written, next_keys

        split_axis = 0 if split_before else None
        in_axes = [split_axis if m == _SPLIT else m for m in plan.in_modes]
        leaf_axes = list(plan.leaf_axes)
        if lanes is not None:
            leaf_axes.append(0)
        if self._donate_positions:
            kwargs["donate_argnums"] = tuple(
                1 + j for j, p in enumerate(plan.leaf_positions) if p in self._donate_positions
            )
        mapped = mapping_fn(
            lane,
            in_axes=(in_axes, *leaf_axes),
            out_axes=(
                self.out_axes,
                plan.lane_written_axes,
                [] if split_before else [None] * len(split_positions),
            ),
            axis_name=axis_name,
            **kwargs,
        )
        merge = merger(entry)

        def program(rw: list[Any], ro: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any]]:
            state_values = merge(rw, ro)
            if lanes is not None:
                dyn_leaves = (*dyn_leaves, lanes)
            keys_after = []
            if split_before and split_positions:
                for k in split_positions:
                    state_values[k], next_key = split_for_lanes(state_values[k], size)
                    keys_after.append(next_key)
            out, written, next_keys = mapped(state_values, *dyn_leaves)
            return out, written + next_keys + keys_after

        plan.program = program
        if hasattr(mapped, "lower"):  # already compiled: jax.pmap, or a jitted mapping
            return program
        return jax.jit(program)

    # ------------------------------------------------------------------ introspection
    def get_jaxpr_by_cache(self, key: Hashable) -> Any:
        """The MAPPED program traced for ``key``: batched arguments first, then the state values.

        Its outputs are the mapped return value and the new values of the written
        states (per-lane jaxpr: ``get_traced_call(key).closed_jaxpr``).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> from state_transform import vmap2
            >>> s = State(jnp.array(1.0))
            >>> f = vmap2(lambda x: x + s.value)
            >>> x = jnp.array([1.0, 2.0])
            >>> _ = f(x)
            >>> str(f.get_jaxpr_by_cache(f.get_arg_cache_key(x))).startswith('{ lambda ; a:f32[2] b:f32[].')
            True
        """
        entry = self._entry(key)
        plan: MappingPlan = entry.plan
        n_dyn = len(plan.arg_avals)
        state_defs = [jax.tree.structure(s._value) for s in entry.in_states]
        state_avals = [
            jax.core.ShapedArray(shape, dtype, weak_type=weak)
            for sigs in entry.in_state_avals
            for shape, dtype, weak in sigs
        ]

        def mapped(*flat: Any) -> tuple[Any, list[Any]]:
            values = unflatten_states(state_defs, flat[n_dyn:])
            rw, ro = entry.split_values(values)
            # Set when the entry was compiled, which _entry(key) requires.
            return cast(Callable[..., Any], plan.program)(rw, ro, *flat[:n_dyn])

        return jax.make_jaxpr(mapped)(*plan.arg_avals, *state_avals)

    def __repr__(self) -> str:
        return (
            f"StatefulMapping({self.name}, in_axes={self.in_axes!r}, out_axes={self.out_axes!r}, "
            f"state_in_axes={self.state_in_axes!r}, state_out_axes={self.state_out_axes!r}, "
            f"axis_name={self.axis_name!r}, axis_size={self.axis_size!r})"
        )


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
