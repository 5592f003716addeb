"""The registry of shared programs, which keeps no user object alive.

Transform objects are cheap to build and real programs build them inline, so
equal objects share one ``FunctionRecord`` (its traced and compiled programs),
found by identity (``callable_identity`` of the function plus the options). The
registry must not keep what the programs belong to alive: a user who drops a
model expects its device buffers back.

So a record is kept alive by the States its programs use, not by the registry:
each such State holds the record (``_kept_records``), and the registry holds it
weakly. A dropped model takes its States and their records with it (State and
record refer to each other, a cycle Python's collector frees); while the model
lives, a transform built afresh in every step finds its programs. A record whose
programs use no State (a pure function) is held by the registry itself, among
the ``MAX_SHARED_FUNCTIONS`` most recently used. And when an object the identity
holds weakly (a captured model, a bound method's object, a State) is collected,
its record leaves the registry at once: no later call can name it again.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

from ._cache import FunctionRecord, clear_owner_caches, register_cache_owner
from ._identity import weak_referents
from ._state import State

__all__ = ["shared_record", "keep_alive_with", "MAX_SHARED_FUNCTIONS", "forget_shared_records", "clear_caches"]

#: How many distinct transformed functions the registry knows at once (least recently
#: used forgotten beyond it; an object already holding a record keeps using it).
MAX_SHARED_FUNCTIONS = 512

#: The attribute of a State that holds the records whose programs use it.
_KEPT = "_kept_records"


class _Slot:
    """A registry entry: its record (strongly until a State keeps it, then weakly)."""

    __slots__ = ("identity", "held", "ref", "keepers", "watchers", "__weakref__")

    def __init__(self, identity: Hashable, record: FunctionRecord) -> None:
        self.identity = identity
        self.held: FunctionRecord | None = record
        self.ref = weakref.ref(record)
        self.keepers: list[weakref.ref[State[Any]]] = []  # the States that hold the record
        self.watchers: list[weakref.ref[Any]] = []  # the identity's weakly held objects


_REGISTRY: OrderedDict[Hashable, _Slot] = OrderedDict()
_REGISTRY_LOCK = threading.Lock()
_DEAD: list[_Slot] = []  # slots whose identity lost an object, forgotten at the next chance


def shared_record(identity: Hashable) -> FunctionRecord:
    """The ``FunctionRecord`` of the transformed function named by ``identity`` (made on first use).

    The record lives as long as the States its programs use (``keep_alive_with``)
    or, for a function whose programs use none, among the ``MAX_SHARED_FUNCTIONS``
    most recently used; it is forgotten as soon as an object ``identity`` holds
    weakly is collected. An object that holds a forgotten record keeps using it.

    Args:
        identity: a hashable key naming what the transformed function computes:
            usually ``StatefulFunction.__engine_identity__()`` (its class,
            ``callable_identity`` of its function and its options).
    """
    slot = _REGISTRY.get(identity)  # a plain read: no lock when it is there
    if slot is not None:
        record = slot.ref()
        if record is not None:
            return record
    with _REGISTRY_LOCK:
        _forget_dead()
        slot = _REGISTRY.get(identity)
        record = None if slot is None else slot.ref()
        if record is None:
            if slot is not None:
                _drop(slot)
            record = FunctionRecord()
            record.slot = slot = _Slot(identity, record)
            _watch(slot, identity)
            _REGISTRY[identity] = slot
            register_cache_owner(record)
            while len(_REGISTRY) > MAX_SHARED_FUNCTIONS:
                _drop(_REGISTRY.popitem(last=False)[1], popped=True)
        else:
            _REGISTRY.move_to_end(identity)
    return record


def keep_alive_with(record: FunctionRecord, states: Iterable[State[Any]]) -> None:
    """Let ``states`` keep ``record`` alive (a shared record its new program uses them in).

    Called when a program is cached; a record of one object's own (not shared)
    needs nothing. Once a State keeps it, the registry holds the record weakly.

    Args:
        record: the record the program was cached in.
        states: the States the program reads or writes (``Trace.states``).
    """
    slot = record.slot
    if slot is None:
        return
    for state in states:
        attrs = state.__dict__
        kept = attrs.get(_KEPT)
        if kept is None:
            kept = attrs.setdefault(_KEPT, set())  # atomic: another thread may add one too
        if record not in kept:
            kept.add(record)
            slot.keepers.append(weakref.ref(state))
    if slot.keepers:
        slot.held = None


def forget_shared_records() -> None:
    """Forget every shared record (``clear_caches`` calls it)."""
    with _REGISTRY_LOCK:
        while _REGISTRY:
            _drop(_REGISTRY.popitem()[1], popped=True)
        _DEAD.clear()


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
    forget_shared_records()
    clear_owner_caches()


def _watch(slot: _Slot, identity: Hashable) -> None:
    """Forget ``slot`` when any object its identity holds weakly is collected."""
    slot_ref = weakref.ref(slot)

    def collected(_: Any) -> None:
        # Runs wherever the collector runs, perhaps while this thread holds the lock.
        dead = slot_ref()
        if dead is None:
            return
        _DEAD.append(dead)
        if _REGISTRY_LOCK.acquire(blocking=False):
            try:
                _forget_dead()
            finally:
                _REGISTRY_LOCK.release()

    slot.watchers = [weakref.ref(obj, collected) for obj in weak_referents(identity)]


def _forget_dead() -> None:
    """Drop the slots whose identity lost an object (the caller holds the lock)."""
    while _DEAD:
        _drop(_DEAD.pop())


def _drop(slot: _Slot, popped: bool = False) -> None:
    """Take ``slot`` out of the registry and out of the States that keep its record."""
    if not popped and _REGISTRY.get(slot.identity) is slot:
        del _REGISTRY[slot.identity]
    record = slot.ref()
    if record is not None:
        for keeper in slot.keepers:
            state = keeper()
            if state is not None:
                state.__dict__.get(_KEPT, set()).discard(record)
        if record.slot is slot:
            record.slot = None
    slot.keepers.clear()
    slot.watchers.clear()
    slot.held = None
