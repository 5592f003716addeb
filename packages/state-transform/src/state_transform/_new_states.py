"""``vmap2_new_states`` / ``pmap2_new_states``: create a batch of copies of a module's states."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from state_core import State, StateTraceStack, active_trace_stacks, catch_new_states, collect_states
from state_core.engine import TracedCall, is_batched, is_eager, private_state_values
from state_random import is_random_state, is_single_key, split_for_lanes

from ._axes import first_match, normalize_state_axes
from ._mapping import StatefulMapping
from ._pmap import pmap2

__all__ = ["vmap2_new_states", "pmap2_new_states"]


class _NewStateMapping(StatefulMapping):
    """A mapping whose output is the list of new state values, each on its own axis."""

    def __init__(self, init: Callable[[], Any], out_axes_of: Callable[[], list[Any]], **kwargs: Any) -> None:
        super().__init__(init, in_axes=(), **kwargs)
        self._out_axes_of = out_axes_of

    def _compile(self, entry: TracedCall) -> Callable[..., Any]:
        self.out_axes, states = self._out_axes_of()
        varying = entry.plan.out_varying
        i = 0
        for state, axis in zip(states, self.out_axes, strict=True):
            n = jax.tree.structure(state._value).num_leaves  # type: ignore[attr-defined]  # PyTreeDef stub
            if axis is None and any(varying[i : i + n]):
                raise ValueError(
                    f"{self.name}: {state.describe()} is declared shared (axis None) in "
                    "state_out_axes, but its initial value differs between copies (for example "
                    "it is drawn at random). Give it an int axis, or initialise it without "
                    "per-copy randomness."
                )
            i += n
        return super()._compile(entry)


def _check_init_target(module: Any, init_kwargs: Any, fn_name: str) -> dict[Any, Any]:
    if not hasattr(module, "init_all_states"):
        raise TypeError(
            f"{fn_name} needs an object with an init_all_states(**kwargs) method (a Module); "
            f"got {type(module).__name__}."
        )
    if init_kwargs is None:
        return {}
    if not isinstance(init_kwargs, dict):
        raise TypeError(
            f"{fn_name}: init_kwargs must be a dict of keyword arguments, got {type(init_kwargs).__name__}."
        )
    return init_kwargs


def _map_new_states(
    fn_name: str,
    module: Any,
    init_kwargs: dict[Any, Any] | None,
    state_tag: str | None,
    axis_size: int,
    state_out_axes: Any,
    make_mapping: Callable[..., StatefulMapping],
    place: Callable[[dict[Any, list[State[Any]]]], None] | None = None,
) -> dict[Any, list[State[Any]]]:
    init_kwargs = _check_init_target(module, init_kwargs, fn_name)
    if not isinstance(axis_size, int) or isinstance(axis_size, bool) or axis_size < 1:
        raise ValueError(f"{fn_name}: axis_size must be a positive int, got {axis_size!r}.")
    axes = normalize_state_axes(state_out_axes, "state_out_axes")
    if (fn_name == "vmap2_new_states" or place is not None) and not active_trace_stacks() and is_eager():
        # Plain eager call: no outer trace whose values could leak into states. The
        # copies draw the same numbers under vmap as under pmap (lane i uses key 1 + i);
        # ``place`` then spreads them over the devices.
        eager_groups = _eager_vmap_new_states(module, init_kwargs, state_tag, axis_size, axes)
        if place is not None:
            place(eager_groups)
        return eager_groups
    caught: dict[str, Any] = {}

    def init() -> list[Any]:
        with catch_new_states(state_tag) as catcher:
            module.init_all_states(**init_kwargs)
        new = catcher.get_states()
        paths = collect_states(module).paths_by_state()
        new_axes = [first_match(axes.items(), paths.get(id(s), ()), s, 0) for s in new]
        caught["states"], caught["axes"] = new, new_axes
        return [s._value for s in new]

    mapping = make_mapping(init, lambda: (caught["axes"], caught["states"]))
    values = mapping()
    groups: dict[Any, list[State[Any]]] = {}
    for state, axis, value in zip(caught["states"], caught["axes"], values, strict=True):
        state.restore_value(value)
        groups.setdefault(axis, []).append(state)
    return groups


def _shared_value_error(state: State[Any]) -> ValueError:
    return ValueError(
        f"vmap2_new_states: {state.describe()} is declared shared (axis None) in "
        "state_out_axes, but its initial value differs between copies (for example "
        "it is drawn at random). Give it an int axis, or initialise it without "
        "per-copy randomness."
    )


def _eager_vmap_new_states(
    module: Any, init_kwargs: dict[Any, Any], state_tag: str | None, size: int, axes: dict[Any, Any]
) -> dict[Any, list[State[Any]]]:
    """``vmap2_new_states`` without compiling: the init runs once under an eager ``jax.vmap``.

    Compiling a program that runs once costs far more than running it, and an eager
    vmap reuses the executables JAX caches for library code (``jax.random`` ...), so a
    second initialisation compiles nothing. Random keys follow the mapping rules: a
    RandomState read during init is split into ``size + 1`` keys, lane ``i`` draws
    from key ``1 + i`` and the state keeps the next key afterwards (also on failure).
    """
    split: list[tuple[State[Any], Any]] = []
    found: dict[str, Any] = {}

    def lane_init(lane: Any) -> tuple[list[Any], list[Any]]:
        def first_read(state: State[Any]) -> Any:
            value = state._value
            if is_random_state(state) and is_single_key(value):
                lane_keys, next_key = split_for_lanes(value, size)
                split.append((state, next_key))
                return lane_keys[lane]
            return value  # read-only states are the same on every lane

        stack = StateTraceStack("vmap2_new_states")
        stack._first_read_hook = first_read
        with private_state_values():
            try:
                with catch_new_states(state_tag) as catcher, stack:
                    module.init_all_states(**init_kwargs)
                split_ids = {id(s) for s, _ in split}
                new = catcher.get_states()
                written = [s for s in stack.get_write_states() if id(s) not in split_ids]
                new_values = [s._value for s in new]
                written_values = [s._value for s in written]
            finally:
                stack.restore_original_values()
        found["new"], found["written"] = new, written
        found["batched"] = [
            [any(is_batched(x) for x in jax.tree.leaves(v)) for v in values] for values in (new_values, written_values)
        ]
        return new_values, written_values

    try:
        new_values, written_values = jax.vmap(lane_init, axis_size=size)(jnp.arange(size))
    finally:
        for state, next_key in split:
            state.restore_value(next_key)
    new, written = found["new"], found["written"]
    new_batched, written_batched = found["batched"]
    paths = collect_states(module).paths_by_state()
    groups: dict[Any, list[State[Any]]] = {}
    results = []
    # Every output came back stacked on axis 0 (unbatched ones broadcast): move or
    # unstack them as each state's axis says.
    for state, value, batched in zip(new, new_values, new_batched, strict=True):
        axis = first_match(axes.items(), paths.get(id(state), ()), state, 0)
        if axis is None:
            if batched:
                raise _shared_value_error(state)
            value = jax.tree.map(lambda x: x[0], value)
        elif axis != 0:
            value = jax.tree.map(lambda x, a=axis: jnp.moveaxis(x, 0, a), value)
        results.append((state, value))
        groups.setdefault(axis, []).append(state)
    for state, value, batched in zip(written, written_values, written_batched, strict=True):
        # A state that existed before init: stacked when it differs between copies.
        results.append((state, value if batched else jax.tree.map(lambda x: x[0], value)))
    for state, value in results:
        state.restore_value(value)
    return groups


def vmap2_new_states(
    module: Any,
    init_kwargs: dict[Any, Any] | None = None,
    state_tag: str | None = None,
    axis_size: int | None = None,
    state_out_axes: Any = None,
) -> dict[Any, list[State[Any]]]:
    """Run ``module.init_all_states(**init_kwargs)`` once under ``vmap2`` and batch the new states.

    Every state created during initialisation gets a leading axis of ``axis_size``
    copies (or the axis its ``state_out_axes`` filter names; ``None`` keeps one
    shared copy). Random draws during initialisation differ between copies.
    Existing states written during initialisation end with concrete values.

    Returns:
        ``{axis: [states]}``, the new states grouped by their mapped axis.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import vmap2_new_states
        >>> class Layer:
        ...     def init_all_states(self, size):
        ...         self.w = ParamState(jnp.zeros(size))
        >>> layer = Layer()
        >>> groups = vmap2_new_states(layer, {'size': 3}, axis_size=5)
        >>> layer.w.value.shape, list(groups)
        ((5, 3), [0])
    """
    if axis_size is None:
        raise ValueError("vmap2_new_states: pass axis_size, the number of copies to create.")

    def make(init: Callable[[], Any], out_axes_of: Callable[[], list[Any]]) -> StatefulMapping:
        return _NewStateMapping(init, out_axes_of, axis_size=axis_size, name="vmap2_new_states")

    return _map_new_states("vmap2_new_states", module, init_kwargs, state_tag, axis_size, state_out_axes, make)


def pmap2_new_states(
    module: Any,
    init_kwargs: dict[Any, Any] | None = None,
    state_tag: str | None = None,
    axis_size: int | None = None,
    state_out_axes: Any = None,
    devices: Any = None,
) -> dict[Any, list[State[Any]]]:
    """Like ``vmap2_new_states`` but creates one copy per device with ``pmap2``.

    ``axis_size`` defaults to the number of local devices (or ``len(devices)``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import pmap2_new_states
        >>> class Layer:
        ...     def init_all_states(self):
        ...         self.w = ParamState(jnp.ones(2))
        >>> layer = Layer()
        >>> _ = pmap2_new_states(layer, axis_size=2)
        >>> layer.w.value.shape
        (2, 2)
    """
    if axis_size is None:
        axis_size = len(devices) if devices is not None else jax.local_device_count()
    targets = list(devices) if devices is not None else jax.local_devices()
    if isinstance(axis_size, int) and axis_size > len(targets):
        raise ValueError(
            f"pmap2_new_states: axis_size={axis_size} copies need one device each, but only "
            f"{len(targets)} device(s) are available. Use at most that many copies (or pass "
            "`devices=`), or vmap2_new_states to batch on one device."
        )

    def place(groups: dict[Any, list[State[Any]]]) -> None:
        mesh = Mesh(np.array(targets[:axis_size]), ("copies",))
        for axis, states in groups.items():
            if axis is None:
                continue  # one shared copy
            for state in states:
                leaves = jax.tree.leaves(state._value)
                at = axis % jnp.ndim(leaves[0]) if leaves else 0
                state.restore_value(jax.device_put(state._value, NamedSharding(mesh, P(*([None] * at), "copies"))))

    def make(init: Callable[[], Any], out_axes_of: Callable[[], list[Any]]) -> StatefulMapping:
        base = pmap2(init, in_axes=(), axis_size=axis_size, devices=devices)
        mapping = _NewStateMapping(
            init,
            out_axes_of,
            axis_size=axis_size,
            name="pmap2_new_states",
            mapping_fn=base.mapping_fn,
            mapping_kwargs=base.mapping_kwargs,
        )
        mapping._device_limit = base._device_limit
        return mapping

    return _map_new_states("pmap2_new_states", module, init_kwargs, state_tag, axis_size, state_out_axes, make, place)
