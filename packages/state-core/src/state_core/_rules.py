"""``StateRules``: an ordered list of (value, filter) rules; the first filter that matches a state wins.

The user-facing forms differ by transformation — ``{axis: filter}`` for
``vmap2`` / ``pmap2`` / ``Map``, ``{State or filter: PartitionSpec}`` for
``shard_map`` — but they all mean "give each state the value of the first rule
that selects it". Engines parse both into this one type.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from ._filter import Filter, to_predicate
from ._state import State

__all__ = ["StateRules"]

V = TypeVar("V")
_NO_MATCH: Any = object()


class StateRules(Generic[V]):
    """Ordered ``(value, filter)`` rules; ``value_for`` gives the value of the first rule matching a state.

    Args:
        rules: ``(value, filter-like)`` pairs in priority order; each filter-like is
            turned into a filter with ``to_predicate`` (a State class, a tag, a
            State, a list of States, ``...`` ...).

    Example:
        >>> from state_core import ParamState, State
        >>> from state_core.engine import StateRules
        >>> rules = StateRules.from_keyed_values({0: ParamState, None: ...})
        >>> w, h = ParamState(1.0), State(0.0)
        >>> rules.value_for((), w), rules.value_for((), h)
        (0, None)
        >>> StateRules.from_keyed_filters({w: 'spec'}).value_for((), h, 'default')
        'default'
    """

    __slots__ = ("rules",)

    def __init__(self, rules: Iterable[tuple[V, Any]] = ()) -> None:
        self.rules: tuple[tuple[V, Filter], ...] = tuple((value, to_predicate(f)) for value, f in rules)

    @classmethod
    def from_keyed_values(cls, spec: dict[Any, Any]) -> StateRules[Any]:
        """From ``{value: filter}`` (the ``{axis: filter}`` form of mapping transformations).

        Args:
            spec: ``{value: filter-like}``; the dict's order is the rules' priority.

        Example:
            >>> from state_core import ParamState, State
            >>> from state_core.engine import StateRules
            >>> rules = StateRules.from_keyed_values({0: ParamState, None: ...})
            >>> rules.value_for((), ParamState(1.0)), rules.value_for((), State(1.0))
            (0, None)
        """
        return cls((value, f) for value, f in spec.items())

    @classmethod
    def from_keyed_filters(cls, spec: dict[Any, Any]) -> StateRules[Any]:
        """From ``{filter or State: value}`` (the ``{state: spec}`` form of ``shard_map``).

        Args:
            spec: ``{filter-like or State: value}``; the dict's order is the rules'
                priority.

        Example:
            >>> from state_core import State
            >>> from state_core.engine import StateRules
            >>> w = State(1.0)
            >>> rules = StateRules.from_keyed_filters({w: 'split', ...: 'replicated'})
            >>> rules.value_for((), w), rules.value_for((), State(2.0))
            ('split', 'replicated')
        """
        return cls((value, f) for f, value in spec.items())

    def value_for(self, path: tuple[Hashable, ...], state: State[Any], default: Any = None) -> Any:
        """The value of the first rule whose filter matches ``(path, state)``, else ``default``.

        Args:
            path: the state's path in its object graph (filters such as ``PathContains``
                read it; ``()`` when there is none).
            state: the State to look up.
            default: returned when no rule matches (None by default).

        Example:
            >>> from state_core import ParamState, State
            >>> from state_core.engine import StateRules
            >>> rules = StateRules.from_keyed_values({0: ParamState})
            >>> rules.value_for(('w',), ParamState(1.0)), rules.value_for(('h',), State(0.0), -1)
            (0, -1)
        """
        for value, predicate in self.rules:
            if predicate(path, state):
                return value
        return default

    def matches(self, path: tuple[Hashable, ...], state: State[Any]) -> bool:
        """True if some rule selects ``(path, state)``.

        Args:
            path: the state's path in its object graph (``()`` when there is none).
            state: the State to look up.

        Example:
            >>> from state_core import ParamState, State
            >>> from state_core.engine import StateRules
            >>> rules = StateRules.from_keyed_values({None: ParamState})
            >>> rules.matches((), ParamState(1.0)), rules.matches((), State(1.0))
            (True, False)
        """
        return self.value_for(path, state, _NO_MATCH) is not _NO_MATCH

    def as_dict(self) -> dict[Any, Filter]:
        """``{value: filter}`` (later rules with the same value are dropped), for display.

        Example:
            >>> from state_core import ParamState, State
            >>> from state_core.engine import StateRules
            >>> list(StateRules([(0, ParamState), (1, ...), (0, State)]).as_dict())
            [0, 1]
        """
        shown: dict[Any, Filter] = {}
        for value, predicate in self.rules:
            shown.setdefault(value, predicate)
        return shown

    def __iter__(self) -> Iterator[tuple[V, Filter]]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateRules) and other.rules == self.rules

    def __hash__(self) -> int:
        return hash(self.rules)

    def __repr__(self) -> str:
        return f"StateRules({list(self.rules)!r})"
