"""Pure ``jax`` samplers that ``jax.random`` lacks (von Mises, Zipf, hypergeometric, log-series).

Each takes one key and works under ``jit``/``vmap``; rejection samplers loop with
``lax.while_loop`` until every element is accepted.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["vonmises_centered", "zipf", "hypergeometric", "logseries"]


def vonmises_centered(key: jax.Array, kappa: Any, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """Von Mises angles in ``[-pi, pi]`` with mean 0 (Best & Fisher 1979 rejection sampler)."""
    kappa = jnp.broadcast_to(jnp.asarray(kappa, dtype), shape)
    # Below this concentration the distribution is uniform to float precision and
    # the sampler's constants lose all accuracy.
    tiny = kappa < 1e-5
    k = jnp.where(tiny, 1.0, kappa)
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
    return jnp.where(tiny, flat, theta)


def zipf(key: jax.Array, a: Any, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """Zipf samples ``>= 1`` for ``a > 1`` (Devroye's rejection method, as in NumPy)."""
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
        accept = (x >= 1.0) & (x <= top) & (v * x * (t - 1.0) / (b - 1.0) <= t / b)
        return key, done | accept, jnp.where(done, out, x)

    init = (key, jnp.zeros(shape, bool), jnp.ones(shape, jnp.float32))
    _, _, out = lax.while_loop(lambda c: ~jnp.all(c[1]), body, init)
    return out.astype(dtype)


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
