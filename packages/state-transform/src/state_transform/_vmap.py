"""``vmap2``: state-aware vectorising map."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, overload

import jax

from ._mapping import MappingStrategy
from ._rules import parse_state_rules
from ._stateful_mapping import StatefulMapping
from ._typing import P, Q, R, S

__all__ = ["vmap2"]

# The strategies of vmap2 calls without state rules, by their options: a
# `vmap2(f)(x)` written inside a step reuses one strategy (and its identity) at
# every step instead of building and keying a new one. Only calls whose options
# are plain values take part, so the table keeps no user object alive.
_PLAIN_STRATEGIES: dict[tuple[Any, ...], MappingStrategy] = {}
_MAX_PLAIN_STRATEGIES = 64
_PLAIN_TYPES = (int, str, type(None))


def _plain_key(*options: Any) -> tuple[Any, ...] | None:
    """``options`` as a key if each is an int, str, None or a flat tuple of those (else None)."""
    for value in options:
        kind = type(value)
        if kind not in _PLAIN_TYPES and not (kind is tuple and all(type(v) in _PLAIN_TYPES for v in value)):
            return None
    return options


# `vmap2(f, ...)` is the mapped function; `vmap2(...)` without `f` is a decorator.
@overload
def vmap2(
    fn: Callable[P, R],
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | None = None,
    state_in_axes: Any = None,
    state_out_axes: Any = None,
    unexpected_out_state_mapping: str = "auto",
    donate_states: bool = True,
) -> StatefulMapping[P, R]: ...
@overload
def vmap2(
    fn: None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | None = None,
    state_in_axes: Any = None,
    state_out_axes: Any = None,
    unexpected_out_state_mapping: str = "auto",
    donate_states: bool = True,
) -> Callable[[Callable[Q, S]], StatefulMapping[Q, S]]: ...


def vmap2(
    fn: Callable[..., Any] | None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | None = None,
    state_in_axes: Any = None,
    state_out_axes: Any = None,
    unexpected_out_state_mapping: str = "auto",
    donate_states: bool = True,
) -> StatefulMapping | Callable[[Callable[..., Any]], StatefulMapping]:
    """Vectorise ``fn`` over an axis like ``jax.vmap``, keeping its States consistent.

    States the function reads are broadcast unless ``state_in_axes`` maps them;
    written states come back as ``state_out_axes`` says (see ``StatefulMapping``
    for the rules, including undeclared writes and random keys). The compiled
    program is cached per call signature, so a repeated call costs one dispatch.
    Usable as ``vmap2(fn, ...)`` or as a decorator ``@vmap2(in_axes=...)``.

    Args:
        fn: The function to vectorise. It may read and write ``State`` objects
            (through ``.value``) but must not take or return them. ``None``
            returns a decorator that takes the function.
        in_axes: Which axis of each positional argument is mapped, as in
            ``jax.vmap``: an int for all arguments, ``None`` to broadcast, or a
            tuple (one entry per argument) or pytree prefix of the arguments.
            For ``x: f32[B, 3]`` and ``w: f32[3]``, ``in_axes=(0, None)``
            maps ``x`` over ``B`` and gives every lane the same ``w``.
        out_axes: Where the mapped axis goes in each output (int, ``None`` for
            an output that is the same on every lane, or a pytree prefix).
            ``out_axes=1`` turns a per-lane ``f32[3]`` into ``f32[3, B]``.
        axis_name: A hashable name for the mapped axis, so that collectives
            (``jax.lax.psum``, ``pmean``, ``axis_index``) can refer to it.
        axis_size: The number of lanes. Needed only when no argument and no
            state is mapped (``in_axes=None``); otherwise it must equal the
            mapped size of every mapped argument and state.
        spmd_axis_name: Passed to ``jax.vmap``: the mesh axis (or axes) that
            the mapped axis is sharded over when used inside ``jax.jit`` with
            sharded inputs.
        state_in_axes: Which states are mapped, and along which axis of their
            value: ``{axis: filter}`` where ``filter`` is a state class in
            ``OfType``, a ``State``, a list of States or any filter of
            ``state_core.filter`` (the first entry that matches wins; ``None``
            as the axis means broadcast). A single filter means ``{0: filter}``.
            Unmatched states are broadcast. A mapped state of value
            ``f32[B, 4]`` is seen as ``f32[4]`` in each lane.
        state_out_axes: Same form as ``state_in_axes``, for written states: the
            axis along which each lane's new value is stacked (``None``: the
            value must be the same on every lane). Written states that no entry
            covers follow ``unexpected_out_state_mapping``.
        unexpected_out_state_mapping: What to do with a written state that no
            ``state_out_axes`` entry covers and whose new value differs per
            lane: ``'auto'`` (default, brainstate's) stacks it on axis 0, except
            that a state the function reads and writes whose leading size is
            already the mapped size is fed one slice per lane (it keeps its
            shape); ``'ignore'`` always stacks, ``'warn'`` stacks with a
            warning, ``'raise'`` raises ``ValueError`` naming the state. A value
            that is the same on every lane is written back unchanged in every
            mode.
        donate_states: Update the states the function writes in place: when
            nothing but a State refers to its old value, the program reuses that
            buffer (the default). ``False`` always allocates new buffers.

    Returns:
        A ``StatefulMapping`` (callable like ``fn``), or, when ``fn`` is
        ``None``, a decorator that makes one.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_transform import vmap2
        >>> vmap2(lambda x: x ** 2)(jnp.array([1., 2., 3.]))
        Array([1., 4., 9.], dtype=float32)

        A state mapped along axis 0, one counter per lane:

        >>> from state_core import ShortTermState
        >>> count = ShortTermState(jnp.zeros(3))
        >>> def bump(delta):
        ...     count.value = count.value + delta
        ...     return count.value
        >>> bumped = vmap2(bump, state_in_axes={0: count}, state_out_axes={0: count})
        >>> bumped(jnp.array([1., 2., 3.]))
        Array([1., 2., 3.], dtype=float32)
        >>> count.value
        Array([1., 2., 3.], dtype=float32)
    """
    if fn is None:
        return functools.partial(
            vmap2,
            in_axes=in_axes,
            out_axes=out_axes,
            axis_name=axis_name,
            axis_size=axis_size,
            spmd_axis_name=spmd_axis_name,
            state_in_axes=state_in_axes,
            state_out_axes=state_out_axes,
            unexpected_out_state_mapping=unexpected_out_state_mapping,
            donate_states=donate_states,
        )
    key = None
    if state_in_axes is None and state_out_axes is None and type(donate_states) is bool:
        key = _plain_key(in_axes, out_axes, axis_name, axis_size, spmd_axis_name, unexpected_out_state_mapping)
        if key is not None:
            key = (*key, donate_states)
            strategy = _PLAIN_STRATEGIES.get(key)
            if strategy is not None:
                return StatefulMapping(fn, strategy=strategy)
    mapping_kwargs = {} if spmd_axis_name is None else {"spmd_axis_name": spmd_axis_name}
    mapped = StatefulMapping(
        fn,
        in_axes=in_axes,
        out_axes=out_axes,
        state_in_axes=parse_state_rules(state_in_axes, "state_in_axes", "vmap2"),
        state_out_axes=parse_state_rules(state_out_axes, "state_out_axes", "vmap2"),
        unexpected_out_state_mapping=unexpected_out_state_mapping,
        axis_size=axis_size,
        axis_name=axis_name,
        mapping_fn=jax.vmap,
        mapping_kwargs=mapping_kwargs,
        donate_states=donate_states,
        transform="vmap2",
    )
    if key is not None:
        if len(_PLAIN_STRATEGIES) >= _MAX_PLAIN_STRATEGIES:
            _PLAIN_STRATEGIES.clear()
        _PLAIN_STRATEGIES[key] = mapped.strategy
    return mapped
