"""Predicates over ``(path, state)`` pairs, used to select states by type, tag or path."""

from __future__ import annotations

import types
import typing
import weakref
from collections.abc import Callable, Hashable
from typing import Union

import jax

from ._identity import IdentityRef

_DictKey = jax.tree_util.DictKey
_GetAttrKey = jax.tree_util.GetAttrKey
_SequenceKey = jax.tree_util.SequenceKey
_FlattenedIndexKey = jax.tree_util.FlattenedIndexKey

__all__ = [
    "Filter",
    "OfType",
    "WithTag",
    "PathContains",
    "Any",
    "All",
    "Not",
    "Everything",
    "Nothing",
    "to_predicate",
    "FilterLike",
    "Path",
]

Path = tuple[Hashable, ...]
"""Where a state sits in a collection: attribute names, list indices and dict keys from the root."""
Predicate = Callable[[Path, typing.Any], bool]
FilterLike = Union[
    "Filter",
    type,
    str,
    Callable[[Path, typing.Any], bool],
    bool,
    "types.EllipsisType",
    None,
    tuple[typing.Any, ...],
    list[typing.Any],
]
"""Anything ``to_predicate`` turns into a ``Filter``: a Filter, a State class, a tag, a
``(path, state) -> bool`` function, ``True``/``...`` (everything), ``False``/``None``
(nothing), a tuple or list (any of its items) or a State object (that state only)."""


class Filter:
    """Base class of the filters: a hashable, comparable predicate ``f(path, state) -> bool``.

    Filters combine with ``&``, ``|`` and ``~``. They are immutable: assigning to
    a field of a built filter raises ``AttributeError``.

    Example:
        >>> from state_core import ParamState, ShortTermState
        >>> from state_core.filter import OfType, WithTag
        >>> f = OfType(ParamState) | WithTag('fast')
        >>> f((), ParamState(1.0)), f((), ShortTermState(1.0, tag='fast')), f((), ShortTermState(1.0))
        (True, True, False)
    """

    __module__ = "state_core.filter"

    def __call__(self, path: Path, state: typing.Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def _key(self) -> tuple[typing.Any, ...]:
        raise NotImplementedError  # pragma: no cover - abstract

    def __setattr__(self, name: str, value: typing.Any) -> None:
        # Filters are hashable (dict keys of state_in_axes, cache keys of traced
        # programs), so a filter never changes once built: only __init__ sets fields.
        if name in self.__dict__:
            raise AttributeError(
                f"{type(self).__name__} filters are immutable; build a new filter instead of changing `{name}`."
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} filters are immutable; cannot delete `{name}`.")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __and__(self, other: FilterLike) -> All:
        return All(self, other)

    def __or__(self, other: FilterLike) -> Any:
        return Any(self, other)

    def __invert__(self) -> Not:
        return Not(self)


class OfType(Filter):
    """Select states that are instances of ``type_`` (subclasses included).

    An object that is not an instance but declares the class it stands for in a
    ``.type`` attribute (a state reference or a state-like record, as brainstate's
    filters accept) is matched when that class is ``type_`` or a subclass.

    Args:
        type_: the class to select (a ``State`` subclass, usually).

    Example:
        >>> from state_core import ParamState, State
        >>> from state_core.filter import OfType
        >>> OfType(ParamState)
        OfType(<class 'state_core.ParamState'>)
        >>> OfType(ParamState)((), ParamState(0.)), OfType(ParamState)((), State(0.))
        (True, False)
    """

    def __init__(self, type_: type) -> None:
        if not isinstance(type_, type):
            raise TypeError(f"OfType expects a class, got {type_!r} of type {type(type_).__name__}.")
        self.type = type_

    def __call__(self, path: Path, state: typing.Any) -> bool:
        if isinstance(state, self.type):
            return True
        declared = getattr(state, "type", None)
        return isinstance(declared, type) and issubclass(declared, self.type)

    def _key(self) -> tuple[typing.Any, ...]:
        return (self.type,)

    def __repr__(self) -> str:
        return f"OfType({self.type!r})"


class WithTag(Filter):
    """Select states that carry ``tag`` among their tags (see ``State(tag=...)``).

    A state may carry several tags; it is selected when any of them is ``tag``.

    Args:
        tag: the tag to look for.

    Example:
        >>> from state_core import State
        >>> from state_core.filter import WithTag
        >>> WithTag('noise')((), State(0., tag='noise'))
        True
    """

    def __init__(self, tag: str) -> None:
        if not isinstance(tag, str):
            raise TypeError(f"WithTag expects a str tag, got {type(tag).__name__}.")
        self.tag = tag

    def __call__(self, path: Path, state: typing.Any) -> bool:
        tags = getattr(state, "tags", None)
        if tags is None:  # a state-like object with brainstate's single-string ``tag``
            tags = getattr(state, "tag", None)
            return tags == self.tag if isinstance(tags, str) else self.tag in (tags or ())
        return self.tag in tags

    def _key(self) -> tuple[typing.Any, ...]:
        return (self.tag,)

    def __repr__(self) -> str:
        return f"WithTag({self.tag!r})"


class PathContains(Filter):
    """Select states whose path (attribute names / indices from the root) contains ``key``.

    Paths may be plain tuples of names and indices (as ``collect_states`` gives)
    or JAX key paths (``jax.tree_util.DictKey``, ``GetAttrKey``, ``SequenceKey``
    entries, as ``jax.tree_util.tree_flatten_with_path`` gives); ``key`` may be
    either form too.

    Args:
        key: an attribute name, dict key or index (or a JAX key-path entry naming one).

    Example:
        >>> import jax
        >>> from state_core import State
        >>> from state_core.filter import PathContains
        >>> PathContains('encoder')(('encoder', 'weight'), State(0.))
        True
        >>> path = (jax.tree_util.DictKey('encoder'), jax.tree_util.SequenceKey(0))
        >>> PathContains('encoder')(path, State(0.)), PathContains(0)(path, State(0.))
        (True, True)
    """

    def __init__(self, key: Hashable) -> None:
        self.key = _plain_key(key)

    def __call__(self, path: Path, state: typing.Any) -> bool:
        key = self.key
        return any(_plain_key(entry) == key for entry in path)

    def _key(self) -> tuple[typing.Any, ...]:
        return (self.key,)

    def __repr__(self) -> str:
        return f"PathContains({self.key!r})"


def _plain_key(entry: typing.Any) -> typing.Any:
    """The name or index inside a JAX key-path entry; other path entries unchanged."""
    entry_type = type(entry)
    if entry_type is _DictKey or entry_type is _FlattenedIndexKey:
        return entry.key
    if entry_type is _GetAttrKey:
        return entry.name
    if entry_type is _SequenceKey:
        return entry.idx
    return entry


class Any(Filter):
    """Select states matched by at least one of ``filters``.

    Args:
        *filters: the filters, each anything ``to_predicate`` accepts.

    Example:
        >>> from state_core import ParamState, HiddenState, State
        >>> from state_core.filter import Any
        >>> f = Any(ParamState, HiddenState)
        >>> f((), HiddenState(0.)), f((), State(0.))
        (True, False)
    """

    def __init__(self, *filters: FilterLike) -> None:
        self.filters = tuple(to_predicate(f) for f in filters)

    def __call__(self, path: Path, state: typing.Any) -> bool:
        return any(f(path, state) for f in self.filters)

    def _key(self) -> tuple[typing.Any, ...]:
        return self.filters

    def __repr__(self) -> str:
        return f"Any({', '.join(map(repr, self.filters))})"


class All(Filter):
    """Select states matched by every one of ``filters``.

    Args:
        *filters: the filters, each anything ``to_predicate`` accepts.

    Example:
        >>> from state_core import ParamState
        >>> from state_core.filter import All, WithTag
        >>> All(ParamState, WithTag('frozen'))((), ParamState(0., tag='frozen'))
        True
    """

    def __init__(self, *filters: FilterLike) -> None:
        self.filters = tuple(to_predicate(f) for f in filters)

    def __call__(self, path: Path, state: typing.Any) -> bool:
        return all(f(path, state) for f in self.filters)

    def _key(self) -> tuple[typing.Any, ...]:
        return self.filters

    def __repr__(self) -> str:
        return f"All({', '.join(map(repr, self.filters))})"


class Not(Filter):
    """Select states that ``filter`` does not match.

    Args:
        filter: the filter to negate, anything ``to_predicate`` accepts.

    Example:
        >>> from state_core import ParamState, State
        >>> from state_core.filter import Not
        >>> Not(ParamState)((), State(0.))
        True
    """

    def __init__(self, filter: FilterLike) -> None:
        self.filter = to_predicate(filter)

    def __call__(self, path: Path, state: typing.Any) -> bool:
        return not self.filter(path, state)

    def _key(self) -> tuple[typing.Any, ...]:
        return (self.filter,)

    def __repr__(self) -> str:
        return f"Not({self.filter!r})"


class Everything(Filter):
    """Select every state.

    Example:
        >>> from state_core import State
        >>> from state_core.filter import Everything
        >>> Everything()((), State(0.))
        True
    """

    def __call__(self, path: Path, state: typing.Any) -> bool:
        return True

    def _key(self) -> tuple[typing.Any, ...]:
        return ()

    def __repr__(self) -> str:
        return "Everything()"


class Nothing(Filter):
    """Select no state.

    Example:
        >>> from state_core import State
        >>> from state_core.filter import Nothing
        >>> Nothing()((), State(0.))
        False
    """

    def __call__(self, path: Path, state: typing.Any) -> bool:
        return False

    def _key(self) -> tuple[typing.Any, ...]:
        return ()

    def __repr__(self) -> str:
        return "Nothing()"


class _Callable(Filter):
    """Wraps a user predicate so it compares and hashes by identity.

    Identity (not the callable's own ``__eq__``/``__hash__``) keeps every filter
    hashable, also for callable objects that define ``__eq__`` without ``__hash__``;
    the wrapper holds the callable, so its ``id`` cannot be reused meanwhile.
    """

    def __init__(self, fn: Callable[[Path, typing.Any], bool]) -> None:
        self.fn = fn

    def __call__(self, path: Path, state: typing.Any) -> bool:
        return bool(self.fn(path, state))

    def __eq__(self, other: object) -> bool:
        return type(other) is _Callable and other.fn is self.fn

    __hash__ = Filter.__hash__

    def _key(self) -> tuple[typing.Any, ...]:
        return (id(self.fn),)

    def __repr__(self) -> str:
        return repr(self.fn)


class _SameState(Filter):
    """Selects exactly one state object.

    It holds the state weakly: a filter kept in a transformation's options (or in
    the key of its shared programs) must not keep a dropped model's State alive.
    """

    def __init__(self, state: typing.Any) -> None:
        self._ref = weakref.ref(state)

    @property
    def state(self) -> typing.Any:
        """The state it selects (None once that state was collected)."""
        return self._ref()

    def __call__(self, path: Path, state: typing.Any) -> bool:
        return state is self._ref()

    def _key(self) -> tuple[typing.Any, ...]:
        # A stand-in equal only while the state lives: a new state at the same address
        # is another filter.
        return (IdentityRef(self._ref()),)

    def __repr__(self) -> str:
        state = self._ref()
        return f"SameState({'<collected>' if state is None else state.describe()})"


def to_predicate(filter: FilterLike) -> Filter:
    """Turn anything filter-like into a ``Filter``.

    * a ``Filter`` -> itself; a class -> ``OfType``; a ``str`` -> ``WithTag``;
    * ``True`` or ``...`` -> ``Everything()``; ``False`` or ``None`` -> ``Nothing()``;
    * a tuple or list -> ``Any`` of its items; a State object -> that state only;
    * any other callable ``f(path, state)`` -> a ``Filter`` that calls it (so it
      hashes and compares by the callable's identity).

    Args:
        filter: the filter-like object to convert (see the list above).

    Example:
        >>> from state_core import ParamState
        >>> from state_core.filter import to_predicate
        >>> to_predicate(ParamState), to_predicate('noise'), to_predicate(...), to_predicate(None)
        (OfType(<class 'state_core.ParamState'>), WithTag('noise'), Everything(), Nothing())
    """
    if isinstance(filter, Filter):
        return filter
    if isinstance(filter, type):
        return OfType(filter)
    if isinstance(filter, str):
        return WithTag(filter)
    if filter is True or filter is Ellipsis:
        return Everything()
    if filter is False or filter is None:
        return Nothing()
    if isinstance(filter, (tuple, list)):
        return Any(*filter)
    if hasattr(filter, "restore_value") and hasattr(filter, "describe"):  # a State instance
        return _SameState(filter)
    if callable(filter):
        return _Callable(filter)
    raise TypeError(
        f"Cannot use {filter!r} (of type {type(filter).__name__}) as a state filter. Use a "
        "State class, a tag string, a callable f(path, state), True/..., False/None, or a "
        "tuple of those."
    )
