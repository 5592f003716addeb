"""Pure ``jax`` samplers that ``jax.random`` lacks or gets wrong at the edges.

Von Mises, Zipf, hypergeometric and log-series are missing from ``jax.random``;
``multivariate_normal`` differs from ``jax.random.multivariate_normal`` only where
that one returns NaN. Each takes one key and works under ``jit``/``vmap``;
rejection samplers loop with ``lax.while_loop`` until every element is accepted,
so their acceptance tests must stay finite for every parameter value.

Each is a ``jax.jit`` function with the output shape and dtype static. An eager
draw then compiles once per signature: an eager ``lax.while_loop`` traces and
compiles its loop anew on every call (its body is a new closure each time),
~0.4-0.8 s per draw on CPU.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["vonmises_centered", "zipf", "hypergeometric", "logseries", "multivariate_normal"]


# Above this concentration the rejection sampler's constants lose all precision (in
# float32 it never accepts from about 1e8 on), while the wrapped normal N(0, 1/kappa)
# it tends to is exact to O(1/kappa): NumPy switches at the same point.
_VONMISES_NORMAL_KAPPA = 1e6


@partial(jax.jit, static_argnums=(2, 3))
def vonmises_centered(key: jax.Array, kappa: Any, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """Von Mises angles in ``[-pi, pi]`` with mean 0 (Best & Fisher 1979 rejection sampler).

    Concentrations above ``1e6`` (up to ``inf``, a point mass at 0) use the normal
    approximation ``N(0, 1 / kappa)``, as NumPy does.
    """
    kappa = jnp.broadcast_to(jnp.asarray(kappa, dtype), shape)
    # Below this concentration the distribution is uniform to float precision and
    # the sampler's constants lose all accuracy.
    tiny = kappa < 1e-5
    huge = kappa > _VONMISES_NORMAL_KAPPA
    k = jnp.where(tiny | huge, 1.0, kappa)
    tau = 1.0 + jnp.sqrt(1.0 + 4.0 * k * k)
    rho = (tau - jnp.sqrt(2.0 * tau)) / (2.0 * k)
    r = (1.0 + rho * rho) / (2.0 * rho)

    def body(carry: tuple[Any, ...]) -> tuple[Any, ...]:
        key, done, f = carry
        key, sub = jax.random.split(key)
        u1, u2 = jax.random.uniform(sub, (2, *shape), dtype)
        z = jnp.cos(jnp.pi * u1)
        fz = (1.0 + r * z) / (r + z)
        c = k * (r - fz)
        accept = (c * (2.0 - c) - u2 > 0) | (jnp.log(c / u2) + 1.0 - c >= 0)
        return key, done | accept, jnp.where(done, f, fz)

    key, sign_key, flat_key = jax.random.split(key, 3)
    init = (key, jnp.zeros(shape, bool), jnp.zeros(shape, dtype))
    _, _, f = lax.while_loop(lambda c: ~jnp.all(c[1]), body, init)
    sign = jnp.where(jax.random.bernoulli(sign_key, 0.5, shape), 1.0, -1.0).astype(dtype)
    theta = sign * jnp.arccos(jnp.clip(f, -1.0, 1.0))
    flat = jax.random.uniform(flat_key, shape, dtype, -jnp.pi, jnp.pi)
    # A key of its own for the normal approximation, derived without changing the others.
    narrow = jax.random.normal(jax.random.fold_in(flat_key, 1), shape, dtype) * lax.rsqrt(jnp.where(huge, kappa, 1.0))
    return jnp.where(tiny, flat, jnp.where(huge, narrow, theta))


@partial(jax.jit, static_argnums=(2, 3))
def zipf(key: jax.Array, a: Any, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """Zipf samples ``>= 1`` for ``a > 1`` (Devroye's rejection method, as in NumPy); ``a = inf`` gives 1."""
    a = jnp.broadcast_to(jnp.asarray(a, jnp.float32), shape)
    am1 = a - 1.0
    b = 2.0**am1
    top = float(np.iinfo(np.dtype(dtype)).max)

    def body(carry: tuple[Any, ...]) -> tuple[Any, ...]:
        key, done, out = carry
        key, sub = jax.random.split(key)
        u, v = jax.random.uniform(sub, (2, *shape), jnp.float32)
        x = jnp.floor((1.0 - u) ** (-1.0 / am1))
        t = (1.0 + 1.0 / x) ** am1
        # Devroye's test, and the same test divided by t / b, whose terms stay in [0, 1]:
        # the first becomes inf / inf = NaN, never accepting, once b = 2**(a - 1)
        # overflows (a >= 129 in float32).
        direct = v * x * (t - 1.0) / (b - 1.0) <= t / b
        scaled = v * x * -jnp.expm1(-am1 * jnp.log1p(1.0 / x)) <= -jnp.expm1(-am1 * jnp.log(2.0))
        accept = (x >= 1.0) & (x <= top) & jnp.where(jnp.isfinite(b), direct, scaled)
        return key, done | accept, jnp.where(done, out, x)

    init = (key, jnp.zeros(shape, bool), jnp.ones(shape, jnp.float32))
    _, _, out = lax.while_loop(lambda c: ~jnp.all(c[1]), body, init)
    return out.astype(dtype)


@partial(jax.jit, static_argnums=(4, 5))
def hypergeometric(
    key: jax.Array, ngood: Any, nbad: Any, nsample: Any, shape: tuple[int, ...], dtype: Any
) -> jax.Array:
    """Good items among ``nsample`` drawn without replacement from ``ngood + nbad`` (exact, sequential)."""
    good = jnp.broadcast_to(jnp.asarray(ngood, jnp.float32), shape)
    total = good + jnp.broadcast_to(jnp.asarray(nbad, jnp.float32), shape)
    n = jnp.broadcast_to(jnp.asarray(nsample, jnp.float32), shape)
    steps = jnp.max(n) if n.size else jnp.float32(0)

    def body(carry: tuple[Any, ...]) -> tuple[Any, ...]:
        i, key, good_left, total_left, count = carry
        key, sub = jax.random.split(key)
        u = jax.random.uniform(sub, shape, jnp.float32)
        active = i < n
        take = active & (u * total_left < good_left)
        return (
            i + 1.0,
            key,
            good_left - take,
            total_left - active,
            count + take,
        )

    init = (jnp.float32(0), key, good, total, jnp.zeros(shape, jnp.float32))
    out = lax.while_loop(lambda c: c[0] < steps, body, init)[-1]
    return out.astype(dtype)


@partial(jax.jit, static_argnums=(2, 3))
def logseries(key: jax.Array, p: Any, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """Logarithmic-series samples ``>= 1`` for ``0 < p < 1`` (Kemp's second algorithm)."""
    p = jnp.broadcast_to(jnp.asarray(p, jnp.float32), shape)
    kv, ku = jax.random.split(key)
    tiny = jnp.finfo(jnp.float32).tiny
    v = jnp.maximum(jax.random.uniform(kv, shape, jnp.float32), tiny)
    u = jax.random.uniform(ku, shape, jnp.float32)
    q = -jnp.expm1(jnp.log1p(-p) * u)
    deep = jnp.floor(1.0 + jnp.log(v) / jnp.log(jnp.maximum(q, tiny)))
    out = jnp.where(v >= p, 1.0, jnp.where(v <= q * q, jnp.maximum(deep, 1.0), jnp.where(v >= q, 1.0, 2.0)))
    return out.astype(dtype)


def _svd_factor(cov: jax.Array) -> jax.Array:
    u, s, _ = jnp.linalg.svd(cov)
    return u * jnp.sqrt(s[..., None, :])


@partial(jax.jit, static_argnums=(3, 4, 5))
def multivariate_normal(
    key: jax.Array, mean: jax.Array, cov: jax.Array, shape: tuple[int, ...], dtype: Any, method: str
) -> jax.Array:
    """``jax.random.multivariate_normal`` without NaNs: a factor with NaNs is replaced by the SVD factor.

    The operations are those of ``jax.random.multivariate_normal`` (so a valid
    covariance gives the same numbers bit for bit); only a Cholesky or eigen factor
    that is not finite (a singular or indefinite matrix) is swapped, matrix by
    matrix, for ``method='svd'``'s factor, which NumPy uses for every matrix.
    """
    common = jnp.result_type(mean, cov)
    if not jnp.issubdtype(common, jnp.inexact):
        common = jnp.result_type(common, float)
    mean, cov = mean.astype(common), cov.astype(common)
    if method == "svd":
        factor = _svd_factor(cov)
    else:
        if method == "eigh":
            w, v = jnp.linalg.eigh(cov)
            factor = v * jnp.sqrt(w[..., None, :])
        else:
            factor = jnp.linalg.cholesky(cov)
        broken = ~jnp.isfinite(factor).all(axis=(-2, -1), keepdims=True)
        # A branch, not a select: the SVD runs only when some matrix needs it.
        factor = lax.cond(broken.any(), lambda f: jnp.where(broken, _svd_factor(cov), f), lambda f: f, factor)
    normal_samples = jax.random.normal(key, shape + mean.shape[-1:], dtype)
    with jax.numpy_rank_promotion("allow"):
        return mean + jnp.einsum("...ij,...j->...i", factor, normal_samples)
