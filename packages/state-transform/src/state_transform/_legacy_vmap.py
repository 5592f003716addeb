"""brainstate's declaration-based ``vmap(in_states=..., out_states=...)``, as a ``vmap2``."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, overload

import jax

from state_core import BatchAxisError, State

from ._rules import DECLARED_STATES, parse_state_rules
from ._stateful_mapping import StatefulMapping
from ._typing import P, Q, R, S
from ._vmap import vmap2

__all__ = ["vmap"]


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
    state_in_axes = parse_state_rules(in_states, "in_states", "vmap", DECLARED_STATES)
    declared_out = parse_state_rules(out_states, "out_states", "vmap", DECLARED_STATES)
    # A state of in_states is written back on its axis too, unless out_states declares it.
    for state in jax.tree.leaves(in_states, is_leaf=lambda x: isinstance(x, State)):
        axis = state_in_axes.value_for((), state)
        out_axis = declared_out.value_for((), state, axis)
        if out_axis != axis:
            raise BatchAxisError(
                f"vmap: {state.describe()} is mapped on axis {axis} in in_states but on axis "
                f"{out_axis} in out_states; declare it on one axis."
            )
    state_out_axes = declared_out.then(state_in_axes)

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
