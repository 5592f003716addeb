"""Sampler implementations on top of ``jax.random``.

Each function validates its arguments first and only then obtains its key from
``key``, which is either a typed PRNG key or a zero-argument callable returning
one (``RandomState.split_key``). That ordering is what guarantees that a call
with bad arguments never advances a random state.

All distributions come from ``jax.random``; this module only adds NumPy-style
signatures (``size=``), argument checks and the location/scale transforms.
"""

from __future__ import annotations

from typing import Any, Callable, Union

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import (
    as_param,
    check_count,
    check_dims,
    check_less,
    check_sums_to_one,
    check_size,
    check_values,
    float_dtype,
    index,
    int_dtype,
    out_shape,
    shape_of,
)

KeySource = Union[jax.Array, Callable[[], jax.Array]]

def _take(key: KeySource) -> jax.Array:
    return key() if callable(key) else key


def _nonneg(x: Any, name: str, fn: str) -> None:
    check_values(x, name, fn, lambda a: a >= 0, ">= 0")


def _positive(x: Any, name: str, fn: str) -> None:
    check_values(x, name, fn, lambda a: a > 0, "> 0")


def _probability(x: Any, name: str, fn: str) -> None:
    check_values(x, name, fn, lambda a: (a >= 0) & (a <= 1), "a probability in [0, 1]")


def _loc_scale(fn: str, loc: Any, scale: Any, size: Any, dtype: Any) -> tuple:
    dt = float_dtype(dtype, fn)
    loc, scale = as_param(loc, "loc", fn), as_param(scale, "scale", fn)
    _nonneg(scale, "scale", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(loc), shape_of(scale))
    return loc, scale, shape, dt


# ------------------------------------------------------------------ uniform family
def rand(key: KeySource, dims: tuple, dtype: Any = None) -> jax.Array:
    shape, dt = check_dims(dims, "rand"), float_dtype(dtype, "rand")
    return jax.random.uniform(_take(key), shape, dt)


def random(key: KeySource, size: Any = None, dtype: Any = None) -> jax.Array:
    shape, dt = check_size(size, "random") or (), float_dtype(dtype, "random")
    return jax.random.uniform(_take(key), shape, dt)


def uniform(key: KeySource, low: Any, high: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "uniform"
    dt = float_dtype(dtype, fn)
    low, high = as_param(low, "low", fn), as_param(high, "high", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(low), shape_of(high))
    return jax.random.uniform(_take(key), shape, dt, low, high)


def randint(key: KeySource, low: Any, high: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "randint"
    dt = int_dtype(dtype, fn)
    if high is None:
        low, high = 0, low
    low, high = as_param(low, "low", fn), as_param(high, "high", fn)
    check_less(low, high, ("low", "high"), fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(low), shape_of(high))
    return jax.random.randint(_take(key), shape, low, high, dt)


# ------------------------------------------------------------------ normal family
def normal(key: KeySource, loc: Any, scale: Any, size: Any, dtype: Any) -> jax.Array:
    loc, scale, shape, dt = _loc_scale("normal", loc, scale, size, dtype)
    return jax.random.normal(_take(key), shape, dt) * scale + loc


def randn(key: KeySource, dims: tuple, dtype: Any = None) -> jax.Array:
    shape, dt = check_dims(dims, "randn"), float_dtype(dtype, "randn")
    return jax.random.normal(_take(key), shape, dt)


def standard_normal(key: KeySource, size: Any = None, dtype: Any = None) -> jax.Array:
    fn = "standard_normal"
    shape, dt = check_size(size, fn) or (), float_dtype(dtype, fn)
    return jax.random.normal(_take(key), shape, dt)


def truncated_normal(
    key: KeySource, lower: Any, upper: Any, size: Any, loc: Any, scale: Any, dtype: Any
) -> jax.Array:
    fn = "truncated_normal"
    dt = float_dtype(dtype, fn)
    lower, upper = as_param(lower, "lower", fn), as_param(upper, "upper", fn)
    loc, scale = as_param(loc, "loc", fn), as_param(scale, "scale", fn)
    _positive(scale, "scale", fn)
    check_less(lower, upper, ("lower", "upper"), fn)
    shape = out_shape(
        check_size(size, fn), fn, shape_of(lower), shape_of(upper), shape_of(loc), shape_of(scale)
    )
    a, b = (lower - loc) / scale, (upper - loc) / scale
    return jax.random.truncated_normal(_take(key), a, b, shape, dt) * scale + loc


def lognormal(key: KeySource, mean: Any, sigma: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "lognormal"
    dt = float_dtype(dtype, fn)
    mean, sigma = as_param(mean, "mean", fn), as_param(sigma, "sigma", fn)
    _nonneg(sigma, "sigma", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(mean), shape_of(sigma))
    return jax.random.lognormal(_take(key), sigma, shape, dt) * jnp.exp(mean)


def multivariate_normal(
    key: KeySource, mean: Any, cov: Any, size: Any, method: str, dtype: Any
) -> jax.Array:
    fn = "multivariate_normal"
    dt = float_dtype(dtype, fn)
    if method not in ("cholesky", "eigh", "svd"):
        raise ValueError(f"{fn}: `method` must be 'cholesky', 'eigh' or 'svd', got {method!r}.")
    mean, cov = jnp.asarray(as_param(mean, "mean", fn)), jnp.asarray(as_param(cov, "cov", fn))
    if mean.ndim < 1 or cov.ndim < 2 or cov.shape[-2:] != (mean.shape[-1], mean.shape[-1]):
        raise ValueError(
            f"{fn}: `mean` must have shape (..., n) and `cov` shape (..., n, n); got "
            f"{mean.shape} and {cov.shape}."
        )
    shape = out_shape(check_size(size, fn), fn, mean.shape[:-1], cov.shape[:-2])
    return jax.random.multivariate_normal(_take(key), mean, cov, shape, dt, method)


# ------------------------------------------------------------------ discrete
def bernoulli(key: KeySource, p: Any, size: Any) -> jax.Array:
    fn = "bernoulli"
    p = as_param(p, "p", fn)
    _probability(p, "p", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(p))
    return jax.random.bernoulli(_take(key), p, shape)


def binomial(key: KeySource, n: Any, p: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "binomial"
    dt = float_dtype(dtype, fn) if dtype is not None and jnp.issubdtype(dtype, jnp.floating) else int_dtype(dtype, fn)
    n, p = as_param(n, "n", fn), as_param(p, "p", fn)
    _nonneg(n, "n", fn)
    _probability(p, "p", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(n), shape_of(p))
    return jax.random.binomial(_take(key), n, p, shape).astype(dt)


def poisson(key: KeySource, lam: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "poisson"
    dt = int_dtype(dtype, fn)
    lam = as_param(lam, "lam", fn)
    _nonneg(lam, "lam", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(lam))
    return jax.random.poisson(_take(key), lam, shape, dt)


def geometric(key: KeySource, p: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "geometric"
    dt = int_dtype(dtype, fn)
    p = as_param(p, "p", fn)
    check_values(p, "p", fn, lambda a: (a > 0) & (a <= 1), "a probability in (0, 1]")
    shape = out_shape(check_size(size, fn), fn, shape_of(p))
    return jax.random.geometric(_take(key), p, shape, dt)


def categorical(key: KeySource, logits: Any, axis: int, size: Any) -> jax.Array:
    fn = "categorical"
    logits = jnp.asarray(as_param(logits, "logits", fn))
    axis = index(axis, "axis", fn)
    if logits.ndim < 1 or not -logits.ndim <= axis < logits.ndim:
        raise ValueError(f"{fn}: `axis` {axis} is out of range for logits of shape {logits.shape}.")
    batch = tuple(np.delete(np.array(logits.shape, dtype=int), axis).tolist())
    size = check_size(size, fn)
    shape = None if size is None else out_shape(size, fn, batch)
    return jax.random.categorical(_take(key), logits, axis, shape)


def choice(key: KeySource, a: Any, size: Any, replace: bool, p: Any, axis: int) -> jax.Array:
    fn = "choice"
    shape = check_size(size, fn) or ()
    axis = index(axis, "axis", fn)
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        n = check_count(a, "a", fn, minimum=1)
    else:
        a = jnp.asarray(as_param(a, "a", fn))
        if a.ndim < 1:
            raise ValueError(f"{fn}: `a` must be an int or an array with at least one dimension.")
        if not -a.ndim <= axis < a.ndim:
            raise ValueError(f"{fn}: `axis` {axis} is out of range for `a` of shape {a.shape}.")
        n = a.shape[axis]
        if n == 0:
            raise ValueError(f"{fn}: `a` must not be empty.")
    if not replace and int(np.prod(shape)) > n:
        raise ValueError(
            f"{fn}: cannot take {int(np.prod(shape))} samples from a population of {n} "
            "without replacement (replace=False)."
        )
    if p is not None:
        p = jnp.asarray(as_param(p, "p", fn))
        if p.shape != (n,):
            raise ValueError(f"{fn}: `p` must have shape ({n},) to match `a`, got {p.shape}.")
        _probability(p, "p", fn)
        check_sums_to_one(p, "p", fn)
    return jax.random.choice(_take(key), a, shape, bool(replace), p, axis)


def permutation(key: KeySource, x: Any, axis: int, independent: bool) -> jax.Array:
    fn = "permutation"
    axis = index(axis, "axis", fn)
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        x = check_count(x, "x", fn)
    else:
        x = jnp.asarray(as_param(x, "x", fn))
        if x.ndim < 1:
            raise ValueError(f"{fn}: `x` must be an int or an array with at least one dimension.")
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(f"{fn}: `axis` {axis} is out of range for `x` of shape {x.shape}.")
    return jax.random.permutation(_take(key), x, axis, bool(independent))


def shuffle(key: KeySource, x: Any, axis: int) -> jax.Array:
    fn = "shuffle"
    if isinstance(x, (int, np.integer, float)) or np.ndim(x) < 1:
        raise ValueError(f"{fn}: `x` must be an array with at least one dimension (use permutation(n) for ints).")
    return permutation(key, x, axis, False)


# ------------------------------------------------------------------ continuous, one-sided
def exponential(key: KeySource, scale: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "exponential"
    dt = float_dtype(dtype, fn)
    scale = as_param(scale, "scale", fn)
    _nonneg(scale, "scale", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(scale))
    return jax.random.exponential(_take(key), shape, dt) * scale


def gamma(key: KeySource, shape_param: Any, scale: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "gamma"
    dt = float_dtype(dtype, fn)
    a, scale = as_param(shape_param, "shape", fn), as_param(scale, "scale", fn)
    _positive(a, "shape", fn)
    _nonneg(scale, "scale", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(a), shape_of(scale))
    return jax.random.gamma(_take(key), a, shape, dt) * scale


def beta(key: KeySource, a: Any, b: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "beta"
    dt = float_dtype(dtype, fn)
    a, b = as_param(a, "a", fn), as_param(b, "b", fn)
    _positive(a, "a", fn)
    _positive(b, "b", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(a), shape_of(b))
    return jax.random.beta(_take(key), a, b, shape, dt)


def chisquare(key: KeySource, df: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "chisquare"
    dt = float_dtype(dtype, fn)
    df = as_param(df, "df", fn)
    _positive(df, "df", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(df))
    return jax.random.chisquare(_take(key), df, shape, dt)


def t(key: KeySource, df: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "t"
    dt = float_dtype(dtype, fn)
    df = as_param(df, "df", fn)
    _positive(df, "df", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(df))
    return jax.random.t(_take(key), df, shape, dt)


def pareto(key: KeySource, a: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "pareto"
    dt = float_dtype(dtype, fn)
    a = as_param(a, "a", fn)
    _positive(a, "a", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(a))
    # NumPy's pareto is the Lomax (Pareto II) distribution: classical Pareto minus 1.
    return jax.random.pareto(_take(key), a, shape, dt) - 1


def weibull(key: KeySource, a: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "weibull"
    dt = float_dtype(dtype, fn)
    a = as_param(a, "a", fn)
    _positive(a, "a", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(a))
    return jax.random.weibull_min(_take(key), 1.0, a, shape, dt)


def dirichlet(key: KeySource, alpha: Any, size: Any, dtype: Any) -> jax.Array:
    fn = "dirichlet"
    dt = float_dtype(dtype, fn)
    alpha = jnp.asarray(as_param(alpha, "alpha", fn))
    if alpha.ndim < 1:
        raise ValueError(f"{fn}: `alpha` must have at least one dimension, got a scalar.")
    _positive(alpha, "alpha", fn)
    shape = out_shape(check_size(size, fn), fn, alpha.shape[:-1])
    return jax.random.dirichlet(_take(key), alpha, shape, dt)


# ------------------------------------------------------------------ location/scale families
def _standard_loc_scale(sampler: Callable[..., jax.Array], fn: str) -> Callable[..., jax.Array]:
    def draw(key: KeySource, loc: Any, scale: Any, size: Any, dtype: Any) -> jax.Array:
        loc, scale, shape, dt = _loc_scale(fn, loc, scale, size, dtype)
        return sampler(_take(key), shape, dt) * scale + loc

    draw.__name__ = draw.__qualname__ = fn
    return draw


laplace = _standard_loc_scale(jax.random.laplace, "laplace")
logistic = _standard_loc_scale(jax.random.logistic, "logistic")
gumbel = _standard_loc_scale(jax.random.gumbel, "gumbel")
cauchy = _standard_loc_scale(jax.random.cauchy, "cauchy")
