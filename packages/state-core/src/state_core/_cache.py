"""Bounded per-function caches of traced programs, and the switch that empties them all."""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Iterator
from typing import Any

from ._replay import _CLOCK, TracedCall

__all__ = ["TraceCache", "DEFAULT_CACHE_SIZE", "clear_caches", "register_cache_owner"]

#: How many call signatures one transformed function keeps compiled by default.
#: Each holds a compiled XLA program (typically tens of kB to a few MB); the
#: least recently used signature is dropped when a new one would exceed it.
DEFAULT_CACHE_SIZE = 64

_OWNERS: weakref.WeakSet[Any] = weakref.WeakSet()


class TraceCache:
    """``key -> TracedCall`` with least-recently-used eviction beyond ``maxsize`` entries.

    Lookups never lock: a hit only stamps the entry with a global clock, and
    eviction (which happens only when a new trace is stored, under the owner's
    trace lock) drops the entry with the oldest stamp.

    Example:
        >>> from state_core.engine import TraceCache
        >>> cache = TraceCache(maxsize=2)
        >>> len(cache), cache.maxsize
        (0, 2)
    """

    __slots__ = ("_entries", "maxsize", "_hit")

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1:
            raise ValueError(f"cache_size must be a positive int, got {maxsize!r}.")
        self._entries: dict[Hashable, TracedCall] = {}
        self.maxsize = maxsize
        self._hit: TracedCall | None = None  # the entry of the latest hit or put

    def get(self, key: Hashable) -> TracedCall | None:
        """The entry of ``key`` (marked as the most recently used), or None."""
        entry = self._entries.get(key)
        if entry is not None and entry is not self._hit:
            self.touch(entry)
        return entry

    def touch(self, entry: TracedCall) -> None:
        """Mark ``entry`` (one of this cache's) as the most recently used.

        Callers skip it when ``entry`` is already ``_hit``: repeated hits of the same
        entry keep their first stamp, as no other entry of this cache was stamped in
        between, so the least-recently-used order is the same.
        """
        entry.last_used = next(_CLOCK)
        self._hit = entry

    def put(self, key: Hashable, entry: TracedCall) -> None:
        entry.last_used = next(_CLOCK)
        self._hit = entry
        entries = self._entries
        entries[key] = entry
        while len(entries) > self.maxsize:
            oldest = min(entries, key=lambda k: entries[k].last_used)
            del entries[oldest]

    def pop(self, key: Hashable) -> None:
        self._entries.pop(key, None)
        self._hit = None

    def clear(self) -> None:
        self._entries.clear()
        self._hit = None

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __getitem__(self, key: Hashable) -> TracedCall:
        return self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._entries))

    def keys(self) -> list[Hashable]:
        return list(self._entries)

    def values(self) -> list[TracedCall]:
        return list(self._entries.values())

    def items(self) -> list[tuple[Hashable, TracedCall]]:
        return list(self._entries.items())


def register_cache_owner(owner: Any) -> None:
    """Let ``clear_caches()`` reach ``owner`` (anything with a ``clear_cache()`` method); held weakly."""
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
    for owner in list(_OWNERS):
        owner.clear_cache()
