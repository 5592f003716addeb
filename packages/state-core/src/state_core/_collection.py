"""Collecting ``path -> State`` mappings from Python object graphs, and splitting them."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, overload

import jax

from ._filter import FilterLike, Path, to_predicate
from ._graph import graph_states
from ._state import State

__all__ = ["StateDict", "collect_states", "states_of_callable"]


class StateDict(dict[Path, State[Any]]):
    """An ordered ``path -> State`` mapping with filtering and splitting.

    Paths are tuples of attribute names, dict keys and list indices from the
    root object. Insertion order is the order of discovery.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState, ShortTermState, collect_states
        >>> class Net:
        ...     def __init__(self):
        ...         self.w = ParamState(jnp.ones(2))
        ...         self.h = ShortTermState(jnp.zeros(2))
        >>> states = collect_states(Net())
        >>> list(states)
        [('w',), ('h',)]
        >>> params, rest = states.split(ParamState, ...)
        >>> list(params), list(rest)
        ([('w',)], [('h',)])
    """

    def filter(self, *filters: FilterLike) -> StateDict:
        """The states matched by any of ``filters`` (all states when none is given).

        Args:
            *filters: filters (anything ``state_core.filter.to_predicate`` accepts: a State subclass, a tag, a
                ``Filter``, a predicate, ``...``); a state matching any of them is kept.
        """
        if not filters:
            return StateDict(self)
        predicate = to_predicate(filters if len(filters) > 1 else filters[0])
        return StateDict((p, s) for p, s in self.items() if predicate(p, s))

    # One StateDict per filter: the overloads let `a, b = d.split(f, ...)` keep its arity.
    @overload
    def split(self, first: FilterLike, /) -> tuple[StateDict]: ...
    @overload
    def split(self, first: FilterLike, second: FilterLike, /) -> tuple[StateDict, StateDict]: ...
    @overload
    def split(
        self, first: FilterLike, second: FilterLike, third: FilterLike, /
    ) -> tuple[StateDict, StateDict, StateDict]: ...
    @overload
    def split(self, *filters: FilterLike) -> tuple[StateDict, ...]: ...

    def split(self, *filters: FilterLike) -> tuple[StateDict, ...]:
        """Partition into one ``StateDict`` per filter; each state goes to the first match.

        States that no filter matches are dropped; end with ``...`` to keep a
        "rest" collection.

        Args:
            *filters: one filter per part, tried in order; ``...`` as the last one collects the rest.
        """
        if not filters:
            raise ValueError("StateDict.split needs at least one filter; use `...` for the rest.")
        predicates = [to_predicate(f) for f in filters]
        parts: list[StateDict] = [StateDict() for _ in predicates]
        for path, state in self.items():
            for part, predicate in zip(parts, predicates, strict=True):
                if predicate(path, state):
                    part[path] = state
                    break
        return tuple(parts)

    def to_values(self) -> dict[Path, Any]:
        """``path -> current value``."""
        return {p: s.value for p, s in self.items()}

    def assign_values(self, values: dict[Path, Any]) -> None:
        """Write ``values`` (``path -> value``) into the states at those paths.

        Args:
            values: ``path -> value`` for some or all of the paths; an unknown path is a ``KeyError``.
        """
        for path, value in values.items():
            if path not in self:
                raise KeyError(f"No state at path {path!r}; known paths: {list(self)[:10]}...")
            self[path].value = value

    def paths_by_state(self) -> dict[int, Path]:
        """``id(state) -> path``, for naming states in messages."""
        return {id(s): p for p, s in self.items()}

    def __repr__(self) -> str:
        inner = ", ".join(f"{'.'.join(map(str, p))}: {type(s).__name__}" for p, s in self.items())
        return f"StateDict({{{inner}}})"

    def __str__(self) -> str:
        """One line per path with the state's type and value (large arrays summarised).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import ParamState, ShortTermState, collect_states
            >>> print(collect_states({'w': ParamState(jnp.ones(2)), 'h': [ShortTermState(0.0)]}))
            StateDict(
              w: ParamState = Array([1., 1.], dtype=float32),
              h.0: ShortTermState = 0.0
            )
        """
        if not self:
            return "StateDict()"
        lines = [
            f"{'.'.join(map(str, p))}: {type(s).__name__} = {s._value_text()}".replace("\n", "\n  ")
            for p, s in self.items()
        ]
        return "StateDict(\n  " + ",\n  ".join(lines) + "\n)"


# A pytree that keeps insertion order (a plain dict would be sorted by key, which
# fails for paths that mix ints and strings), so gradients w.r.t. a StateDict come
# back as a StateDict with the same paths.
jax.tree_util.register_pytree_with_keys(
    StateDict,
    lambda d: (tuple((jax.tree_util.DictKey(k), v) for k, v in d.items()), tuple(d.keys())),
    lambda keys, children: StateDict(zip(keys, children, strict=True)),
    flatten_func=lambda d: (tuple(d.values()), tuple(d.keys())),
)


def collect_states(root: Any, *filters: FilterLike) -> StateDict:
    """Walk ``root``'s object graph and return every State found, keyed by its path.

    Objects are entered through their attributes (definition order), lists and
    tuples through their indices, dicts through their keys. A state reachable by
    several paths is reported once, under the first path found. With ``filters``,
    only the states matched by any of them are returned. The walk is iterative,
    so arbitrarily deep graphs (a chain of thousands of modules) are fine.

    Args:
        root: the object to walk: any object, list, tuple or dict (a State itself is found at path ``()``).
        *filters: keep only the states matched by any of these filters; none: keep every state.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, collect_states
        >>> shared = State(jnp.zeros(1))
        >>> tree = {'a': [shared, State(jnp.ones(1))], 'b': shared}
        >>> list(collect_states(tree))
        [('a', 0), ('a', 1)]
    """
    found = StateDict(graph_states(root))
    return found.filter(*filters) if filters else found


def states_of_callable(fun: Callable[..., Any]) -> StateDict:
    """States reachable from a callable object: a bound method's owner or the object itself.

    Plain functions have no paths to offer and give an empty mapping.

    Args:
        fun: a callable: a bound method (its owner is walked), an object with a ``__call__`` (the object is walked) or a
            plain function (nothing to walk).
    """
    if isinstance(fun, types.MethodType):
        return collect_states(fun.__self__)
    if isinstance(fun, (types.FunctionType, types.BuiltinFunctionType)):
        return StateDict()
    if hasattr(fun, "__dict__") and not isinstance(fun, type):
        return collect_states(fun)
    return StateDict()
