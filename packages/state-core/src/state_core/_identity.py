"""What a transformed function computes, as a hashable key that keeps no user object alive.

``callable_identity`` names a function by its code and what it captured,
``frozen`` names an option value; objects compared by identity are held through
``IdentityRef``, weakly where Python allows, so a key (and the shared programs
filed under it) never keeps a user's model or States alive.
"""

from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from ._graph import _cell_is_set

__all__ = ["IdentityRef", "Unshareable", "callable_identity", "frozen", "weak_referents"]


class Unshareable(Exception):
    """Raised by ``frozen`` for an option that cannot name a program (the object keeps its own cache).

    Example:
        >>> import functools
        >>> from state_core.engine import Unshareable, frozen
        >>> class Unkeyed:
        ...     def __engine_identity__(self):
        ...         return None          # a transformation whose options cannot be keyed
        ...     def __call__(self, x):
        ...         return x
        >>> try:
        ...     frozen(functools.partial(Unkeyed(), 1))
        ... except Unshareable:
        ...     print('no key')
        no key
    """


class IdentityRef:
    """A hashable stand-in for an object, equal only to a stand-in of the same object.

    It holds the object weakly when the object allows it (a dropped object is
    collected, and its stand-ins then equal nothing but themselves), and strongly
    otherwise (ints, tuples and other values that cannot be weakly referenced).

    Args:
        obj: any object, hashable or not.

    Example:
        >>> import gc
        >>> from state_core import State
        >>> from state_core.engine import IdentityRef
        >>> a, b = State(1.0), State(1.0)
        >>> IdentityRef(a) == IdentityRef(a), IdentityRef(a) == IdentityRef(b)
        (True, False)
        >>> ref = IdentityRef(a)
        >>> del a; _ = gc.collect()
        >>> ref.obj is None, ref.weak
        (True, True)
    """

    __slots__ = ("_ref", "_held", "_hash")

    def __init__(self, obj: Any) -> None:
        if type(obj).__weakrefoffset__:  # its type allows weak references
            self._ref: Callable[[], Any] | None = weakref.ref(obj)
            self._held = None
        else:  # a list, dict, int ...: a value the key must keep
            self._ref = None
            self._held = obj
        self._hash = id(obj)

    @property
    def obj(self) -> Any:
        """The object, or None once a weakly held object was collected."""
        return self._held if self._ref is None else self._ref()

    @property
    def weak(self) -> bool:
        """Whether the object is held weakly."""
        return self._ref is not None

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if type(other) is not IdentityRef:
            return False
        ref = self._ref
        if ref is None:
            return other._ref is None and other._held is self._held
        # Python hands out one plain weak reference per object: the same reference
        # means the same object, alive unless it returns None.
        return ref is other._ref and ref() is not None

    def __repr__(self) -> str:
        obj = self.obj
        if obj is None:
            return "IdentityRef(<collected>)"
        return f"IdentityRef({type(obj).__name__} at {id(obj):#x})"


_VALUE_TYPES = (int, float, complex, bool, str, bytes, type(None), type(Ellipsis))
_MAX_DEPTH = 4


def frozen(x: Any, depth: int = 0) -> Hashable:
    """A hashable key for an option value, comparing what a program depends on.

    Numbers and strings compare by value; tuples, lists and dicts by their items
    (dicts in insertion order, which filters depend on); functions by
    ``callable_identity``; other hashable values by equality; anything else by
    identity.

    Args:
        x: the option value (a number, string, tuple, list, dict, function, filter,
            mesh ...).
        depth: the nesting level reached so far (callers leave it at 0); past four
            levels values compare by identity, so deep or cyclic structures end.

    Raises:
        Unshareable: ``x`` holds a function that no key can name.

    Example:
        >>> from state_core.engine import frozen
        >>> frozen({0: 'a', 1: (2, [3])}) == frozen({0: 'a', 1: (2, [3])})
        True
    """
    t = type(x)
    if t in _VALUE_TYPES:
        return (t, x)
    if depth > _MAX_DEPTH:
        return IdentityRef(x)
    if t is tuple or t is list:
        return (t, tuple(frozen(v, depth + 1) for v in x))
    if t is dict:
        return (t, tuple((frozen(k, depth + 1), frozen(v, depth + 1)) for k, v in x.items()))
    if isinstance(x, (types.FunctionType, types.MethodType, functools.partial)):
        ident = callable_identity(x, depth + 1)
        if ident is None:
            raise Unshareable(x)
        return ident
    hash_method = getattr(t, "__hash__", None)
    if hash_method is None or hash_method is object.__hash__:  # unhashable, or hashed by identity anyway
        return IdentityRef(x)
    try:
        hash(x)
    except TypeError:  # a container of unhashable values: compare by identity
        return IdentityRef(x)
    return (t, x)


def _captured(x: Any, depth: int) -> Hashable:
    """A key for a value a function captured: immutable values by value, the rest by identity.

    A captured list or dict may be mutated between two calls (the function sees
    the change), so unlike ``frozen`` it is compared by identity, not content.
    Such a container cannot be weakly referenced: the key holds it (see
    ``shared_record`` for what that keeps alive).
    """
    t = type(x)
    if t in _VALUE_TYPES:
        return (t, x)
    if t is tuple and depth <= _MAX_DEPTH:
        return (t, tuple(_captured(v, depth + 1) for v in x))
    if isinstance(x, (types.FunctionType, types.MethodType, functools.partial)) and depth <= _MAX_DEPTH:
        ident = callable_identity(x, depth + 1)
        if ident is not None:
            return ident
    return IdentityRef(x)


def callable_identity(fun: Any, depth: int = 0) -> Hashable | None:
    """A key naming what ``fun`` computes, shared by equal callables built at different times.

    A plain function is named by its code and what its closure, defaults and
    keyword defaults hold (so a lambda written inline in a loop is the same
    function every iteration); a bound method by its function and its object; a
    ``functools.partial`` by its function and arguments; an object that names
    itself with ``__engine_identity__()`` (state-aware transformations do) by that;
    any other callable by identity.

    Args:
        fun: the callable to name.
        depth: the nesting level reached so far (callers leave it at 0); captured
            values past four levels compare by identity.

    Returns:
        A hashable key, or None when no key can be made (``fun`` is, or wraps, a
        state-aware transformation whose options cannot be keyed); the caller then
        keeps its programs to itself.

    Example:
        >>> from state_core.engine import callable_identity
        >>> make = lambda k: (lambda x: x * k)
        >>> callable_identity(make(2)) == callable_identity(make(2))
        True
        >>> callable_identity(make(2)) == callable_identity(make(3))
        False
    """
    try:
        own = getattr(fun, "__engine_identity__", None)
        if own is not None and not isinstance(fun, type):
            return own()
        if isinstance(fun, types.MethodType):
            inner = callable_identity(fun.__func__, depth + 1)
            return None if inner is None else ("method", inner, IdentityRef(fun.__self__))
        if isinstance(fun, types.FunctionType):
            # (List comprehensions, and no call for absent defaults: a transformation built
            # inline for every call names its function once per call.)
            closure = fun.__closure__
            cells = (
                tuple([_captured(c.cell_contents, depth + 1) if _cell_is_set(c) else _UNSET for c in closure])
                if closure
                else ()
            )
            defaults, kwdefaults = fun.__defaults__, fun.__kwdefaults__
            return (
                "function",
                fun.__code__,
                IdentityRef(fun.__globals__),
                cells,
                None if defaults is None else _captured(defaults, depth + 1),
                None if kwdefaults is None else tuple([(k, _captured(v, depth + 1)) for k, v in kwdefaults.items()]),
            )
        if isinstance(fun, functools.partial):
            inner = callable_identity(fun.func, depth + 1)
            if inner is None:
                return None
            keywords = tuple((k, _captured(v, depth + 1)) for k, v in fun.keywords.items())
            return ("partial", inner, _captured(fun.args, depth + 1), keywords)
    except Unshareable:
        return None
    return ("object", IdentityRef(fun))


_UNSET = ("unset cell",)


def weak_referents(identity: Hashable) -> Iterator[Any]:
    """The live objects an identity key holds weakly (through ``IdentityRef``), each once.

    Args:
        identity: a key made by ``callable_identity`` / ``frozen`` (nested tuples).
    """
    seen: set[int] = set()
    pending: list[Any] = [identity]
    while pending:  # iterative: keys nest as deep as closures do
        item = pending.pop()
        if type(item) is tuple:
            pending.extend(reversed(item))
        elif type(item) is IdentityRef and item.weak:
            obj = item.obj
            if obj is not None and id(obj) not in seen:
                seen.add(id(obj))
                yield obj
