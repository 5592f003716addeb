"""The one walk over Python object graphs, and what engines learn from it.

``walk_graph`` visits an object graph (objects' attributes in definition order,
except those their class lists in ``graph_invisible_attrs``; list and tuple
items, dict items) iteratively, so a chain of thousands of nested
modules is fine. ``collect_states``, ``Module`` (its submodules and hook order) and
the engines' object-graph checks are all built on it.

An engine traces a function once and replays the program later. If the objects the
function reaches now hold other States than at trace time (``init_all_states``
made new ones), the program would write to detached States: ``GraphSnapshot``
records what the trace saw and ``graph_roots`` says where to look.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import jax
import numpy as np

from ._state import State

__all__ = [
    "graph_children",
    "walk_graph",
    "graph_states",
    "graph_roots",
    "GraphSnapshot",
    "snapshot_graph",
    "state_label",
]

Path = tuple[Hashable, ...]

# Leaves of the walk: never entered (they hold no States, and some are huge).
OPAQUE = (
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    type(None),
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    types.CodeType,
    np.ndarray,
    np.generic,
    jax.Array,
)


def graph_children(obj: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    """``(path, child)`` for the items of a container or the attributes of an object.

    The one definition of what an object's children are: dict items, list and
    tuple items, or the attributes in ``__dict__`` (definition order) minus those
    its class lists in ``graph_invisible_attrs``.

    Args:
        obj: a dict, list, tuple or any object.
        path: ``obj``'s own path; each child's path extends it by its key.

    Example:
        >>> from state_core.engine import graph_children
        >>> list(graph_children({'a': 1, 'b': [2]}, ('root',)))
        [(('root', 'a'), 1), (('root', 'b'), [2])]
    """
    if isinstance(obj, dict):
        items: Any = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        attrs = getattr(obj, "__dict__", None)
        if attrs is None:
            return
        hidden = getattr(type(obj), "graph_invisible_attrs", None)
        if hidden and isinstance(hidden, (tuple, list, set, frozenset)):
            items = [(k, v) for k, v in attrs.items() if k not in hidden]
        else:
            items = attrs.items()
    for key, child in items:
        yield (*path, key), child


def state_label(state: State[Any], path: Any = None) -> str:
    """How messages name ``state``: by its path in the user's objects when known, else by ``describe()``.

    Args:
        state: the state to name.
        path: its path (a sequence of keys) in the graph it was found in; None or
            empty: not known.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_core.engine import state_label
        >>> state_label(ParamState(jnp.zeros(2)), ('layer', 'weight'))
        "ParamState at path 'layer.weight'"
        >>> state_label(ParamState(jnp.zeros(2), name='w'), ('layer', 'weight'))
        "ParamState 'w' at path 'layer.weight'"
    """
    if not path:
        return state.describe()
    where = ".".join(map(str, path))
    if state.name:
        return f"{state.describe()} at path {where!r}"
    return f"{type(state).__name__} at path {where!r}"


def walk_graph(
    root: Any,
    enter: Callable[[Any], bool] | None = None,
    *,
    post_order: bool = False,
    root_path: Path = (),
) -> Iterator[tuple[Path, Any]]:
    """Every object reachable from ``root``, once each, as ``(path, object)``.

    Paths are tuples of attribute names, dict keys and list indices from ``root``.
    States and the leaf types of ``OPAQUE`` (arrays, numbers, functions, classes,
    modules) are yielded but not entered; ``enter(obj)`` may refuse to enter other
    objects too (they are still yielded). Each object is yielded once, under the
    first path found (depth-first).

    Args:
        root: the object to start from (any object; it is yielded first, or last
            with ``post_order``).
        enter: a predicate called with each enterable object; False keeps the walk
            out of it (it is still yielded). None (the default) enters every object
            that is not a State or an opaque leaf.
        post_order: yield an object after everything below it (children before
            parents) instead of before (the default).
        root_path: the path ``root`` is yielded under; every other path extends it.
    """
    seen: set[int] = {id(root)}
    # An explicit stack of (object, path, child iterator): the order of a recursive
    # walk without Python's recursion limit.
    if not post_order:
        yield root_path, root
    if _enterable(root, enter):
        pending: list[tuple[Any, Path, Iterator[tuple[Path, Any]]]] = [
            (root, root_path, graph_children(root, root_path))
        ]
    else:
        pending = []
    while pending:
        owner, owner_path, children = pending[-1]
        item = next(children, None)
        if item is None:
            pending.pop()
            if post_order:
                yield owner_path, owner
            continue
        path, obj = item
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if _enterable(obj, enter):
            if not post_order:
                yield path, obj
            pending.append((obj, path, graph_children(obj, path)))
        else:
            yield path, obj
    if post_order and not _enterable(root, enter):
        yield root_path, root


def _enterable(obj: Any, enter: Callable[[Any], bool] | None) -> bool:
    if isinstance(obj, (State, *OPAQUE)):
        return False
    return enter is None or enter(obj)


def graph_states(*roots: Any) -> dict[Path, State[Any]]:
    """``path -> State`` for every State reachable from ``roots`` (first path wins).

    With one root, paths start at it; with several, each path starts with the
    root's index.

    Args:
        *roots: the objects to search (modules, dicts, lists, any object with
            attributes).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_core.engine import graph_states
        >>> s = State(jnp.zeros(1))
        >>> list(graph_states({'a': [s], 'b': s}))
        [('a', 0)]
    """
    found: dict[Path, State[Any]] = {}
    seen: set[int] = set()
    root: Any = roots[0] if len(roots) == 1 else list(roots)
    for path, obj in walk_graph(root):
        if isinstance(obj, State) and id(obj) not in seen:
            seen.add(id(obj))
            found[path] = obj
    return found


def graph_roots(fun: Any) -> list[Any]:
    """The objects whose attributes ``fun`` can reach: where its States live.

    A bound method's owner; a callable object itself; for a plain function the
    objects its closure captured and the module-level objects its code names
    (``model`` in ``def step(): model.update()``); for ``functools.partial`` its
    function's roots and its arguments; an object that names its own roots with
    ``__graph_roots__()`` (state-aware transformations do) gives those.

    Args:
        fun: the callable a transformation traces.

    Returns:
        The roots, in a fixed order; an empty list when ``fun`` reaches no object
        (a builtin, a class).

    Example:
        >>> from state_core.engine import graph_roots
        >>> class Net:
        ...     def step(self): pass
        >>> net = Net()
        >>> graph_roots(net.step) == [net]
        True
    """
    own = getattr(fun, "__graph_roots__", None)
    if own is not None and not isinstance(fun, type):
        return list(own())
    if isinstance(fun, types.MethodType):
        return [fun.__self__]
    if isinstance(fun, functools.partial):
        return [*graph_roots(fun.func), *fun.args, *fun.keywords.values()]
    if isinstance(fun, types.FunctionType):
        roots = [c.cell_contents for c in (fun.__closure__ or ()) if _cell_is_set(c)]
        roots.extend(_named_globals(fun))
        return roots
    if hasattr(fun, "__dict__") and not isinstance(fun, type):
        return [fun]
    return []


def _named_globals(fun: types.FunctionType) -> list[Any]:
    """Module-level objects (not modules, classes or functions) that ``fun``'s code names."""
    names: set[str] = set()
    codes = [fun.__code__]
    while codes:  # the function's code and the code of lambdas / comprehensions inside it
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    namespace = fun.__globals__
    found = []
    for name in sorted(names):
        obj = namespace.get(name, _MISSING)
        if obj is not _MISSING and not isinstance(obj, OPAQUE):
            found.append(obj)
    return found


_MISSING = object()


def _cell_is_set(cell: Any) -> bool:
    try:
        _ = cell.cell_contents  # reading it is the test
    except ValueError:  # a closure variable that is not bound yet
        return False
    return True


@dataclasses.dataclass(frozen=True, slots=True)
class GraphSnapshot:
    """What a trace saw of the object graph around its function (made by ``snapshot_graph``).

    ``unchanged(now)`` is True while every used State is still at its path and no
    State appeared at a new path (a function that creates a State on its first call
    behaves differently on the next one: it must be traced again).

    Args:
        paths: every path that held a State before the trace ran.
        used: ``(path, state)`` for the States the trace used that the graph held then.
    """

    paths: frozenset[Path]
    used: tuple[tuple[Path, State[Any]], ...]

    def unchanged(self, now: dict[Path, State[Any]]) -> bool:
        """True if a program traced with this snapshot still fits the graph ``now``.

        Args:
            now: ``path -> State`` of the same roots at the time of the check
                (``graph_states(*graph_roots(fun))``).

        Returns:
            False if a used State left its path (was replaced) or a State appeared
            at a path that held none at trace time.
        """
        for path, state in self.used:
            if now.get(path) is not state:
                return False
        return now.keys() <= self.paths


def snapshot_graph(before: dict[Path, State[Any]], used: list[State[Any]] | tuple[State[Any], ...]) -> GraphSnapshot:
    """The ``GraphSnapshot`` of a trace that used ``used``, given the graph ``before`` it ran.

    Args:
        before: ``path -> State`` of the function's roots (``graph_states``), taken
            before the trace ran.
        used: the States the trace accessed (``Trace.states``); those the graph
            did not hold are not checked later.
    """
    ids = {id(s) for s in used}
    return GraphSnapshot(
        paths=frozenset(before),
        used=tuple((path, s) for path, s in before.items() if id(s) in ids),
    )
