"""Name the state and the argument when the inputs of one call lie on different devices.

JAX refuses to run a compiled program whose committed inputs lie on different
device sets, or on other devices than the program places its values on (its
``in_shardings`` / ``out_shardings``, a sharding constraint or ``jax.device_put``
inside it), and its message names the program's internal arguments. When a
program of ours fails at dispatch with a ``ValueError``, the replay asks
``device_mismatch_message`` whether the inputs it handed over are spread over
different devices, or lie elsewhere than the program's placements; if so, the
error the user sees names the State (or the argument), both device sets and how
to bring them together.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import jax

from ._graph import state_label
from ._jax_internals import context_mesh, open_jaxpr
from ._state import State

__all__ = ["describe_devices", "device_mismatch_message", "labelled_inputs", "placements_in"]


def _devices(leaf: Any) -> frozenset[int] | None:
    """The ids of the devices a committed array lies on; None for anything JAX may move freely."""
    sharding = getattr(leaf, "sharding", None)
    if sharding is None or not getattr(leaf, "committed", True):
        return None
    return frozenset(d.id for d in sharding.device_set)


def describe_devices(devices: Iterable[Any]) -> str:
    """How an error message names a set of devices: ``device 3``, ``devices 0, 2`` or ``devices 0..7``.

    Args:
        devices: ``jax.Device`` objects (a sharding's ``device_set``, a mesh's
            ``devices.flat``) or their integer ids; order and repeats do not matter.

    Example:
        >>> import jax
        >>> from state_core.engine import describe_devices
        >>> describe_devices(jax.devices()[:1]), describe_devices([2, 0]), describe_devices(range(8))
        ('device 0', 'devices 0, 2', 'devices 0..7')
    """
    ordered = sorted({d if isinstance(d, int) else d.id for d in devices})
    if len(ordered) > 4 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"devices {ordered[0]}..{ordered[-1]}"
    return f"device{'s' if len(ordered) > 1 else ''} {', '.join(map(str, ordered))}"


def _ids(devices: Any) -> frozenset[int]:
    return frozenset(d.id for d in devices)


def _placement_devices(target: Any) -> frozenset[int] | None:
    """The ids of the devices a sharding, a device or a concrete mesh places values on; None for anything else."""
    if isinstance(target, jax.sharding.Sharding):
        return _ids(target.device_set)
    if isinstance(target, jax.Device):
        return _ids([target])
    if isinstance(target, jax.sharding.Mesh):
        return _ids(target.devices.flat)
    return None  # an abstract mesh, None (JAX chooses), a memory kind ...


def _placements_of(eqn: Any, who: str) -> Iterator[tuple[str, Any]]:
    """What one equation places its values on, with how the message names it."""
    name = eqn.primitive.name
    if name == "sharding_constraint":
        yield f"a sharding constraint (jax.lax.with_sharding_constraint) in {who}", eqn.params.get("sharding")
    elif name == "device_put":
        for target in eqn.params.get("devices") or ():
            yield f"a jax.device_put in {who}", target
    elif name == "shard_map":
        yield f"a shard_map in {who}", eqn.params.get("mesh")


def placements_in(jaxpr: Any, who: str) -> list[tuple[str, Any]]:
    """``(what, sharding or device or mesh)`` for each placement a traced program makes itself.

    Searches ``jaxpr`` and its sub-jaxprs (loop bodies, branches, nested calls) for
    sharding constraints, ``jax.device_put`` and ``shard_map``, and adds the mesh
    set with ``jax.set_mesh`` around the call (``jax.jit`` runs on its devices).
    Only the failure path calls it (it walks the whole program).

    Args:
        jaxpr: a closed or open jaxpr of the program.
        who: the function's name, for the descriptions.
    """
    import jax.extend.core as jex_core

    found: list[tuple[str, Any]] = []
    todo = [open_jaxpr(jaxpr)]  # an explicit stack: deeply nested programs do not recurse
    while todo:
        current = todo.pop()
        for eqn in current.eqns:
            found.extend(_placements_of(eqn, who))
            todo.extend(open_jaxpr(sub) for sub in jex_core.jaxprs_in_params(eqn.params))
    mesh = context_mesh()
    if mesh is not None:
        found.append(("the mesh set with jax.set_mesh", mesh))
    return found


def labelled_inputs(
    states: Sequence[State[Any]], values: Sequence[Any], leaves: Sequence[Any], argument_labels: Sequence[str]
) -> list[tuple[str, Any]]:
    """``(label, value)`` for each input of a call: ``"State 'w'"`` per state, ``"argument args[0]"`` per leaf.

    Args:
        states: the input states, one per entry of ``values``.
        values: the values handed to the program, one pytree per state.
        leaves: the dynamic argument leaves handed to the program.
        argument_labels: how to name each leaf (``Trace.argument_labels()``).
    """
    inputs: list[tuple[str, Any]] = [(state_label(s), v) for s, v in zip(states, values, strict=True)]
    inputs += [(f"argument {label}", leaf) for label, leaf in zip(argument_labels, leaves, strict=True)]
    return inputs


def device_mismatch_message(
    who: str, inputs: Sequence[tuple[str, Any]], placements: Sequence[tuple[str, Any]] = ()
) -> str | None:
    """The message for a call whose committed inputs lie on different devices; None if they do not.

    Args:
        who: the transformation's name for the message (``"jit(step)"``).
        inputs: ``(label, value)`` for each input of the call (``labelled_inputs``).
        placements: ``(what, sharding or device or mesh)`` pairs naming where the
            program itself places values (``Program.placed_by``, ``placements_in``
            its jaxpr); looked at when the inputs agree with each other.

    Returns:
        A message naming one input on each of two device sets and the fix, or an
        input and a placement of the program on other devices and the fix, or None
        when every committed input lies on the devices of every placement (the
        failure has another cause).
    """
    seen: dict[frozenset[int], str] = {}
    for label, value in inputs:
        for leaf in jax.tree.leaves(value):
            ids = _devices(leaf)
            if ids is None:
                continue
            if seen and ids not in seen:
                (first_ids, first), *_ = seen.items()
                return (
                    f"{who}: {first} lies on {describe_devices(first_ids)} but {label} lies on "
                    f"{describe_devices(ids)}; "
                    "all inputs of one call must lie on the same devices. Move one of them with "
                    "jax.device_put (for a state: state.value = jax.device_put(state.value, "
                    "other.sharding)); a program compiled for one mesh needs the same mesh's "
                    "devices on every later call."
                )
            seen.setdefault(ids, label)
    if not seen:
        return None
    (ids, label), *_ = seen.items()
    for what, target in placements:
        placed = _placement_devices(target)
        if placed is not None and placed != ids:
            return (
                f"{who}: {label} lies on {describe_devices(ids)} but {what} places the program on "
                f"{describe_devices(placed)}; "
                f"a program runs on one set of devices. Move {label} there with jax.device_put (for a "
                f"state: state.value = jax.device_put(state.value, sharding) with a sharding on "
                f"{describe_devices(placed)}), or place the program on {describe_devices(ids)}."
            )
    return None
