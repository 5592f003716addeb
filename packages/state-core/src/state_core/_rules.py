"""``StateRules``: an ordered list of (value, filter) rules; the first filter that matches a state wins.

The user-facing forms differ by transformation — ``{axis: filter}`` for
``vmap2`` / ``pmap2`` / ``Map``, ``{State or filter: PartitionSpec}`` for
``shard_map``, ``{axis: {name: State}}`` for brainstate's ``vmap`` — but they all
mean "give each state the value of the first rule that selects it". One parser
(``state_transform``'s) reads every form into this one frozen type.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from ._filter import All, Filter, Not, to_predicate
from ._filter import Any as AnyOf
from ._state import State

__all__ = ["StateRules"]

V = TypeVar("V")
_NO_MATCH: Any = object()


class StateRules(Generic[V]):
    """Ordered ``(value, filter)`` rules, frozen; ``value_for`` gives the value of the first rule matching a state.

    Args:
        rules: ``(value, filter-like)`` pairs in priority order; each filter-like is
            turned into a filter with ``to_predicate`` (a State class, a tag, a
            State, a list of States, ``...`` ...).

    Example:
        >>> from state_core import ParamState, State
        >>> from state_core.engine import StateRules
        >>> rules = StateRules([(0, ParamState), (None, ...)])
        >>> w, h = ParamState(1.0), State(0.0)
        >>> rules.value_for((), w), rules.value_for((), h)
        (0, None)
        >>> StateRules([('spec', w)]).value_for((), h, 'default')
        'default'
    """

    __slots__ = ("rules",)
    rules: tuple[tuple[V, Filter], ...]

    def __init__(self, rules: Iterable[tuple[V, Any]] = ()) -> None:
        object.__setattr__(self, "rules", tuple((value, to_predicate(f)) for value, f in rules))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"StateRules is frozen: cannot set {name!r}; build new rules with then().")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"StateRules is frozen: cannot delete {name!r}.")

    def __reduce__(self) -> tuple[Any, ...]:
        # copy / deepcopy / pickle rebuild through __init__ (a frozen object has no setattr).
        return (StateRules, (self.rules,))

    def then(self, other: Iterable[tuple[V, Any]]) -> StateRules[V]:
        """These rules first, then ``other``'s (which only decide the states none of these selects).

        Args:
            other: ``StateRules`` or ``(value, filter-like)`` pairs of lower priority.

        Example:
            >>> from state_core import NonBatchState, ParamState
            >>> from state_core.engine import StateRules
            >>> rules = StateRules([(None, NonBatchState)]).then([(1, ParamState)])
            >>> rules.value_for((), NonBatchState(0.0)), rules.value_for((), ParamState(0.0))
            (None, 1)
        """
        return StateRules([*self.rules, *other])

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
            >>> rules = StateRules([(0, ParamState)])
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
            >>> rules = StateRules([(None, ParamState)])
            >>> rules.matches((), ParamState(1.0)), rules.matches((), State(1.0))
            (True, False)
        """
        return self.value_for(path, state, _NO_MATCH) is not _NO_MATCH

    def as_dict(self) -> dict[Any, Filter]:
        """``{value: filter}`` with the same meaning: read in order, the first filter that matches wins.

        A value given by several rules gets one filter: its first rule's, or'ed with each
        later rule's minus what the rules before that one (of other values) select.

        Example:
            >>> from state_core import LongTermState, ParamState, State
            >>> from state_core.engine import StateRules
            >>> shown = StateRules([(0, ParamState), (None, LongTermState), (0, ...)]).as_dict()
            >>> list(shown)
            [0, None]
            >>> shown[0]((), State(1.0)), shown[0]((), LongTermState(1.0))
            (True, False)
        """
        shown: dict[Any, Filter] = {}
        for i, (value, predicate) in enumerate(self.rules):
            if value not in shown:
                shown[value] = predicate
                continue
            earlier = [f for v, f in self.rules[:i] if v != value]
            part = All(predicate, Not(AnyOf(*earlier))) if earlier else predicate
            shown[value] = AnyOf(shown[value], part)
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
