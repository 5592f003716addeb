"""A mapping strategy's program: its record (``MappingInfo``) and the lane wrapped in ``jax.vmap`` / ``jax.pmap``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import jax

from state_core.engine import Trace, jaxpr_evaluator, merger

from ._lanes import SPLIT, kept_writes, split_before_mapping, split_inside_lane

__all__ = ["MappingInfo", "build_mapped_program"]


@dataclasses.dataclass(frozen=True)
class MappingInfo:
    """How a traced signature of a ``StatefulMapping`` is mapped (its strategy's record).

    ``MappingStrategy.analyze`` makes it and ``build_mapped_program`` reads it;
    every field is also an attribute of the same name.

    Args:
        axis_size: the number of lanes.
        axis_name: the axis name bound in the program (the user's; a private one when a
            lane must find its index and the user gave none; else None).
        in_modes: per input state: its mapped axis, None (broadcast) or ``'split'``
            (a state that gives each lane its own value, such as a random key).
        split_positions: indices into ``in_states`` of the split states.
        lane_written_mask: per written state, whether the lanes return it (split
            states are written from the split instead).
        lane_written_axes: the out axis of each lane-written state.
        created_axes: the out axis of each state created during the trace.
        leaf_axes: the mapped axis of each dynamic argument leaf.
        leaf_positions: the positional index of each dynamic leaf (None for keywords).
        mapped_inputs: whether any argument or state is mapped (else a lane index is).
        out_varying: per output leaf, whether it differs across lanes.
        arg_avals: the (batched) abstract value of each dynamic argument leaf.
        nested_pmap: a pmap2 traced inside another pmap2 (its axis is vectorised).
    """

    axis_size: int
    axis_name: Hashable | None
    in_modes: tuple[Any, ...]
    split_positions: tuple[int, ...]
    lane_written_mask: tuple[bool, ...]
    lane_written_axes: tuple[Any, ...]
    created_axes: tuple[Any, ...]
    leaf_axes: tuple[Any, ...]
    leaf_positions: tuple[Any, ...]
    mapped_inputs: bool
    out_varying: tuple[bool, ...]
    arg_avals: tuple[Any, ...]
    nested_pmap: bool


def build_mapped_program(
    trace: Trace,
    info: MappingInfo,
    mapping_fn: Callable[..., Any],
    mapping_kwargs: Mapping[str, Any],
    out_axes: Any,
    donate_positions: frozenset[int],
    donate_states: bool = False,
) -> tuple[Callable[..., Any], bool]:
    """``(program, compiled)``: ``program(rw, ro, *dyn_leaves) -> (output, new values)``.

    The new values are those of the lane-written states, the created states, then
    the split states' next values (``Program.write_back`` order). ``compiled`` is
    True when ``mapping_fn`` compiles by itself (``jax.pmap``); otherwise the caller
    wraps the program in ``jax.jit`` (and donates through that).

    Args:
        trace: the per-lane trace.
        info: the mapping strategy's decisions for it.
        mapping_fn: ``jax.vmap``, ``jax.pmap`` or a function with their calling convention.
        mapping_kwargs: extra keyword arguments for ``mapping_fn``.
        out_axes: the user's ``out_axes`` for the return value.
        donate_positions: user positional arguments whose buffers ``mapping_fn`` donates
            (``pmap2``'s ``donate_argnums``).
        donate_states: also donate the written states' values (the program's first
            argument) to a ``mapping_fn`` that compiles by itself.
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

    merge = merger(trace)
    rw_index, ro_index = trace.rw_index, trace.ro_index

    def lane(rw: list[Any], ro: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any], list[Any]]:
        state_values = merge(rw, ro)
        next_values: list[Any]
        if split_before:
            values, next_values = state_values, []
        else:
            values, next_values = split_inside_lane(split_states, state_values, split_positions, size, axis_name)
        if lanes is not None:
            dyn_leaves = dyn_leaves[:-1]
        out, written, created = evaluate(values, dyn_leaves)
        return out, kept_writes(written, mask) + created, next_values

    split_axis = 0 if split_before else None
    in_axes = [split_axis if m is SPLIT else m for m in info.in_modes]
    leaf_axes = list(info.leaf_axes)
    if lanes is not None:
        leaf_axes.append(0)
    if not info.nested_pmap and not split_before:
        donate = [2 + j for j, p in enumerate(info.leaf_positions) if p in donate_positions]
        if donate_states and rw_index and mapping_fn is jax.pmap:  # a custom mapping_fn may donate itself
            donate.insert(0, 0)
        if donate:
            kwargs["donate_argnums"] = tuple(donate)
    mapped = mapping_fn(
        lane,
        in_axes=([in_axes[k] for k in rw_index], [in_axes[k] for k in ro_index], *leaf_axes),
        out_axes=(
            out_axes,
            [*info.lane_written_axes, *info.created_axes],
            [] if split_before else [None] * len(split_positions),
        ),
        axis_name=axis_name,
        **kwargs,
    )

    def program(rw: list[Any], ro: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any]]:
        if lanes is not None:
            dyn_leaves = (*dyn_leaves, lanes)
        keys_after = []
        if split_before and split_positions:
            state_values = merge(rw, ro)
            keys_after = split_before_mapping(split_states, state_values, split_positions, size)
            rw, ro = [state_values[k] for k in rw_index], [state_values[k] for k in ro_index]
        out, new_values, next_values = mapped(rw, ro, *dyn_leaves)
        return out, new_values + next_values + keys_after

    return program, hasattr(mapped, "lower")  # already compiled: jax.pmap
