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

    __slots__ = ("default", "name", "_override")

    def __init__(self, default: bool, name: str) -> None:
        self.default = default
        self.name = name
        self._override = _Override()

    def on(self) -> bool:
        """The setting here and now: this thread's block if any, else the process default."""
        override = self._override.value
        return self.default if override is None else override

    def set(self, enabled: bool) -> None:
        """Change the process default (what every thread outside a block sees)."""
        self.default = _checked(enabled, f"set_{self.name}")

    @contextlib.contextmanager
    def block(self, enabled: bool) -> Iterator[None]:
        """Override the setting inside a ``with`` block, in this thread only."""
        _checked(enabled, self.name)
        before = self._override.value
        self._override.value = enabled
        try:
            yield
        finally:
            self._override.value = before


def _checked(enabled: object, who: str) -> bool:
    if not isinstance(enabled, bool):
        raise TypeError(f"{who}: enabled must be a bool, got {type(enabled).__name__}.")
    return enabled
