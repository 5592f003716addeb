"""Name the state and the argument when the inputs of one call lie on different devices.

JAX refuses to run a compiled program whose committed inputs lie on different
device sets, and its message names the program's internal arguments. When a
program of ours fails at dispatch with a ``ValueError``, the replay asks
``device_mismatch_message`` whether the inputs it handed over are spread over
different devices; if so, the error the user sees names the State and the
argument and says how to bring them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from ._graph import state_label
from ._state import State

__all__ = ["device_mismatch_message"]


def _devices(leaf: Any) -> frozenset[int] | None:
    """The ids of the devices a committed array lies on; None for anything JAX may move freely."""
    sharding = getattr(leaf, "sharding", None)
    if sharding is None or not getattr(leaf, "committed", True):
        return None
    return frozenset(d.id for d in sharding.device_set)


def _show(ids: frozenset[int]) -> str:
    ordered = sorted(ids)
    if len(ordered) > 4 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"devices {ordered[0]}..{ordered[-1]}"
    return f"device{'s' if len(ordered) > 1 else ''} {', '.join(map(str, ordered))}"


def _argument_paths(dyn_treedef: Any) -> list[str]:
    """``args[0]``, ``kwargs['x']`` ... for each dynamic argument leaf, in leaf order."""
    numbered = jax.tree.unflatten(dyn_treedef, list(range(dyn_treedef.num_leaves)))
    paths = []
    for path, _ in jax.tree_util.tree_flatten_with_path(numbered)[0]:
        head = "args" if getattr(path[0], "idx", 0) == 0 else "kwargs"
        paths.append(head + jax.tree_util.keystr(path[1:]))
    return paths


def device_mismatch_message(
    who: str,
    states: Sequence[State[Any]],
    values: Sequence[Any],
    leaves: Sequence[Any],
    dyn_treedef: Any,
) -> str | None:
    """The message for a call whose committed inputs lie on different devices; None if they do not.

    Args:
        who: the transformation's name for the message (``"jit(step)"``).
        states: the input states, one per entry of ``values``.
        values: the values handed to the program, one pytree per state.
        leaves: the dynamic argument leaves handed to the program.
        dyn_treedef: the structure of the call's dynamic ``(args, kwargs)``.

    Returns:
        A message naming one input on each of two device sets and the fix, or None
        when every committed input lies on the same devices (the failure has another cause).

    Example:
        >>> import jax
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_core._device_mismatch import device_mismatch_message
        >>> s = State(jnp.zeros(2), name='v')
        >>> treedef = jax.tree.structure(((jnp.zeros(2),), {}))
        >>> device_mismatch_message('jit(f)', [s], [s.value], [jnp.ones(2)], treedef) is None
        True
    """
    seen: dict[frozenset[int], str] = {}
    inputs: list[tuple[str, Any]] = [(state_label(s), v) for s, v in zip(states, values, strict=True)]
    inputs += list(zip((f"argument {p}" for p in _argument_paths(dyn_treedef)), leaves, strict=True))
    for label, value in inputs:
        for leaf in jax.tree.leaves(value):
            ids = _devices(leaf)
            if ids is None:
                continue
            if seen and ids not in seen:
                (first_ids, first), *_ = seen.items()
                return (
                    f"{who}: {first} lies on {_show(first_ids)} but {label} lies on {_show(ids)}; "
                    "all inputs of one call must lie on the same devices. Move one of them with "
                    "jax.device_put (for a state: state.value = jax.device_put(state.value, "
                    "other.sharding)); a program compiled for one mesh needs the same mesh's "
                    "devices on every later call."
                )
            seen.setdefault(ids, label)
    return None
