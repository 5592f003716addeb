"""Contexts that belong to a call's signature: the engine's registration point for them.

A setting a traced function reads from outside its arguments (``state_core.environ``'s
``dt``, a framework's own ``train`` / ``eval`` flag) becomes a constant of the
compiled program, so a cached program may be reused only while the setting keeps
the value it had when the program was traced. The engine knows no such setting: a
module that provides one registers a *recorder* here, and every state-aware
transformation then traces inside it and checks it before reusing a program.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from typing import Any

__all__ = ["register_call_context", "recording_call_contexts", "call_contexts_unchanged"]

#: ``(record, unchanged)`` pairs: ``record()`` is a context manager yielding what the
#: traced code read (falsy when nothing), ``unchanged(reads)`` says whether it still holds.
_CONTEXTS: list[tuple[Callable[[], ContextManager[Any]], Callable[[Any], bool]]] = []


def register_call_context(
    record: Callable[[], ContextManager[Any]], unchanged: Callable[[Any], bool]
) -> Callable[[], None]:
    """Make every state-aware transformation key its programs by a context's settings.

    Register once, when the module that provides the settings is imported.

    Args:
        record: a context manager factory: inside ``with record() as reads`` the
            settings the traced code reads are recorded into ``reads`` (any
            object, falsy when nothing was read).
        unchanged: ``unchanged(reads)`` is True while every recorded setting still
            has its recorded value; called on every cached call that read some, so
            keep it cheap.

    Returns:
        A function that takes the registration back.

    Example:
        >>> import contextlib
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction
        >>> from state_core.engine import register_call_context
        >>> MODE = {'train': True}
        >>> @contextlib.contextmanager
        ... def record():
        ...     reads = {}
        ...     MODE['reads'] = reads
        ...     yield reads
        ...     del MODE['reads']
        >>> def read_train():                 # how the framework's code reads the flag
        ...     if 'reads' in MODE:
        ...         MODE['reads']['train'] = MODE['train']
        ...     return MODE['train']
        >>> unregister = register_call_context(record, lambda reads: reads['train'] == MODE['train'])
        >>> scale = State(jnp.ones(()))
        >>> f = StatefulFunction(lambda x: x * scale.value * (2.0 if read_train() else 1.0))
        >>> float(f(3.0))
        6.0
        >>> MODE['train'] = False            # the program read the flag: traced again
        >>> float(f(3.0))
        3.0
        >>> unregister()
    """
    entry = (record, unchanged)
    _CONTEXTS.append(entry)

    def unregister() -> None:
        if entry in _CONTEXTS:
            _CONTEXTS.remove(entry)

    return unregister


@contextlib.contextmanager
def recording_call_contexts() -> Iterator[list[tuple[Callable[[Any], bool], Any]]]:
    """Record every registered context while a function is traced (the engine's side).

    Yields a list that, once the block ends, holds ``(unchanged, reads)`` for each
    context the traced code read; empty when it read none.
    """
    found: list[tuple[Callable[[Any], bool], Any]] = []
    with contextlib.ExitStack() as stack:
        pending = [(unchanged, stack.enter_context(record())) for record, unchanged in _CONTEXTS]
        yield found
    found.extend((unchanged, reads) for unchanged, reads in pending if reads)


def call_contexts_unchanged(reads: list[tuple[Callable[[Any], bool], Any]]) -> bool:
    """Whether every context a program read still has the values it was traced with."""
    for unchanged, recorded in reads:  # noqa: SIM110  # every cached call: a loop, not a generator
        if not unchanged(recorded):
            return False
    return True
