"""Collecting ``path -> State`` mappings from Python object graphs, and splitting them."""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
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
        """``path -> current value``: a plain dict of arrays, the pytree optimisers and ``jax`` functions take.

        A ``StateDict`` itself holds ``State`` objects, not arrays: hand
        ``to_values()`` to code that expects arrays (``optax``'s ``init`` /
        ``update`` / ``apply_updates``), and write results back with
        ``assign_values``. ``to_dict_values`` is the same method (brainstate's
        name).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import ParamState, collect_states
            >>> states = collect_states({'w': ParamState(jnp.ones(2)), 'b': ParamState(0.0)})
            >>> states.to_values()
            {('w',): Array([1., 1.], dtype=float32), ('b',): 0.0}
        """
        return {p: s.value for p, s in self.items()}

    to_dict_values = to_values

    def assign_values(self, values: Mapping[Path, Any]) -> None:
        """Write ``values`` (``path -> value``) into the states at those paths; other states keep theirs.

        Every path and every value's pytree structure is checked before the
        first write, so a bad entry leaves all states unchanged.

        Args:
            values: new values keyed by paths of this collection (a subset is fine).

        Raises:
            KeyError: if a path is not in this collection.
            ValueError: if a value's pytree structure differs from its state's.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import ParamState, collect_states
            >>> states = collect_states({'w': ParamState(jnp.ones(2)), 'b': ParamState(0.0)})
            >>> states.assign_values({('b',): 1.5})
            >>> states[('b',)].value
            1.5
        """
        unknown = [path for path in values if path not in self]
        if unknown:
            more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            known = f"{list(self)[:10]}{' ...' if len(self) > 10 else ''}"
            raise KeyError(f"No state at path {unknown[0]!r}{more}; the paths of this StateDict are {known}.")
        for path, value in values.items():
            self[path]._check_write(value)
        for path, value in values.items():
            self[path].value = value

    def assign_dict_values(self, data: Mapping[Path, Any]) -> None:
        """Write ``data[path]`` into every state of this collection (brainstate's ``assign_dict_values``).

        Unlike ``assign_values``, every path of this collection must be in
        ``data``; paths of ``data`` that are not in it are ignored, so a
        filtered collection can be assigned from the values of a whole model.

        Args:
            data: ``path -> value`` with at least this collection's paths.

        Raises:
            KeyError: if a path of this collection is missing from ``data``
                (nothing is written then).
            ValueError: if a value's pytree structure differs from its state's.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenState, ParamState, collect_states
            >>> states = collect_states({'w': ParamState(jnp.ones(2)), 'h': HiddenState(jnp.zeros(2))})
            >>> params = states.filter(ParamState)
            >>> params.assign_dict_values({('w',): jnp.zeros(2), ('h',): jnp.ones(2)})
            >>> states.to_dict_values()
            {('w',): Array([0., 0.], dtype=float32), ('h',): Array([0., 0.], dtype=float32)}
        """
        missing = [path for path in self if path not in data]
        if missing:
            raise KeyError(
                f"assign_dict_values needs a value for every path of the StateDict; missing {missing[:5]}"
                f"{' ...' if len(missing) > 5 else ''}. Use assign_values to write only some paths."
            )
        self.assign_values({path: data[path] for path in self})

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

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # IPython / Jupyter display: the values, like ``str``.
        printer.text("StateDict(...)" if cycle else str(self))

    def __treescope_repr__(self, path: str | None, subtree_renderer: Any) -> Any:
        """Render in treescope (notebooks) as a mapping ``path -> State``, each state with its value."""
        from treescope import repr_lib  # treescope calls this hook, so it is installed

        return repr_lib.render_dictionary_wrapper(
            object_type=type(self),
            wrapped_dict=dict(self),
            path=path,
            subtree_renderer=subtree_renderer,
            roundtrippable=False,
        )


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
