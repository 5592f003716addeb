"""Element-wise activation functions, under the names and signatures of ``brainstate.nn``.

Each is a plain function of arrays (usable in ``Sequential`` and under any JAX
transformation). Where ``jax.nn`` has the same function with the same defaults,
this is a thin wrapper over it; ``hard_tanh`` (with bounds), ``hard_shrink``,
``soft_shrink``, ``tanh_shrink``, ``prelu`` and ``rrelu`` are written here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

import state_random

__all__ = [
    "tanh",
    "relu",
    "squareplus",
    "softplus",
    "soft_sign",
    "sigmoid",
    "silu",
    "swish",
    "log_sigmoid",
    "elu",
    "leaky_relu",
    "hard_tanh",
    "celu",
    "selu",
    "gelu",
    "relu6",
    "hard_sigmoid",
    "hard_silu",
    "hard_swish",
    "hard_shrink",
    "rrelu",
    "mish",
    "soft_shrink",
    "prelu",
    "tanh_shrink",
    "sparse_plus",
    "sparse_sigmoid",
]


def tanh(x: ArrayLike) -> jax.Array:
    """Hyperbolic tangent, ``jnp.tanh(x)``.

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.tanh(jnp.array([-2.0, 0.0, 2.0]))
        Array([-0.9640276,  0.       ,  0.9640276], dtype=float32)
    """
    return jnp.tanh(x)


def relu(x: ArrayLike) -> jax.Array:
    """Rectified linear unit ``max(x, 0)`` (``jax.nn.relu``; its derivative at 0 is 0).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.relu(jnp.array([-2.0, 0.0, 2.0]))
        Array([0., 0., 2.], dtype=float32)
    """
    return jax.nn.relu(x)


def squareplus(x: ArrayLike, b: ArrayLike = 4) -> jax.Array:
    """Squareplus ``(x + sqrt(x**2 + b)) / 2`` (``jax.nn.squareplus``).

    Args:
        x: the input array.
        b: the smoothness (default 4).

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.squareplus(jnp.array([-2.0, 0.0, 2.0]))
        Array([0.41421354, 1.        , 2.4142137 ], dtype=float32)
    """
    return jax.nn.squareplus(x, b)


def softplus(x: ArrayLike) -> jax.Array:
    """Softplus ``log(1 + exp(x))`` (``jax.nn.softplus``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.softplus(jnp.array([-2.0, 0.0, 2.0]))
        Array([0.126928 , 0.6931472, 2.126928 ], dtype=float32)
    """
    return jax.nn.softplus(x)


def soft_sign(x: ArrayLike) -> jax.Array:
    """Soft sign ``x / (|x| + 1)`` (``jax.nn.soft_sign``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.soft_sign(jnp.array([-2.0, 0.0, 2.0]))
        Array([-0.6666667,  0.       ,  0.6666667], dtype=float32)
    """
    return jax.nn.soft_sign(x)


def sigmoid(x: ArrayLike) -> jax.Array:
    """Logistic sigmoid ``1 / (1 + exp(-x))`` (``jax.nn.sigmoid``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.sigmoid(jnp.array([-2.0, 0.0, 2.0]))
        Array([0.11920292, 0.5       , 0.880797  ], dtype=float32)
    """
    return jax.nn.sigmoid(x)


def silu(x: ArrayLike) -> jax.Array:
    """SiLU (swish) ``x * sigmoid(x)`` (``jax.nn.silu``); ``swish`` is the same function.

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.silu(jnp.array([-2.0, 0.0, 2.0]))
        Array([-0.23840584,  0.        ,  1.761594  ], dtype=float32)
        >>> state_nn.swish is state_nn.silu
        True
    """
    return jax.nn.silu(x)


swish = silu


def log_sigmoid(x: ArrayLike) -> jax.Array:
    """Log-sigmoid ``-log(1 + exp(-x))`` (``jax.nn.log_sigmoid``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.log_sigmoid(jnp.array([-2.0, 0.0, 2.0]))
        Array([-2.126928 , -0.6931472, -0.126928 ], dtype=float32)
    """
    return jax.nn.log_sigmoid(x)


def elu(x: ArrayLike, alpha: ArrayLike = 1.0) -> jax.Array:
    """Exponential linear unit: ``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)`` (``jax.nn.elu``).

    Args:
        x: the input array.
        alpha: the scale of the negative part (default 1.0).

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.elu(jnp.array([-2.0, 0.0, 2.0]))
        Array([-0.86466473,  0.        ,  2.        ], dtype=float32)
    """
    return jax.nn.elu(x, alpha)


def leaky_relu(x: ArrayLike, negative_slope: ArrayLike = 1e-2) -> jax.Array:
    """Leaky ReLU: ``x`` for ``x >= 0``, else ``negative_slope * x`` (``jax.nn.leaky_relu``).

    Args:
        x: the input array.
        negative_slope: the slope for negative inputs (default 0.01).

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.leaky_relu(jnp.array([-2.0, 0.0, 2.0]))
        Array([-0.02,  0.  ,  2.  ], dtype=float32)
    """
    return jax.nn.leaky_relu(x, negative_slope)


def hard_tanh(x: ArrayLike, min_val: float = -1.0, max_val: float = 1.0) -> jax.Array:
    """Hard tanh: ``x`` clipped to ``[min_val, max_val]`` (``jax.nn.hard_tanh`` for the default bounds).

    Args:
        x: the input array.
        min_val: the lower end of the linear region (default -1).
        max_val: the upper end of the linear region (default 1).

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.hard_tanh(jnp.array([-4.0, 0.0, 4.0]))
        Array([-1.,  0.,  1.], dtype=float32)
        >>> state_nn.hard_tanh(jnp.array([-4.0, 0.5, 4.0]), 0.0, 2.0)
        Array([0. , 0.5, 2. ], dtype=float32)
    """
    x = jnp.asarray(x)
    return jnp.where(x > max_val, max_val, jnp.where(x < min_val, min_val, x))


def celu(x: ArrayLike, alpha: ArrayLike = 1.0) -> jax.Array:
    """Continuously differentiable ELU: ``x`` for ``x > 0``, else ``alpha * (exp(x / alpha) - 1)`` (``jax.nn.celu``).

    Args:
        x: the input array.
        alpha: the smoothness (default 1.0).

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.celu(jnp.array([-2.0, 0.0, 2.0]))
        Array([-0.86466473,  0.        ,  2.        ], dtype=float32)
    """
    return jax.nn.celu(x, alpha)


def selu(x: ArrayLike) -> jax.Array:
    """Scaled ELU with the self-normalising constants (``jax.nn.selu``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.selu(jnp.array([-2.0, 0.0, 2.0]))
        Array([-1.5201665,  0.       ,  2.101402 ], dtype=float32)
    """
    return jax.nn.selu(x)


def gelu(x: ArrayLike, approximate: bool = True) -> jax.Array:
    """Gaussian error linear unit (``jax.nn.gelu``); the tanh approximation by default.

    Args:
        x: the input array.
        approximate: use the tanh approximation (default, as in brainstate and
            ``jax.nn``); ``False`` for the exact ``x * Phi(x)``.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.gelu(jnp.array([-2.0, 0.0, 2.0]))
        Array([-0.04540235,  0.        ,  1.9545977 ], dtype=float32)
    """
    return jax.nn.gelu(x, approximate=approximate)


def relu6(x: ArrayLike) -> jax.Array:
    """ReLU capped at 6: ``min(max(x, 0), 6)`` (``jax.nn.relu6``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.relu6(jnp.array([-1.0, 3.0, 8.0]))
        Array([0., 3., 6.], dtype=float32)
    """
    return jax.nn.relu6(x)


def hard_sigmoid(x: ArrayLike) -> jax.Array:
    """Hard sigmoid ``relu6(x + 3) / 6`` (``jax.nn.hard_sigmoid``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.hard_sigmoid(jnp.array([-4.0, 0.0, 4.0]))
        Array([0. , 0.5, 1. ], dtype=float32)
    """
    return jax.nn.hard_sigmoid(x)


def hard_silu(x: ArrayLike) -> jax.Array:
    """Hard SiLU (hard swish) ``x * hard_sigmoid(x)`` (``jax.nn.hard_silu``); ``hard_swish`` is the same function.

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.hard_silu(jnp.array([-4.0, 1.0, 4.0]))
        Array([-0.       ,  0.6666667,  4.       ], dtype=float32)
    """
    return jax.nn.hard_silu(x)


hard_swish = hard_silu


def hard_shrink(x: ArrayLike, lambd: float = 0.5) -> jax.Array:
    """Hard shrinkage: ``x`` where ``|x| > lambd``, else 0.

    Args:
        x: the input array.
        lambd: the threshold (default 0.5).

    Returns:
        An array of ``x``'s shape and dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.hard_shrink(jnp.array([-1.0, 0.25, 0.5, 2.0]))
        Array([-1.,  0.,  0.,  2.], dtype=float32)
    """
    x = jnp.asarray(x)
    # A zero of x's own dtype, so that integer inputs stay integers.
    return jnp.where((x > lambd) | (x < -lambd), x, jnp.zeros_like(x))


def soft_shrink(x: ArrayLike, lambd: float = 0.5) -> jax.Array:
    """Soft shrinkage: ``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0.

    Args:
        x: the input array.
        lambd: the threshold (default 0.5).

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.soft_shrink(jnp.array([-1.0, 0.25, 2.0]))
        Array([-0.5,  0. ,  1.5], dtype=float32)
    """
    x = jnp.asarray(x)
    return jnp.where(x > lambd, x - lambd, jnp.where(x < -lambd, x + lambd, jnp.zeros_like(x)))


def tanh_shrink(x: ArrayLike) -> jax.Array:
    """Tanh shrinkage ``x - tanh(x)``.

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.tanh_shrink(jnp.array([0.0, 2.0]))
        Array([0.       , 1.0359724], dtype=float32)
    """
    x = jnp.asarray(x)
    return x - jnp.tanh(x)


def prelu(x: ArrayLike, a: ArrayLike = 0.25) -> jax.Array:
    """Parametric ReLU: ``x`` for ``x >= 0``, else ``a * x``.

    ``a`` may be an array (for example a ``ParamState``'s value) broadcastable
    against ``x``, which makes the slope learnable.

    Args:
        x: the input array.
        a: the negative slope (default 0.25).

    Returns:
        An array of the broadcast shape of ``x`` and ``a``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.prelu(jnp.array([-2.0, 0.0, 2.0]))
        Array([-0.5,  0. ,  2. ], dtype=float32)
    """
    x = jnp.asarray(x)
    return jnp.where(x >= 0, x, a * x)


def rrelu(x: ArrayLike, lower: float = 0.125, upper: float = 0.3333333333333333) -> jax.Array:
    """Randomised leaky ReLU: ``x`` for ``x >= 0``, else ``a * x`` with ``a ~ U(lower, upper)`` per element.

    The slopes are drawn with ``state_random.uniform`` from the default stream,
    so ``state_random.seed`` makes them reproducible, and each call (and each
    ``Map`` member) draws new ones.

    Args:
        x: the input array.
        lower: the smallest slope (default 1/8).
        upper: the largest slope (default 1/3).

    Returns:
        An array of ``x``'s shape, in the default float dtype for integer ``x``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn, state_random
        >>> state_random.seed(0)
        >>> y = state_nn.rrelu(jnp.array([-1.0, -1.0, 2.0]))
        >>> bool(((-1/3 <= y[:2]) & (y[:2] <= -1/8)).all()), float(y[2])
        (True, 2.0)
    """
    x = jnp.asarray(x)
    dtype = jnp.result_type(x, float)
    slope = state_random.uniform(lower, upper, size=x.shape, dtype=dtype)
    return jnp.where(x >= 0, x.astype(dtype), slope * x)


def mish(x: ArrayLike) -> jax.Array:
    """Mish ``x * tanh(softplus(x))`` (``jax.nn.mish``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.mish(jnp.array([-2.0, 0.0, 2.0]))
        Array([-0.25250146,  0.        ,  1.943959  ], dtype=float32)
    """
    return jax.nn.mish(x)


def sparse_plus(x: ArrayLike) -> jax.Array:
    """Sparse plus: 0 for ``x <= -1``, ``(x + 1)**2 / 4`` in between, ``x`` for ``x >= 1`` (``jax.nn.sparse_plus``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.sparse_plus(jnp.array([-2.0, 0.0, 2.0]))
        Array([0.  , 0.25, 2.  ], dtype=float32)
    """
    return jax.nn.sparse_plus(x)


def sparse_sigmoid(x: ArrayLike) -> jax.Array:
    """Sparse sigmoid: 0 for ``x <= -1``, ``(x + 1) / 2`` in between, 1 for ``x >= 1`` (``jax.nn.sparse_sigmoid``).

    Args:
        x: the input array.

    Returns:
        An array of ``x``'s shape.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.sparse_sigmoid(jnp.array([-2.0, 0.0, 2.0]))
        Array([0. , 0.5, 1. ], dtype=float32)
    """
    return jax.nn.sparse_sigmoid(x)
