"""Meshes with Explicit and Auto axes: the checks and conversions ``shard_map`` and ``jit`` share.

A ``jax.sharding.Mesh`` axis is Explicit (a value's type records how it is split
over the axis, and JAX checks it) or Auto (the partitioner decides).
``jax.make_mesh`` makes Explicit axes unless it is given ``axis_types=``. Two JAX
rules decide what can run together, and the helpers here turn their failures into
messages that name the state and the fix:

* ``jax.shard_map`` runs only on the mesh set with ``jax.set_mesh`` (when one is set);
* inside one program, every sharded value must lie on the mesh in effect, unless
  that mesh and the value's mesh both have only Auto axes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

__all__ = ["check_context_mesh", "explicit_axes", "explicit_sharding", "mesh_text", "annotation_mesh_guard"]


def explicit_axes(mesh: Mesh) -> frozenset[Any]:
    """The names of ``mesh``'s Explicit axes (empty for a mesh of Auto axes)."""
    return frozenset(
        name for name, kind in zip(mesh.axis_names, mesh.axis_types, strict=True) if kind == AxisType.Explicit
    )


def explicit_sharding(mesh: Mesh, spec: PartitionSpec, explicit: frozenset[Any]) -> NamedSharding:
    """``spec`` on ``mesh`` keeping only the ``explicit`` axes: what ``jax.reshard`` may name.

    ``jax.reshard`` refuses a spec that names an Auto axis (such axes are not part
    of a value's type); on a mesh mixing both kinds, the Auto part of a spec is
    left to the partitioner.
    """
    entries: list[Any] = []
    for entry in spec:
        names = () if entry is None else (tuple(entry) if isinstance(entry, tuple) else (entry,))
        kept = tuple(name for name in names if name in explicit)
        entries.append(None if not kept else kept[0] if len(kept) == 1 else kept)
    return NamedSharding(mesh, PartitionSpec(*entries))


def mesh_text(mesh: Any) -> str:
    """A mesh (concrete or abstract) for messages: its axis sizes and their types."""
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes, strict=True))
    kinds = ", ".join(kind.name for kind in mesh.axis_types)
    return f"{sizes} (axis types {kinds})"


def _differ_only_in_types(a: Any, b: Any) -> bool:
    return tuple(a.axis_names) == tuple(b.axis_names) and tuple(a.axis_sizes) == tuple(b.axis_sizes)


_TYPES_HINT = (
    " The two differ only in their axis types: jax.make_mesh makes Explicit axes unless it is "
    "given axis_types=, so build both meshes with the same axis_types."
)


def check_context_mesh(mesh: Mesh, who: str) -> None:
    """Refuse to run a shard_map on ``mesh`` while ``jax.set_mesh`` has set another mesh.

    JAX runs ``jax.shard_map`` only on the mesh in effect; it would fail with its
    own message, naming neither the function nor the fix. The same axis names and
    sizes with other axis types are another mesh.

    Args:
        mesh: the mesh the shard_map runs on.
        who: the function's name, the start of the message.

    Raises:
        ValueError: a mesh is set and it is not ``mesh``.
    """
    context = jax.sharding.get_abstract_mesh()
    expected = mesh.abstract_mesh
    if context is expected or context.empty or context == expected:
        return
    hint = _TYPES_HINT if _differ_only_in_types(context, mesh) else ""
    raise ValueError(
        f"{who} runs on the mesh {mesh_text(mesh)}, but it was called under jax.set_mesh(...) of another "
        f"mesh, {mesh_text(context)}; JAX runs a shard_map only on the mesh in effect. Pass that mesh to "
        f"shard_map, or call it outside the `with jax.set_mesh(...)` block.{hint} No state was changed."
    )


def _all_auto(mesh: Any) -> bool:
    return all(kind == AxisType.Auto for kind in mesh.axis_types)


def _fits_context(mesh: Any, context: Any) -> bool:
    """JAX's rule for a sharded value inside a program traced under the context mesh."""
    return context.empty or mesh == context or (_all_auto(mesh) and _all_auto(context))


def annotation_mesh_guard(labelled: Sequence[tuple[str, Any, NamedSharding]], who: str) -> Callable[[], None] | None:
    """A check, run before each call, that the states' annotated meshes can run under the mesh in effect.

    A program whose states are laid out on one mesh cannot be traced under
    ``jax.set_mesh`` of another (unless both have only Auto axes): JAX would fail
    inside the program, naming an internal operation. Inside ``shard_map`` (a
    context with manual axes) the check is JAX's to make.

    Args:
        labelled: ``(label, annotation, sharding)`` per annotated state: how the
            state is named in messages, its ``sharding`` metadata and the
            ``NamedSharding`` the program lays it out with.
        who: how the message names the call (``jit(step)``), at its start.

    Returns:
        ``check()``, raising ``ValueError`` naming the first state that does not
        fit; None when there is nothing to check.
    """
    if not labelled:
        return None
    meshes = {sharding.mesh.abstract_mesh for _, _, sharding in labelled}
    accepted: list[Any] = [None]  # the last context found to fit: the common case costs one identity test

    def check() -> None:
        context = jax.sharding.get_abstract_mesh()
        if context is accepted[0] or context.empty or AxisType.Manual in context.axis_types:
            return
        if all(_fits_context(mesh, context) for mesh in meshes):
            accepted[0] = context
            return
        for label, annotation, sharding in labelled:
            if not _fits_context(sharding.mesh.abstract_mesh, context):
                raise ValueError(_annotation_message(label, annotation, sharding, context, who))

    return check


def _annotation_message(label: str, annotation: Any, sharding: NamedSharding, context: Any, who: str) -> str:
    mesh = sharding.mesh
    if isinstance(annotation, NamedSharding):
        where = f"{label} is annotated with a NamedSharding on the mesh {mesh_text(mesh)}"
        fix = (
            f"Annotate it with the PartitionSpec alone (sharding={sharding.spec}), which is laid out on "
            "the mesh set with jax.set_mesh, or build its NamedSharding on that mesh."
        )
    else:
        where = (
            f"{label} is annotated with {annotation}, which it laid out on the mesh in effect at its "
            f"first call, {mesh_text(mesh)}"
        )
        fix = (
            "Call it under the mesh it was first called with, or make a new jit for the new mesh "
            "(state_transform.clear_caches() forgets the compiled programs)."
        )
    hint = _TYPES_HINT if _differ_only_in_types(context, mesh) else ""
    return (
        f"{who}: {where}, but it was called under jax.set_mesh(...) of another mesh, {mesh_text(context)}; "
        "inside one program every sharded value must lie on the mesh in effect (unless both meshes have "
        f"only Auto axes). {fix}{hint} No state was changed."
    )
