"""``Map``: run a Module as an ensemble of members with ``vmap2`` / ``pmap2``."""

from __future__ import annotations

import collections
import types
import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, cast

import jax

import state_core
import state_transform
from state_core import State
from state_core.engine import StateRules, user_stacklevel
from state_core.filter import Filter, FilterLike
from state_random import is_random_state
from state_transform.engine import LanesOnMesh, MappingStrategy, parse_state_rules

from ._map_shard import member_layout, place_members
from ._module import Module
from ._typing import M

__all__ = ["Map"]

_BEHAVIORS = ("vmap", "pmap", "shard")
_MAX_CACHED_MAPS = 128


class _MemberStates(Filter):
    """Selects exactly the given state objects (a set lookup by identity)."""

    def __init__(self, states: list[State[Any]]) -> None:
        self.states = tuple(states)
        self._ids = frozenset(id(s) for s in states)

    def __call__(self, path: Any, state: Any) -> bool:
        return id(state) in self._ids

    def _key(self) -> tuple[Any, ...]:
        return (self._ids,)

    def __repr__(self) -> str:
        return f"MemberStates({len(self.states)} state(s))"


def _member_rules(groups: dict[Any, list[State[Any]]], user: StateRules[Any]) -> StateRules[Any]:
    """The user's rules first (they take priority), then the init groups ``{axis: [states]}``."""
    return user.then((axis, _MemberStates(states)) for axis, states in groups.items() if states)


def _freeze(x: Any) -> Hashable:
    """A hashable stand-in for an axes spec (lists/dicts become tuples)."""
    if isinstance(x, dict):
        return ("__dict__", *((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, *(_freeze(v) for v in x))
    if isinstance(x, State):
        return ("__state__", id(x))
    hash(x)
    return x


class _TraceCounter:
    """Counts traces of Map update functions; ``Map.update`` compares it to see a new trace."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


_UPDATE_TRACES = _TraceCounter()


def _call_module(module: Any, *args: Any, **kwargs: Any) -> Any:
    # Runs only while the mapping traces (a cached call runs the compiled
    # program), so counting here costs nothing on the hot path.
    _UPDATE_TRACES.n += 1
    return module(*args, **kwargs)


def _method_runner(name: str) -> Callable[..., Any]:
    def run(module: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(module, name)(*args, **kwargs)

    run.__name__ = name
    return run


def _callable_runner(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(module: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(module, *args, **kwargs)

    run.__name__ = getattr(fn, "__name__", type(fn).__name__)
    return run


class _MapCache:
    """Per-Map bookkeeping. It has no ``__dict__``, so state collection skips it.

    ``maps`` and ``resets`` keep the ``StatefulMapping`` objects this Map built, so
    a repeated ``map(...)`` or ``reset_all_states(...)`` call skips building and
    keying a new one. They hold transform objects only: the compiled programs live
    in state_core's shared registry, which a rebuilt object finds again.
    """

    __slots__ = ("groups", "rules", "update", "maps", "resets", "traces_seen", "warned")

    def __init__(self) -> None:
        self.traces_seen = -1  # _UPDATE_TRACES.n when the update's writes were last checked
        # Shared states already warned about; weak, so a re-created state is new.
        self.warned: weakref.WeakSet[State[Any]] = weakref.WeakSet()
        self.groups: dict[Any, list[State[Any]]] | None = None
        self.rules: StateRules[Any] | None = None  # where states are mapped during calls
        self.update: _MapCaller | None = None
        self.maps: collections.OrderedDict[Hashable, _MapCaller] = collections.OrderedDict()
        self.resets: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()

    @staticmethod
    def remember(table: collections.OrderedDict[Hashable, Any], key: Hashable, value: Any) -> None:
        """Store ``value`` under ``key``, dropping the oldest entries beyond ``_MAX_CACHED_MAPS``."""
        table[key] = value
        while len(table) > _MAX_CACHED_MAPS:
            table.popitem(last=False)


class _MapCaller:
    """The callable ``Map.map`` returns: calls one cached ``StatefulMapping``.

    Positional arguments are mapped as ``in_axes`` says; keyword arguments are
    passed unmapped (the same value) to every member.
    """

    __module__ = "state_nn"
    __slots__ = ("mapping", "in_axes", "name", "n_args")

    def __init__(self, mapping: state_transform.StatefulMapping, in_axes: Any, name: str) -> None:
        self.mapping = mapping
        self.in_axes = in_axes
        self.name = name
        # The number of positional arguments in_axes fixes (None: any number).
        self.n_args = len(in_axes) if isinstance(in_axes, (tuple, list)) else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        n_args = self.n_args
        if n_args is not None and n_args != len(args):
            raise ValueError(
                f"{self.name}: in_axes has {n_args} entries but {len(args)} positional "
                "argument(s) were given; give one entry per positional argument (None for an "
                "argument shared by all members) or a single int/None for all of them."
            )
        return self.mapping(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Map caller {self.name} in_axes={self.in_axes!r}>"


class Map(Module, Generic[M]):
    """Run a Module as ``init_map_size`` members, vectorised on one device or spread over several.

    ``init_all_states(**kwargs)`` runs ``module.init_all_states(**kwargs)`` once under
    the mapping (``state_transform.vmap2_new_states`` / ``pmap2_new_states``) and so
    creates ``init_map_size`` copies of every new state, stacked on axis 0 (or
    the axis ``init_state_axes`` names; ``None`` keeps one shared copy). Random
    draws during initialisation differ between members. States the module
    already had before (for example parameters created in ``__init__``) are not
    copied: every member sees the same value.

    ``update(*args, **kwargs)`` (or calling the Map) then runs the module's
    ``__call__`` on every member; ``map(fn, ...)`` does the same for another
    method or a function ``fn(module, *args, **kwargs)``. Each member reads and
    writes its own slice of the member states; ``call_state_axes`` /
    ``state_axes`` ``{axis: filter}`` entries come first and override that
    (``None`` = shared by all members). Keyword arguments are passed unmapped to
    every member; positional ones follow ``in_axes``. RandomStates the module
    draws from are split so that each member gets its own key.

    The mapping behind ``update`` is built once, at the end of
    ``init_all_states``, and the compiled program is cached per argument
    signature: the module's Python code runs once per new signature, and a
    repeated call costs one dispatch. ``map`` callers are cached per
    ``(fn, in_axes, out_axes, axis_name, state_axes)``.

    With ``behavior='pmap'`` or ``'shard'`` the members are spread over devices:
    each device holds ``init_map_size / D`` of them (``D`` devices) and runs
    them vectorised. The program is the one ``'vmap'`` runs, with the member
    axis sharded, so the results and every member's random draws are the same
    as with ``'vmap'``; ``lax.pmean(x, axis_name)`` and other collectives reduce
    over all members on all devices.

    Args:
        module: the Module to map.
        init_map_size: the number of members (a positive int). With
            ``behavior='pmap'``: at most the number of local devices (one member
            on each of the first ``init_map_size`` devices) or a multiple of it.
            With ``behavior='shard'``: a multiple of the number of devices along
            ``mesh_axis``.
        init_state_axes: ``{axis: filter}`` placing new states on an axis other
            than 0, or ``None`` (shared). Default: every new state on axis 0.
        state_tag: a tag added to every state created by ``init_all_states``.
        in_axes: as in ``jax.vmap``, for ``update``'s positional arguments.
        out_axes: as in ``jax.vmap``, for ``update``'s result.
        axis_name: the mapped axis' name, for collectives such as ``lax.pmean``.
        spmd_axis_name: passed to ``jax.vmap`` (ignored with ``'pmap'`` and ``'shard'``).
        call_state_axes: ``{axis: filter}`` overriding where states are mapped
            during calls (user entries have priority over the member states).
        behavior: ``'vmap'`` (every member on one device), ``'pmap'`` (the
            members split evenly over the local devices) or ``'shard'`` (split
            over the devices of ``mesh``, which may span several processes).
        mesh: with ``behavior='shard'``, the ``jax.sharding.Mesh`` to place the
            members on (Explicit or Auto axes: the members stay on this mesh,
            so they can be used under ``jax.set_mesh(mesh)``); default: a 1-D
            mesh over every device (``jax.devices()``).
        mesh_axis: with ``behavior='shard'``, the mesh axis (or tuple of axes)
            the member axis is split over; default: all of the mesh's axes. The
            members are replicated over the other axes.

    Attributes:
        module, init_map_size: as given.
        mesh, mesh_axis: where the members live with ``'pmap'`` / ``'shard'``
            (``None`` with ``'vmap'``); ``mesh_axis`` is a tuple of axis names.
        dict_vmap_states: ``{axis: [states]}`` created by ``init_all_states``
            (``None`` before).

    Example:
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> class MyModule(state_nn.Module):
        ...     def init_state(self, size):
        ...         self.weight = state_core.ParamState(jnp.ones(size))
        ...     def update(self, x):
        ...         return x @ self.weight.value
        >>> vmapper = state_nn.Map(MyModule(), init_map_size=10, in_axes=0, axis_name='batch')
        >>> vmapper.init_all_states(size=(5,))
        >>> vmapper.module.weight.value.shape
        (10, 5)
        >>> vmapper.update(jnp.ones((10, 5))).shape
        (10,)

        Four members on each local device, with the same values as ``'vmap'``:

        >>> import jax, state_random
        >>> n = 4 * jax.local_device_count()
        >>> class Noisy(state_nn.Module):
        ...     def init_state(self):
        ...         self.w = state_core.ParamState(state_random.normal(size=3))
        ...     def update(self, x):
        ...         return (x * self.w.value).sum()
        >>> state_random.seed(0)
        >>> spread = state_nn.Map(Noisy(), init_map_size=n, behavior='pmap')
        >>> spread.init_all_states()
        >>> state_random.seed(0)
        >>> local = state_nn.Map(Noisy(), init_map_size=n)
        >>> local.init_all_states()
        >>> bool((spread(jnp.ones((n, 3))) == local(jnp.ones((n, 3)))).all())
        True
        >>> {shard.data.shape for shard in spread.module.w.value.addressable_shards}
        {(4, 3)}
    """

    __module__ = "state_nn"
    _repr_attrs = ("init_map_size", "behavior")

    def __init__(
        self,
        module: M,
        init_map_size: int,
        init_state_axes: dict[Any, FilterLike] | None = None,
        state_tag: str | None = None,
        in_axes: Any = 0,
        out_axes: Any = 0,
        axis_name: Hashable | None = None,
        spmd_axis_name: Hashable | None = None,
        call_state_axes: dict[Any, FilterLike] | None = None,
        behavior: str = "vmap",
        mesh: jax.sharding.Mesh | None = None,
        mesh_axis: str | tuple[str, ...] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"Map expects a state_nn.Module to map, got {type(module).__name__}.")
        if not isinstance(init_map_size, int) or isinstance(init_map_size, bool):
            raise TypeError(
                f"Map: init_map_size must be an int (the number of members), got "
                f"{type(init_map_size).__name__} {init_map_size!r}."
            )
        if init_map_size < 1:
            raise ValueError(f"Map: init_map_size must be at least 1, got {init_map_size}.")
        if behavior not in _BEHAVIORS:
            raise ValueError(f"Map: behavior must be 'vmap', 'pmap' or 'shard', got {behavior!r}.")
        self._layout: LanesOnMesh | None = member_layout(behavior, init_map_size, mesh, mesh_axis)
        # The axes specs are read (and checked) now rather than at init time.
        self._init_rules = parse_state_rules(init_state_axes, "init_state_axes", "Map")
        self._call_rules = parse_state_rules(call_state_axes, "call_state_axes", "Map")
        self.module = module
        self.init_map_size = init_map_size
        self.init_state_axes = init_state_axes
        self.state_tag = state_tag
        self.in_axes = in_axes
        self.out_axes = out_axes
        self.axis_name = axis_name
        self.spmd_axis_name = spmd_axis_name
        self.call_state_axes = call_state_axes
        self.behavior = behavior
        self.mesh = None if self._layout is None else self._layout.mesh
        self.mesh_axis = None if self._layout is None else self._layout.axes
        self._cache = _MapCache()

    # ------------------------------------------------------------------ state
    @property
    def dict_vmap_states(self) -> dict[Any, list[State[Any]]] | None:
        """``{axis: [states]}`` created by ``init_all_states``, or ``None`` before it.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn
            >>> class Bias(state_nn.Module):
            ...     def init_state(self):
            ...         self.b = state_core.ParamState(jnp.zeros(2))
            >>> ens = state_nn.Map(Bias(), init_map_size=4)
            >>> ens.dict_vmap_states is None
            True
            >>> ens.init_all_states()
            >>> {axis: [s.value.shape for s in states] for axis, states in ens.dict_vmap_states.items()}
            {0: [(4, 2)]}
        """
        return self._cache.groups

    def _require_init(self, what: str) -> _MapCache:
        cache = self._cache
        if cache.groups is None:
            raise ValueError(
                f"Map.{what}() was called before the member states exist: call "
                f"`init_all_states(...)` on the Map first (it creates the {self.init_map_size} "
                "copies of each state)."
            )
        return cache

    def init_all_states(self, *args: Any, **kwargs: Any) -> None:
        """Create ``init_map_size`` copies of the states ``module.init_all_states(**kwargs)`` makes.

        Must be called before ``update`` / ``map``. Calling it again re-creates
        the states and rebuilds the cached mappings.

        Args:
            *args: not accepted: ``Map`` passes keyword arguments only.
            **kwargs: passed to the wrapped module's ``init_all_states`` (and so to
                every ``init_state`` hook; ``node_to_exclude`` included), the same
                for every member.

        Raises:
            TypeError: positional arguments were given.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn, state_random
            >>> class Noise(state_nn.Module):
            ...     def init_state(self):
            ...         self.w = state_core.ParamState(state_random.normal(size=2))
            >>> ens = state_nn.Map(Noise(), init_map_size=3)
            >>> ens.init_all_states()
            >>> ens.module.w.value.shape, list(ens.dict_vmap_states)
            ((3, 2), [0])
            >>> bool((ens.module.w.value[0] != ens.module.w.value[1]).all())
            True
        """
        if args:
            raise TypeError(
                "Map.init_all_states takes keyword arguments only (they are passed to "
                f"module.init_all_states); got {len(args)} positional argument(s)."
            )
        # Every behavior initialises like 'vmap' (eagerly, without compiling), so the
        # members' random draws are the same; sharded members are then placed.
        groups = state_transform.vmap2_new_states(
            self.module,
            kwargs,
            state_tag=self.state_tag,
            axis_size=self.init_map_size,
            state_out_axes=self._init_rules,
        )
        if self._layout is not None:
            place_members(groups, self._layout)
        cache = self._cache
        cache.groups = groups
        cache.rules = _member_rules(groups, self._call_rules)
        cache.maps.clear()
        cache.resets.clear()
        cache.update = self._build(
            types.MethodType(_call_module, self.module),
            self.in_axes,
            self.out_axes,
            self.axis_name,
            cache.rules,
            f"Map({type(self.module).__name__}).update",
        )

    def _member_strategy(self, *, rules: StateRules[Any], spmd: bool = True, **options: Any) -> MappingStrategy:
        """The mapping strategy of a member program: sharded over the mesh when there is one.

        ``options`` are further ``MappingStrategy`` fields; ``spmd``: pass
        ``spmd_axis_name`` to ``jax.vmap``. Messages name a call by the mapping's
        own name (``Map(Linear).update``), not by a transformation.
        """
        if self._layout is not None:
            return MappingStrategy(
                lanes_on=self._layout,
                axis_size=self.init_map_size,
                in_rules=rules,
                out_rules=rules,
                transform="",
                **options,
            )
        spmd_axis = self.spmd_axis_name
        return MappingStrategy(
            axis_size=self.init_map_size,
            in_rules=rules,
            out_rules=rules,
            mapping_kwargs={} if spmd_axis is None or not spmd else {"spmd_axis_name": spmd_axis},
            transform="",
            **options,
        )

    def _build(
        self,
        runner: Callable[..., Any],
        in_axes: Any,
        out_axes: Any,
        axis_name: Hashable | None,
        rules: StateRules[Any],
        name: str,
    ) -> _MapCaller:
        if isinstance(in_axes, list):
            in_axes = tuple(in_axes)
        # Keyword arguments are shared by every member, not mapped.
        strategy = self._member_strategy(
            in_axes=in_axes, out_axes=out_axes, axis_name=axis_name, rules=rules, keyword_axis=None
        )
        mapping = state_transform.StatefulMapping(runner, strategy=strategy)
        mapping.name = name
        return _MapCaller(mapping, in_axes, name)

    # ------------------------------------------------------------------ calling
    def update(self, *args: Any, **kwargs: Any) -> Any:
        """Run the module on every member; ``Map(...)(x)`` is the same.

        Positional arguments are mapped as ``in_axes`` says, keyword arguments
        are shared by every member, and the result is stacked as ``out_axes``
        says.

        A state that existed before ``init_all_states`` (for example a layer
        created in the module's ``__init__``) is shared by all members; when the
        update writes one, a ``UserWarning`` names it once (create it in
        ``init_state`` instead, or name it in ``call_state_axes`` if sharing is
        intended).

        Args:
            *args: the module's positional arguments, each mapped over the axis
                ``in_axes`` gives it (size ``init_map_size``; None passes the
                same value to every member).
            **kwargs: the module's keyword arguments, passed whole to every member.

        Raises:
            ValueError: ``init_all_states`` has not been called yet.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn
            >>> class Acc(state_nn.Module):
            ...     def init_state(self):
            ...         self.total = state_core.ShortTermState(jnp.zeros(()))
            ...     def update(self, x):
            ...         self.total.value = self.total.value + x
            ...         return self.total.value
            >>> ens = state_nn.Map(Acc(), init_map_size=3)
            >>> ens.init_all_states()
            >>> ens(jnp.array([1., 2., 3.]))
            Array([1., 2., 3.], dtype=float32)
            >>> ens(jnp.array([1., 2., 3.]))
            Array([2., 4., 6.], dtype=float32)
        """
        cache = self._cache
        caller = cache.update
        if caller is None:
            # init_all_states sets the update caller together with the groups it checks.
            caller = cast(_MapCaller, self._require_init("update").update)
        # Without a per-argument in_axes there is no argument count to check: call the mapping itself.
        out = caller.mapping(*args, **kwargs) if caller.n_args is None else caller(*args, **kwargs)
        if cache.traces_seen != _UPDATE_TRACES.n:
            cache.traces_seen = _UPDATE_TRACES.n
            self._warn_shared_writes(caller.mapping)
        return out

    def _warn_shared_writes(self, mapping: state_transform.StatefulMapping) -> None:
        """Warn once per state when the update writes a state that is not per-member.

        Such a state was created before ``init_all_states`` (typically in the
        module's ``__init__``), so every member shares its single copy.
        """
        cache = self._cache
        members = {id(s) for states in (cache.groups or {}).values() for s in states}
        declared = self._call_rules
        paths = state_core.collect_states(self.module).paths_by_state()
        shared = []
        for state in mapping.get_write_states():
            if id(state) in members or state in cache.warned or is_random_state(state):
                continue
            path = paths.get(id(state), ())
            if declared.matches(path, state):
                continue
            cache.warned.add(state)
            where = ".".join(map(str, path)) if path else state.describe()
            shared.append(f"{type(state).__name__} '{where}'")
        if not shared:
            return
        owner = type(self.module).__name__
        warnings.warn(
            f"Map({owner}).update wrote {', '.join(shared)}, which "
            f"{'is' if len(shared) == 1 else 'are'} shared by all "
            f"{self.init_map_size} members, not one copy per member: "
            f"{'it' if len(shared) == 1 else 'they'} existed before "
            f"Map.init_all_states (for example, created in {owner}.__init__), and a write that "
            "differs between members stacks the members' values on a new leading axis. To give "
            f"each member its own copy, create it in {owner}.init_state (or in a submodule's "
            "init_state). If sharing is intended, name it in call_state_axes to silence this "
            "warning.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )

    def map(
        self,
        fn: str | Callable[..., Any],
        in_axes: Any = 0,
        out_axes: Any = 0,
        axis_name: Hashable | None = None,
        state_axes: dict[Any, FilterLike] | None = None,
    ) -> Callable[..., Any]:
        """A callable that runs ``fn`` on every member with its own mapping settings.

        Args:
            fn: the name of a method of the module, or a function
                ``fn(module, *args, **kwargs)``.
            in_axes: as in ``jax.vmap``, for the positional arguments; keyword
                arguments are shared by all members.
            out_axes: as in ``jax.vmap``, for the result.
            axis_name: the axis name for collectives; ``None`` uses the Map's.
            state_axes: ``{axis: filter}`` entries that override where states are
                mapped (default: the Map's ``call_state_axes``); the member states
                stay mapped on their axis unless an entry claims them.

        The returned callable (and its compiled program) is cached per
        ``(fn, in_axes, out_axes, axis_name, state_axes)``: keep a reference to the
        same function object to reuse it. Raises ``ValueError`` before
        ``init_all_states`` and ``AttributeError`` for an unknown method name.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn
            >>> class MyModule(state_nn.Module):
            ...     def init_state(self):
            ...         self.weight = state_core.ParamState(jnp.ones(5))
            ...     def predict(self, x):
            ...         return x @ self.weight.value
            >>> vmapper = state_nn.Map(MyModule(), init_map_size=10)
            >>> vmapper.init_all_states()
            >>> vmapper.map('predict')(jnp.ones((10, 5))).shape
            (10,)
            >>> vmapper.map(lambda m, x, scale: m.predict(x) * scale)(jnp.ones((10, 5)), scale=2.0)[:3]
            Array([10., 10., 10.], dtype=float32)
        """
        cache = self._require_init("map")
        if isinstance(fn, str):
            target = getattr(self.module, fn, None)
            if target is None or not callable(target):
                raise AttributeError(
                    f"Map.map: {type(self.module).__name__} has no method {fn!r} "
                    f"(the wrapped module is {type(self.module).__name__})."
                )
        elif not callable(fn):
            raise TypeError(
                f"Map.map: fn must be a method name (str) or a callable fn(module, *args, **kwargs), "
                f"got {type(fn).__name__}."
            )
        if axis_name is None:
            axis_name = self.axis_name
        try:
            key: Hashable | None = (fn, _freeze(in_axes), _freeze(out_axes), axis_name, _freeze(state_axes))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in cache.maps:
            cache.maps.move_to_end(key)
            return cache.maps[key]
        # _require_init checked the groups; init_all_states sets the rules with them.
        rules = (
            cast("StateRules[Any]", cache.rules)
            if state_axes is None
            else _member_rules(
                cast("dict[Any, list[State[Any]]]", cache.groups),
                parse_state_rules(state_axes, "state_axes", "Map.map"),
            )
        )
        if isinstance(fn, str):
            runner, label = _method_runner(fn), fn
        else:
            runner, label = _callable_runner(fn), getattr(fn, "__name__", type(fn).__name__)
        caller = self._build(
            types.MethodType(runner, self.module),
            in_axes,
            out_axes,
            axis_name,
            rules,
            f"Map({type(self.module).__name__}).map({label})",
        )
        if key is not None:
            cache.remember(cache.maps, key, caller)
        return caller

    def reset_all_states(self, *args: Any, **kwargs: Any) -> None:
        """Run ``module.reset_all_states(*args, **kwargs)`` on every member.

        The arguments are compile-time constants shared by all members (they
        must be hashable, e.g. a batch size). ``reset_state`` hooks should assign
        ``state.value``; each member's write lands in its own slice.

        Args:
            *args: passed to every ``reset_state`` hook (hashable).
            **kwargs: passed to every ``reset_state`` hook (hashable).

        Raises:
            ValueError: ``init_all_states`` has not been called yet.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn
            >>> class Acc(state_nn.Module):
            ...     def init_state(self):
            ...         self.total = state_core.ShortTermState(jnp.zeros(()))
            ...     def reset_state(self, start=0.0):
            ...         self.total.value = jnp.full((), start, dtype=jnp.float32)
            ...     def update(self, x):
            ...         self.total.value = self.total.value + x
            ...         return self.total.value
            >>> ens = state_nn.Map(Acc(), init_map_size=2)
            >>> ens.init_all_states()
            >>> _ = ens(jnp.array([1., 2.]))
            >>> ens.reset_all_states(start=5.0)
            >>> ens.module.total.value
            Array([5., 5.], dtype=float32)
        """
        cache = self._require_init("reset_all_states")
        names = tuple(kwargs)
        key = (len(args), names)
        mapping = cache.resets.get(key)
        if mapping is None:
            n_args = len(args)

            def reset(module: Any, *values: Any) -> None:
                module.reset_all_states(*values[:n_args], **dict(zip(names, values[n_args:], strict=True)))

            static = tuple(range(n_args + len(names)))
            fun = types.MethodType(reset, self.module)
            rules = cast("StateRules[Any]", cache.rules)  # (init_all_states sets them with the groups)
            strategy = self._member_strategy(
                in_axes=None, out_axes=None, axis_name=self.axis_name, rules=rules, static_argnums=static, spmd=False
            )
            mapping = state_transform.StatefulMapping(fun, strategy=strategy)
            mapping.name = f"Map({type(self.module).__name__}).reset_all_states"
            cache.remember(cache.resets, key, mapping)
        mapping(*args, *kwargs.values())
