"""A mapping whose lanes are split over a device mesh: ``vmap2``'s program, compiled with shardings.

``MappingStrategy(lanes_on=LanesOnMesh(mesh, axes))`` runs the same program as a
plain ``jax.vmap`` mapping (so random draws and results match it lane for lane),
compiled with ``jax.jit`` and explicit shardings that put ``size / D`` lanes on each
of the ``D`` devices of the mesh axes. The partitioner then runs each device's lanes
on that device; collectives over the mapping's ``axis_name`` become cross-device
reductions. ``Map(behavior='shard')`` and ``Map(behavior='pmap')`` run on it.

The lane values stay on the mesh the caller gave, whatever its axis types, so they
can be used beside other values under ``jax.set_mesh`` of that mesh. The program
itself is traced with the mesh's axes in Auto mode: the lane axis is placed by the
shardings, not typed, exactly as on a mesh of Auto axes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from state_core import State
from state_core.engine import Program, Trace, input_placer, place_value

from ._lanes import lane_write_back
from ._mapping_program import MappingInfo, build_mapped_program

if TYPE_CHECKING:
    from ._mapping import MappingStrategy

__all__ = ["LanesOnMesh", "compile_on_mesh"]


class LanesOnMesh:
    """Where a mapping's lanes live: a mesh, and the mesh axes the mapped axis is split over.

    Equal layouts (same mesh, same axes) place lanes alike, so mappings on them
    share programs.

    Args:
        mesh: the device mesh.
        axes: the names of the mesh axes the lane axis is split over, in order.

    Attributes:
        n_shards: how many pieces the lane axis is split into (the product of the
            axes' sizes); the mapped size must be a multiple of it.
        replicated: the sharding of a value every device holds whole.
        traced_mesh: the abstract mesh the program is traced on (``mesh`` with every
            axis in Auto mode).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import StatefulMapping
        >>> from state_transform.engine import LanesOnMesh, MappingStrategy
        >>> mesh = jax.make_mesh((4,), ('lanes',), axis_types=(jax.sharding.AxisType.Auto,),
        ...                      devices=jax.devices()[:4])
        >>> total = State(jnp.zeros(8))
        >>> def add(x):
        ...     total.value = total.value + x
        ...     return x * 2
        >>> strategy = MappingStrategy(lanes_on=LanesOnMesh(mesh, ('lanes',)), in_rules={0: State})
        >>> doubled = StatefulMapping(add, strategy=strategy)(jnp.arange(8.0))
        >>> doubled.sharding.spec, total.value.sharding.spec, total.value.tolist()
        (P('lanes',), P('lanes',), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    """

    __slots__ = ("mesh", "axes", "n_shards", "replicated", "traced_mesh")

    def __init__(self, mesh: Mesh, axes: tuple[str, ...]) -> None:
        if not isinstance(mesh, Mesh):
            raise TypeError(f"LanesOnMesh: mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}.")
        unknown = [a for a in axes if a not in mesh.axis_names]
        if unknown or not axes:
            raise ValueError(
                f"LanesOnMesh: axes={axes!r} must name one or more axes of the mesh, whose axes are "
                f"{tuple(mesh.axis_names)}."
            )
        self.mesh = mesh
        self.axes = tuple(axes)
        self.n_shards = math.prod(mesh.shape[a] for a in axes)
        self.replicated = NamedSharding(mesh, P())
        self.traced_mesh = mesh.abstract_mesh.update_axis_types(dict.fromkeys(mesh.axis_names, AxisType.Auto))

    def __eq__(self, other: object) -> bool:
        return type(other) is LanesOnMesh and (self.mesh, self.axes) == (other.mesh, other.axes)

    def __hash__(self) -> int:
        return hash((self.mesh, self.axes))

    def __repr__(self) -> str:
        return f"LanesOnMesh(mesh={dict(self.mesh.shape)}, axes={self.axes})"

    def sharding(self, axis: Any, ndim: int | None = None) -> NamedSharding:
        """The sharding of a value whose lane axis is ``axis``.

        Args:
            axis: the value's lane axis (negative counts from the end); ``None`` or
                anything not an int: replicated on every device of the mesh.
            ndim: the value's number of dimensions, needed for a negative ``axis``.
        """
        if not isinstance(axis, int) or isinstance(axis, bool):
            return self.replicated
        if axis < 0:
            axis += ndim if ndim is not None else 0
        spec = self.axes[0] if len(self.axes) == 1 else self.axes
        return NamedSharding(self.mesh, P(*([None] * axis), spec))

    def state_sharding(self, state: State[Any], axis: Any) -> NamedSharding:
        """The sharding of ``state``'s value when its lane axis is ``axis``.

        Args:
            state: the state (its value's first leaf gives the number of dimensions).
            axis: its lane axis, as in ``sharding``; ``None``: replicated.
        """
        return self.sharding(axis, _ndim(state))

    def place(self, value: Any, sharding: NamedSharding) -> Any:
        """``value`` placed with ``sharding``; tracers are left alone.

        Args:
            value: a pytree of arrays.
            sharding: where to put every leaf (from ``sharding`` or ``state_sharding``).
        """
        return place_value(value, sharding)


def compile_on_mesh(strategy: MappingStrategy, trace: Trace, info: MappingInfo, layout: LanesOnMesh) -> Program:
    """The ``jax.vmap`` program of ``trace`` in ``jax.jit``, its lane axis split over ``layout``.

    Inputs are moved to their shardings before a call and stored back placed, so
    the first and later calls (whose inputs are the program's own outputs) share
    one compiled executable.
    """
    program, _ = build_mapped_program(trace, info, jax.vmap, {}, strategy.out_axes, strategy.donate_positions)
    state_shardings = [
        layout.state_sharding(state, mode) for state, mode in zip(trace.in_states, info.in_modes, strict=True)
    ]
    leaf_shardings = [
        layout.sharding(axis, len(aval.shape)) for axis, aval in zip(info.leaf_axes, info.arg_avals, strict=True)
    ]
    out_axes = jax.tree.broadcast(strategy.out_axes, trace.out_shapes, is_leaf=lambda x: x is None)
    out_shardings = jax.tree.map(
        lambda shape, axis: layout.sharding(axis, len(shape.shape) + 1), trace.out_shapes, out_axes
    )
    written = [s for s, keep in zip(trace.out_states, info.lane_written_mask, strict=True) if keep]
    written_shardings = [layout.state_sharding(s, a) for s, a in zip(written, info.lane_written_axes, strict=True)]
    # A created state's per-lane type is an output of the traced jaxpr.
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
    program = _on_lane_mesh(program, layout.mesh, all_out)
    return Program(
        run=jax.jit(program, **shardings),
        write_back=lane_write_back(trace, info.split_positions, info.lane_written_mask),
        prepare=_lane_placer(trace.in_states, state_shardings, leaf_shardings, layout),
        # (with out_shardings given, the donating form keeps the order of `run`)
        donating=strategy.donating(jax.jit, program, trace, **shardings).get("donating"),
    )


def _on_lane_mesh(program: Callable[..., Any], mesh: Mesh, out_shardings: Any) -> Callable[..., Any]:
    """``program`` traced on ``mesh`` with every axis in Auto mode.

    The program is ``vmap2``'s: its lane axis is split over the mesh by the jit's
    shardings. On Explicit axes a value's type would carry that split, and
    ``jax.vmap`` refuses to map away a dimension its inputs split differently (the
    per-lane random keys are made inside, unsplit), so Explicit axes are switched to
    Auto inside (``jax.sharding.auto_axes``; no data moves) and the results get
    their Explicit shardings back on the way out. The lanes' mesh is also the mesh
    in effect while tracing, so a call under ``jax.set_mesh`` of another mesh of
    Auto axes traces the same program.
    """
    explicit = tuple(
        name for name, kind in zip(mesh.axis_names, mesh.axis_types, strict=True) if kind == AxisType.Explicit
    )
    abstract = mesh.abstract_mesh
    if explicit:
        specs = jax.tree.map(lambda sharding: sharding.spec, out_shardings)
        program = jax.sharding.auto_axes(program, axes=explicit, out_sharding=specs)

    def on_lane_mesh(*args: Any) -> Any:
        with jax.sharding.use_abstract_mesh(abstract):
            return program(*args)

    return on_lane_mesh


def _lane_placer(
    in_states: Sequence[State[Any]],
    state_shardings: Sequence[NamedSharding],
    leaf_shardings: Sequence[NamedSharding],
    layout: LanesOnMesh,
) -> Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]]:
    """``Program.prepare``: lane states and arguments moved to where the program reads them.

    An argument the caller placed elsewhere (an array committed to other devices,
    or to another sharding, such as one made under ``jax.set_mesh``) is moved to
    the lane layout; ``jax.jit`` would refuse it. Uncommitted arrays and host data
    are left to ``jax.jit``, which places them on the way in.
    """
    place_states = input_placer(in_states, state_shardings, layout.place)
    moves = list(enumerate(leaf_shardings))
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
