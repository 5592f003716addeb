"""``brainstate.util``: only its filters exist here (``state_core.filter``).

``FlattedDict`` (what ``Module.states()`` returns in brainstate) is our
``StateDict``.  The rest of brainstate.util (``NestedDict``, ``PrettyRepr``,
``struct``, ``BoundedCache``, ...) is not provided.
"""

from state_core import StateDict
from state_core.filter import All, Any, Everything, Not, Nothing, OfType, PathContains, WithTag, to_predicate

from . import filter

FlattedDict = StateDict

__all__ = [
    'All',
    'Any',
    'Everything',
    'FlattedDict',
    'Not',
    'Nothing',
    'OfType',
    'PathContains',
    'WithTag',
    'filter',
    'to_predicate',
]
