"""brainstate's declaration-based ``vmap(in_states=..., out_states=...)``, as a ``vmap2``."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, overload

import jax

from state_core import BatchAxisError, State

from ._mapping import StatefulMapping
from ._typing import P, Q, R, S
from ._vmap import vmap2

__all__ = ["vmap"]


def _is_state(x: Any) -> bool:
    return isinstance(x, State)


def _declared(states: Any, what: str) -> dict[int, list[State[Any]]]:
    """``{axis: [State, ...]}`` from ``{axis: {name: State}}``, or from a State / pytree of States (axis 0)."""
    if states is None:
        return {}
    if (
        isinstance(states, dict)
        and states
        and all(isinstance(k, int) and not isinstance(k, bool) for k in states)
        and all(isinstance(v, dict) for v in states.values())
    ):
        declared = {axis: jax.tree.leaves(group, is_leaf=_is_state) for axis, group in states.items()}
    else:
        declared = {0: jax.tree.leaves(states, is_leaf=_is_state)}
    for group in declared.values():
        for s in group:
            if not isinstance(s, State):
                raise TypeError(
                    f"vmap: {what} must hold States ({{axis: {{name: State}}}}, a State, or a list/dict of "
                    f"States), but it contains a {type(s).__name__}."
                )
    return declared


# `vmap(f, ...)` is the mapped function; `vmap(...)` without `f` is a decorator.
@overload
def vmap(
    fn: Callable[P, R],
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | None = None,
    in_states: Any = None,
    out_states: Any = None,
) -> StatefulMapping[P, R]: ...
@overload
def vmap(
    fn: None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | None = None,
    in_states: Any = None,
    out_states: Any = None,
) -> Callable[[Callable[Q, S]], StatefulMapping[Q, S]]: ...


def vmap(
    fn: Callable[..., Any] | None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | None = None,
    in_states: Any = None,
    out_states: Any = None,
) -> StatefulMapping | Callable[[Callable[..., Any]], StatefulMapping]:
    """brainstate's ``vmap``: the states that are mapped are declared by instance.

    This is ``vmap2`` with ``state_in_axes`` / ``state_out_axes`` built from the
    declared States: every state in ``in_states`` is mapped along its axis on the
    way in *and* written back along it; states in ``out_states`` are written back
    along theirs. A state that the function writes with a value that differs per
    lane but that neither declares raises ``BatchAxisError`` (a ``ValueError``)
    naming it, as in brainstate (``vmap2``'s default stacks it instead). Other
    states are broadcast.

    Args:
        fn: the function to vectorise; None returns a decorator.
        in_axes: the mapped axis of each positional argument, as in ``jax.vmap``.
        out_axes: where the mapped axis goes in the outputs, as in ``jax.vmap``.
        axis_name: a name for the mapped axis, for collectives.
        axis_size: the number of lanes, when no argument or state gives it.
        spmd_axis_name: passed to ``jax.vmap``.
        in_states: the states mapped on the way in: ``{axis: {name: State}}``, or a
            State, list or dict of States (all on axis 0).
        out_states: the states written back along a mapped axis, in the same forms.

    Returns:
        The mapped function (a ``StatefulMapping``), or a decorator when ``fn`` is None.

    Raises:
        BatchAxisError: a state is declared on different axes in ``in_states`` and ``out_states``.
        TypeError: ``in_states`` / ``out_states`` hold something that is not a State.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ShortTermState
        >>> from state_transform import vmap
        >>> counter = ShortTermState(jnp.zeros(3))
        >>> @vmap(in_states=counter)
        ... def accumulate(x):
        ...     counter.value = counter.value + x
        ...     return counter.value
        >>> accumulate(jnp.array([1., 2., 3.]))
        Array([1., 2., 3.], dtype=float32)
        >>> counter.value
        Array([1., 2., 3.], dtype=float32)
    """
    state_in = _declared(in_states, "in_states")
    state_out = _declared(out_states, "out_states")
    out_axis = {id(s): axis for axis, group in state_out.items() for s in group}
    for axis, group in state_in.items():
        for s in group:
            if id(s) not in out_axis:
                out_axis[id(s)] = axis
                state_out.setdefault(axis, []).append(s)
            elif out_axis[id(s)] != axis:
                raise BatchAxisError(
                    f"vmap: {s.describe()} is mapped on axis {axis} in in_states but on axis "
                    f"{out_axis[id(s)]} in out_states; declare it on one axis."
                )
    state_in_axes = {axis: list(group) for axis, group in state_in.items() if group} or None
    state_out_axes = {axis: list(group) for axis, group in state_out.items() if group} or None

    def mapped(f: Callable[..., Any]) -> StatefulMapping:
        return vmap2(
            f,
            in_axes=tuple(in_axes) if isinstance(in_axes, list) else in_axes,
            out_axes=out_axes,
            axis_name=axis_name,
            axis_size=axis_size,
            spmd_axis_name=spmd_axis_name,
            state_in_axes=state_in_axes,
            state_out_axes=state_out_axes,
            unexpected_out_state_mapping="raise",
        )

    return mapped if fn is None else mapped(fn)
