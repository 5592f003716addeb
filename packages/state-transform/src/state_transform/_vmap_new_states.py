"""``vmap_new_states``: brainstate's function form of mapping over the states a call creates."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, overload

from ._new_states import check_axis_size, new_state_rules, run_creating_states
from ._rules import rule_filter

__all__ = ["vmap_new_states"]

R = TypeVar("R")


@overload
def vmap_new_states(
    fun: Callable[..., R],
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | None = None,
    state_tag: str | None = None,
    state_to_exclude: Any = None,
    in_states: Any = None,
    out_states: Any = None,
) -> Callable[..., R]: ...
@overload
def vmap_new_states(
    fun: None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | None = None,
    state_tag: str | None = None,
    state_to_exclude: Any = None,
    in_states: Any = None,
    out_states: Any = None,
) -> Callable[[Callable[..., R]], Callable[..., R]]: ...


def vmap_new_states(
    fun: Callable[..., Any] | None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | None = None,
    state_tag: str | None = None,
    state_to_exclude: Any = None,
    in_states: Any = None,
    out_states: Any = None,
) -> Callable[..., Any]:
    """Map a function over its lanes, giving every State it creates one copy per lane.

    Each call of the returned function runs ``fun`` once under ``vmap2``. Every
    State created during the call comes out with a leading axis of copies (axis
    0 of its value), so a ``ShortTermState(x)`` made from a mapped ``x`` of
    shape ``(n,)`` holds ``(n,)`` values afterwards; random draws differ between
    copies. A ``NonBatchState``, and the new states ``state_to_exclude``
    selects, stay one shared copy (their value must then be the same on every
    lane). States that existed before the call are read as in ``vmap2``.

    This is the function form of ``vmap2_new_states`` (which initialises a
    module). A call creates new States each time, so each call traces ``fun``
    again and runs it op by op: use it to build things, not in a hot loop.

    Args:
        fun: the function to map; None returns a decorator.
        in_axes: the mapped axis of each positional argument, as in ``jax.vmap``
            (a list is taken as a tuple). Keyword arguments are mapped on axis 0.
        out_axes: where the mapped axis goes in the result, as in ``jax.vmap``.
        axis_name: a name for the mapped axis, for collectives.
        axis_size: the number of lanes; needed when no argument is mapped.
        spmd_axis_name: passed to ``jax.vmap``.
        state_tag: a tag added to every State the call creates.
        state_to_exclude: a filter (a State class, a tag, ...) selecting the new
            states that keep one shared copy.
        in_states: not accepted (there are no existing states to declare); use
            ``vmap`` or ``vmap2`` to map existing states.
        out_states: not accepted, as ``in_states``.

    Returns:
        The mapped function, or a decorator when ``fun`` is None.

    Raises:
        ValueError: ``axis_size`` is not a positive int; ``in_states`` or
            ``out_states`` is given; ``axis_size`` disagrees with a mapped argument.
        BatchAxisError: a state kept as one shared copy is created with a value
            that differs between lanes.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import NonBatchState, ShortTermState
        >>> from state_transform import vmap_new_states
        >>> made = {}
        >>> @vmap_new_states(axis_size=3)
        ... def build(x):
        ...     made['v'] = ShortTermState(x * 10.0)
        ...     made['table'] = NonBatchState(jnp.ones(2))
        ...     return made['v'].value + 1.0
        >>> build(jnp.arange(3.0))
        Array([ 1., 11., 21.], dtype=float32)
        >>> made['v'].value, made['table'].value.shape
        (Array([ 0., 10., 20.], dtype=float32), (2,))
    """
    for given, what in ((in_states, "in_states"), (out_states, "out_states")):
        if given is not None:
            raise ValueError(
                f"vmap_new_states: {what}= is not accepted; this transform maps the states the "
                "function creates. To map existing states, use vmap(fun, in_states=...) or "
                "vmap2(fun, state_in_axes=...)."
            )
    if axis_size is not None:
        check_axis_size("vmap_new_states", axis_size)
    shared = None if state_to_exclude is None else rule_filter(state_to_exclude, "state_to_exclude", "vmap_new_states")
    rules = new_state_rules(None, "vmap_new_states", shared)
    options: dict[str, Any] = {
        "in_axes": tuple(in_axes) if isinstance(in_axes, list) else in_axes,
        "out_axes": out_axes,
        "axis_name": axis_name,
        "axis_size": axis_size,
    }
    if spmd_axis_name is not None:
        options["mapping_kwargs"] = {"spmd_axis_name": spmd_axis_name}

    def transform(f: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(f):
            raise TypeError(f"vmap_new_states: fun must be callable, got {type(f).__name__}.")

        @functools.wraps(f)
        def mapped(*args: Any, **kwargs: Any) -> Any:
            out, _ = run_creating_states("vmap_new_states", f, args, kwargs, None, rules, state_tag, **options)
            return out

        return mapped

    return transform if fun is None else transform(fun)
