"""Key handling for mapping transforms: one key per lane, one key to carry on.

These helpers are pure ``jax.random`` / ``jnp`` code, so mapping layers can call
them inside ``jax.jit``, ``jax.vmap``, ``jax.pmap`` or ``shard_map``.
"""

from __future__ import annotations

from typing import Any

import jax

from ._checks import check_count, is_key
from ._random_state import RandomState, as_key, split_lanes

__all__ = ["split_for_lanes", "is_single_key", "is_random_state"]


def split_for_lanes(key: Any, num_lanes: int) -> tuple[jax.Array, jax.Array]:
    """Split ``key`` for ``num_lanes`` mapped lanes: ``(lane_keys, next_key)``.

    ``P = jax.random.split(key, num_lanes + 1)``; lane ``i`` gets ``P[1 + i]`` and the
    state carries on with ``jax.random.split(P[0], 2)[1]``. This is the discipline
    that every mapping transform (``vmap2``, ``pmap2``, ``shard_map`` ...) applies to a
    ``RandomState`` it splits, so that results are reproducible bit for bit.

    Args:
        key: a single typed key (raw ``uint32[2]`` data is wrapped); may be traced.
        num_lanes: the number of lanes, a static int ``>= 1``.

    Returns:
        ``lane_keys`` (a key array of shape ``(num_lanes,)``) and ``next_key``.

    Example:
        >>> import jax
        >>> from state_random import split_for_lanes
        >>> lanes, nxt = split_for_lanes(jax.random.key(42), 4)
        >>> P = jax.random.split(jax.random.key(42), 5)
        >>> lanes.shape, bool((lanes == P[1:]).all())
        ((4,), True)
        >>> bool(nxt == jax.random.split(P[0], 2)[1])
        True
    """
    num_lanes = check_count(num_lanes, "num_lanes", "split_for_lanes", minimum=1)
    return split_lanes(as_key(key, "split_for_lanes", "key", allow_batch=False), num_lanes)


def is_single_key(value: Any) -> bool:
    """True when ``value`` is one typed PRNG key (a scalar key array, possibly traced).

    Args:
        value: any object; raw ``uint32`` key data and key arrays give False.

    Example:
        >>> import jax
        >>> from state_random import is_single_key
        >>> k = jax.random.key(0)
        >>> is_single_key(k), is_single_key(jax.random.split(k, 3)), is_single_key(jax.random.PRNGKey(0))
        (True, False, False)
    """
    return is_key(value) and getattr(value, "ndim", None) == 0


def is_random_state(obj: Any) -> bool:
    """True when ``obj`` is a ``RandomState`` (including subclasses).

    Args:
        obj: any object.

    Example:
        >>> import state_core
        >>> from state_random import RandomState, is_random_state
        >>> is_random_state(RandomState(0)), is_random_state(state_core.State(1.0))
        (True, False)
    """
    return isinstance(obj, RandomState)
