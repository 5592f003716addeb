"""A process-wide on/off setting that a ``with`` block overrides in its own thread."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["Switch"]


class _Override(threading.local):
    value: bool | None = None  # (a thread that never entered a block reads this class default)


class Switch:
    """One setting: a process-wide default, and this thread's override inside a block.

    Args:
        default: the setting until ``set`` changes it.
        name: how messages name the block function (``'donation'``); ``set``'s
            messages name ``set_<name>``.
    """

    __slots__ = ("default", "name", "_override", "_open_blocks", "_lock", "on_everywhere")

    def __init__(self, default: bool, name: str) -> None:
        self.default = default
        self.name = name
        self._override = _Override()
        self._open_blocks = 0
        self._lock = threading.Lock()
        # True while the default is on and no thread is inside a block: a hot path reads
        # this plain attribute and asks ``on()`` (a thread-local lookup) only when it is False.
        # A thread's own block is counted before it takes effect and after it ends, so
        # inside a block this thread never sees True.
        self.on_everywhere = default

    def on(self) -> bool:
        """The setting here and now: this thread's block if any, else the process default."""
        override = self._override.value
        return self.default if override is None else override

    def set(self, enabled: bool) -> None:
        """Change the process default (what every thread outside a block sees)."""
        enabled = _checked(enabled, f"set_{self.name}")
        with self._lock:
            self.default = enabled
            self.on_everywhere = enabled and not self._open_blocks

    @contextlib.contextmanager
    def block(self, enabled: bool) -> Iterator[None]:
        """Override the setting inside a ``with`` block, in this thread only."""
        _checked(enabled, self.name)
        self._count_block(+1)
        before = self._override.value
        self._override.value = enabled
        try:
            yield
        finally:
            self._override.value = before
            self._count_block(-1)

    def _count_block(self, step: int) -> None:
        with self._lock:
            self._open_blocks += step
            self.on_everywhere = self.default and not self._open_blocks


def _checked(enabled: object, who: str) -> bool:
    if not isinstance(enabled, bool):
        raise TypeError(f"{who}: enabled must be a bool, got {type(enabled).__name__}.")
    return enabled
