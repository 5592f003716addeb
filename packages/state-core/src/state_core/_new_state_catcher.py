"""Catching the States created inside a block: ``catch_new_states`` and what it yields."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ._context import CTX
from ._filter import FilterLike, to_predicate
from ._state import State

__all__ = ["NewStateCatcher", "catch_new_states"]


class NewStateCatcher:
    """The object a ``catch_new_states`` block yields: the states created inside it.

    It is a sequence (``len``, iteration, indexing) of the caught states in
    creation order. ``catch_new_states`` builds it; there is no need to build
    one by hand.

    Args:
        tag: a tag (or several) added to every caught state; ``None`` adds none.
        exclude: a filter; new states it matches are neither caught nor tagged
            (``None`` excludes nothing).

    Example:
        >>> from state_core import State, catch_new_states
        >>> with catch_new_states(tag='new') as caught:
        ...     a = State(0.0)
        >>> len(caught), caught[0] is a, sorted(a.tags)
        (1, True, ['new'])
    """

    def __init__(self, tag: str | Iterable[str] | None, exclude: FilterLike = None) -> None:
        self.tag = tag
        self.states: list[State[Any]] = []
        self._exclude = to_predicate(exclude)

    def _add(self, state: State[Any]) -> None:
        if self._exclude((), state):
            return
        if self.tag is not None:
            state.add_tag(*((self.tag,) if isinstance(self.tag, str) else self.tag))
        self.states.append(state)

    def get_by_tag(self, tag: str) -> list[State[Any]]:
        """The caught states that carry ``tag``, in creation order.

        Args:
            tag: the tag to select on (a tag given to the state when it was
                created, or added by the ``catch_new_states`` block).

        Example:
            >>> from state_core import State, catch_new_states
            >>> with catch_new_states() as caught:
            ...     a = State(0.0, tag='fast')
            ...     b = State(0.0)
            >>> caught.get_by_tag('fast') == [a]
            True
        """
        return [s for s in self.states if tag in s.tags]

    def __getitem__(self, index: Any) -> Any:
        return self.states[index]

    def get_states(self) -> list[State[Any]]:
        """The created states, in creation order (a new list).

        Example:
            >>> from state_core import State, catch_new_states
            >>> with catch_new_states() as caught:
            ...     a = State(0.0)
            >>> caught.get_states() == [a]
            True
        """
        return list(self.states)

    def get_state_values(self) -> list[Any]:
        """The current values of the created states, in creation order.

        Example:
            >>> from state_core import State, catch_new_states
            >>> with catch_new_states() as caught:
            ...     a = State(3.0)
            >>> caught.get_state_values()
            [3.0]
        """
        return [s._value for s in self.states]

    def __iter__(self) -> Iterator[State[Any]]:
        return iter(self.states)

    def __len__(self) -> int:
        return len(self.states)


class catch_new_states:
    """Collect every ``State`` created inside the ``with`` block (optionally tagging it).

    Args:
        tag: a tag (or tags) added to each new state; ``None`` adds none.
        state_tag: brainstate's name for ``tag`` (give one of the two).
        state_to_exclude: a filter; new states it matches are neither caught nor tagged.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, catch_new_states
        >>> with catch_new_states(tag='init') as caught:
        ...     a = State(jnp.zeros(3))
        ...     b = State(jnp.ones(2))
        >>> len(caught.states), sorted(a.tags)
        (2, ['init'])
    """

    def __init__(
        self,
        tag: str | Iterable[str] | None = None,
        *,
        state_tag: str | Iterable[str] | None = None,
        state_to_exclude: FilterLike = None,
    ) -> None:
        if tag is not None and state_tag is not None:
            raise TypeError("catch_new_states: give the tag as `tag` or as `state_tag`, not both.")
        self._catcher = NewStateCatcher(tag if state_tag is None else state_tag, state_to_exclude)

    def __enter__(self) -> NewStateCatcher:
        CTX.catchers.append(self._catcher)
        return self._catcher

    def __exit__(self, *exc: Any) -> None:
        CTX.catchers.remove(self._catcher)
