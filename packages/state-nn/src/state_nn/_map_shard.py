"""Members of a ``Map`` spread over devices: one ``vmap`` whose member axis is sharded over a mesh.

``Map(behavior='pmap')`` and ``Map(behavior='shard')`` run the same program as
``behavior='vmap'`` (so random draws and results match it member for member),
compiled with ``jax.jit`` and explicit shardings that put ``init_map_size / D``
members on each of the ``D`` devices of a mesh axis. The partitioner then runs
each device's members on that device; collectives over the Map's ``axis_name``
become cross-device reductions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from state_core import State
from state_core.engine import TracedCall
from state_transform import StatefulMapping

__all__ = ["MemberLayout", "ShardedMapping", "member_layout", "place_members"]

MEMBER_AXIS = "members"  # the axis name of the meshes Map builds itself


class MemberLayout:
    """Where the members of a Map live: a mesh and the mesh axes the member axis is split over."""

    __slots__ = ("mesh", "axes", "n_shards", "replicated")

    def __init__(self, mesh: Mesh, axes: tuple[str, ...]) -> None:
        self.mesh = mesh
        self.axes = axes
        self.n_shards = math.prod(mesh.shape[a] for a in axes)
        self.replicated = NamedSharding(mesh, P())

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
        leaves = jax.tree.leaves(value)
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            return value
        if all(isinstance(x, jax.Array) and x.sharding == sharding for x in leaves):
            return value
        if sharding.is_fully_addressable:
            return jax.device_put(value, sharding)
        # Several processes: every process holds the whole value (the same seed and
        # arguments on each), and contributes the slices of its own devices.
        return jax.tree.map(lambda x: _global_array(x, sharding), value)


def _global_array(x: Any, sharding: NamedSharding) -> jax.Array:
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        data = _global_array(jax.random.key_data(x), sharding)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def _auto_mesh(mesh: Mesh) -> Mesh:
    """``mesh`` with every axis in Auto mode: the member axis is placed by shardings, not types."""
    if all(t == AxisType.Auto for t in mesh.axis_types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))


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
    layout = MemberLayout(_auto_mesh(mesh), axes)
    if size % layout.n_shards:
        n = layout.n_shards
        raise ValueError(
            f"Map(behavior='shard') splits the members evenly over mesh axes {axes} ({n} device(s)), "
            f"but init_map_size={size} is not a multiple of {n}. Use a multiple of {n} (for example "
            f"{n * max(1, size // n)}), or choose other axes with mesh_axis=."
        )
    return layout


class ShardedMapping(StatefulMapping):
    """A ``vmap``-based ``StatefulMapping`` compiled with the member axis sharded over a mesh.

    The program is exactly the one ``vmap2`` builds (the per-member random keys are
    split the same way), wrapped in ``jax.jit`` with in/out shardings from each
    state's and argument's mapped axis. Compiling also places the current values
    of the input states as the program expects them, so the first and later calls
    (whose inputs are the program's own outputs) share one compiled executable.
    """

    def __init__(self, fun: Callable[..., Any], layout: MemberLayout, **kwargs: Any) -> None:
        super().__init__(fun, mapping_fn=jax.vmap, **kwargs)
        self._layout = layout

    def _runs_on_several_devices(self, entry: TracedCall) -> bool:
        return self._layout.mesh.size > 1

    def _compile(self, entry: TracedCall) -> Callable[..., Any]:
        super()._compile(entry)  # builds entry.plan.program
        plan = entry.plan
        layout = self._layout
        in_states: Sequence[State[Any]] = entry.in_states
        state_shardings = [
            layout.sharding(mode, _ndim(state)) for state, mode in zip(in_states, plan.in_modes, strict=True)
        ]
        for state, sharding in zip(in_states, state_shardings, strict=True):
            state.restore_value(layout.place(state._value, sharding))
        leaf_shardings = [
            layout.sharding(axis, len(aval.shape)) for axis, aval in zip(plan.leaf_axes, plan.arg_avals, strict=True)
        ]
        out_axes = jax.tree.broadcast(self.out_axes, entry.out_shapes, is_leaf=lambda x: x is None)
        out_shardings = jax.tree.map(
            lambda shape, axis: layout.sharding(axis, len(shape.shape) + 1), entry.out_shapes, out_axes
        )
        written = [s for s, keep in zip(entry.out_states, plan.lane_written_mask, strict=True) if keep]
        written_shardings = [layout.sharding(a, _ndim(s)) for s, a in zip(written, plan.lane_written_axes, strict=True)]
        key_shardings = [layout.replicated] * len(plan.split_positions)
        return jax.jit(
            plan.program,
            in_shardings=(
                [state_shardings[i] for i in entry.rw_index],
                [state_shardings[i] for i in entry.ro_index],
                *leaf_shardings,
            ),
            out_shardings=(out_shardings, written_shardings + key_shardings),
        )


def _ndim(state: State[Any]) -> int:
    leaves = jax.tree.leaves(state._value)
    return len(np.shape(leaves[0])) if leaves else 0


def place_members(groups: dict[Hashable, list[State[Any]]], layout: MemberLayout) -> None:
    """Put freshly created member states where the sharded program reads them."""
    for axis, states in groups.items():
        for state in states:
            state.restore_value(layout.place(state._value, layout.sharding(axis, _ndim(state))))
