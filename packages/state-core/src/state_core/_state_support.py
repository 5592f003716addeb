"""Helpers of ``State``: write-check modes and messages, tags, creation sites, abstract-value text."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from types import FrameType
from typing import Any

import jax
import numpy as np

from ._context import CTX
from ._jax_internals import is_tracer

__all__ = ["strict_state_checks", "check_state_value_tree"]


@contextlib.contextmanager
def strict_state_checks() -> Iterator[None]:
    """Within this block every ``State`` write must keep each leaf's shape and dtype.

    By default a write may change shapes and dtypes (models resize states in
    ``reset_state(batch_size)``; mapping transforms add axes).  Strict mode turns
    such changes into a ``ValueError`` that shows both avals.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, strict_state_checks
        >>> s = State(jnp.zeros(3), name='buffer')
        >>> with strict_state_checks():
        ...     s.value = jnp.ones(3)      # same shape and dtype: fine
        >>> s.value
        Array([1., 1., 1.], dtype=float32)
    """
    CTX.strict += 1
    try:
        yield
    finally:
        CTX.strict -= 1


@contextlib.contextmanager
def check_state_value_tree(val: bool = True) -> Iterator[None]:
    """Check that writes keep each state's pytree structure (brainstate's name).

    States here always check the structure on every write (a ``ValueError``
    naming the state), so this block adds nothing and ``val=False`` cannot turn
    the check off; it exists so code written for brainstate runs unchanged. For
    shape and dtype checks too, use ``strict_state_checks()``.

    Args:
        val: accepted for brainstate compatibility; the check stays on either way.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, check_state_value_tree
        >>> s = State(jnp.zeros(2), name='s')
        >>> with check_state_value_tree():
        ...     s.value = (jnp.zeros(2), jnp.zeros(2))
        Traceback (most recent call last):
        ...
        ValueError: Cannot assign to State 's': the new value has pytree structure ((*, *)) but the state holds (*). A state keeps its pytree structure; create a new State if you need a different one.
    """
    yield


_LIBRARY_MODULES = frozenset(
    {"state_core", "state_random", "state_transform", "state_nn", "jax", "jaxlib", "contextlib"}
)


def _creation_site() -> tuple[str, int] | str:
    """``(file, line)`` of the innermost frame outside our libraries and JAX."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__", "").partition(".")[0] not in _LIBRARY_MODULES:
            return (frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return "<unknown location>"


def _as_tags(tag: str | Iterable[str] | None) -> frozenset[str]:
    if tag is None:
        return frozenset()
    if isinstance(tag, str):
        return frozenset((tag,))
    tags = frozenset(tag)
    for t in tags:
        if not isinstance(t, str):
            raise TypeError(f"State tags must be strings, got {t!r} of type {type(t).__name__}.")
    return tags


def _describe_structure(tree: Any) -> str:
    return str(jax.tree.structure(tree)).replace("PyTreeDef", "")


def _leaf_aval_str(leaf: Any) -> str:
    try:
        return repr(jax.typeof(leaf))
    except TypeError:
        return type(leaf).__name__


def _contains_tracer(tree: Any) -> bool:
    return any(is_tracer(leaf) for leaf in jax.tree.leaves(tree))


# ``_leaked_at`` of a state born holding tracers while its trace may still run:
# reads check whether those tracers are stale (see ``State._check_leaked``).


class _ShownAval:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _dtype_of(x: Any) -> Any:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return np.asarray(x).dtype
    return dtype
