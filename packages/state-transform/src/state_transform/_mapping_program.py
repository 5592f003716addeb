"""Building the program of a mapping strategy: the traced lane wrapped in ``jax.vmap`` / ``jax.pmap``."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import jax

from state_core.engine import Trace, jaxpr_evaluator, merger

from ._lanes import split_before_mapping, split_inside_lane

if TYPE_CHECKING:
    from ._mapping import MappingInfo

__all__ = ["build_mapped_program"]

_SPLIT = "split"


def build_mapped_program(
    trace: Trace,
    info: MappingInfo,
    mapping_fn: Callable[..., Any],
    mapping_kwargs: dict[str, Any],
    out_axes: Any,
    donate_positions: frozenset[int],
) -> tuple[Callable[..., Any], bool]:
    """``(program, compiled)``: ``program(rw, ro, *dyn_leaves) -> (output, new values)``.

    The new values are those of the lane-written states, the created states, then
    the split states' next values (``Program.write_back`` order). ``compiled`` is
    True when ``mapping_fn`` compiles by itself (``jax.pmap``); otherwise the caller
    wraps the program in ``jax.jit``.
    """
    evaluate = jaxpr_evaluator(trace)
    size = info.axis_size
    axis_name: Hashable = info.axis_name
    split_positions = info.split_positions
    split_states = [trace.in_states[k] for k in split_positions]
    mask = info.lane_written_mask

    kwargs = dict(mapping_kwargs)
    if info.nested_pmap:
        # jax.pmap cannot be nested in another pmap on current JAX; inside an outer
        # pmap2 the inner axis is vectorised on each outer device instead
        # (collectives over both axis names still work).
        mapping_fn = jax.vmap
        kwargs = {}
    # Under vmap the values are split once, before mapping (a slice per lane); other
    # mapping primitives split inside each lane and pick the lane's part by index.
    split_before = mapping_fn is jax.vmap
    # When nothing is mapped (the size comes from axis_size alone) a dummy lane
    # index array is mapped instead: jax.pmap needs at least one mapped input.
    lanes = None if info.mapped_inputs else jax.numpy.arange(size, dtype=jax.numpy.int32)

    def lane(state_values: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any], list[Any]]:
        next_values: list[Any]
        if split_before:
            values, next_values = state_values, []
        else:
            values, next_values = split_inside_lane(split_states, state_values, split_positions, size, axis_name)
        if lanes is not None:
            dyn_leaves = dyn_leaves[:-1]
        out, written, created = evaluate(values, dyn_leaves)
        kept = [v for v, keep in zip(written, mask, strict=True) if keep]
        return out, kept + created, next_values

    split_axis = 0 if split_before else None
    in_axes = [split_axis if m == _SPLIT else m for m in info.in_modes]
    leaf_axes = list(info.leaf_axes)
    if lanes is not None:
        leaf_axes.append(0)
    if donate_positions and not info.nested_pmap:
        kwargs["donate_argnums"] = tuple(1 + j for j, p in enumerate(info.leaf_positions) if p in donate_positions)
    mapped = mapping_fn(
        lane,
        in_axes=(in_axes, *leaf_axes),
        out_axes=(
            out_axes,
            [*info.lane_written_axes, *info.created_axes],
            [] if split_before else [None] * len(split_positions),
        ),
        axis_name=axis_name,
        **kwargs,
    )
    merge = merger(trace)

    def program(rw: list[Any], ro: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any]]:
        state_values = merge(rw, ro)
        if lanes is not None:
            dyn_leaves = (*dyn_leaves, lanes)
        keys_after = split_before_mapping(split_states, state_values, split_positions, size) if split_before else []
        out, new_values, next_values = mapped(state_values, *dyn_leaves)
        return out, new_values + next_values + keys_after

    return program, hasattr(mapped, "lower")  # already compiled: jax.pmap
