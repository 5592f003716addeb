"""``pmap2``: state-aware parallel map over devices."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, overload

import jax

from ._rules import parse_state_rules
from ._stateful_mapping import StatefulMapping
from ._typing import P, Q, R, S

__all__ = ["pmap2"]


def _as_tuple(argnums: int | Iterable[int]) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


# `pmap2(f, ...)` is the mapped function; `pmap2(...)` without `f` is a decorator.
@overload
def pmap2(
    fn: Callable[P, R],
    axis_name: Hashable | None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    static_broadcasted_argnums: int | Iterable[int] = (),
    devices: Sequence[Any] | None = None,
    backend: str | None = None,
    axis_size: int | None = None,
    donate_argnums: int | Iterable[int] = (),
    state_in_axes: Any = None,
    state_out_axes: Any = None,
    unexpected_out_state_mapping: str = "auto",
    donate_states: bool = True,
) -> StatefulMapping[P, R]: ...
@overload
def pmap2(
    fn: None = None,
    axis_name: Hashable | None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    static_broadcasted_argnums: int | Iterable[int] = (),
    devices: Sequence[Any] | None = None,
    backend: str | None = None,
    axis_size: int | None = None,
    donate_argnums: int | Iterable[int] = (),
    state_in_axes: Any = None,
    state_out_axes: Any = None,
    unexpected_out_state_mapping: str = "auto",
    donate_states: bool = True,
) -> Callable[[Callable[Q, S]], StatefulMapping[Q, S]]: ...


def pmap2(
    fn: Callable[..., Any] | None = None,
    axis_name: Hashable | None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    static_broadcasted_argnums: int | Iterable[int] = (),
    devices: Sequence[Any] | None = None,
    backend: str | None = None,
    axis_size: int | None = None,
    donate_argnums: int | Iterable[int] = (),
    state_in_axes: Any = None,
    state_out_axes: Any = None,
    unexpected_out_state_mapping: str = "auto",
    donate_states: bool = True,
) -> StatefulMapping | Callable[[Callable[..., Any]], StatefulMapping]:
    """Run ``fn`` in parallel on several devices like ``jax.pmap``, keeping its States consistent.

    Accepts everything ``jax.pmap`` accepts. ``static_broadcasted_argnums`` become
    compile-time constants; ``donate_argnums`` donates those positional arguments'
    buffers. A state mapped with ``state_in_axes`` is split across devices along
    that axis; written states come back as ``state_out_axes`` says. Each device
    gets its own random key. The compiled program is cached per call signature.

    Args:
        fn: The function to run on every device. It may read and write
            ``State`` objects but must not take or return them. ``None``
            returns a decorator.
        axis_name: A hashable name for the device axis, for collectives such as
            ``jax.lax.psum(x, axis_name)``.
        in_axes: Which axis of each positional argument is split across
            devices, as in ``jax.pmap`` (int, ``None`` to broadcast, or a tuple /
            pytree prefix). With 8 devices, ``x: f32[8, 128]`` and
            ``in_axes=0``, each device sees ``f32[128]``.
        out_axes: Where the device axis goes in each output (as ``in_axes``).
        static_broadcasted_argnums: Positions of arguments that are hashable
            compile-time constants, the same on every device; each new value
            compiles a new program.
        devices: The devices to run on (a sequence of ``jax.Device``); by default
            the first ``axis size`` local devices. The mapped size may not exceed
            their number.
        backend: The XLA backend (``'cpu'``, ``'gpu'``, ``'tpu'``).
        axis_size: The number of devices to map over when no argument or state
            is split (all ``in_axes`` are ``None``).
        donate_argnums: Positions of arguments whose buffers XLA may reuse for
            the outputs; do not use those arrays after the call.
        state_in_axes: Which states are split across devices and along which
            axis of their value: ``{axis: filter}`` (a state class in
            ``OfType``, a ``State``, a list of States, or any filter of
            ``state_core.filter``; first match wins; ``None`` broadcasts).
            A state of value ``f32[8, 4]`` mapped on axis 0 is ``f32[4]`` on
            each of 8 devices. Unmatched states are broadcast.
        state_out_axes: Same form, for written states: the axis along which the
            devices' new values are gathered.
        unexpected_out_state_mapping: A written state that no ``state_out_axes``
            entry covers and whose new value differs between devices:
            ``'auto'`` (default) gathers it on axis 0 (a state the function
            reads and writes whose leading size is the number of devices is fed
            one slice per device instead), ``'ignore'`` always gathers,
            ``'warn'`` gathers with a warning, ``'raise'`` raises ``ValueError``
            naming the state.
        donate_states: Update the states the function writes in place: when
            nothing but a State refers to its old value, the program reuses that
            buffer (the default). ``False`` always allocates new buffers.

    Returns:
        A ``StatefulMapping`` (callable like ``fn``), or a decorator when ``fn``
        is ``None``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_transform import pmap2
        >>> n = jax.local_device_count()
        >>> pmap2(lambda x: x * 2)(jnp.arange(n, dtype=jnp.float32)).shape == (n,)
        True

        One row of a state per device, updated in place:

        >>> from state_core import ParamState
        >>> w = ParamState(jnp.zeros((n, 2)))
        >>> def step(delta):
        ...     w.value = w.value + delta
        ...     return jax.lax.psum(w.value.sum(), 'd')
        >>> total = pmap2(step, 'd', state_in_axes={0: w}, state_out_axes={0: w})(jnp.ones((n, 2)))
        >>> float(total[0]) == 2.0 * n
        True
        >>> w.value.shape == (n, 2)
        True
    """
    if fn is None:
        return functools.partial(
            pmap2,
            axis_name=axis_name,
            in_axes=in_axes,
            out_axes=out_axes,
            static_broadcasted_argnums=static_broadcasted_argnums,
            devices=devices,
            backend=backend,
            axis_size=axis_size,
            donate_argnums=donate_argnums,
            state_in_axes=state_in_axes,
            state_out_axes=state_out_axes,
            unexpected_out_state_mapping=unexpected_out_state_mapping,
            donate_states=donate_states,
        )
    no_mapped_args = in_axes is None or (
        isinstance(in_axes, (tuple, list)) and len(in_axes) > 0 and all(a is None for a in in_axes)
    )
    if no_mapped_args and state_in_axes is None:
        # jax.pmap raises "pmap requires at least one argument with a mapped axis".
        raise ValueError(
            f"pmap2: needs at least one argument with a mapped axis: in_axes={in_axes!r} maps "
            "no argument and state_in_axes maps no state (axis_size alone does not give the "
            "devices any input). Map an argument with in_axes or a state with state_in_axes."
        )
    mapping_kwargs: dict[str, Any] = {}
    if devices is not None:
        devices = list(devices)
        mapping_kwargs["devices"] = devices
    if backend is not None:
        mapping_kwargs["backend"] = backend
    mapping = StatefulMapping(
        fn,
        in_axes=in_axes,
        out_axes=out_axes,
        state_in_axes=parse_state_rules(state_in_axes, "state_in_axes", "pmap2"),
        state_out_axes=parse_state_rules(state_out_axes, "state_out_axes", "pmap2"),
        unexpected_out_state_mapping=unexpected_out_state_mapping,
        static_argnums=_as_tuple(static_broadcasted_argnums),
        axis_size=axis_size,
        axis_name=axis_name,
        mapping_fn=jax.pmap,
        mapping_kwargs=mapping_kwargs,
        donate_states=donate_states,
        donate_argnums=_as_tuple(donate_argnums),
        # (counted at the first trace: building a pmap2 does not start JAX's backend)
        max_axis_size=(lambda: len(devices)) if devices is not None else lambda: jax.local_device_count(backend),
        transform="pmap2",
    )
    return mapping
