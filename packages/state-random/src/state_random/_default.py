"""The global random stream ``DEFAULT`` and module-level samplers that draw from it."""

from __future__ import annotations

import contextlib
from typing import Iterator

import jax
from jax.typing import ArrayLike, DTypeLike

from ._checks import Size
from ._random_state import RandomState, check_seed, key_from_seed

__all__ = [
    "DEFAULT",
    "seed",
    "seed_context",
    "get_key",
    "set_key",
    "split_key",
    "split_keys",
    "rand",
    "randn",
    "random",
    "uniform",
    "normal",
    "standard_normal",
    "randint",
    "bernoulli",
    "binomial",
    "choice",
    "permutation",
    "shuffle",
    "truncated_normal",
    "exponential",
    "gamma",
    "beta",
    "poisson",
    "categorical",
    "lognormal",
    "laplace",
    "logistic",
    "gumbel",
    "cauchy",
    "chisquare",
    "dirichlet",
    "multivariate_normal",
    "geometric",
    "pareto",
    "weibull",
    "t",
]

DEFAULT: RandomState = RandomState(None, name="DEFAULT")
"""The global ``RandomState`` behind every module-level sampler.

It is seeded lazily with fresh OS entropy the first time it is used (importing
``state_random`` does not touch the JAX backend); ``seed(s)`` makes it reproducible.

Example:
    >>> import state_random as sr
    >>> sr.seed(0)
    >>> a = sr.normal(size=2)
    >>> sr.seed(0)
    >>> bool((sr.DEFAULT.normal(size=2) == a).all())
    True
"""


def seed(seed: int | None = None) -> None:
    """Reseed ``DEFAULT`` with ``jax.random.key(seed)`` (``None``: fresh OS entropy).

    A float, string or bool is a ``TypeError`` and leaves the key unchanged.

    Example:
        >>> import state_random as sr
        >>> sr.seed(42)
        >>> a = sr.uniform(size=3)
        >>> sr.seed(42)
        >>> bool((sr.uniform(size=3) == a).all())
        True
    """
    DEFAULT.seed(seed)


@contextlib.contextmanager
def seed_context(seed: int | None) -> Iterator[None]:
    """Temporarily reseed ``DEFAULT``; its previous key is restored on exit (also on error).

    Example:
        >>> import state_random as sr
        >>> sr.seed(1)
        >>> before = sr.get_key()
        >>> with sr.seed_context(123):
        ...     x = sr.normal(size=2)
        >>> bool(sr.get_key() == before)
        True
        >>> with sr.seed_context(123):
        ...     bool((sr.normal(size=2) == x).all())
        True
    """
    new_key = key_from_seed(check_seed(seed, "seed_context"))
    old_key = DEFAULT.value
    DEFAULT.value = new_key
    try:
        yield
    finally:
        DEFAULT.value = old_key


def get_key() -> jax.Array:
    """The current key of ``DEFAULT``.

    Example:
        >>> import jax
        >>> import state_random as sr
        >>> sr.seed(5)
        >>> bool(sr.get_key() == jax.random.key(5))
        True
    """
    return DEFAULT.get_key()


def set_key(key: ArrayLike) -> None:
    """Install ``key`` (typed key or raw ``uint32[2]`` data) into ``DEFAULT``.

    Example:
        >>> import jax
        >>> import state_random as sr
        >>> sr.set_key(jax.random.key(9))
        >>> bool(sr.get_key() == jax.random.key(9))
        True
    """
    DEFAULT.set_key(key)


def split_key(n: int | None = None) -> jax.Array:
    """Advance ``DEFAULT`` and return one new key (or ``n`` keys); see ``RandomState.split_key``.

    Example:
        >>> import jax
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> bool(sr.split_key() == jax.random.split(jax.random.key(0))[1])
        True
    """
    return DEFAULT.split_key(n)


def split_keys(n: int) -> jax.Array:
    """Advance ``DEFAULT`` and return ``n`` new keys (shape ``(n,)``).

    Example:
        >>> import state_random as sr
        >>> sr.split_keys(3).shape
        (3,)
    """
    return DEFAULT.split_keys(n)


# ---------------------------------------------------------------------- samplers

def rand(*dn: int, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
    """Uniform samples in ``[0, 1)`` of shape ``dn`` (``rand()`` is a scalar).

    Draws from ``DEFAULT``; same arguments as ``RandomState.rand``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.rand(2, 3).shape
        (2, 3)
    """
    return DEFAULT.rand(*dn, key=key, dtype=dtype)


def randn(*dn: int, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
    """Standard-normal samples of shape ``dn``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.randn``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.randn(3).shape
        (3,)
    """
    return DEFAULT.randn(*dn, key=key, dtype=dtype)


def random(size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
    """Uniform samples in ``[0, 1)`` of shape ``size``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.random``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.random(4).dtype
        dtype('float32')
    """
    return DEFAULT.random(size, key=key, dtype=dtype)


def uniform(
    low: ArrayLike = 0.0, high: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Uniform samples in ``[low, high)`` (``jax.random.uniform(k, shape, dtype, low, high)``).

    Draws from ``DEFAULT``; same arguments as ``RandomState.uniform``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> bool((sr.uniform(-1.0, 1.0, size=8) < 1).all())
        True
    """
    return DEFAULT.uniform(low, high, size, key=key, dtype=dtype)


def normal(
    loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Normal samples: ``jax.random.normal(k, shape, dtype) * scale + loc``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.normal``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.normal(0.0, 2.0, size=(2, 2)).shape
        (2, 2)
    """
    return DEFAULT.normal(loc, scale, size, key=key, dtype=dtype)


def standard_normal(
    size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
) -> jax.Array:
    """Standard-normal samples of shape ``size``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.standard_normal``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.standard_normal((3,)).shape
        (3,)
    """
    return DEFAULT.standard_normal(size, key=key, dtype=dtype)


def randint(
    low: ArrayLike, high: ArrayLike | None = None, size: Size = None,
    dtype: DTypeLike = int, *, key: ArrayLike | None = None,
) -> jax.Array:
    """Integers in ``[low, high)`` (``[0, low)`` when ``high`` is None); int32 by default.

    Draws from ``DEFAULT``; same arguments as ``RandomState.randint``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.randint(5, 6, size=3)
        Array([5, 5, 5], dtype=int32)
    """
    return DEFAULT.randint(low, high, size, dtype, key=key)


def bernoulli(p: ArrayLike = 0.5, size: Size = None, *, key: ArrayLike | None = None) -> jax.Array:
    """Boolean samples that are True with probability ``p`` (``p`` must be in [0, 1]).

    Draws from ``DEFAULT``; same arguments as ``RandomState.bernoulli``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.bernoulli(0.0, size=2)
        Array([False, False], dtype=bool)
    """
    return DEFAULT.bernoulli(p, size, key=key)


def binomial(
    n: ArrayLike, p: ArrayLike, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Binomial counts of ``n`` trials with success probability ``p`` (int32 by default).

    Draws from ``DEFAULT``; same arguments as ``RandomState.binomial``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.binomial(4, 0.0, size=2)
        Array([0, 0], dtype=int32)
    """
    return DEFAULT.binomial(n, p, size, key=key, dtype=dtype)


def choice(
    a: int | ArrayLike, size: Size = None, replace: bool = True, p: ArrayLike | None = None,
    *, axis: int = 0, key: ArrayLike | None = None,
) -> jax.Array:
    """Random elements of ``a`` (or of ``arange(a)`` for an int), optionally weighted by ``p``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.choice``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.choice(jnp.array([7, 8, 9]), size=2, p=jnp.array([0.0, 1.0, 0.0]))
        Array([8, 8], dtype=int32)
    """
    return DEFAULT.choice(a, size, replace, p, axis=axis, key=key)


def permutation(
    x: int | ArrayLike, axis: int = 0, independent: bool = False, *, key: ArrayLike | None = None
) -> jax.Array:
    """A permuted copy of ``x`` along ``axis`` (for an int: a permutation of ``arange(x)``).

    Draws from ``DEFAULT``; same arguments as ``RandomState.permutation``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sorted(sr.permutation(jnp.arange(3)).tolist())
        [0, 1, 2]
    """
    return DEFAULT.permutation(x, axis, independent, key=key)


def shuffle(x: ArrayLike, axis: int = 0, *, key: ArrayLike | None = None) -> jax.Array:
    """Return ``x`` shuffled along ``axis``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.shuffle``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sorted(sr.shuffle(jnp.arange(3)).tolist())
        [0, 1, 2]
    """
    return DEFAULT.shuffle(x, axis, key=key)


def truncated_normal(
    lower: ArrayLike, upper: ArrayLike, size: Size = None, loc: ArrayLike = 0.0,
    scale: ArrayLike = 1.0, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Normal(``loc``, ``scale``) samples truncated to ``[lower, upper]`` (bounds in output units).

    Draws from ``DEFAULT``; same arguments as ``RandomState.truncated_normal``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> bool((sr.truncated_normal(0.0, 0.5, size=10) <= 0.5).all())
        True
    """
    return DEFAULT.truncated_normal(lower, upper, size, loc, scale, key=key, dtype=dtype)


def exponential(
    scale: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Exponential samples with mean ``scale``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.exponential``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.exponential(size=3).shape
        (3,)
    """
    return DEFAULT.exponential(scale, size, key=key, dtype=dtype)


def gamma(
    shape: ArrayLike, scale: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Gamma(``shape``, ``scale``) samples: ``jax.random.gamma(k, shape) * scale``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.gamma``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.gamma(2.0, size=3).shape
        (3,)
    """
    return DEFAULT.gamma(shape, scale, size, key=key, dtype=dtype)


def beta(
    a: ArrayLike, b: ArrayLike, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Beta(``a``, ``b``) samples in ``[0, 1]``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.beta``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.beta(1.0, 1.0, size=3).shape
        (3,)
    """
    return DEFAULT.beta(a, b, size, key=key, dtype=dtype)


def poisson(
    lam: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Poisson counts with rate ``lam`` (int32 by default).

    Draws from ``DEFAULT``; same arguments as ``RandomState.poisson``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.poisson(3.0, size=2).dtype
        dtype('int32')
    """
    return DEFAULT.poisson(lam, size, key=key, dtype=dtype)


def categorical(
    logits: ArrayLike, axis: int = -1, size: Size = None, *, key: ArrayLike | None = None
) -> jax.Array:
    """Category indices drawn from unnormalised log-probabilities ``logits`` along ``axis``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.categorical``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.categorical(jnp.array([0.0, -1e9]), size=2)
        Array([0, 0], dtype=int32)
    """
    return DEFAULT.categorical(logits, axis, size, key=key)


def lognormal(
    mean: ArrayLike = 0.0, sigma: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """``exp(N(mean, sigma))`` samples: ``jax.random.lognormal(k, sigma, shape) * exp(mean)``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.lognormal``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.lognormal(0.0, 0.0, size=2)
        Array([1., 1.], dtype=float32)
    """
    return DEFAULT.lognormal(mean, sigma, size, key=key, dtype=dtype)


def laplace(
    loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Laplace samples: ``jax.random.laplace(k, shape) * scale + loc``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.laplace``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.laplace(size=3).shape
        (3,)
    """
    return DEFAULT.laplace(loc, scale, size, key=key, dtype=dtype)


def logistic(
    loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Logistic samples: ``jax.random.logistic(k, shape) * scale + loc``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.logistic``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.logistic(size=3).shape
        (3,)
    """
    return DEFAULT.logistic(loc, scale, size, key=key, dtype=dtype)


def gumbel(
    loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Gumbel samples: ``jax.random.gumbel(k, shape) * scale + loc``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.gumbel``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.gumbel(size=3).shape
        (3,)
    """
    return DEFAULT.gumbel(loc, scale, size, key=key, dtype=dtype)


def cauchy(
    loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Cauchy samples: ``jax.random.cauchy(k, shape) * scale + loc``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.cauchy``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.cauchy(size=3).shape
        (3,)
    """
    return DEFAULT.cauchy(loc, scale, size, key=key, dtype=dtype)


def chisquare(
    df: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
) -> jax.Array:
    """Chi-square samples with ``df`` degrees of freedom.

    Draws from ``DEFAULT``; same arguments as ``RandomState.chisquare``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.chisquare(2.0, size=3).shape
        (3,)
    """
    return DEFAULT.chisquare(df, size, key=key, dtype=dtype)


def dirichlet(
    alpha: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
) -> jax.Array:
    """Dirichlet samples; the output shape is ``size + alpha.shape[-1:]``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.dirichlet``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.dirichlet(jnp.ones(4)).shape
        (4,)
    """
    return DEFAULT.dirichlet(alpha, size, key=key, dtype=dtype)


def multivariate_normal(
    mean: ArrayLike, cov: ArrayLike, size: Size = None, method: str = "cholesky", *,
    key: ArrayLike | None = None, dtype: DTypeLike | None = None,
) -> jax.Array:
    """Multivariate normal samples; the output shape is ``size + mean.shape[-1:]``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.multivariate_normal``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.multivariate_normal(jnp.zeros(3), jnp.eye(3)).shape
        (3,)
    """
    return DEFAULT.multivariate_normal(mean, cov, size, method, key=key, dtype=dtype)


def geometric(
    p: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
) -> jax.Array:
    """Number of Bernoulli(``p``) trials up to and including the first success (>= 1).

    Draws from ``DEFAULT``; same arguments as ``RandomState.geometric``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.geometric(0.5, size=3).dtype
        dtype('int32')
    """
    return DEFAULT.geometric(p, size, key=key, dtype=dtype)


def pareto(
    a: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
) -> jax.Array:
    """NumPy's Pareto (Lomax / Pareto II, support ``[0, inf)``): ``jax.random.pareto(k, a) - 1``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.pareto``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.pareto(2.0, size=3).shape
        (3,)
    """
    return DEFAULT.pareto(a, size, key=key, dtype=dtype)


def weibull(
    a: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
) -> jax.Array:
    """NumPy's one-parameter Weibull (scale 1, shape ``a``): ``jax.random.weibull_min(k, 1, a)``.

    Draws from ``DEFAULT``; same arguments as ``RandomState.weibull``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.weibull(2.0, size=3).shape
        (3,)
    """
    return DEFAULT.weibull(a, size, key=key, dtype=dtype)


def t(
    df: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
) -> jax.Array:
    """Student's t samples with ``df`` degrees of freedom.

    Draws from ``DEFAULT``; same arguments as ``RandomState.t``.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> sr.t(3.0, size=3).shape
        (3,)
    """
    return DEFAULT.t(df, size, key=key, dtype=dtype)
