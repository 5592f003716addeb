"""``pmap2``: state-aware parallel map over devices."""

from __future__ import annotations

import functools
from typing import Any, Callable, Hashable, Iterable, Sequence

import jax

from ._mapping import StatefulMapping

__all__ = ["pmap2"]


def _as_tuple(argnums: int | Iterable[int]) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


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
    unexpected_out_state_mapping: str = "ignore",
) -> StatefulMapping | Callable[[Callable[..., Any]], StatefulMapping]:
    """Run ``fn`` in parallel on several devices like ``jax.pmap``, keeping its States consistent.

    Accepts everything ``jax.pmap`` accepts. ``static_broadcasted_argnums`` become
    compile-time constants; ``donate_argnums`` donates those positional arguments'
    buffers. A state mapped with ``state_in_axes`` is split across devices along
    that axis; written states come back as ``state_out_axes`` says. Each device
    gets its own random key. The compiled program is cached per call signature.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_transform import pmap2
        >>> n = jax.local_device_count()
        >>> pmap2(lambda x: x * 2)(jnp.arange(n, dtype=jnp.float32)).shape == (n,)
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
        )
    no_mapped_args = in_axes is None or (
        isinstance(in_axes, (tuple, list)) and len(in_axes) > 0 and all(a is None for a in in_axes)
    )
    if no_mapped_args and state_in_axes is None:
        # jax.pmap raises "pmap requires at least one argument with a mapped axis".
        raise ValueError(
            f"pmap2 requires at least one argument with a mapped axis: in_axes={in_axes!r} maps "
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
        state_in_axes=state_in_axes,
        state_out_axes=state_out_axes,
        unexpected_out_state_mapping=unexpected_out_state_mapping,
        static_argnums=_as_tuple(static_broadcasted_argnums),
        axis_size=axis_size,
        axis_name=axis_name,
        mapping_fn=jax.pmap,
        mapping_kwargs=mapping_kwargs,
    )
    if devices is not None:
        mapping._device_limit = lambda: len(devices)
    else:
        mapping._device_limit = lambda: jax.local_device_count(backend)
    mapping._donate_positions = frozenset(_as_tuple(donate_argnums))
    return mapping
