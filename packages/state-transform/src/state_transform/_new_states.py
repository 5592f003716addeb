"""``vmap2_new_states`` / ``pmap2_new_states``: create a batch of copies of a module's states.

A strategy on the mapping engine: ``module.init_all_states(**kwargs)`` is traced
once per lane, and every State it creates comes out of the mapped program with the
axis its ``state_out_axes`` rule names (axis 0 by default). The call runs once, so
its ``jax.vmap`` program runs op by op (compiling a program that runs once costs far
more than running it). ``run_creating_states`` is that core for any function; the
function form ``vmap_new_states`` uses it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from state_core import BatchAxisError, NonBatchState, State, active_trace_stacks, catch_new_states, collect_states
from state_core.engine import StateRules, Trace, is_eager

from ._axes import normalize_state_axes
from ._mapping import MappingInfo, StatefulMapping

__all__ = ["vmap2_new_states", "pmap2_new_states", "in_new_state_probe"]


class _NewStateMapping(StatefulMapping):
    """The mapping of one initialisation: new states go out on the axis their rule names."""

    # It runs once: op by op costs far less than compiling (and compiles nothing new
    # when the same model is initialised again).
    eager_first_call = True

    def __init__(self, root: Any, run: Callable[..., Any], rules: StateRules[Any], name: str, **kwargs: Any) -> None:
        super().__init__(run, name=name, **kwargs)
        self._root = root
        self._new_rules = rules
        self._shared = True  # a one-shot call: its trace (and the States it made) is never reused

    def _created_axis(self, state: State[Any], varies: bool, paths: dict[int, tuple[Any, ...]]) -> Any:
        path = collect_states(self._root).paths_by_state().get(id(state), ()) if self._root is not None else ()
        axis = self._new_rules.value_for(path, state, 0)
        if axis is None and varies:
            raise BatchAxisError(
                f"{self.name}: {state.describe()} is kept as one shared copy (a NonBatchState, "
                "or axis None in state_out_axes / state_to_exclude), but its initial value differs "
                "between copies (for example it is drawn at random, or computed from a mapped "
                "argument). Give it an int axis, or initialise it the same on every copy."
            )
        return axis


def new_state_rules(state_out_axes: Any, shared: Any = None) -> StateRules[Any]:
    """NonBatchState (and ``shared``) first on axis None, then the user's rules; the rest go on axis 0."""
    user = normalize_state_axes(state_out_axes, "state_out_axes")
    first: list[tuple[Any, Any]] = [(None, NonBatchState)]
    if shared is not None:
        first.append((None, shared))
    return StateRules([*first, *user.items()])


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

    rules = new_state_rules(state_out_axes)
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
    ``options`` are ``StatefulMapping``'s (``in_axes``, ``axis_size``, ``mapping_fn`` ...).
    """
    caught: list[State[Any]] = []

    def run(*a: Any, **kw: Any) -> Any:
        with catch_new_states(state_tag) as catcher:
            out = fun(*a, **kw)
        caught[:] = catcher.get_states()
        return out

    mapping = _NewStateMapping(root, run, rules, fn_name, **options)
    out = mapping(*args, **kwargs)
    trace: Trace = mapping.get_traced_call()
    info: MappingInfo = mapping._entry(None).info
    mapped = dict(zip(trace.created_states, info.created_axes, strict=True))
    paths = collect_states(root).paths_by_state() if root is not None else {}
    size = info.axis_size
    groups: dict[Any, list[State[Any]]] = {}
    for state in caught:
        if state in mapped:
            axis = mapped[state]
        else:
            # Created with a value known at trace time (the same on every copy): copies made here.
            axis = rules.value_for(paths.get(id(state), ()), state, 0)
            if axis is not None:
                state.restore_value(jax.tree.map(lambda x, a=axis: _copies(x, size, a), state._value))
        if axis is None:
            # A shared constant made while tracing can be one of JAX's typed Python scalars.
            state.restore_value(jax.tree.map(jnp.asarray, state._value))
        groups.setdefault(axis, []).append(state)
    return out, groups


def _copies(x: Any, n: int, axis: int) -> jax.Array:
    x = jnp.asarray(x)
    return jnp.repeat(jnp.expand_dims(x, axis), n, axis=axis)


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
    for axis, states in groups.items():
        if axis is None:
            continue  # one shared copy
        for state in states:
            leaves = jax.tree.leaves(state._value)
            at = axis % jnp.ndim(leaves[0]) if leaves else 0
            state.restore_value(jax.device_put(state._value, NamedSharding(mesh, P(*([None] * at), "copies"))))
    return groups


def in_new_state_probe() -> bool:
    """Whether a ``*_new_states`` call is running a discovery pass of ``init_state``: always False here.

    Libraries whose ``vmap2_new_states`` runs the initialiser twice (once unmapped,
    to discover the states it creates, then mapped) let one-shot side effects
    skip the first pass by asking this. ``vmap2_new_states`` and
    ``pmap2_new_states`` here run the initialiser once, mapped, so there is no
    discovery pass; code guarded by this function runs unchanged.

    Returns:
        False.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import in_new_state_probe, vmap2_new_states
        >>> passes = []
        >>> class Cell:
        ...     def init_all_states(self):
        ...         passes.append(in_new_state_probe())
        ...         self.w = ParamState(jnp.zeros(2))
        >>> _ = vmap2_new_states(Cell(), {}, axis_size=3)
        >>> passes
        [False]
    """
    return False
