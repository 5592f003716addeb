"""``shard_map``: a state-aware ``jax.shard_map`` over a device mesh."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from state_core import State, StatefulFunction, states_of_callable
from state_core.engine import (
    Program,
    StateRules,
    Strategy,
    Trace,
    TraceContext,
    annotated_spec,
    frozen,
    input_placer,
    jaxpr_evaluator,
    merger,
    mesh_type,
    named,
    place_value,
)

from ._lanes import SPLIT, kept_writes, lane_write_back, split_inside_lane, split_layout, splits_per_lane
from ._meshes import check_context_mesh, explicit_axes, explicit_sharding
from ._rules import SPECS, parse_state_rules
from ._typing import P, R

__all__ = ["shard_map", "ShardMapFunction", "ShardMapStrategy"]

_REPLICATED = PartitionSpec()


@dataclasses.dataclass(eq=False)
class _ShardTrace(TraceContext):
    """What one trace of a ``shard_map`` learns while the user function runs."""

    paths: dict[int, Any] = dataclasses.field(default_factory=dict)
    state_specs: dict[int, PartitionSpec | str] = dataclasses.field(default_factory=dict)
    leaf_specs: list[PartitionSpec] = dataclasses.field(default_factory=list)
    undeclared: list[State[Any]] = dataclasses.field(default_factory=list)  # replicated: no spec names them


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """How a traced signature of ``shard_map`` places its inputs (its strategy's record).

    Attributes:
        in_specs: the PartitionSpec of each input state.
        leaf_specs: the PartitionSpec of each dynamic argument leaf.
        split_positions: indices into ``in_states`` of the states split per shard (random keys).
        written_mask: per written state, whether the shards return it.
        written_specs: the out spec of each shard-written state, then of each created state.
        state_shardings, leaf_shardings: ``NamedSharding`` of the specs above.
    """

    in_specs: tuple[PartitionSpec, ...]
    leaf_specs: tuple[PartitionSpec, ...]
    split_positions: tuple[int, ...]
    written_mask: tuple[bool, ...]
    written_specs: tuple[PartitionSpec, ...]
    state_shardings: tuple[NamedSharding, ...]
    leaf_shardings: tuple[NamedSharding, ...]


def _spec_axes(entry: Any) -> tuple[Any, ...]:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def _spec_mesh_axes(spec: PartitionSpec) -> tuple[Any, ...]:
    """The mesh axes a PartitionSpec shards over (those a per-shard value varies over)."""
    return tuple(name for entry in spec for name in _spec_axes(entry))


class ShardMapFunction(StatefulFunction, Generic[P, R]):
    """The callable ``shard_map`` returns, compiled as ``jax.jit(jax.shard_map(...))`` per signature.

    On a new signature the function runs once, traced inside a ``jax.shard_map``
    context so that every value is typed by the mesh axes it varies over (what
    ``check_vma=True`` checks); the states it touches become inputs of the traced
    program, which the compiled ``jax.shard_map`` then runs. Cached calls do not
    run it.

    Args:
        fun: the function run on every shard (per-shard shapes); it may read and
            write States but must not take or return them.
        mesh: the ``jax.sharding.Mesh`` of devices (Explicit or Auto axes).
        in_specs: a ``PartitionSpec`` per positional argument (a tuple or list),
            or one spec (None: ``P()``) for all; keyword arguments are replicated.
        out_specs: a ``PartitionSpec`` or pytree of them for the return value.
        state_in_specs: None (every state replicated, unless its ``sharding``
            annotation says otherwise), one ``PartitionSpec`` for every state, or
            ``{State or filter: PartitionSpec}`` (first match wins).
        state_out_specs: the same for the new values of written states; a state
            it does not cover keeps the spec it came in with.
        check_vma: type values by the mesh axes they vary over and check
            replicated outputs, as ``jax.shard_map`` does (default True).
        donate_states: update written states in place when nothing but the State
            refers to the old value (the default); ``False`` always allocates new
            buffers.

    Raises:
        TypeError: ``mesh`` is not a ``Mesh``, or ``state_in_specs`` /
            ``state_out_specs`` is not one of the forms above.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import PartitionSpec as P
        >>> from state_core import State
        >>> from state_transform import shard_map
        >>> mesh = jax.make_mesh((jax.device_count(),), ('x',))
        >>> total = State(jnp.zeros(()))
        >>> def add_all(data):
        ...     total.value = total.value + jax.lax.psum(data.sum(), 'x')
        ...     return data
        >>> f = shard_map(add_all, mesh, in_specs=P('x'), out_specs=P('x'))
        >>> _ = f(jnp.ones(jax.device_count()))
        >>> float(total.value) == jax.device_count()
        True
    """

    __module__ = "state_transform"
    strategy: ShardMapStrategy

    def __init__(
        self,
        fun: Callable[P, R],
        mesh: Mesh,
        in_specs: Any,
        out_specs: Any,
        state_in_specs: Any = None,
        state_out_specs: Any = None,
        check_vma: bool = True,
        donate_states: bool = True,
    ) -> None:
        if not isinstance(mesh, Mesh):
            raise TypeError(f"shard_map: mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}.")
        strategy = ShardMapStrategy(
            donate_states=donate_states,
            mesh=mesh,
            in_specs=in_specs,
            out_specs=out_specs,
            # Only the parsed rules are kept: ``{State or filter: spec}``, first match wins.
            in_rules=parse_state_rules(state_in_specs, "state_in_specs", "shard_map", SPECS),
            out_rules=parse_state_rules(state_out_specs, "state_out_specs", "shard_map", SPECS),
            check_vma=check_vma,
        )
        super().__init__(fun, name=f"shard_map({getattr(fun, '__name__', type(fun).__name__)})", strategy=strategy)

    if TYPE_CHECKING:  # the call takes and returns what `fun` does (StatefulFunction.__call__ runs it)

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    @property
    def mesh(self) -> Mesh:
        """The device mesh the function runs on."""
        return self.strategy.mesh

    @property
    def in_specs(self) -> Any:
        """The ``in_specs`` of the positional arguments, as given."""
        return self.strategy.in_specs

    @property
    def out_specs(self) -> Any:
        """The ``out_specs`` of the return value, as given."""
        return self.strategy.out_specs

    @property
    def check_vma(self) -> bool:
        """Whether values are typed by the mesh axes they vary over."""
        return self.strategy.check_vma

    @property
    def state_in_specs(self) -> dict[Any, PartitionSpec]:
        """``{filter: PartitionSpec}``: the ``state_in_specs`` rules, in priority order (the first match wins)."""
        return _by_filter(self.strategy.in_rules)

    @property
    def state_out_specs(self) -> dict[Any, PartitionSpec]:
        """``{filter: PartitionSpec}``: the ``state_out_specs`` rules, in priority order (the first match wins)."""
        return _by_filter(self.strategy.out_rules)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardMapStrategy(Strategy[_ShardTrace]):
    """How ``shard_map`` traces and compiles: inside a ``jax.shard_map`` context, then ``jax.jit(jax.shard_map(...))``.

    Args:
        mesh: the device mesh.
        in_specs: the user's ``in_specs``.
        out_specs: the user's ``out_specs``.
        in_rules: the parsed ``state_in_specs``.
        out_rules: the parsed ``state_out_specs``.
        check_vma: type values by the mesh axes they vary over.
    """

    mesh: Mesh
    in_specs: Any
    out_specs: Any
    in_rules: StateRules[PartitionSpec]
    out_rules: StateRules[PartitionSpec]
    check_vma: bool = True

    def identity(self) -> Hashable | None:
        """The options, mesh and parsed rules."""
        return (
            self.static_argnums,
            self.static_argnames,
            self.donate_states,
            self.mesh,
            frozen(self.in_specs),
            frozen(self.out_specs),
            self.in_rules,
            self.out_rules,
            self.check_vma,
        )

    # ------------------------------------------------------------------ specs
    def _per_shard_aval(self, aval: Any, spec: PartitionSpec, where: str) -> Any:
        shape = list(aval.shape)
        if len(spec) > len(shape):
            raise ValueError(
                f"shard_map: the spec {spec} of {where} has {len(spec)} entries but the value has "
                f"shape {tuple(aval.shape)}; a spec may have at most one entry per dimension."
            )
        for dim, entry in enumerate(spec):
            names = _spec_axes(entry)
            for name in names:
                if name not in self.mesh.shape:
                    raise ValueError(
                        f"shard_map: the spec {spec} of {where} names mesh axis {name!r}, but the "
                        f"mesh has axes {tuple(self.mesh.axis_names)}."
                    )
            parts = math.prod(self.mesh.shape[n] for n in names)
            if shape[dim] % parts:
                raise ValueError(
                    f"shard_map: {where} has size {shape[dim]} along dimension {dim}, which the "
                    f"spec {spec} splits into {parts} shards; {shape[dim]} is not divisible by "
                    f"{parts}. Pad the value or choose a mesh axis that divides it."
                )
            shape[dim] //= parts
        return jax.core.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type)

    def _typed(self, aval: Any, axes: tuple[Any, ...]) -> Any:
        """``aval`` typed as varying over mesh ``axes`` (only inside the shard_map context)."""
        if not self.check_vma or not axes:
            return aval
        # A value's type records the mesh axes it varies over; make one that does.
        probe = jax.lax.pcast(jax.numpy.zeros(aval.shape, aval.dtype), axes, to="varying")
        typed = jax.typeof(probe)
        return typed.update(weak_type=aval.weak_type) if aval.weak_type else typed

    def _arg_specs(self, n_args: int) -> tuple[Any, ...]:
        specs = self.in_specs
        if isinstance(specs, PartitionSpec) or specs is None:
            return ((specs or _REPLICATED),) * n_args
        if isinstance(specs, list):
            specs = tuple(specs)
        if not isinstance(specs, tuple) or len(specs) != n_args:
            got = len(specs) if isinstance(specs, tuple) else type(specs).__name__
            raise ValueError(
                f"shard_map: in_specs has {got} entries but the function was called with {n_args} "
                "positional argument(s); give one PartitionSpec per positional argument (or one "
                "spec for all)."
            )
        return specs

    def _state_spec(
        self, state: State[Any], rules: StateRules[PartitionSpec], paths: dict[int, Any]
    ) -> PartitionSpec | None:
        spec: PartitionSpec | None = rules.value_for(paths.get(id(state), ()), state)
        if spec is None and rules is self.in_rules:
            # A state no input rule names is laid out as its ``sharding`` annotation says
            # (and, when written, keeps that spec like any spec it came in with).
            return annotated_spec(state)
        return spec

    # ------------------------------------------------------------------ tracing hooks
    def new_trace_context(self, fun: Callable[..., Any], name: str, learned: Mapping[Any, Any]) -> _ShardTrace:
        """A ``_ShardTrace`` holding the paths of the States ``fun`` reaches."""
        return _ShardTrace(fun, name, learned, paths=states_of_callable(fun).paths_by_state())

    def trace(self, ctx: _ShardTrace, trace_once: Callable[[], Trace]) -> Trace:
        """Trace inside a ``jax.shard_map`` context on the mesh, after checking the mesh in effect."""
        # Before anything runs: a call refused here changes no state, not even a random key.
        check_context_mesh(self.mesh, ctx.name)
        traced: list[Trace] = []

        def inside_shard_map() -> tuple[()]:
            # The one run of the user function: traced here, where the mesh axes are
            # manual and values carry their varying axes, as in the compiled program.
            traced.append(trace_once())
            return ()

        context = jax.shard_map(inside_shard_map, mesh=self.mesh, in_specs=(), out_specs=(), check_vma=self.check_vma)
        # A failure here leaves every State as it was, random keys included: the trace
        # restores what it touched, and nothing is written back.
        try:
            jax.make_jaxpr(context)()
        except TypeError as err:
            # A shape clash inside the function is often a state that no spec names and
            # that every shard therefore sees whole: say which ones are replicated.
            note = _replicated_states_note(ctx.undeclared, tuple(self.mesh.shape.values()))
            if note is None:
                raise
            # In the message itself (not a note), so logs and str(err) show the fix too.
            raise TypeError(f"{err}\n{note}") from err
        except (AssertionError, NameError) as err:
            message = _unknown_axis_message(err, ctx.name, tuple(self.mesh.axis_names))
            if message is None:
                raise
            raise NameError(message) from err
        return traced[0]

    def abstract_inputs(
        self, ctx: _ShardTrace, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any], leaves: list[Any]
    ) -> list[Any]:
        """Each argument leaf at its per-shard shape, typed by the mesh axes it varies over."""
        specs = self._arg_specs(len(dyn_args))
        abstract = []
        for i, (arg, spec) in enumerate(zip(dyn_args, specs, strict=True)):
            if not isinstance(spec, PartitionSpec):
                raise TypeError(f"shard_map: in_specs[{i}] must be a PartitionSpec, got {spec!r}.")
            for path, leaf in jax.tree.leaves_with_path(arg):
                where = f"argument {i}{jax.tree_util.keystr(path)}"
                aval = self._per_shard_aval(jax.typeof(leaf), spec, where)
                abstract.append(self._typed(aval, _spec_mesh_axes(spec)))
                ctx.leaf_specs.append(spec)
        for leaf in jax.tree.leaves(dyn_kwargs):  # keyword arguments are replicated
            aval = jax.typeof(leaf)
            abstract.append(jax.core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type))
            ctx.leaf_specs.append(_REPLICATED)
        return abstract

    def state_input_avals(self, ctx: _ShardTrace, state: State[Any], value: Any) -> Any:
        """A state's per-shard abstract value, from its spec (or split per shard for a random key)."""
        spec = self._state_spec(state, self.in_rules, ctx.paths)
        if splits_per_lane(state, value, kept_whole=spec is not None):
            ctx.state_specs[id(state)] = SPLIT
            # Each shard gets its own part: a value that varies over every mesh axis.
            every_axis = tuple(self.mesh.axis_names)
            return jax.tree.map(lambda a: self._typed(a, every_axis), super().state_input_avals(ctx, state, value))
        if spec is None:
            ctx.undeclared.append(state)
        spec = spec or _REPLICATED
        ctx.state_specs[id(state)] = spec
        label = state.describe()
        axes = _spec_mesh_axes(spec)
        return jax.tree.map(lambda x: self._typed(self._per_shard_aval(jax.typeof(x), spec, label), axes), value)

    def analyze(
        self, ctx: _ShardTrace, trace: Trace, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any]
    ) -> ShardInfo:
        """Decide each state's in and out specs and check the written values against them (a ``ShardInfo``)."""
        specs = ctx.state_specs
        in_specs = [specs[id(s)] for s in trace.in_states]
        split_positions, mask = split_layout(trace, in_specs)
        written_specs = []
        out_avals = trace.closed_jaxpr.out_avals
        first = trace.n_out_leaves
        for state, treedef, lane_written in zip(trace.out_states, trace.out_state_defs, mask, strict=False):
            avals, first = out_avals[first : first + treedef.num_leaves], first + treedef.num_leaves
            if not lane_written:  # a split state: written from the split
                continue
            spec = self._state_spec(state, self.out_rules, ctx.paths)
            if spec is None:
                in_spec = specs.get(id(state))
                spec = in_spec if isinstance(in_spec, PartitionSpec) else _REPLICATED
            for leaf in jax.tree.leaves(state._value):
                self._per_shard_aval(jax.typeof(leaf), spec, f"{state.describe()} (state_out_specs)")
            self._check_written_varying(state, spec, avals, ctx.name)
            written_specs.append(spec)
        created_avals = trace.closed_jaxpr.out_avals[trace.n_out_leaves :]
        first = sum(d.num_leaves for d in trace.out_state_defs[: len(trace.out_states)])
        for state, treedef in zip(trace.created_states, trace.out_state_defs[len(trace.out_states) :], strict=True):
            # A new state: as state_out_specs says, else concatenated along its first
            # dimension over the mesh axes its value varies over (replicated if none).
            spec = self._state_spec(state, self.out_rules, ctx.paths)
            if spec is None:
                spec = self._created_spec(state, created_avals[first : first + treedef.num_leaves], ctx.name)
            written_specs.append(spec)
            first += treedef.num_leaves
        placed_specs = tuple(s if isinstance(s, PartitionSpec) else _REPLICATED for s in in_specs)  # split: replicated
        return ShardInfo(
            in_specs=placed_specs,
            leaf_specs=tuple(ctx.leaf_specs),
            split_positions=split_positions,
            written_mask=mask,
            written_specs=tuple(written_specs),
            state_shardings=tuple(NamedSharding(self.mesh, s) for s in placed_specs),
            leaf_shardings=tuple(NamedSharding(self.mesh, s) for s in ctx.leaf_specs),
        )

    def _check_written_varying(self, state: State[Any], spec: PartitionSpec, avals: Sequence[Any], name: str) -> None:
        """Refuse a new value that differs between shards along mesh axes its out spec keeps whole.

        JAX would refuse it too, naming the program's internal outputs; this names
        the state and says how to fix it.
        """
        kept = set(_spec_mesh_axes(spec))
        varying = _varying_axes(avals)
        extra = tuple(name for name in self.mesh.axis_names if name in varying and name not in kept)
        if not extra:
            return
        axes = extra[0] if len(extra) == 1 else extra
        raise ValueError(
            f"{name}: {state.describe()} is written with a value that differs between shards "
            f"along mesh axes {extra}, but its out spec {spec} keeps it whole on every shard along "
            f"them. Either make the value the same on every shard before writing it (e.g. "
            f"jax.lax.psum or jax.lax.pmean over {axes!r}), or shard the state along them: name it "
            f"in state_out_specs (and state_in_specs), e.g. {{filter: P({axes!r})}}. No state was written."
        )

    def _created_spec(self, state: State[Any], avals: Sequence[Any], name: str) -> PartitionSpec:
        """The out spec of a state created inside the function and named by no rule."""
        varying = _varying_axes(avals)
        if not varying:
            return _REPLICATED
        axes = tuple(name for name in self.mesh.axis_names if name in varying)
        if any(len(aval.shape) == 0 for aval in avals):
            raise ValueError(
                f"{name}: {state.describe()} is created with a scalar value that differs between "
                f"shards (it varies over mesh axes {axes}), so it has no dimension to put the shards "
                "side by side. Name it in state_out_specs, or give it a leading dimension."
            )
        return PartitionSpec(axes[0] if len(axes) == 1 else axes)

    def spans_devices(self, trace: Trace, info: ShardInfo) -> bool:
        """Whether the mesh has more than one device."""
        return self.mesh.size > 1

    # ------------------------------------------------------------------ compiling
    def compile(self, trace: Trace, info: ShardInfo, name: str) -> Program:
        """``jax.jit(jax.shard_map(...))`` of the traced program, its inputs placed by their specs."""
        evaluate = jaxpr_evaluator(trace, self.call_name(name))
        split_positions = info.split_positions
        split_states = tuple(trace.in_states[k] for k in split_positions)
        mask = info.written_mask
        axis_names = tuple(self.mesh.axis_names)
        num_shards = self.mesh.size

        def shard(state_values: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any], list[Any]]:
            # Replays the jaxpr traced inside shard_map: its values have the same
            # varying-axes types here, so check_vma accepts it unchanged.
            values, next_values = split_inside_lane(split_states, state_values, split_positions, num_shards, axis_names)
            out, written, created = evaluate(values, dyn_leaves)
            return out, kept_writes(written, mask) + created, next_values

        mapped = jax.shard_map(
            shard,
            mesh=self.mesh,
            in_specs=(list(info.in_specs), *info.leaf_specs),
            out_specs=(self.out_specs, list(info.written_specs), [_REPLICATED] * len(split_positions)),
            check_vma=self.check_vma,
        )
        state_shardings, leaf_shardings = info.state_shardings, info.leaf_shardings
        # On Explicit mesh axes a value's type carries its sharding, and jax.shard_map
        # checks that it matches the in_spec instead of moving it: move the inputs to the
        # layout the specs ask for (a no-op when they are already there). Only the
        # Explicit axes of a spec are typed; Auto axes are left to the partitioner.
        explicit = explicit_axes(self.mesh)
        state_targets = [explicit_sharding(self.mesh, s, explicit) for s in info.in_specs]
        leaf_targets = [explicit_sharding(self.mesh, s, explicit) for s in info.leaf_specs]
        merge = merger(trace)

        def program(rw: list[Any], ro: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any]]:
            state_values = merge(rw, ro)
            if explicit:
                state_values = [jax.reshard(v, s) for v, s in zip(state_values, state_targets, strict=True)]
                dyn_leaves = tuple(jax.reshard(x, s) for x, s in zip(dyn_leaves, leaf_targets, strict=True))
            out, written, next_values = mapped(state_values, *dyn_leaves)
            return out, written + next_values

        named(program, name)
        return Program(
            run=jax.jit(program),
            write_back=lane_write_back(trace, split_positions, mask),
            prepare=_placer(trace.in_states, state_shardings, leaf_shardings, self.mesh, name),
            **self.donating(jax.jit, program, trace),
        )


def _by_filter(rules: StateRules[PartitionSpec]) -> dict[Any, PartitionSpec]:
    """``{filter: spec}`` of ``rules`` (a filter given twice keeps its first, winning spec)."""
    shown: dict[Any, PartitionSpec] = {}
    for spec, f in rules:
        shown.setdefault(f, spec)
    return shown


def _varying_axes(avals: Sequence[Any]) -> set[Any]:
    """The mesh axes any of ``avals`` varies over (their ``check_vma`` types; empty without them)."""
    varying: set[Any] = set()
    for aval in avals:
        kind = mesh_type(aval)
        if kind is not None:
            varying.update(kind[1])
    return varying


def _placer(
    in_states: tuple[State[Any], ...],
    state_shardings: tuple[NamedSharding, ...],
    leaf_shardings: tuple[NamedSharding, ...],
    mesh: Mesh,
    who: str,
) -> Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]]:
    """``Program.prepare``: check the mesh in effect, then put the input values where the program expects them.

    The check runs on every call, cached ones included: ``jax.set_mesh`` may name
    another mesh since the program was traced, and a call refused here (before the
    run) changes no state. In one process the state values are kept on the mesh with
    their specs' shardings (written states come back placed, read-only ones are
    stored placed), so the program is not compiled again for a new input layout. On
    a mesh that spans processes every input must be a global array with the mesh's
    sharding.
    """
    if jax.process_count() == 1:
        place_states = input_placer(in_states, state_shardings)

        def prepare(values: list[Any], leaves: list[Any]) -> tuple[list[Any], list[Any]]:
            check_context_mesh(mesh, who)
            return place_states(values, leaves)

        return prepare

    def place(values: list[Any], leaves: list[Any]) -> tuple[list[Any], list[Any]]:
        check_context_mesh(mesh, who)
        values = [place_value(v, s) for v, s in zip(values, state_shardings, strict=True)]
        leaves = [place_value(x, s) for x, s in zip(leaves, leaf_shardings, strict=True)]
        return values, leaves

    return place


def _unknown_axis_message(err: BaseException, who: str, mesh_axes: tuple[Any, ...]) -> str | None:
    """A message for a collective that names an axis the mesh lacks; None if ``err`` is something else.

    JAX reports such a name with a ``NameError``, or (for ``psum``, ``pmean`` and
    ``ppermute`` when varying axes are checked) with a bare ``AssertionError`` from
    inside JAX. A user's own ``assert`` fails in the user's code and is left alone.
    The unknown name is taken from JAX's message, or else from the failing JAX
    frame's locals (best effort: the message lists the mesh's axes either way).
    """
    tb = err.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    if f"{os.sep}jax{os.sep}" not in tb.tb_frame.f_code.co_filename:
        return None
    if isinstance(err, AssertionError) and (str(err) or "axes" not in tb.tb_frame.f_locals):
        # JAX's checks of an axis name fail with the names in a local ``axes``; other bare
        # asserts inside JAX (a sharding it cannot handle) are not about axis names.
        return None
    unknown: list[Any] = []
    if isinstance(err, NameError):
        name = str(err).rsplit(":", 1)[-1].strip().split(".")[0].strip()
        unknown = [name] if name and name not in mesh_axes else []
    else:
        named = tb.tb_frame.f_locals.get("axes")
        named = named if isinstance(named, tuple) else (named,)
        unknown = [name for name in named if isinstance(name, str) and name not in mesh_axes]
    which = f"axis name {', '.join(map(repr, unknown))}" if unknown else "an axis name"
    return (
        f"{who}: a collective (psum, pmean, all_gather, ppermute, axis_index ...) "
        f"uses {which}, which the mesh does not have; the mesh's axes are {mesh_axes}. "
        "Use one of those names (the mesh's axis_names), or add the axis to the mesh."
    )


def _replicated_states_note(undeclared: Any, axis_sizes: tuple[int, ...]) -> str | None:
    """A note for an error raised while tracing: the states every shard sees whole.

    Only states that could be split over a mesh axis (a dimension divisible by the
    axis size) are named: a small replicated parameter is rarely the culprit.
    """
    named = []
    for state in undeclared:
        leaf_shapes = [tuple(getattr(x, "shape", ())) for x in jax.tree.leaves(state._value)]
        if any(d % n == 0 for shape in leaf_shapes for d in shape for n in axis_sizes if n > 1):
            shapes = ", ".join(sorted({str(shape) for shape in leaf_shapes}))
            named.append(f"{state.describe()} ({shapes})")
    if not named:
        return None
    return (
        "shard_map: these states are not named in state_in_specs, so every shard sees their "
        f"whole value: {'; '.join(named)}. If the error above is a shape clash with the per-shard "
        "data, shard them like the data, e.g. state_in_specs={state: P('x')}."
    )


def shard_map(
    fun: Callable[P, R],
    mesh: Mesh,
    in_specs: Any,
    out_specs: Any,
    *,
    state_in_specs: PartitionSpec | dict[Any, Any] | None = None,
    state_out_specs: PartitionSpec | dict[Any, Any] | None = None,
    check_vma: bool = True,
    donate_states: bool = True,
) -> ShardMapFunction[P, R]:
    """Map a stateful function over shards of data on a device mesh (SPMD), like ``jax.shard_map``.

    States are replicated on every device unless ``state_in_specs`` gives them a
    ``PartitionSpec``: one spec for every state, or a dict whose keys are States
    or filters (``{OfType(ParamState): P()}``; the first match wins). Written
    states come back with ``state_out_specs`` (default: the spec they came in
    with). RandomStates holding one key get a distinct key per shard. Positional
    arguments are sharded by ``in_specs`` (one spec per argument, or one for all);
    keyword arguments are replicated. The program is traced once per call
    signature and cached as ``jax.jit(jax.shard_map(...))``, so an eager call is
    one dispatch; it also works inside ``jax.jit`` and on meshes spanning several
    processes (``jax.distributed``).

    Args:
        fun: The function to run on every shard. It may read and write
            ``State`` objects but must not take or return them; it sees
            per-shard shapes.
        mesh: The device mesh, e.g. ``jax.make_mesh((8,), ('x',))`` or
            ``jax.make_mesh((4, 2), ('data', 'model'))``. Its axes may be
            Explicit (``jax.make_mesh``'s default), Auto, or both: inputs are
            moved to their specs either way. Under ``jax.set_mesh`` it must be
            the mesh set (same axis types too), or the call is a ``ValueError``.
        in_specs: A ``PartitionSpec`` per positional argument (a tuple with one
            entry per argument), or one spec for all. On a mesh ``('x',)`` of 8
            devices, ``x: f32[16, 3]`` with ``P('x')`` is ``f32[2, 3]`` per shard;
            ``P()`` replicates.
        out_specs: A ``PartitionSpec`` (or pytree of them) for the outputs: how
            the per-shard results are assembled. ``P()`` requires the result to
            be the same on every shard (for example after ``jax.lax.psum``).
        state_in_specs: How states are laid out on the mesh: ``None``
            (default, all replicated), one ``PartitionSpec`` for every state, or
            ``{State or filter: spec}`` (first match wins; unmatched states use
            their ``sharding`` annotation's PartitionSpec, or are replicated). A state of
            value ``f32[16]`` with ``P('x')`` is ``f32[2]`` per shard on 8 devices.
        state_out_specs: The same, for the new values of written states;
            a written state not covered keeps the spec it came in with.
        check_vma: Passed to ``jax.shard_map``: values are typed by the mesh
            axes they vary over, and values declared replicated (``P()``
            outputs) are checked to be the same on every device. State-aware
            transforms nested in ``fun`` (``jit``, ``grad``, ``vmap2``, loops,
            ...) are traced with these types, so, as in JAX, the gradient of a
            replicated state with respect to a loss on sharded data is summed
            over the shards. ``False`` drops the types (and that sum).
        donate_states: Update the states the function writes in place: when
            nothing but a State refers to its old value, the program reuses that
            buffer (the default). ``False`` always allocates new buffers.

    Returns:
        A ``ShardMapFunction``, callable with ``fun``'s positional arguments.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import PartitionSpec as P
        >>> from state_core import State
        >>> from state_transform import shard_map
        >>> mesh = jax.make_mesh((jax.device_count(),), ('x',))
        >>> w = State(jnp.array(3.0))
        >>> f = shard_map(lambda data: data * w.value, mesh, in_specs=(P('x'),), out_specs=P('x'))
        >>> f(jnp.arange(jax.device_count() * 2, dtype=jnp.float32)).tolist()[:4]
        [0.0, 3.0, 6.0, 9.0]

        A buffer sharded like the data, accumulated in place on each device:

        >>> n = jax.device_count()
        >>> buffer = State(jnp.zeros(2 * n))
        >>> def accumulate(data):
        ...     buffer.value = buffer.value + data
        ...     return jax.lax.psum(data.sum(keepdims=True), 'x')
        >>> g = shard_map(accumulate, mesh, in_specs=(P('x'),), out_specs=P(),
        ...               state_in_specs={buffer: P('x')}, state_out_specs={buffer: P('x')})
        >>> float(g(jnp.ones(2 * n))[0]) == 2.0 * n
        True
        >>> float(buffer.value.sum()) == 2.0 * n
        True
    """
    return ShardMapFunction(fun, mesh, in_specs, out_specs, state_in_specs, state_out_specs, check_vma, donate_states)
