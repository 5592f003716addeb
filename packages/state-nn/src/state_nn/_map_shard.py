"""Members of a ``Map`` spread over devices: one ``vmap`` whose member axis is sharded over a mesh.

``Map(behavior='pmap')`` and ``Map(behavior='shard')`` run the same program as
``behavior='vmap'`` (so random draws and results match it member for member),
compiled with ``jax.jit`` and explicit shardings that put ``init_map_size / D``
members on each of the ``D`` devices of a mesh axis. The partitioner then runs
each device's members on that device; collectives over the Map's ``axis_name``
become cross-device reductions.

The member values stay on the mesh the user gave, whatever its axis types, so
they can be used beside other values under ``jax.set_mesh`` of that mesh. The
program itself is traced with the mesh's axes in Auto mode: the member axis is
placed by the shardings, not typed, exactly as on a mesh of Auto axes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from state_core import State
from state_core.engine import Program, Trace, input_placer, place_value, write_state_values
from state_transform.engine import MappingInfo, MappingStrategy, build_mapped_program

__all__ = ["MemberLayout", "ShardedMappingStrategy", "member_layout", "place_members"]

MEMBER_AXIS = "members"  # the axis name of the meshes Map builds itself


class MemberLayout:
    """Where the members of a Map live: a mesh and the mesh axes the member axis is split over.

    ``traced_mesh`` is the abstract mesh the member program is traced on: ``mesh``
    with every axis in Auto mode (see ``_on_member_mesh``).
    """

    __slots__ = ("mesh", "axes", "n_shards", "replicated", "traced_mesh")

    def __init__(self, mesh: Mesh, axes: tuple[str, ...]) -> None:
        self.mesh = mesh
        self.axes = axes
        self.n_shards = math.prod(mesh.shape[a] for a in axes)
        self.replicated = NamedSharding(mesh, P())
        self.traced_mesh = mesh.abstract_mesh.update_axis_types(dict.fromkeys(mesh.axis_names, AxisType.Auto))

    # Equal layouts place members alike, so Maps on the same mesh and axes share programs.
    def __eq__(self, other: object) -> bool:
        return type(other) is MemberLayout and (self.mesh, self.axes) == (other.mesh, other.axes)

    def __hash__(self) -> int:
        return hash((self.mesh, self.axes))

    def sharding(self, axis: Any, ndim: int | None = None) -> NamedSharding:
        """The sharding of a value whose member axis is ``axis`` (``None``: replicated)."""
        if not isinstance(axis, int) or isinstance(axis, bool):
            return self.replicated
        if axis < 0:
            axis += ndim if ndim is not None else 0
        spec = self.axes[0] if len(self.axes) == 1 else self.axes
        return NamedSharding(self.mesh, P(*([None] * axis), spec))

    def place(self, value: Any, sharding: NamedSharding) -> Any:
        """``value`` (a pytree of arrays) placed with ``sharding``; tracers are left alone."""
        return place_value(value, sharding)


def member_layout(behavior: str, size: int, mesh: Any, mesh_axis: Any) -> MemberLayout | None:
    """Check ``Map``'s placement arguments and return the layout (``None`` for ``'vmap'``)."""
    if behavior == "vmap":
        if mesh is not None or mesh_axis is not None:
            raise ValueError(
                "Map: mesh and mesh_axis place members on devices and are only used with "
                "behavior='shard'; pass behavior='shard' or drop them."
            )
        return None
    if behavior == "pmap":
        if mesh is not None or mesh_axis is not None:
            raise ValueError(
                "Map(behavior='pmap') spreads the members over the local devices and takes no mesh; "
                "to choose the devices, use behavior='shard' with mesh=... (and mesh_axis=...)."
            )
        devices = jax.local_devices()
        n = len(devices)
        if size > n and size % n:
            lower, upper = n * (size // n), n * (size // n + 1)
            raise ValueError(
                f"Map(behavior='pmap') runs init_map_size / {n} members on each device, but "
                f"init_map_size={size} members do not divide evenly: only {n} local device(s) are "
                f"available. Use a multiple of {n} (for example {lower} or {upper}), at most {n} members "
                "(one per device), or behavior='vmap'."
            )
        mesh = Mesh(np.array(devices[: min(size, n)]), (MEMBER_AXIS,), axis_types=(AxisType.Auto,))
        return MemberLayout(mesh, (MEMBER_AXIS,))
    if mesh is None:
        mesh = Mesh(np.array(jax.devices()), (MEMBER_AXIS,), axis_types=(AxisType.Auto,))
    elif not isinstance(mesh, Mesh):
        raise TypeError(f"Map: mesh must be a jax.sharding.Mesh (e.g. jax.make_mesh(...)), got {type(mesh).__name__}.")
    if mesh_axis is None:
        axes = tuple(mesh.axis_names)
    else:
        axes = (mesh_axis,) if isinstance(mesh_axis, str) else tuple(mesh_axis)
        unknown = [a for a in axes if a not in mesh.axis_names]
        if unknown or not axes:
            raise ValueError(
                f"Map: mesh_axis={mesh_axis!r} names no axis of the mesh, whose axes are "
                f"{tuple(mesh.axis_names)}; give one of them (or a tuple of them)."
            )
    layout = MemberLayout(mesh, axes)
    if size % layout.n_shards:
        n = layout.n_shards
        raise ValueError(
            f"Map(behavior='shard') splits the members evenly over mesh axes {axes} ({n} device(s)), "
            f"but init_map_size={size} is not a multiple of {n}. Use a multiple of {n} (for example "
            f"{n * max(1, size // n)}), or choose other axes with mesh_axis=."
        )
    return layout


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardedMappingStrategy(MappingStrategy):
    """A ``vmap``-based ``MappingStrategy`` compiled with the member axis sharded over a mesh.

    The program is exactly the one ``vmap2`` builds (the per-member random keys are
    split the same way), wrapped in ``jax.jit`` with in/out shardings from each
    state's and argument's mapped axis. Its inputs are moved to those shardings
    before a call and stored back placed, so the first and later calls (whose inputs
    are the program's own outputs) share one compiled executable.

    Args:
        layout: where the members live (the mesh and the mesh axes of the member axis).
    """

    layout: MemberLayout

    def spans_devices(self, trace: Trace, info: MappingInfo) -> bool:
        """Whether the member mesh has more than one device."""
        return self.layout.mesh.size > 1

    def trace(self, ctx: Any, trace_once: Callable[[], Trace]) -> Trace:
        """Trace with the member mesh in effect, so the recorded operations belong to the program's mesh."""
        # The function runs once here and is replayed inside the compiled program, whose
        # axes are all Auto (``_on_member_mesh``): trace it with that mesh in effect, so
        # the operations it records belong to the program's mesh, not the caller's.
        with jax.sharding.use_abstract_mesh(self.layout.traced_mesh):
            return super().trace(ctx, trace_once)

    def compile(self, trace: Trace, info: MappingInfo, name: str) -> Program:
        """``vmap2``'s program in ``jax.jit`` with the member axis sharded over the mesh."""
        base = super().compile(trace, info, name)
        program, _ = build_mapped_program(trace, info, jax.vmap, {}, self.out_axes, self.donate_positions)
        layout = self.layout
        state_shardings = [
            layout.sharding(mode, _ndim(state)) for state, mode in zip(trace.in_states, info.in_modes, strict=True)
        ]
        leaf_shardings = [
            layout.sharding(axis, len(aval.shape)) for axis, aval in zip(info.leaf_axes, info.arg_avals, strict=True)
        ]
        out_axes = jax.tree.broadcast(self.out_axes, trace.out_shapes, is_leaf=lambda x: x is None)
        out_shardings = jax.tree.map(
            lambda shape, axis: layout.sharding(axis, len(shape.shape) + 1), trace.out_shapes, out_axes
        )
        written = [s for s, keep in zip(trace.out_states, info.lane_written_mask, strict=True) if keep]
        written_shardings = [layout.sharding(a, _ndim(s)) for s, a in zip(written, info.lane_written_axes, strict=True)]
        # A created state's per-member type is an output of the traced jaxpr.
        state_avals = trace.closed_jaxpr.out_avals[trace.n_out_leaves :]
        first = sum(d.num_leaves for d in trace.out_state_defs[: len(trace.out_states)])
        created_shardings = []
        for treedef, axis in zip(trace.out_state_defs[len(trace.out_states) :], info.created_axes, strict=True):
            ndim = len(state_avals[first].shape) if treedef.num_leaves else 0
            created_shardings.append(layout.sharding(axis, ndim + (axis is not None)))
            first += treedef.num_leaves
        key_shardings = [layout.replicated] * len(info.split_positions)
        all_out = (out_shardings, written_shardings + created_shardings + key_shardings)
        shardings: dict[str, Any] = {
            "in_shardings": (
                [state_shardings[i] for i in trace.rw_index],
                [state_shardings[i] for i in trace.ro_index],
                *leaf_shardings,
            ),
            "out_shardings": all_out,
        }
        program = _on_member_mesh(program, layout.mesh, all_out)
        return dataclasses.replace(
            base,
            run=jax.jit(program, **shardings),
            eager=None,
            prepare=_member_placer(trace.in_states, state_shardings, leaf_shardings, layout),
            # (with out_shardings given, the donating form keeps the order of `run`)
            donating=self.donating(jax.jit, program, trace, **shardings).get("donating"),
            donating_new_values_first=False,
        )


def _on_member_mesh(program: Callable[..., Any], mesh: Mesh, out_shardings: Any) -> Callable[..., Any]:
    """``program`` traced on ``mesh`` with every axis in Auto mode.

    The program is ``vmap2``'s: its member axis is split over the mesh by the
    jit's shardings. On Explicit axes a value's type would carry that split, and
    ``jax.vmap`` refuses to map away a dimension its inputs split differently (the
    per-member random keys are made inside, unsplit), so Explicit axes are switched
    to Auto inside (``jax.sharding.auto_axes``; no data moves) and the results get
    their Explicit shardings back on the way out. The members' mesh is also the
    mesh in effect while tracing, so a call under ``jax.set_mesh`` of another mesh
    of Auto axes traces the same program.
    """
    explicit = tuple(
        name for name, kind in zip(mesh.axis_names, mesh.axis_types, strict=True) if kind == AxisType.Explicit
    )
    abstract = mesh.abstract_mesh
    if explicit:
        specs = jax.tree.map(lambda sharding: sharding.spec, out_shardings)
        program = jax.sharding.auto_axes(program, axes=explicit, out_sharding=specs)

    def on_member_mesh(*args: Any) -> Any:
        with jax.sharding.use_abstract_mesh(abstract):
            return program(*args)

    return on_member_mesh


def _member_placer(
    in_states: Sequence[State[Any]],
    state_shardings: Sequence[NamedSharding],
    leaf_shardings: Sequence[NamedSharding],
    layout: MemberLayout,
) -> Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]]:
    """``Program.prepare``: member states and arguments moved to where the program reads them.

    An argument the caller placed elsewhere (an array committed to other devices,
    or to another sharding, such as one made under ``jax.set_mesh``) is moved to
    the member layout; ``jax.jit`` would refuse it. Uncommitted arrays and host
    data are left to ``jax.jit``, which places them on the way in.
    """
    place_states = input_placer(in_states, state_shardings, layout.place)
    moves = [(k, sharding) for k, sharding in enumerate(leaf_shardings)]
    array_class = _concrete_array_class()

    def prepare(values: list[Any], leaves: list[Any]) -> tuple[list[Any], list[Any]]:
        values, leaves = place_states(values, leaves)
        for k, sharding in moves:
            leaf = leaves[k]
            if type(leaf) is array_class and leaf.committed and leaf.sharding != sharding:
                leaves[k] = layout.place(leaf, sharding)
        return values, leaves

    return prepare


@functools.cache
def _concrete_array_class() -> type[jax.Array]:
    """The class of JAX's concrete arrays, for a one-comparison test on every call.

    Found from an array (JAX's public API names no such class; ``isinstance(x,
    jax.Array)`` is also true of tracers and costs more), when the first sharded
    program is built: making an array at import would start JAX's backend before
    users can set ``jax_num_cpu_devices``.
    """
    return type(jax.numpy.zeros(()))


def _ndim(state: State[Any]) -> int:
    leaves = jax.tree.leaves(state._value)
    return len(np.shape(leaves[0])) if leaves else 0


def place_members(groups: dict[Hashable, list[State[Any]]], layout: MemberLayout) -> None:
    """Put freshly created member states where the sharded program reads them.

    Every value is placed before any is stored, and the one write-back stores them
    all or none (and refuses tracers of a plain ``jax.jit`` around the call).
    """
    members = [(state, axis) for axis, states in groups.items() for state in states]
    placed = [layout.place(state._value, layout.sharding(axis, _ndim(state))) for state, axis in members]
    write_state_values([state for state, _ in members], placed, "Map.init_all_states", every_value=True)
