"""State filters: predicates ``f(path, state) -> bool`` that select states.

Example:
    >>> from state_core import ParamState
    >>> from state_core.filter import OfType, Not
    >>> Not(OfType(ParamState))
    Not(OfType(<class 'state_core.ParamState'>))
"""

from ._filter import (
    All,
    Any,
    Everything,
    Filter,
    FilterLike,
    Not,
    Nothing,
    OfType,
    Path,
    PathContains,
    WithTag,
    to_predicate,
)

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
