"""How a ``pmap2`` program runs: outside a context mesh, and refusing inputs committed elsewhere in plain words."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import NamedSharding

from state_core.engine import describe_devices

__all__ = ["committed_inputs_message", "private_axis_name", "refuse_context_mesh", "refusing_context_mesh"]

_LANE_AXIS_PREFIX = "_state_lane_"
_AXIS_COUNTER = itertools.count()


def private_axis_name() -> str:
    """A fresh axis name, used to find the lane index when the user gave none."""
    return f"{_LANE_AXIS_PREFIX}{next(_AXIS_COUNTER)}"


def refuse_context_mesh(name: str) -> None:
    """Refuse a ``jax.pmap`` program under ``jax.set_mesh``, with what to do instead.

    ``jax.pmap`` maps over devices it picks itself, and JAX lets neither the
    program nor its results run under a context mesh of other devices: the call, or
    the first operation on its results, fails with a mesh mismatch that names
    neither the mesh nor a fix. A mesh of manual axes (inside ``shard_map``) is left
    to JAX.
    """
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or jax.sharding.AxisType.Manual in mesh.axis_types:
        return
    raise ValueError(
        f"{name}: cannot run under jax.set_mesh (the mesh {dict(mesh.shape)} is in effect): pmap2 "
        "maps over devices of its own, and JAX does not mix them with a context mesh. Call it "
        "outside the `with jax.set_mesh(...)` block, or map over that mesh with shard_map."
    )


def refusing_context_mesh(run: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``run`` (a ``jax.pmap`` program), refused under a context mesh (``refuse_context_mesh``)."""

    def run_outside_context_mesh(*args: Any) -> Any:
        refuse_context_mesh(name)
        return run(*args)

    return run_outside_context_mesh


def _laid_out_by_pmap2(sharding: Any) -> bool:
    """True for the layout of a ``pmap2`` (or ``jax.pmap``) result: the leading axis split over a 1-D mesh."""
    pmap_sharding = getattr(jax.sharding, "PmapSharding", None)
    if pmap_sharding is not None and isinstance(sharding, pmap_sharding):
        return True
    if not isinstance(sharding, NamedSharding) or len(sharding.mesh.axis_names) != 1:
        return False
    spec = tuple(sharding.spec)
    return bool(spec) and spec[0] == sharding.mesh.axis_names[0] and all(p is None for p in spec[1:])


def committed_inputs_message(name: str, inputs: list[tuple[str, Any]], error: Exception) -> str | None:
    """Why a ``pmap2`` call failed: inputs committed where it cannot take them (None: there are none).

    Like ``jax.pmap``, the program lays every input out over its devices itself and
    cannot take one committed elsewhere (``jax.device_put`` to a device or onto a
    mesh); JAX's error then names the program's private lane axis. This is the
    program's ``explain_failure``.

    Args:
        name: how the message names the call (``pmap2(step)``).
        inputs: ``(label, value)`` for each input of the call.
        error: JAX's error. A ``KeyError`` names a mesh axis of an input laid out
            like a ``pmap2`` result on another mesh, which JAX's pmap looks up in
            its own mesh.
    """
    found = []
    for label, value in inputs:
        for leaf in jax.tree.leaves(value):
            sharding = getattr(leaf, "sharding", None)
            if not getattr(leaf, "committed", False) or sharding is None:
                continue
            foreign_axis = isinstance(error, KeyError) and error.args[:1] == (_first_axis(sharding),)
            if foreign_axis or not _laid_out_by_pmap2(sharding):
                found.append(f"{label} ({_where(sharding)})")
                break
    if not found:
        return None
    return (
        f"{name}: {'; '.join(found)} {'is' if len(found) == 1 else 'are'} committed to devices with "
        "jax.device_put, but pmap2, like jax.pmap, lays each input out over its devices itself and "
        "cannot take one committed elsewhere. Pass it uncommitted (a NumPy array, an array made with "
        "jnp, or jax.device_get(x); for a state: state.value = jax.device_get(state.value)), or keep "
        "the sharded layout and map over that mesh with shard_map. No state was changed."
    )


def _first_axis(sharding: Any) -> Any:
    return sharding.mesh.axis_names[0] if isinstance(sharding, NamedSharding) and sharding.mesh.axis_names else None


def _where(sharding: Any) -> str:
    if isinstance(sharding, NamedSharding):
        return f"sharding {sharding.spec} on a mesh {dict(sharding.mesh.shape)}"
    return describe_devices(sharding.device_set)
