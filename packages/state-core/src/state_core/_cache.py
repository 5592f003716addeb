"""The one cache of traced programs, shared by every transform object that computes the same thing.

Each state-aware function keeps its programs in a bounded ``TraceCache``
(signature -> ``CacheEntry``). Transform objects are cheap to build, and real
programs build them inline (``grad(loss, grad_states=params)(x)`` in every step of
an eager loop); a fresh object must not pay a fresh trace and XLA compile. So the
cache belongs to *what the transform computes*: ``callable_identity`` names the
function (a bound method by its object and function, a closure by its code and
what it captured), the transform adds its options, and every object with the
same identity finds the same ``FunctionRecord``. ``clear_caches()`` empties all of
them.
"""

from __future__ import annotations

import functools
import itertools
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Any

from ._program import CacheEntry

__all__ = [
    "TraceCache",
    "DEFAULT_CACHE_SIZE",
    "clear_caches",
    "register_cache_owner",
    "FunctionRecord",
    "shared_record",
    "callable_identity",
    "frozen",
    "Unshareable",
    "IdentityRef",
]

#: How many call signatures one transformed function keeps compiled by default.
#: Each holds a compiled XLA program (typically tens of kB to a few MB); the
#: least recently used signature is dropped when a new one would exceed it.
DEFAULT_CACHE_SIZE = 64

#: How many distinct transformed functions keep their programs between objects
#: (least recently used dropped beyond it).
MAX_SHARED_FUNCTIONS = 512

# A process-wide clock for least-recently-used eviction: a hit stamps its entry.
_CLOCK = itertools.count()
_OWNERS: weakref.WeakSet[Any] = weakref.WeakSet()


class TraceCache:
    """``key -> CacheEntry`` with least-recently-used eviction beyond ``maxsize`` entries.

    Lookups never lock: a hit only stamps the entry with a global clock, and
    eviction (which happens only when a new trace is stored, under the owner's
    trace lock) drops the entry with the oldest stamp.

    Args:
        maxsize: how many entries to keep, a positive int (default
            ``DEFAULT_CACHE_SIZE``, 64); storing one more drops the least recently
            used.

    Raises:
        ValueError: ``maxsize`` is not a positive int.

    Example:
        >>> from state_core.engine import TraceCache
        >>> cache = TraceCache(maxsize=2)
        >>> len(cache), cache.maxsize
        (0, 2)
    """

    __slots__ = ("_entries", "maxsize", "_hit", "__weakref__")

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1:
            raise ValueError(f"cache_size must be a positive int, got {maxsize!r}.")
        self._entries: dict[Hashable, CacheEntry[Any]] = {}
        self.maxsize = maxsize
        self._hit: CacheEntry[Any] | None = None  # the entry of the latest hit or put

    def get(self, key: Hashable) -> CacheEntry[Any] | None:
        """The entry of ``key`` (marked as the most recently used), or None.

        Args:
            key: a call signature's cache key (``get_arg_cache_key``).

        Example:
            >>> from types import SimpleNamespace
            >>> from state_core.engine import TraceCache
            >>> cache, entry = TraceCache(), SimpleNamespace()    # stands in for a CacheEntry
            >>> cache.put('k', entry)
            >>> cache.get('k') is entry, cache.get('other')
            (True, None)
        """
        entry = self._entries.get(key)
        if entry is not None and entry is not self._hit:
            self.touch(entry)
        return entry

    def touch(self, entry: CacheEntry[Any]) -> None:
        """Mark ``entry`` (one of this cache's) as the most recently used.

        Callers skip it when ``entry`` is already ``_hit``: repeated hits of the same
        entry keep their first stamp, as no other entry of this cache was stamped in
        between, so the least-recently-used order is the same.

        Args:
            entry: an entry stored in this cache (``put``); its ``last_used`` stamp
                is renewed.

        Example:
            >>> from types import SimpleNamespace
            >>> from state_core.engine import TraceCache
            >>> cache = TraceCache(maxsize=2)
            >>> a, b = SimpleNamespace(), SimpleNamespace()    # stand in for CacheEntry objects
            >>> cache.put('a', a); cache.put('b', b)
            >>> cache.touch(a)                                # 'b' is now the least recently used
            >>> cache.put('c', SimpleNamespace())
            >>> cache.keys()
            ['a', 'c']
        """
        entry.last_used = next(_CLOCK)
        self._hit = entry

    def put(self, key: Hashable, entry: CacheEntry[Any]) -> None:
        """Store ``entry`` under ``key``, dropping the least recently used beyond ``maxsize``.

        Args:
            key: the call signature's cache key; an entry already under it is replaced.
            entry: the ``CacheEntry`` to keep; it becomes the most recently used.

        Example:
            >>> from types import SimpleNamespace
            >>> from state_core.engine import TraceCache
            >>> cache = TraceCache(maxsize=2)
            >>> for key in 'abc':
            ...     cache.put(key, SimpleNamespace())    # stands in for a CacheEntry
            >>> cache.keys()
            ['b', 'c']
        """
        entry.last_used = next(_CLOCK)
        self._hit = entry
        entries = self._entries
        entries[key] = entry
        while len(entries) > self.maxsize:
            oldest = min(entries, key=lambda k: entries[k].last_used)
            del entries[oldest]

    def pop(self, key: Hashable) -> None:
        """Forget ``key`` (nothing happens if it is not cached).

        Args:
            key: the cache key whose entry to drop.

        Example:
            >>> from types import SimpleNamespace
            >>> from state_core.engine import TraceCache
            >>> cache = TraceCache()
            >>> cache.put('k', SimpleNamespace())    # stands in for a CacheEntry
            >>> cache.pop('k'); cache.pop('never stored')
            >>> len(cache)
            0
        """
        self._entries.pop(key, None)
        self._hit = None

    def clear(self) -> None:
        """Forget every entry.

        Example:
            >>> from types import SimpleNamespace
            >>> from state_core.engine import TraceCache
            >>> cache = TraceCache()
            >>> cache.put('k', SimpleNamespace())    # stands in for a CacheEntry
            >>> cache.clear(); len(cache)
            0
        """
        self._entries.clear()
        self._hit = None

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __getitem__(self, key: Hashable) -> CacheEntry[Any]:
        return self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._entries))

    def keys(self) -> list[Hashable]:
        """The cached keys, in insertion order (a copy: safe to iterate while the cache changes).

        Example:
            >>> from types import SimpleNamespace
            >>> from state_core.engine import TraceCache
            >>> cache = TraceCache()
            >>> cache.put('a', SimpleNamespace()); cache.put('b', SimpleNamespace())
            >>> cache.keys()
            ['a', 'b']
        """
        return list(self._entries)

    def values(self) -> list[CacheEntry[Any]]:
        """The cached entries, in the order of ``keys()`` (a copy).

        Example:
            >>> from types import SimpleNamespace
            >>> from state_core.engine import TraceCache
            >>> cache, entry = TraceCache(), SimpleNamespace()    # stands in for a CacheEntry
            >>> cache.put('a', entry)
            >>> cache.values() == [entry]
            True
        """
        return list(self._entries.values())

    def items(self) -> list[tuple[Hashable, CacheEntry[Any]]]:
        """``(key, entry)`` pairs, in the order of ``keys()`` (a copy).

        Example:
            >>> from types import SimpleNamespace
            >>> from state_core.engine import TraceCache
            >>> cache, entry = TraceCache(), SimpleNamespace()    # stands in for a CacheEntry
            >>> cache.put('a', entry)
            >>> cache.items() == [('a', entry)]
            True
        """
        return list(self._entries.items())


class FunctionRecord:
    """The programs of one transformed function, shared by every object that computes it.

    Attributes:
        cache: its ``TraceCache``.
        trace_lock: serialises tracing of the function (cached calls never take it).
            Re-entrant, because the function may call itself while traced.
        learned: what the transform's strategy remembers between signatures (for
            example the axis a mapping stacked an undeclared state on).

    Args:
        maxsize: the ``maxsize`` of its ``TraceCache``: how many call signatures
            stay compiled (default ``DEFAULT_CACHE_SIZE``, 64).

    Example:
        >>> from state_core.engine import FunctionRecord
        >>> record = FunctionRecord(8)
        >>> record.cache.maxsize, record.learned
        (8, {})
    """

    __slots__ = ("cache", "trace_lock", "learned", "__weakref__")

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        self.cache = TraceCache(maxsize)
        self.trace_lock = threading.RLock()
        self.learned: dict[Any, Any] = {}

    def clear_cache(self) -> None:
        """Forget every traced signature and what the strategy learned.

        Example:
            >>> from state_core.engine import FunctionRecord
            >>> record = FunctionRecord()
            >>> record.learned['axis'] = 0
            >>> record.clear_cache(); record.learned, len(record.cache)
            ({}, 0)
        """
        with self.trace_lock:
            self.cache.clear()
            self.learned.clear()


_REGISTRY: OrderedDict[Hashable, FunctionRecord] = OrderedDict()
_REGISTRY_LOCK = threading.Lock()


def shared_record(identity: Hashable) -> FunctionRecord:
    """The ``FunctionRecord`` of the transformed function named by ``identity`` (made on first use).

    The registry keeps the ``MAX_SHARED_FUNCTIONS`` most recently used records;
    an object that holds a dropped record keeps using it.

    Args:
        identity: a hashable key naming what the transformed function computes:
            usually ``StatefulFunction.__engine_identity__()`` (its class,
            ``callable_identity`` of its function and its options).

    Example:
        >>> from state_core.engine import shared_record
        >>> shared_record(('example', 1)) is shared_record(('example', 1))
        True
    """
    record = _REGISTRY.get(identity)  # a plain read: no lock when it is there
    if record is not None:
        return record
    with _REGISTRY_LOCK:
        record = _REGISTRY.get(identity)
        if record is None:
            record = _REGISTRY[identity] = FunctionRecord()
            register_cache_owner(record)
            while len(_REGISTRY) > MAX_SHARED_FUNCTIONS:
                _REGISTRY.popitem(last=False)
        else:
            _REGISTRY.move_to_end(identity)
    return record


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

    It holds the object, so its ``id`` cannot be reused while the reference lives.

    Args:
        obj: any object, hashable or not; it is kept alive by the reference.

    Example:
        >>> from state_core.engine import IdentityRef
        >>> a, b = [1], [1]
        >>> IdentityRef(a) == IdentityRef(a), IdentityRef(a) == IdentityRef(b)
        (True, False)
    """

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IdentityRef) and other.obj is self.obj

    def __repr__(self) -> str:
        return f"IdentityRef({type(self.obj).__name__} at {id(self.obj):#x})"


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
            cells = tuple(
                _captured(c.cell_contents, depth + 1) if _cell_is_set(c) else _UNSET for c in fun.__closure__ or ()
            )
            kwdefaults = fun.__kwdefaults__
            return (
                "function",
                fun.__code__,
                IdentityRef(fun.__globals__),
                cells,
                _captured(fun.__defaults__, depth + 1),
                None if kwdefaults is None else tuple((k, _captured(v, depth + 1)) for k, v in kwdefaults.items()),
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


def _cell_is_set(cell: Any) -> bool:
    try:
        _ = cell.cell_contents  # reading it is the test
    except ValueError:  # a closure variable that is not bound yet
        return False
    return True


def register_cache_owner(owner: Any) -> None:
    """Let ``clear_caches()`` reach ``owner``; it is held weakly (registering keeps nothing alive).

    Args:
        owner: any weak-referenceable object with a ``clear_cache()`` method
            (a ``StatefulFunction``, a ``FunctionRecord``).

    Example:
        >>> from state_core import clear_caches
        >>> from state_core.engine import FunctionRecord, register_cache_owner
        >>> record = FunctionRecord()
        >>> record.learned['axis'] = 0
        >>> register_cache_owner(record)
        >>> clear_caches(); record.learned
        {}
    """
    _OWNERS.add(owner)


def clear_caches() -> None:
    """Forget every traced and compiled program of every state-aware function in this process.

    The functions stay usable: their next call traces again. Use it to release
    memory, or after changing something a cached program baked in.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction, clear_caches
        >>> s = State(jnp.zeros(()))
        >>> f = StatefulFunction(lambda: s.value + 1)
        >>> _ = f()
        >>> clear_caches()
        >>> len(f._cache)
        0
    """
    with _REGISTRY_LOCK:
        _REGISTRY.clear()
    for owner in list(_OWNERS):
        owner.clear_cache()
