"""Functions along an axis (softmax and friends), under the names and signatures of ``brainstate.nn``.

Thin wrappers over ``jax.nn``; ``softmin`` is ``softmax(-x)``.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.typing import ArrayLike

__all__ = ["glu", "logsumexp", "log_softmax", "softmax", "softmin", "standardize", "one_hot"]

Axis = int | tuple[int, ...] | None


def glu(x: ArrayLike, axis: int = -1) -> jax.Array:
    """Gated linear unit: split ``x`` in two halves along ``axis``, return ``first * sigmoid(second)`` (``jax.nn.glu``).

    Args:
        x: the input array; its size along ``axis`` must be even.
        axis: the axis to split (default -1).

    Returns:
        An array of ``x``'s shape with the ``axis`` dimension halved.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.glu(jnp.array([1.0, 2.0, 0.0, 0.0]))
        Array([0.5, 1. ], dtype=float32)
    """
    return jax.nn.glu(x, axis)


def logsumexp(
    a: ArrayLike,
    axis: Axis = None,
    b: ArrayLike | None = None,
    keepdims: bool = False,
    return_sign: bool = False,
    where: ArrayLike | None = None,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """``log(sum(b * exp(a)))`` over ``axis``, computed stably (``jax.nn.logsumexp``).

    Args:
        a: the input array.
        axis: the axis or axes to reduce (default: all).
        b: optional weights, broadcastable against ``a``.
        keepdims: keep the reduced axes with size 1.
        return_sign: also return the sign of the sum (for negative ``b``).
        where: optional mask of the elements to include.

    Returns:
        The reduced array, or ``(value, sign)`` with ``return_sign=True``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.logsumexp(jnp.array([0.0, 0.0]))
        Array(0.6931472, dtype=float32)
    """
    return jax.nn.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign, where=where)


def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> jax.Array:
    """Log of the softmax along ``axis``, computed stably (``jax.nn.log_softmax``).

    Args:
        x: the input array.
        axis: the axis or axes to normalise over (default -1).
        where: optional mask of the elements to include.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.log_softmax(jnp.array([0.0, 0.0]))
        Array([-0.6931472, -0.6931472], dtype=float32)
    """
    return jax.nn.log_softmax(x, axis=axis, where=where)


def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> jax.Array:
    """Softmax ``exp(x) / sum(exp(x))`` along ``axis`` (``jax.nn.softmax``).

    Args:
        x: the input array.
        axis: the axis or axes that sum to 1 (default -1).
        where: optional mask of the elements to include.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.softmax(jnp.array([0.0, 0.0]))
        Array([0.5, 0.5], dtype=float32)
    """
    return jax.nn.softmax(x, axis=axis, where=where)


def softmin(x: ArrayLike, axis: Axis = -1) -> jax.Array:
    """Softmin ``softmax(-x)`` along ``axis``: small inputs get large weights.

    Args:
        x: the input array.
        axis: the axis or axes that sum to 1 (default -1).

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> jnp.round(state_nn.softmin(jnp.array([0.0, jnp.log(3.0)])), 4)
        Array([0.75, 0.25], dtype=float32)
    """
    return jax.nn.softmax(-jax.numpy.asarray(x), axis=axis)


def standardize(
    x: ArrayLike,
    axis: Axis = -1,
    variance: ArrayLike | None = None,
    epsilon: ArrayLike = 1e-5,
    where: ArrayLike | None = None,
) -> jax.Array:
    """Subtract the mean and divide by ``sqrt(variance + epsilon)`` along ``axis`` (``jax.nn.standardize``).

    Args:
        x: the input array.
        axis: the axis or axes to normalise over (default -1).
        variance: a precomputed variance (default: computed from ``x``).
        epsilon: added to the variance (default 1e-5).
        where: optional mask of the elements to include.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.standardize(jnp.array([1.0, 2.0, 3.0]))
        Array([-1.224736,  0.      ,  1.224736], dtype=float32)
    """
    return jax.nn.standardize(x, axis=axis, variance=variance, epsilon=epsilon, where=where)


def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: int = -1) -> jax.Array:
    """One-hot encode integer indices; an index outside ``[0, num_classes)`` gives all zeros (``jax.nn.one_hot``).

    Args:
        x: an array of indices.
        num_classes: the number of classes.
        dtype: the result's dtype (default: the default float dtype, as
            brainstate's ``jnp.float_``).
        axis: where to put the new axis (default -1, the end).

    Returns:
        An array with one more axis (of size ``num_classes``) than ``x``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.one_hot(jnp.array([0, 2]), 3)
        Array([[1., 0., 0.],
               [0., 0., 1.]], dtype=float32)
    """
    return jax.nn.one_hot(x, num_classes, dtype=dtype, axis=axis)
