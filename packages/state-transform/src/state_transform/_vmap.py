"""``vmap2``: state-aware vectorising map."""

from __future__ import annotations

import functools
from typing import Any, Callable, Hashable

import jax

from ._mapping import StatefulMapping

__all__ = ["vmap2"]


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
    unexpected_out_state_mapping: str = "ignore",
) -> StatefulMapping | Callable[[Callable[..., Any]], StatefulMapping]:
    """Vectorise ``fn`` over an axis like ``jax.vmap``, keeping its States consistent.

    States the function reads are broadcast unless ``state_in_axes`` maps them;
    written states come back as ``state_out_axes`` says (see ``StatefulMapping``
    for the rules, including undeclared writes and random keys). The compiled
    program is cached per call signature, so a repeated call costs one dispatch.
    Usable as ``vmap2(fn, ...)`` or as a decorator ``@vmap2(in_axes=...)``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_transform import vmap2
        >>> vmap2(lambda x: x ** 2)(jnp.array([1., 2., 3.]))
        Array([1., 4., 9.], dtype=float32)
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
        )
    mapping_kwargs = {} if spmd_axis_name is None else {"spmd_axis_name": spmd_axis_name}
    return StatefulMapping(
        fn,
        in_axes=in_axes,
        out_axes=out_axes,
        state_in_axes=state_in_axes,
        state_out_axes=state_out_axes,
        unexpected_out_state_mapping=unexpected_out_state_mapping,
        axis_size=axis_size,
        axis_name=axis_name,
        mapping_fn=jax.vmap,
        mapping_kwargs=mapping_kwargs,
    )
