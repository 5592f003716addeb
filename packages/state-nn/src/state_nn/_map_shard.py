"""Where the members of a ``Map`` live: the layout of ``behavior='pmap'`` and ``behavior='shard'``.

Both run the same program as ``behavior='vmap'`` (so random draws and results match
it member for member), on a mapping whose lanes are split over a mesh
(``MappingStrategy(lanes_on=...)``, see ``state_transform.engine.LanesOnMesh``):
``init_map_size / D`` members on each of the ``D`` devices of the mesh axes. This
module checks ``Map``'s placement arguments and places freshly created members.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

from state_core import State
from state_core.engine import write_state_values
from state_transform.engine import LanesOnMesh

__all__ = ["member_layout", "place_members"]

MEMBER_AXIS = "members"  # the axis name of the meshes Map builds itself


def member_layout(behavior: str, size: int, mesh: Any, mesh_axis: Any) -> LanesOnMesh | None:
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
        return LanesOnMesh(mesh, (MEMBER_AXIS,))
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
    layout = LanesOnMesh(mesh, axes)
    if size % layout.n_shards:
        n = layout.n_shards
        raise ValueError(
            f"Map(behavior='shard') splits the members evenly over mesh axes {axes} ({n} device(s)), "
            f"but init_map_size={size} is not a multiple of {n}. Use a multiple of {n} (for example "
            f"{n * max(1, size // n)}), or choose other axes with mesh_axis=."
        )
    return layout


def place_members(groups: dict[Hashable, list[State[Any]]], layout: LanesOnMesh) -> None:
    """Put freshly created member states where the sharded program reads them.

    Every value is placed before any is stored, and the one write-back stores them
    all or none (and refuses tracers of a plain ``jax.jit`` around the call).
    """
    members = [(state, axis) for axis, states in groups.items() for state in states]
    placed = [layout.place(state._value, layout.state_sharding(state, axis)) for state, axis in members]
    write_state_values([state for state, _ in members], placed, "Map.init_all_states", every_value=True)
