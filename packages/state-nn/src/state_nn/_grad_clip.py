"""``clip_grad_norm``: scale a pytree of gradients so that its global norm is at most ``max_norm``."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["clip_grad_norm"]

# Added to the norm before dividing, as in brainstate and PyTorch, so an all-zero
# gradient gives a factor of 1 rather than a division by zero.
_EPS = 1e-6


def _norm_order(norm_type: Any) -> float:
    """``norm_type`` as a float ``p > 0`` or +-inf; ``None`` means 2."""
    if norm_type is None:
        return 2.0
    if isinstance(norm_type, str):
        if norm_type in ("inf", "-inf"):
            return float(norm_type)
        raise ValueError(f"clip_grad_norm: norm_type must be a number, 'inf' or '-inf', got {norm_type!r}.")
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)):
        raise TypeError(f"clip_grad_norm: norm_type must be a number, got {type(norm_type).__name__} {norm_type!r}.")
    p = float(norm_type)
    if math.isnan(p) or (not math.isinf(p) and p <= 0):
        raise ValueError(f"clip_grad_norm: norm_type must be positive (or +-inf), got {norm_type!r}.")
    return p


def _global_norm(leaves: list[jax.Array], p: float) -> jax.Array:
    """The ``p``-norm of all leaves taken together, as if concatenated (without building the concatenation)."""
    leaves = [g for g in leaves if g.size]
    if not leaves:
        return jnp.zeros((), jnp.result_type(float))
    if p == math.inf:
        return jnp.max(jnp.stack([jnp.max(jnp.abs(g)) for g in leaves]))
    if p == -math.inf:
        return jnp.min(jnp.stack([jnp.min(jnp.abs(g)) for g in leaves]))
    if p == 2.0:
        return jnp.sqrt(sum(jnp.sum(jnp.square(jnp.abs(g))) for g in leaves))
    return sum(jnp.sum(jnp.abs(g) ** p) for g in leaves) ** (1.0 / p)


def _scale(g: Any, factor: jax.Array) -> jax.Array:
    g = jnp.asarray(g)
    # A float leaf keeps its dtype (a bfloat16 gradient stays bfloat16).
    return g * factor.astype(g.dtype) if jnp.issubdtype(g.dtype, jnp.inexact) else g * factor


def clip_grad_norm(
    grad: Any,
    max_norm: float | jax.Array,
    norm_type: int | float | str | None = 2.0,
    return_norm: bool = False,
) -> Any:
    """Scale ``grad`` by ``min(1, max_norm / (norm + 1e-6))``, where ``norm`` is its global norm.

    The norm is taken over all leaves together, as if they were flattened and
    concatenated into one vector (brainstate's and PyTorch's
    ``clip_grad_norm``). Each leaf keeps its dtype. Works under ``jit`` and
    with a traced ``max_norm``.

    Args:
        grad: a pytree of gradient arrays (for example the dict
            ``state_transform.grad`` returns).
        max_norm: the largest allowed norm.
        norm_type: ``p`` of the p-norm (default 2); ``'inf'`` / ``jnp.inf`` for
            the largest absolute value, ``'-inf'`` for the smallest; ``None``
            means 2.
        return_norm: also return the norm before clipping.

    Returns:
        The clipped pytree (same structure), or ``(clipped, norm)`` with
        ``return_norm=True``.

    Raises:
        ValueError: if ``norm_type`` is not positive, ``'inf'`` or ``'-inf'``.
        TypeError: if ``norm_type`` is not a number or one of those strings.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> grads = {'w': jnp.array([3.0, 0.0]), 'b': jnp.array([4.0])}
        >>> clipped, norm = state_nn.clip_grad_norm(grads, max_norm=1.0, return_norm=True)
        >>> norm
        Array(5., dtype=float32)
        >>> [round(float(v), 4) for v in clipped['w']], [round(float(v), 4) for v in clipped['b']]
        ([0.6, 0.0], [0.8])
    """
    p = _norm_order(norm_type)
    leaves = jax.tree.leaves(grad)
    if not leaves:
        return (grad, jnp.zeros((), jnp.result_type(float))) if return_norm else grad
    total = _global_norm([jnp.asarray(g) for g in leaves], p)
    factor = jnp.minimum(1.0, max_norm / (total + _EPS))
    clipped = jax.tree.map(lambda g: _scale(g, factor), grad)
    return (clipped, total) if return_norm else clipped
