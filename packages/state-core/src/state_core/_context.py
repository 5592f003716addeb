"""Thread-local bookkeeping shared by states and trace stacks.

JAX traces are per thread, so the stack of active ``StateTraceStack`` objects,
the strict-mode counter and the values a trace puts into states are too.
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any

__all__ = ["CTX", "OPEN_STACKS", "GENERATION", "PRIVATE_THREADS", "PRIVATE_LOCK", "user_call_site", "user_stacklevel"]


class _Context(threading.local):
    def __init__(self) -> None:
        self.stacks: list[Any] = []  # active StateTraceStack objects, outermost first
        self.catchers: list[Any] = []  # active catch_new_states blocks
        self.strict: int = 0  # >0 inside ``strict_state_checks()``
        # ``state -> value`` seen only by this thread while it traces (see
        # ``_trace.private_state_values``); ``None`` when the thread is not tracing.
        self.overlay: dict[Any, Any] | None = None
        # Engine markers that make a trace context differ (``_signature.pushed_context``).
        self.markers: tuple[Any, ...] = ()


CTX = _Context()


class _OpenStacks:
    """How many ``StateTraceStack`` blocks are open right now, over all threads.

    At zero no thread traces, so no thread has ``CTX.stacks``: a hot path that
    reads ``OPEN_STACKS.value`` first (a plain attribute) skips the thread-local
    lookup, which costs several times more. A thread's own blocks are counted
    before they open and after they close, so a thread that has stacks never
    sees zero.
    """

    __slots__ = ("value", "lock")

    def __init__(self) -> None:
        self.value = 0
        self.lock = threading.Lock()  # (``+=`` is not atomic between threads)

    def add(self, n: int) -> None:
        with self.lock:
            self.value += n


OPEN_STACKS = _OpenStacks()

# How many threads have an overlay right now. While it is non-zero ``State`` carries
# a ``_value`` property that looks at the thread-local overlay; at zero the property
# is removed, so eager code and cached calls read a plain attribute.
PRIVATE_THREADS = [0]
PRIVATE_LOCK = threading.Lock()


class _Generation:
    """How many States were ever created (process-wide).

    Engines compare it with the value they saw when tracing: while it is
    unchanged, no object graph can hold a State the trace did not see, so the
    graph need not be walked again.
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


GENERATION = _Generation()
"""The process-wide count of States ever created, in ``GENERATION.value``.

An engine that cached the States of an object graph compares it with the value it
saw then: while it is unchanged, no new State exists, so the graph need not be
walked again.
"""

_SKIPPED_MODULES = ("state_core", "state_random", "state_transform", "state_nn", "jax", "contextlib")


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` that points at the innermost frame that is neither ours nor JAX's.

    Called from the function that warns; a warning raised through any number of
    library frames then names the user's line.

    Example:
        >>> import warnings
        >>> from state_core.engine import user_stacklevel
        >>> def library_function():
        ...     warnings.warn("careful", UserWarning, stacklevel=user_stacklevel())
        >>> user_stacklevel() >= 1
        True
    """
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.split(".", 1)[0] not in _SKIPPED_MODULES:
            return level
        frame = frame.f_back
        level += 1
    return level


def user_call_site() -> str:
    """``file:line`` of the innermost frame that is neither ours nor JAX's."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.split(".", 1)[0] not in _SKIPPED_MODULES:
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown location>"
