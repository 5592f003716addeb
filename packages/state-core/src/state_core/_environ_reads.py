"""Which ``state_core.environ`` settings a traced function read: the cache key of its program."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

from ._call_contexts import register_call_context
from ._environ import _LOCAL, _lookup
from ._jax_internals import is_tracer

__all__ = ["record_reads", "reads_unchanged"]


@contextlib.contextmanager
def record_reads() -> Iterator[dict[str, Any]]:
    """Record the settings read inside the block that come from outside it (for transformation authors).

    A value read while a function is traced becomes a constant of the compiled
    program, so a transformation that caches programs should trace inside this
    block, keep the dict it yields (``key -> value``, ``<unset>`` for settings read
    while unset) and reuse a program only while ``reads_unchanged(reads)``.
    Values set by ``context`` blocks opened inside the recorded region belong to
    the traced function itself and are not recorded.

    Yields:
        The dict of reads, filled while the block runs.

    Example:
        >>> from state_core import environ
        >>> with environ.context(dt=0.1):
        ...     with environ.record_reads() as reads:
        ...         with environ.context(t=1.0):
        ...             _ = environ.get('t'), environ.get_dt(), environ.get('fit', False)
        >>> reads
        {'dt': 0.1, 'fit': <unset>}
    """
    local = _LOCAL
    entry: tuple[int, dict[str, Any]] = (local.depth, {})
    local.recorders.append(entry)
    try:
        yield entry[1]
    finally:
        local.recorders.remove(entry)


def reads_unchanged(reads: dict[str, Any]) -> bool:
    """Whether every setting in ``reads`` (from ``record_reads``) still has the recorded value.

    Numbers, strings and other hashable plain values compare by value; arrays and
    quantities by type, shape, dtype, unit and elements; tracers only by identity.

    Args:
        reads: ``{setting: value}`` as yielded by a ``record_reads()`` block; a
            setting read while unset is recorded as ``<unset>``, so setting it
            later counts as a change.

    Example:
        >>> from state_core import environ
        >>> with environ.record_reads() as reads:
        ...     _ = environ.get('fit', True)
        >>> environ.reads_unchanged(reads)
        True
        >>> with environ.context(fit=False):
        ...     environ.reads_unchanged(reads)
        False
    """
    local = _LOCAL
    for key, value in reads.items():
        current = _lookup(local, key)[0]
        if not _same_value(current, value):
            return False
    return True


def _same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (bool, int, float, complex, str, bytes, type(None))):
        return bool(a == b)
    a_leaves, a_def = jax.tree.flatten(a)
    b_leaves, b_def = jax.tree.flatten(b)
    if a_def != b_def:  # type: ignore[operator]  # jaxlib PyTreeDef stub not found
        return False
    return all(_same_leaf(x, y) for x, y in zip(a_leaves, b_leaves, strict=True))


def _same_leaf(x: Any, y: Any) -> bool:
    if x is y:
        return True
    if is_tracer(x) or is_tracer(y):
        return False
    if isinstance(x, (np.ndarray, np.generic, jax.Array)) and isinstance(y, (np.ndarray, np.generic, jax.Array)):
        return bool(x.shape == y.shape and x.dtype == y.dtype and np.array_equal(np.asarray(x), np.asarray(y)))
    if isinstance(x, (bool, int, float, complex, str)) and type(x) is type(y):
        return bool(x == y)
    return False


# Every state-aware transformation keys its programs by the settings they read.
register_call_context(record_reads, reads_unchanged)
