"""The bounded cache of traced programs of one transformed function (``FunctionRecord``).

Each state-aware function keeps its programs in a bounded ``TraceCache``
(signature -> ``CacheEntry``), inside a ``FunctionRecord`` that every transform
object computing the same thing shares (``_registry.shared_record``).
"""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from ._jax_internals import ArrayImpl, each_on_one_device
from ._program import LRU_CLOCK, CacheEntry
from ._steady_call import UNROLLED_UP_TO, DirectCall, no_direct_call

if TYPE_CHECKING:
    from ._registry import _Slot

__all__ = ["TraceCache", "DEFAULT_CACHE_SIZE", "register_cache_owner", "FunctionRecord", "clear_owner_caches"]

DEFAULT_CACHE_SIZE = 64
"""How many call signatures one transformed function keeps compiled by default (64).

Each holds a compiled XLA program (typically tens of kB to a few MB); the least
recently used signature is dropped when a new one would exceed it. A function
given its own ``cache_size`` (``StatefulFunction``, ``jit``) keeps that many.

Example:
    >>> import jax.numpy as jnp
    >>> from state_core import StatefulFunction
    >>> from state_core.engine import DEFAULT_CACHE_SIZE
    >>> DEFAULT_CACHE_SIZE
    64
    >>> f = StatefulFunction(lambda x: x + 1, cache_size=2)
    >>> for n in range(3):                  # three signatures: the first is dropped
    ...     _ = f(jnp.zeros(n))
    >>> f
    StatefulFunction(<lambda>, 2 cached signature(s))
"""

_OWNERS: weakref.WeakSet[Any] = weakref.WeakSet()
_NO_AVAL: tuple[Any, None] = (object(), None)  # matches no argument's aval

DIRECT_CALLS = 2
"""How many signatures of one cache get direct calls (``TraceCache.use_direct``); a call passes at most that many."""


class _DirectPart(NamedTuple):
    """One direct call of a cache: its entry, the argument avals it serves, itself, and where it sends other calls."""

    entry: CacheEntry[Any]
    arg_avals: list[Any]
    call: DirectCall
    then: list[DirectCall]


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
    """

    __slots__ = (
        "_entries",
        "maxsize",
        "_hit",
        "_by_aval",
        "_aval_hit",
        "_direct",
        "_direct_parts",
        "_wants_direct",
        "__weakref__",
    )

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1:
            raise ValueError(f"cache_size must be a positive int, got {maxsize!r}.")
        self._entries: dict[Hashable, CacheEntry[Any]] = {}
        self.maxsize = maxsize
        # The entry of the latest hit or put, in a cell the direct calls update too.
        self._hit: list[CacheEntry[Any] | None] = [None]
        self._by_aval: dict[int, tuple[Any, CacheEntry[Any]]] = {}
        # The pair of ``_by_aval`` the latest call found (one attribute, so a reader in
        # another thread sees an aval with its own entry): a call with the same aval
        # object as the one before finds its entry without hashing.
        self._aval_hit: tuple[Any, CacheEntry[Any] | None] = _NO_AVAL
        # The first direct call (``use_direct``), every direct call newest first, and
        # whether the next steady call should set one up.
        self._direct: DirectCall | None = None
        self._direct_parts: list[_DirectPart] = []
        self._wants_direct = True

    def get(self, key: Hashable) -> CacheEntry[Any] | None:
        """The entry of ``key`` (marked as the most recently used), or None.

        Args:
            key: a call signature's cache key (``get_arg_cache_key``).
        """
        entry = self._entries.get(key)
        if entry is not None and entry is not self._hit[0]:
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
        """
        entry.last_used = next(LRU_CLOCK)
        self._hit[0] = entry

    def remember_aval(self, aval: Any, entry: CacheEntry[Any]) -> None:
        """Let a call whose one argument is an array with this very ``aval`` object find ``entry`` by identity.

        ``_by_aval`` maps ``id(aval)`` to ``(aval, entry)`` (the aval is kept alive, so
        its id is not reused). Arrays made by one compiled program share their aval
        object from call to call, so a steady call finds its entry with one identity
        test instead of building and hashing its key. At most ``maxsize`` avals are
        kept; storing or dropping any entry forgets them all.

        Args:
            aval: the argument's ``aval``.
            entry: the entry found under that aval's key (already in this cache).
        """
        known = self._by_aval
        if len(known) >= self.maxsize:
            known.clear()
        known[id(aval)] = self._aval_hit = (aval, entry)

    def forget_avals(self) -> None:
        """Forget every aval ``remember_aval`` stored, and the direct call: calls find their entries by key again."""
        self._aval_hit = _NO_AVAL
        self._by_aval.clear()
        self._direct = None
        self._direct_parts = []
        self._wants_direct = True

    def use_direct(self, entry: CacheEntry[Any], args: tuple[Any, ...]) -> None:
        """Let calls with these positional arrays' avals run ``entry`` through its direct call.

        Called after a steady call of ``entry`` with the positional arguments
        ``args`` and no keyword arguments. The new direct call comes first; calls it
        does not serve go on to the direct call of the cache's other entry, if any.
        A cache holding more than ``DIRECT_CALLS`` entries, an entry without a
        direct call (``CacheEntry.direct_maker``), arguments that are not all
        arrays on one device each, and the avals of a direct call already made (it
        missed for another reason) leave things as they are. When a call finds the
        direct calls stale, ``StatefulFunction.__call__`` sets ``_wants_direct``
        again.

        Args:
            entry: the entry that just ran, found by the arguments' signature.
            args: that call's positional arguments.
        """
        self._wants_direct = False
        maker = entry.direct_maker
        if maker is None or len(self._entries) > DIRECT_CALLS or len(args) > UNROLLED_UP_TO:
            return
        for arg in args:
            if type(arg) is not ArrayImpl:
                return
        avals = [arg.aval for arg in args]
        chain = self._direct_parts
        for part in chain:
            if part.entry is entry and all(map(operator.is_, avals, part.arg_avals)):
                return
        # Arguments with these very avals lie on one device each when these do (no aval
        # is shared between a value on one device and one spread over several), so the
        # direct call never asks their placement.
        if not each_on_one_device(args):
            return
        then: list[DirectCall] = [no_direct_call]
        direct = maker(entry, avals, then, self._hit)
        if direct is None:
            return
        # (Each direct call serves its own entry: the other entry's goes after it, and the
        # chain ends there, so no call runs through more than two.)
        others = [part for part in chain if part.entry is not entry][: DIRECT_CALLS - 1]
        if others:
            then[0] = others[0].call
            others[0].then[0] = no_direct_call
        self._direct_parts = [_DirectPart(entry, avals, direct, then), *others]
        self._direct = direct

    def put(self, key: Hashable, entry: CacheEntry[Any]) -> None:
        """Store ``entry`` under ``key``, dropping the least recently used beyond ``maxsize``.

        Args:
            key: the call signature's cache key; an entry already under it is replaced.
            entry: the ``CacheEntry`` to keep; it becomes the most recently used.
        """
        entry.last_used = next(LRU_CLOCK)
        self._hit[0] = entry
        self.forget_avals()
        entries = self._entries
        entries[key] = entry
        while len(entries) > self.maxsize:
            oldest = min(entries, key=lambda k: entries[k].last_used)
            del entries[oldest]

    def pop(self, key: Hashable) -> None:
        """Forget ``key`` (nothing happens if it is not cached).

        Args:
            key: the cache key whose entry to drop.
        """
        self._entries.pop(key, None)
        self._hit[0] = None
        self.forget_avals()

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()
        self._hit[0] = None
        self.forget_avals()

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __getitem__(self, key: Hashable) -> CacheEntry[Any]:
        return self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._entries))

    def keys(self) -> list[Hashable]:
        """The cached keys, in insertion order (a copy: safe to iterate while the cache changes)."""
        return list(self._entries)

    def values(self) -> list[CacheEntry[Any]]:
        """The cached entries, in the order of ``keys()`` (a copy)."""
        return list(self._entries.values())

    def items(self) -> list[tuple[Hashable, CacheEntry[Any]]]:
        """``(key, entry)`` pairs, in the order of ``keys()`` (a copy)."""
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
    """

    __slots__ = ("cache", "trace_lock", "learned", "slot", "__weakref__")

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        self.cache = TraceCache(maxsize)
        self.trace_lock = threading.RLock()
        self.learned: dict[Any, Any] = {}
        self.slot: _Slot | None = None  # its place in the shared registry, if it has one

    def clear_cache(self) -> None:
        """Forget every traced signature and what the strategy learned."""
        with self.trace_lock:
            self.cache.clear()
            self.learned.clear()


def register_cache_owner(owner: Any) -> None:
    """Let ``clear_caches()`` reach ``owner``; it is held weakly (registering keeps nothing alive).

    Args:
        owner: any weak-referenceable object with a ``clear_cache()`` method
            (a ``StatefulFunction``, a ``FunctionRecord``).
    """
    _OWNERS.add(owner)


def clear_owner_caches() -> None:
    """Empty the caches of every registered owner (``register_cache_owner``)."""
    for owner in list(_OWNERS):
        owner.clear_cache()
