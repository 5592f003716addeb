"""``vmap2_new_states`` / ``pmap2_new_states``: create a batch of copies of a module's states.

A one-shot mapping (``MappingStrategy(new_state_rules=...)``): ``module.init_all_states(**kwargs)``
is traced once per lane, and every State it creates comes out of the mapped program
with the axis its ``state_out_axes`` rule names (axis 0 by default). The call runs once, so
eagerly the function itself runs once under an eager ``jax.vmap`` (``_new_states_eager``:
compiling a program that runs once costs far more than running it, and tracing it
first would do its work twice); inside a trace the mapping is traced and compiled.
``run_creating_states`` is that core for any function; the function form
``vmap_new_states`` uses it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from state_core import NonBatchState, State, active_trace_stacks, catch_new_states, collect_states
from state_core.engine import StateRules, Trace, is_eager, state_label, write_state_values

from ._mapping import MappingInfo, MappingStrategy
from ._new_states_eager import EagerRun, commit, eager_run_possible, run_eagerly
from ._rules import parse_state_rules
from ._stateful_mapping import StatefulMapping

__all__ = ["vmap2_new_states", "pmap2_new_states"]


def new_state_rules(state_out_axes: Any, who: str, shared: Any = None) -> StateRules[Any]:
    """NonBatchState (and ``shared``) first on axis None, then the user's rules; the rest go on axis 0."""
    first: list[tuple[Any, Any]] = [(None, NonBatchState)]
    if shared is not None:
        first.append((None, shared))
    return StateRules(first).then(parse_state_rules(state_out_axes, "state_out_axes", who))


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


def check_axis_size(fn_name: str, axis_size: Any) -> None:
    if not isinstance(axis_size, int) or isinstance(axis_size, bool) or axis_size < 1:
        raise ValueError(f"{fn_name}: axis_size must be a positive int, got {axis_size!r}.")


def _map_new_states(
    fn_name: str,
    module: Any,
    init_kwargs: dict[Any, Any] | None,
    state_tag: str | None,
    axis_size: int,
    state_out_axes: Any,
    mapping_kwargs: dict[str, Any],
) -> dict[Any, list[State[Any]]]:
    """Run the initialisation once under the mapping and group the new states by axis."""
    init_kwargs = _check_init_target(module, init_kwargs, fn_name)
    check_axis_size(fn_name, axis_size)

    def init() -> None:
        module.init_all_states(**init_kwargs)

    rules = new_state_rules(state_out_axes, fn_name)
    _, groups = run_creating_states(
        fn_name, init, (), {}, module, rules, state_tag, axis_size=axis_size, in_axes=(), **mapping_kwargs
    )
    return groups


def run_creating_states(
    fn_name: str,
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    root: Any,
    rules: StateRules[Any],
    state_tag: str | None,
    **options: Any,
) -> tuple[Any, dict[Any, list[State[Any]]]]:
    """Run ``fun(*args, **kwargs)`` once under a mapping; its new states get the axis ``rules`` names.

    Returns ``fun``'s mapped result and the new states grouped by axis. ``root`` is
    where the new states' paths are looked up for path filters (None: no paths);
    ``options`` are ``MappingStrategy`` fields (``in_axes``, ``axis_size``, ``mapping_fn`` ...).
    """
    eager: bool | None = None
    while True:
        caught: list[State[Any]] = []
        # A one-shot call: its trace (and the States it made) is never reused, so it
        # keeps its one program to itself.
        strategy = MappingStrategy(created_in=root, new_state_rules=rules, transform="", **options)
        mapping = StatefulMapping(_catching(fun, state_tag, caught), name=fn_name, cache_size=1, strategy=strategy)
        if eager is None:
            eager = eager_run_possible(mapping, args, kwargs)
        done = run_eagerly(mapping, args, kwargs) if eager else None
        if done is None:
            eager = False
            done = _run_traced(mapping, args, kwargs)
        paths = collect_states(root).paths_by_state() if root is not None else {}
        groups, finished, values = _group_new_states(caught, done, paths, rules, fn_name)
        # Every value is made before any is stored: the one write-back stores them all or
        # none, refuses tracers of a plain jax.jit around this call, and records the
        # writes on the trace stacks of a state-aware one.
        if commit([*done.states, *finished], [*done.values, *values], done.split_from, done.created, fn_name):
            return done.out, groups
        # Another thread drew from a random stream while the lanes used its key: run the
        # call again, traced, under the streams' locks (no key is handed out twice).
        eager = False


def _catching(fun: Callable[..., Any], state_tag: str | None, caught: list[State[Any]]) -> Callable[..., Any]:
    """``fun`` that leaves the States it creates in ``caught`` (tagged with ``state_tag``)."""

    def run(*a: Any, **kw: Any) -> Any:
        with catch_new_states(state_tag) as catcher:
            out = fun(*a, **kw)
        caught[:] = catcher.get_states()
        return out

    return run


def _run_traced(mapping: StatefulMapping, args: tuple[Any, ...], kwargs: dict[str, Any]) -> EagerRun:
    """Run the call through the traced mapping; it stores the states that left the program itself."""
    out = mapping(*args, **kwargs)
    trace: Trace = mapping.get_traced_call()
    info: MappingInfo = mapping._entry(None).info
    return EagerRun(out, info.axis_size, dict(zip(trace.created_states, info.created_axes, strict=True)))


def _group_new_states(
    caught: list[State[Any]], done: EagerRun, paths: dict[int, tuple[Any, ...]], rules: StateRules[Any], who: str
) -> tuple[dict[Any, list[State[Any]]], list[State[Any]], list[Any]]:
    """``(groups, states, values)``: the new states by axis, and the copies still to store."""
    mapped = done.created_axes
    groups: dict[Any, list[State[Any]]] = {}
    finished: list[State[Any]] = []
    values: list[Any] = []
    for state in caught:
        traced = state in mapped
        axis = mapped[state] if traced else rules.value_for(paths.get(id(state), ()), state, 0)
        if axis is not None and not traced:
            # Created with a value known before mapping (the same on every copy): copies made here.
            finished.append(state)
            values.append(_copies(state, done.axis_size, axis, f"{who}: {state_label(state, paths.get(id(state)))}"))
        elif axis is None:
            # A shared constant made while tracing can be one of JAX's typed Python scalars.
            finished.append(state)
            values.append(jax.tree.map(jnp.asarray, state._value))
        groups.setdefault(axis, []).append(state)
    return groups, finished, values


def _copies(state: State[Any], n: int, axis: int, where: str) -> Any:
    """``n`` copies of ``state``'s value stacked on ``axis`` (``where`` names it in the error)."""

    def stack(x: Any) -> jax.Array:
        x = jnp.asarray(x)
        if not -(x.ndim + 1) <= axis <= x.ndim:
            raise ValueError(
                f"{where} has shape {x.shape}, so its copies can go on an axis "
                f"in [{-(x.ndim + 1)}, {x.ndim}], but state_out_axes puts them on axis {axis}. "
                "Use an axis in that range for it in state_out_axes. No state was written."
            )
        # One broadcast (a single eager operation) makes the n copies.
        at = axis % (x.ndim + 1)
        dims = tuple(d if d < at else d + 1 for d in range(x.ndim))
        return jax.lax.broadcast_in_dim(x, (*x.shape[:at], n, *x.shape[at:]), dims)

    return jax.tree.map(stack, state._value)


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
    shared copy). Random draws during initialisation differ between copies (copy
    ``i`` draws from key ``1 + i`` of the split, as in every mapping). Existing
    states written during initialisation end with concrete values: stacked when
    they differ between copies. Eagerly the initialisation runs op by op under
    ``jax.vmap``, without an XLA compile.

    Args:
        module: an object with an ``init_all_states(**kwargs)`` method (a
            ``state_nn.Module``, or any object that creates its States there).
        init_kwargs: a dict of keyword arguments for ``init_all_states``
            (``{'batch_size': 16}``); ``None`` (the default) passes none.
        state_tag: a tag added to every state created during initialisation
            (selectable with ``WithTag`` later); ``None`` adds none.
        axis_size: the number of copies, the length of the new axis (required).
        state_out_axes: where the copies' axis goes in each new state's value,
            ``{axis: filter}`` as in ``vmap2`` (an int axis, or ``None`` for one
            copy shared by all, which then must not differ between copies).
            ``None`` (the default) puts every new state's copies on axis 0, so
            a ``f32[3]`` parameter becomes ``f32[axis_size, 3]``.

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
    return _map_new_states("vmap2_new_states", module, init_kwargs, state_tag, axis_size, state_out_axes, {})


def pmap2_new_states(
    module: Any,
    init_kwargs: dict[Any, Any] | None = None,
    state_tag: str | None = None,
    axis_size: int | None = None,
    state_out_axes: Any = None,
    devices: Any = None,
) -> dict[Any, list[State[Any]]]:
    """Like ``vmap2_new_states`` but creates one copy per device.

    The copies are the same numbers ``vmap2_new_states`` makes (eagerly they are made
    by it and then spread over the devices); inside a trace the initialisation runs
    under ``pmap2``. ``axis_size`` defaults to the number of local devices (or
    ``len(devices)``).

    Args:
        module: an object with an ``init_all_states(**kwargs)`` method (a
            ``state_nn.Module``, or any object that creates its States there).
        init_kwargs: a dict of keyword arguments for ``init_all_states``;
            ``None`` (the default) passes none.
        state_tag: a tag added to every state created during initialisation;
            ``None`` adds none.
        axis_size: the number of copies, one per device; ``None`` (the
            default) means ``len(devices)``, or the number of local devices.
        state_out_axes: where the copies' axis goes in each new state's value,
            ``{axis: filter}`` as in ``vmap2`` (``None`` as an axis: one
            shared copy, not spread over the devices). ``None`` (the default)
            puts every new state's copies on axis 0.
        devices: the devices to place the copies on, copy ``i`` on
            ``devices[i]``; ``None`` (the default) uses the local devices.

    Raises:
        ValueError: ``axis_size`` exceeds the number of devices.

    Returns:
        ``{axis: [states]}``, the new states grouped by their mapped axis.

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
    if active_trace_stacks() or not is_eager():
        mapping_kwargs: dict[str, Any] = {"mapping_fn": jax.pmap}
        if devices is not None:
            mapping_kwargs["mapping_kwargs"] = {"devices": targets}
        return _map_new_states(
            "pmap2_new_states", module, init_kwargs, state_tag, axis_size, state_out_axes, mapping_kwargs
        )
    groups = _map_new_states("pmap2_new_states", module, init_kwargs, state_tag, axis_size, state_out_axes, {})
    mesh = Mesh(np.array(targets[:axis_size]), ("copies",))
    spread = [(state, axis) for axis, states in groups.items() if axis is not None for state in states]  # None: shared
    placed = [jax.device_put(state._value, NamedSharding(mesh, _copies_spec(state, axis))) for state, axis in spread]
    write_state_values([state for state, _ in spread], placed, "pmap2_new_states", every_value=True)
    return groups


def _copies_spec(state: State[Any], axis: int) -> P:
    """The PartitionSpec that puts one copy of ``state`` on each device: its copies' axis split."""
    leaves = jax.tree.leaves(state._value)
    at = axis % jnp.ndim(leaves[0]) if leaves else 0
    return P(*([None] * at), "copies")
