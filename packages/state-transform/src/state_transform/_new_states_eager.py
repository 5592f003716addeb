"""The eager run of a one-shot mapping that creates states (``vmap2_new_states`` and its kin).

An initialisation runs once. Traced into a jaxpr and then evaluated op by op under
``jax.vmap``, its work is done twice: the init's Python while tracing, then every
operation again under JAX's batching interpreter. At the top level, where every
value is concrete, ``run_eagerly`` runs the function once under an eager
``jax.vmap`` instead, and records what it does to States as a trace does (a
``StateTraceStack``, with the values it writes private to this thread). Each state's
axis is decided by the same methods of the same ``MappingStrategy``, so the numbers,
the errors, the warnings and the one all-or-nothing write-back are those of the
traced run.

What a trace would learn before running (the mapped size, the arguments' axes) is
checked before the function runs. Random streams give each lane its own key by the
mapping rule (lane ``i`` gets ``split(K, n + 1)[1 + i]``); ``state_random.DEFAULT``'s
lane keys are split before the run, other streams' when they are first read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

import state_random
from state_core import State, StateTraceStack, active_trace_stacks, check_not_state
from state_core.engine import handout_locks, is_batched, is_eager, private_state_values, write_state_values

from ._axes import check_out_axes
from ._lanes import splits_per_lane
from ._mapping import _MappingTrace
from ._stateful_mapping import StatefulMapping

__all__ = ["EagerRun", "eager_run_possible", "run_eagerly", "commit"]

_UNSET = object()


@dataclasses.dataclass
class EagerRun:
    """What a mapping that creates states computed, before anything is stored.

    Args:
        out: the mapped return value of the function.
        axis_size: the number of lanes.
        created_axes: the axis of each created state whose value came out of the lanes.
        states: the states to write, in the traced mapping's write-back order.
        values: their new values (concrete).
        split_from: each stream split for the lanes and the key it was split from; the
            write-back happens only if each still holds that key.
        created: the created states that held the lanes' values (usable again once written).
    """

    out: Any
    axis_size: int
    created_axes: dict[State[Any], Any]
    states: list[State[Any]] = dataclasses.field(default_factory=list)
    values: list[Any] = dataclasses.field(default_factory=list)
    split_from: list[tuple[State[Any], Any]] = dataclasses.field(default_factory=list)
    created: list[State[Any]] = dataclasses.field(default_factory=list)


def eager_run_possible(mapping: StatefulMapping, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``run_eagerly`` may run this call: eager, under ``jax.vmap``, nothing to compile.

    Inside a trace the compiled mapping is used; while JAX checks every operation for
    NaNs (``jax_debug_nans`` / ``jax_debug_infs``) a compiled program is run, since
    library code makes and masks NaNs on purpose; and arguments spread over several
    devices are left to a compiled program, as in every mapping's first call.
    """
    if mapping.mapping_fn is not jax.vmap or len(mapping.strategy.in_rules) or mapping.static_argnums:
        return False
    if mapping.static_argnames or active_trace_stacks() or not is_eager():
        return False
    config: Any = jax.config
    if config.jax_debug_nans or config.jax_debug_infs:
        return False
    return all(_on_one_device(leaf) for leaf in jax.tree.leaves((args, kwargs)))


def _on_one_device(leaf: Any) -> bool:
    sharding = getattr(leaf, "sharding", None)
    return sharding is None or len(sharding.device_set) == 1


def run_eagerly(mapping: StatefulMapping, args: tuple[Any, ...], kwargs: dict[str, Any]) -> EagerRun | None:
    """Run ``mapping``'s function once under an eager ``jax.vmap``; store nothing.

    Returns None when the traced mapping must run the call instead: the function
    read and wrote a state that the traced mapping feeds one slice per lane once it
    has seen it (a per-lane buffer under ``'auto'``), which takes a second trace.

    Raises what the traced mapping raises (a bad axis or size before the function
    runs; a state kept shared that differs between lanes after it), and whatever
    the function raises; no State changes then.
    """
    _, leaves, treedef, static_args, static_kwargs, dyn_args, dyn_kwargs = mapping._signature(args, kwargs)
    strategy = mapping.strategy
    ctx = strategy.new_trace_context(mapping.fun, mapping.name, mapping.learned)
    strategy.abstract_inputs(ctx, dyn_args, dyn_kwargs, leaves)  # checks in_axes; the sizes they map
    size = strategy.axis_size_for(ctx.sizes, ctx.name)
    n_args = len(dyn_args) + len(static_args)
    lane = _Lane(mapping, size, _split_stream(size))

    def mapped(index: Any, stream_keys: Any, *flat: Any) -> tuple[Any, list[Any]]:
        call_args, call_kwargs = mapping._rebuild_args(flat, treedef, static_args, static_kwargs, n_args)
        return lane.run(index, stream_keys, call_args, call_kwargs)

    stream_keys = None if lane.stream is None else lane.stream[2]
    run_mapped = jax.vmap(
        mapped,
        in_axes=(0, None if stream_keys is None else 0, *ctx.leaf_axes),
        out_axes=(mapping.out_axes, 0),
        axis_name=mapping.axis_name,
        axis_size=size,
        **mapping.mapping_kwargs,
    )
    out, lanes_values = run_mapped(np.arange(size, dtype=np.int32), stream_keys, *leaves)
    if _has_per_lane_buffer(mapping, lane, ctx.paths, size):
        return None
    result = lane.decide(ctx, lanes_values)
    result.out = out
    # Eager operations run asynchronously: one that fails (a callback that raises) must
    # fail here, before any State sees the results.
    jax.block_until_ready((out, result.values))
    return result


def _split_stream(size: int) -> tuple[State[Any], Any, Any, Any] | None:
    """``(DEFAULT, key, lane keys, next key)``: the global stream split ahead for ``size`` lanes.

    Most initialisations draw from ``state_random.DEFAULT``; splitting its key here, in
    one compiled call, spares a split inside the lanes. Nothing is stored: an init that
    never reads it leaves it as it was. (A lazily seeded stream makes its key now, the
    key its first draw would make.)
    """
    stream = state_random.DEFAULT
    key = stream._value
    if isinstance(key, jax.core.Tracer) or not stream.splits_across_lanes(key):
        return None
    lanes, after = stream.split_across_lanes(key, size)
    return stream, key, lanes, after


class _Lane:
    """The function's run inside the lanes, and what it did to States."""

    def __init__(self, mapping: StatefulMapping, size: int, stream: tuple[State[Any], Any, Any, Any] | None) -> None:
        self.mapping = mapping
        self.size = size
        self.stream = stream
        self.index: Any = None
        self.stream_keys: Any = None
        self.read_first: set[int] = set()
        self.splits: list[tuple[State[Any], Any, Any]] = []  # (state, key split, its next key)
        # Per written state (split states left out): (state, varies, whether its value left the lanes, value).
        self.written: list[tuple[State[Any], bool, bool, Any]] = []
        self.created: list[tuple[State[Any], bool]] = []  # (state, varies); their values left the lanes

    def run(self, index: Any, stream_keys: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
        self.index, self.stream_keys = index, stream_keys
        mapping = self.mapping
        # (states left holding a lane's value are reported if read)
        stack = StateTraceStack(mapping.name, first_read=self._first_read, traces_jaxpr=True)
        # The lanes' values put into states are visible to this thread only.
        with private_state_values():
            try:
                with stack:
                    out = mapping.fun(*args, **kwargs)
                    created = [s for s in stack._created if _holds_tracer(s._value)]
                    created_values = [s._value for s in created]
                written = stack.get_write_states()
                written_values = [s._value for s in written]
            finally:
                stack.restore_original_values()
        check_not_state(out, f"The return value of {mapping.name}")
        check_out_axes(mapping.out_axes, out, mapping.name)
        return out, self._record(written, written_values, created, created_values)

    def _first_read(self, state: State[Any]) -> Any:
        """The value the lanes see when ``state`` is first read: its own key for a split stream."""
        value = state._value
        self.read_first.add(id(state))
        if not splits_per_lane(state, value, kept_whole=False):
            return value  # every lane reads the same value
        stream = self.stream
        if stream is not None and state is stream[0] and value is stream[1]:
            lanes, after = self.stream_keys, stream[3]
        else:
            keys, after = state.split_across_lanes(value, self.size)
            lanes = jax.tree.map(lambda k: jax.lax.dynamic_index_in_dim(k, self.index, keepdims=False), keys)
        self.splits.append((state, value, after))
        return lanes

    def _record(
        self, written: list[State[Any]], written_values: list[Any], created: list[State[Any]], created_values: list[Any]
    ) -> list[Any]:
        """Note what varies between lanes (here, where the lanes' trace is current); return what leaves the lanes."""
        split = {id(s) for s, _, _ in self.splits}
        out: list[Any] = []
        for state, value in zip(written, written_values, strict=True):
            if id(state) in split:
                continue  # a split stream goes on from its next key, not from the lanes' keys
            leaves = jax.tree.leaves(value)
            traced = _holds_tracer(value)
            self.written.append((state, any(map(is_batched, leaves)), traced, None if traced else value))
            if traced:
                out.append(value)
        for state, value in zip(created, created_values, strict=True):
            self.created.append((state, any(map(is_batched, jax.tree.leaves(value)))))
            out.append(value)
        return out

    def decide(self, ctx: _MappingTrace, lanes_values: list[Any]) -> EagerRun:
        """Each state's axis, as the traced mapping decides it (written states, then created ones)."""
        strategy, size = self.mapping.strategy, self.size
        sent = iter(lanes_values)
        result = EagerRun(out=None, axis_size=size, created_axes={})
        for state, varies, traced, value in self.written:
            read = id(state) in self.read_first
            axis = strategy.out_axis(ctx, state, varies, size, None, read)
            result.states.append(state)
            result.values.append(_placed(next(sent), axis) if traced else value)
        for state, varies in self.created:
            axis = strategy.created_axis(ctx, state, varies)  # (their paths are found once, for all)
            result.created_axes[state] = axis
            result.states.append(state)
            result.values.append(_placed(next(sent), axis))
            result.created.append(state)
        for state, key, after in self.splits:
            result.states.append(state)
            result.values.append(after)
            result.split_from.append((state, key))
        return result


def _holds_tracer(value: Any) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(value))


def _placed(value: Any, axis: Any) -> Any:
    """A value that left the lanes on axis 0, with its lanes' axis where ``axis`` puts it (None: one copy)."""

    def place(x: Any) -> Any:
        if axis is None:
            return x[0]  # the same on every lane
        if axis % np.ndim(x) == 0:
            return x
        return jax.numpy.moveaxis(x, 0, axis)

    return jax.tree.map(place, value)


def _has_per_lane_buffer(mapping: StatefulMapping, lane: _Lane, paths: dict[int, tuple[Any, ...]], size: int) -> bool:
    """Whether the traced mapping would feed a written state one slice per lane (``MappingStrategy._per_lane_buffers``).

    An undeclared state read and written with a value that differs between lanes, whose
    leading size already is the number of lanes: under ``'auto'`` the traced mapping
    traces again with one slice per lane, which an eager run cannot take back.
    """
    if mapping.unexpected_out_state_mapping != "auto":
        return False
    for state, varies, _, _ in lane.written:
        if not varies or id(state) not in lane.read_first:
            continue
        path = paths.get(id(state), ())
        if mapping.strategy.out_rules.value_for(path, state, _UNSET) is not _UNSET:
            continue
        leaves = jax.tree.leaves(state._value)
        if leaves and all(np.ndim(x) >= 1 and np.shape(x)[0] == size for x in leaves):
            return True
    return False


def commit(
    states: Sequence[State[Any]],
    values: Sequence[Any],
    split_from: Sequence[tuple[State[Any], Any]],
    created: Sequence[State[Any]],
    who: str,
) -> bool:
    """Store ``values`` in ``states`` all or nothing, if every split stream still holds its key.

    Under the streams' hand-out locks, as every draw: if another thread drew from a
    stream since its key was split for the lanes, nothing is stored and False is
    returned (the call then runs again, traced and locked), so no key is handed out twice.
    """
    locks = handout_locks([state for state, _ in split_from])
    for lock in locks:
        lock.acquire()
    try:
        if any(state._value is not key for state, key in split_from):
            return False
        write_state_values(states, values, who, every_value=True, created=created)
    finally:
        for lock in reversed(locks):
            lock.release()
    return True
