"""brainstate's ``graph`` helpers: an object graph as a structure plus nested dicts of state values.

``treefy_split(model)`` gives a ``GraphDef`` (the model with its States replaced
by empty slots) and the states' values as nested dicts keyed by attribute names
(``{'linear1': {'w': Array}}``): plain pytrees that ``jax.jit``, ``jax.grad``,
optax and orbax take. ``treefy_merge(graphdef, values)`` builds a new model with
new States holding those values, which is how functional-style programs run a
model inside a pure JAX function; ``update_states(model, values)`` writes values
back into an existing model's States.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from ._collection import StateDict, collect_states
from ._filter import FilterLike, Path, to_predicate
from ._graph import walk_graph
from ._state import State
from ._tracing import shape_structs

__all__ = ["GraphDef", "states", "treefy_states", "treefy_split", "treefy_merge", "update_states"]

_MISSING = object()


def _shell(state: State[Any]) -> State[Any]:
    """A detached copy of ``state`` that keeps its class, name, tags and metadata but only the value's shape.

    Built without ``State.__init__`` on purpose: it is a template, not a state of
    the program (no trace or new-state catcher records it).
    """
    shell = object.__new__(type(state))
    shell.__dict__.update(state.__dict__)
    shell.__dict__.pop("_hooks", None)  # the template is not the state its hooks watch
    shell.__dict__.pop("_kept_records", None)  # nor keeps the state's programs alive
    shell.__dict__["_value"] = shape_structs(state.__dict__["_value"])
    return shell


def _nest(items: Mapping[Path, Any]) -> dict[Any, Any]:
    """``{('a', 'w'): x}`` -> ``{'a': {'w': x}}``."""
    nested: dict[Any, Any] = {}
    for path, value in items.items():
        node = nested
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return nested


def _lookup(mapping: Mapping[Any, Any], path: Path) -> Any:
    """The entry for ``path`` in a nested (``{'a': {'w': x}}``) or flat (``{('a', 'w'): x}``) mapping."""
    if path in mapping:
        found = mapping[path]
    else:
        found = mapping
        for part in path:
            if not isinstance(found, Mapping) or part not in found:
                return _MISSING
            found = found[part]
    return found.value if isinstance(found, State) else found


def _unknown_paths(mapping: Mapping[Any, Any], known: set[Path]) -> list[Path]:
    """Entries of ``mapping`` (nested or flat) that are no path of ``known`` and lead to none."""
    prefixes = {path[:k] for path in known for k in range(1, len(path))}
    unknown: list[Path] = []
    pending: list[tuple[Path, Mapping[Any, Any]]] = [((), mapping)]
    while pending:
        prefix, node = pending.pop()
        for key, value in node.items():
            path = key if (not prefix and isinstance(key, tuple)) else (*prefix, key)
            if path in known:
                continue
            if path in prefixes and isinstance(value, Mapping):
                pending.append((path, value))
            else:
                unknown.append(path)
    return unknown


def _partition(found: StateDict, filters: tuple[FilterLike, ...], exhaustive: bool, who: str) -> list[StateDict]:
    """One ``StateDict`` per filter (each state goes to the first that matches)."""
    predicates = [to_predicate(f) for f in filters]
    parts = [StateDict() for _ in predicates]
    for path, state in found.items():
        for part, predicate in zip(parts, predicates, strict=True):
            if predicate(path, state):
                part[path] = state
                break
        else:
            if exhaustive:
                raise ValueError(
                    f"{who}: no filter matches the state at {'.'.join(map(str, path))} "
                    f"({type(state).__name__}); add `...` as the last filter to collect the rest."
                )
    return parts


class GraphDef:
    """The structure of an object graph without its state values: what ``treefy_merge`` rebuilds.

    It holds a copy of the object with every State replaced by an empty slot of
    the same class, name and tags (arrays that are plain attributes are shared,
    not copied). It is a static pytree, so it may be passed to ``jax.jit``.
    ``treefy_split`` makes it; there is no need to build one directly.

    Args:
        node: the object whose structure is kept.
        found: its States by path (``collect_states(node)``), each to become a slot.

    Attributes:
        paths: the path of every State of the object, in discovery order.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_core.graph import treefy_split
        >>> class Net:
        ...     def __init__(self):
        ...         self.w = ParamState(jnp.ones(2))
        >>> graphdef, values = treefy_split(Net())
        >>> graphdef
        GraphDef(Net, paths=[('w',)])
    """

    __module__ = "state_core.graph"

    def __init__(self, node: Any, found: StateDict) -> None:
        shells = {id(s): _shell(s) for s in found.values()}
        memo: dict[int, Any] = dict(shells)
        shared = [obj for _, obj in walk_graph(node) if isinstance(obj, (jax.Array, np.ndarray))]
        memo.update((id(obj), obj) for obj in shared)
        self._template = copy.deepcopy(node, memo)
        self._slots = [(path, shells[id(s)]) for path, s in found.items()]
        self._shared = shared
        self.paths: tuple[Path, ...] = tuple(found)

    def build(self, values: list[Any]) -> Any:
        """A new object of this structure whose States (new ones) hold ``values``.

        Args:
            values: one value per entry of ``paths``, in that order.

        Returns:
            The new object (``treefy_merge`` finds the values by path and calls this).
        """
        memo: dict[int, Any] = {id(obj): obj for obj in self._shared}
        for (_, shell), value in zip(self._slots, values, strict=True):
            memo[id(shell)] = shell._clone(value)
        return copy.deepcopy(self._template, memo)

    def __repr__(self) -> str:
        return f"GraphDef({type(self._template).__name__}, paths={list(self.paths)})"


jax.tree_util.register_static(GraphDef)


def states(node: Any, *filters: FilterLike) -> Any:
    """The States of ``node``'s object graph as a ``StateDict`` (``path -> State``); brainstate's ``graph.states``.

    Args:
        node: the object to walk (a Module, any object, list or dict).
        *filters: none: every state; one: the states it matches; several: one
            ``StateDict`` per filter (each state in the first that matches, the rest dropped).

    Returns:
        A ``StateDict``, or a tuple of them for several filters.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState, ShortTermState
        >>> from state_core.graph import states
        >>> net = {'w': ParamState(jnp.ones(2)), 'h': ShortTermState(jnp.zeros(2))}
        >>> params, short = states(net, ParamState, ShortTermState)
        >>> list(params), list(short)
        ([('w',)], [('h',)])
    """
    found = collect_states(node)
    if len(filters) < 2:
        return found.filter(*filters)
    return tuple(_partition(found, filters, False, "states"))


def treefy_states(node: Any, *filters: FilterLike) -> Any:
    """The current values of ``node``'s States as nested dicts keyed by attribute names.

    ``{'linear1': {'w': Array, 'b': Array}, 'count': Array}``: a plain pytree to
    save (orbax), transform (``jax.tree.map``) or restore with ``update_states``.

    Args:
        node: the object to walk.
        *filters: none: every state; one: the states it matches; several: one
            nested dict per filter (each state in the first that matches, the rest dropped).

    Returns:
        A nested dict of values, or a tuple of them for several filters.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_core.graph import treefy_states
        >>> net = {'layer': {'w': ParamState(jnp.ones(2))}, 'n': ParamState(0)}
        >>> treefy_states(net)
        {'layer': {'w': Array([1., 1.], dtype=float32)}, 'n': 0}
    """
    found = collect_states(node)
    if len(filters) < 2:
        return _nest(found.filter(*filters).to_values())
    return tuple(_nest(part.to_values()) for part in _partition(found, filters, False, "treefy_states"))


def treefy_split(node: Any, *filters: FilterLike) -> tuple[Any, ...]:
    """Split ``node`` into its structure (``GraphDef``) and the values of its States.

    ``graphdef, values = treefy_split(model)``, or with filters one nested dict of
    values per filter: ``graphdef, params, rest = treefy_split(model, ParamState, ...)``.
    ``treefy_merge(graphdef, params, rest)`` rebuilds a model.

    Args:
        node: the object to split.
        *filters: none: one mapping with every state; otherwise one mapping per
            filter, each state in the first that matches. Every state must be
            matched: end with ``...`` to collect the rest.

    Returns:
        ``(graphdef, values)`` or ``(graphdef, values_1, ..., values_n)``.

    Raises:
        ValueError: a state matches none of ``filters`` (the message names its path).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState, State
        >>> from state_core.graph import treefy_split
        >>> class Net:
        ...     def __init__(self):
        ...         self.w = ParamState(jnp.ones(2))
        ...         self.count = State(jnp.array(0))
        >>> graphdef, params, rest = treefy_split(Net(), ParamState, ...)
        >>> params, rest
        ({'w': Array([1., 1.], dtype=float32)}, {'count': Array(0, dtype=int32, weak_type=True)})
    """
    found = collect_states(node)
    graphdef = GraphDef(node, found)
    if not filters:
        return graphdef, _nest(found.to_values())
    parts = _partition(found, filters, True, "treefy_split")
    return (graphdef, *(_nest(part.to_values()) for part in parts))


def treefy_merge(graphdef: GraphDef, *values: Mapping[Any, Any]) -> Any:
    """A new object with ``graphdef``'s structure whose States hold ``values``: ``treefy_split``'s inverse.

    The States are new objects (of the original classes, names and tags); the
    object it was split from is not touched. Inside ``jax.jit`` / ``jax.grad`` the
    values may be traced: run the rebuilt model there and read its new values with
    ``treefy_states``.

    Args:
        graphdef: from ``treefy_split``.
        *values: nested (or ``path``-keyed flat) mappings that together hold a value
            for every path of ``graphdef`` (the first mapping holding a path wins).

    Returns:
        The rebuilt object.

    Raises:
        TypeError: ``graphdef`` is not a ``GraphDef``.
        ValueError: no mapping holds a value for some path (the message names it).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_core.graph import treefy_merge, treefy_split
        >>> class Net:
        ...     def __init__(self):
        ...         self.w = ParamState(jnp.ones(2))
        ...     def __call__(self, x):
        ...         return (self.w.value * x).sum()
        >>> graphdef, params = treefy_split(Net())
        >>> jax.grad(lambda p, x: treefy_merge(graphdef, p)(x))(params, jnp.array([3., 4.]))
        {'w': Array([3., 4.], dtype=float32)}
    """
    if not isinstance(graphdef, GraphDef):
        raise TypeError(f"treefy_merge: expected the GraphDef from treefy_split, got {type(graphdef).__name__}.")
    found = []
    for path in graphdef.paths:
        for mapping in values:
            value = _lookup(mapping, path)
            if value is not _MISSING:
                found.append(value)
                break
        else:
            raise ValueError(
                f"treefy_merge: no value for the state at {'.'.join(map(str, path))}; pass every mapping "
                "treefy_split returned (e.g. treefy_merge(graphdef, params, rest))."
            )
    return graphdef.build(found)


def update_states(node: Any, state_dict: Mapping[Any, Any], /, *state_dicts: Mapping[Any, Any]) -> None:
    """Write values into ``node``'s States: the inverse of ``treefy_states``.

    Every entry is checked before the first write (an unknown path or a value of
    another pytree structure leaves every state unchanged). States without an
    entry keep their values.

    Args:
        node: the object whose States are written.
        state_dict: nested (``{'layer': {'w': x}}``) or flat (``{('layer', 'w'): x}``)
            values, as ``treefy_states`` / ``StateDict.to_values`` give; a State as
            an entry gives its value.
        *state_dicts: more mappings (the first holding a path wins).

    Raises:
        KeyError: an entry names no state of ``node``.
        ValueError: a value's pytree structure differs from its state's.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_core.graph import treefy_states, update_states
        >>> net = {'layer': {'w': ParamState(jnp.ones(2))}}
        >>> saved = treefy_states(net)
        >>> update_states(net, {'layer': {'w': jnp.zeros(2)}})
        >>> net['layer']['w'].value
        Array([0., 0.], dtype=float32)
        >>> update_states(net, saved); net['layer']['w'].value
        Array([1., 1.], dtype=float32)
    """
    found = collect_states(node)
    mappings = (state_dict, *state_dicts)
    known = set(found)
    for mapping in mappings:
        unknown = _unknown_paths(mapping, known)
        if unknown:
            raise KeyError(
                f"update_states: no state at {'.'.join(map(str, unknown[0]))}"
                f"{f' (and {len(unknown) - 1} more)' if len(unknown) > 1 else ''}; the object's state paths "
                f"are {['.'.join(map(str, p)) for p in list(found)[:10]]}{' ...' if len(found) > 10 else ''}."
            )
    new: dict[Path, Any] = {}
    for path in found:
        for mapping in mappings:
            value = _lookup(mapping, path)
            if value is not _MISSING:
                new[path] = value
                break
    found.assign_values(new)
