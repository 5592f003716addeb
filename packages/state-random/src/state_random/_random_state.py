"""``RandomState``: a ``State`` that holds a JAX PRNG key and draws from it."""

from __future__ import annotations

import os
import threading
from typing import Any, Iterable

import jax
import numpy as np
from jax.typing import ArrayLike, DTypeLike

from state_core import State

from . import _samplers as S
from ._checks import Size, check_count, is_key

__all__ = ["RandomState"]

_ENTROPY = object()  # "seed me with fresh entropy when first needed"
_LOCK = threading.Lock()
_SEED_MIN, _SEED_MAX = -(2**63), 2**63 - 1

_ACCEPTED = (
    "None (fresh entropy), an int seed, a typed PRNG key from jax.random.key (a scalar "
    "key or an array of keys), or raw uint32 key data of shape (2,) (or (..., 2)) as "
    "made by jax.random.PRNGKey"
)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_int_scalar_array(x: Any) -> bool:
    dtype = getattr(x, "dtype", None)
    return (
        dtype is not None
        and not is_key(x)
        and np.ndim(x) == 0
        and np.issubdtype(np.dtype(dtype), np.integer)
    )


def check_seed(seed: Any, fn: str) -> Any:
    """Validate a seed: ``None`` -> fresh entropy, an int, or a 0-d integer array (may be traced)."""
    if seed is None:
        return _ENTROPY
    if _is_int(seed):
        seed = int(seed)
        if not _SEED_MIN <= seed <= _SEED_MAX:
            raise ValueError(
                f"{fn}: `seed` must fit in a signed 64-bit integer, got {seed}."
            )
        return seed
    if _is_int_scalar_array(seed):
        return seed
    raise TypeError(
        f"{fn}: `seed` must be an int (or None for fresh entropy), got "
        f"{type(seed).__name__} {seed!r}. Use set_key() to install an existing key."
    )


def entropy_key() -> jax.Array:
    """A fresh threefry key made from 64 bits of operating-system entropy."""
    data = np.frombuffer(os.urandom(8), dtype=np.uint32).copy()
    return jax.random.wrap_key_data(data)


def key_from_seed(seed: Any) -> jax.Array:
    """``jax.random.key(seed)``, or an entropy key for the ``None`` marker of ``check_seed``."""
    if seed is _ENTROPY:
        return entropy_key()
    return jax.random.key(seed)


def as_key(value: Any, fn: str, name: str = "key", allow_batch: bool = True) -> jax.Array:
    """Return ``value`` as a typed key array, wrapping raw ``uint32[..., 2]`` key data.

    With ``allow_batch=False`` only a single (scalar) key is accepted.
    """
    if is_key(value):
        if not allow_batch and value.ndim != 0:
            raise ValueError(
                f"{fn}: `{name}` must be a single key, got a key array of shape {value.shape}."
            )
        return value
    dtype = getattr(value, "dtype", None)
    if dtype is not None and hasattr(value, "shape") and not isinstance(value, (bool, int, float)):
        if np.dtype(dtype) == np.uint32:
            shape = tuple(value.shape)
            if len(shape) >= 1 and shape[-1] == 2 and (allow_batch or len(shape) == 1):
                return jax.random.wrap_key_data(value)
            wanted = "(2,) or (..., 2)" if allow_batch else "(2,)"
            raise ValueError(
                f"{fn}: raw uint32 key data for `{name}` must have shape {wanted}, got shape {shape}."
            )
    raise TypeError(
        f"{fn}: `{name}` must be a typed PRNG key (jax.random.key) or raw uint32 key data "
        f"(jax.random.PRNGKey), got {type(value).__name__} "
        f"{getattr(value, 'dtype', value)!r}."
    )


class RandomState(State):
    """A ``State`` holding a JAX PRNG key, with NumPy-style samplers as methods.

    Every draw splits the key: ``parts = jax.random.split(K, 2)``, the state keeps
    ``parts[0]`` and the sampler uses ``parts[1]``. All key reads and writes go
    through ``self.value``, so state-aware transformations (``StatefulFunction``,
    ``state_transform.jit``/``vmap2`` ...) trace them like any other state.

    Args:
        seed_or_key: ``None`` (fresh OS entropy), an int seed (the key is
            ``jax.random.key(seed)``), a typed key or key array, or raw ``uint32``
            key data of shape ``(2,)`` / ``(..., 2)`` (wrapped with
            ``jax.random.wrap_key_data``). Anything else is a ``TypeError``
            (wrong-shaped raw data: ``ValueError``).
        name, tag, strict, **metadata: as for ``state_core.State``.

    Keys for ``None`` and int seeds are created lazily, on first use, so creating a
    RandomState (including the module-level ``DEFAULT``) never initialises the JAX
    backend.

    A RandomState may hold an *array* of keys (shape ``(B,)``); drawing from it
    directly is an error, but mapping transforms that declare its axis hand each
    lane one key.

    Example:
        >>> import jax
        >>> from state_random import RandomState
        >>> rng = RandomState(0)
        >>> x = rng.normal(size=3)
        >>> parts = jax.random.split(jax.random.key(0), 2)
        >>> bool((x == jax.random.normal(parts[1], (3,))).all())
        True
        >>> bool(rng.value == parts[0])
        True
        >>> rng
        RandomState(
          value=ShapedArray(key<fry>[])
        )
    """

    __module__ = "state_random"

    def __init__(
        self,
        seed_or_key: Any = None,
        name: str | None = None,
        tag: str | Iterable[str] | None = None,
        *,
        strict: bool = False,
        **metadata: Any,
    ) -> None:
        pending: Any = None
        fn = "RandomState"
        if seed_or_key is None:
            pending = _ENTROPY
        elif _is_int(seed_or_key):
            pending = check_seed(seed_or_key, fn)
        elif _is_int_scalar_array(seed_or_key):
            value = jax.random.key(seed_or_key)
        elif hasattr(seed_or_key, "dtype") and not isinstance(seed_or_key, (bool, float)):
            value = as_key(seed_or_key, fn, "seed_or_key")
        else:
            raise TypeError(
                f"{fn}: `seed_or_key` must be {_ACCEPTED}; got "
                f"{type(seed_or_key).__name__} {seed_or_key!r}."
            )
        super().__init__(None if pending is not None else value, name, tag, strict=strict, **metadata)
        if pending is not None:
            # Lazy key: ``_value`` is absent until first read (see ``__getattr__``).
            self.__dict__["_pending"] = pending
            del self.__dict__["_value"]

    # ------------------------------------------------------------------ lazy key
    def __getattr__(self, name: str) -> Any:
        # Only called for attributes that are missing: ``_value`` of a lazy state.
        if name == "_value" and "_pending" in self.__dict__:
            return self._materialize()
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _materialize(self) -> jax.Array:
        d = self.__dict__
        with _LOCK:
            if "_value" not in d:
                # Concrete even when first touched inside a trace (never a tracer).
                with jax.ensure_compile_time_eval():
                    d["_value"] = key_from_seed(d["_pending"])
            d.pop("_pending", None)
            return d["_value"]

    def _aval_repr(self) -> str:
        if "_value" not in self.__dict__:  # do not create the key just to print it
            return repr(jax.typeof(jax.eval_shape(lambda: jax.random.key(0))))
        return super()._aval_repr()

    # ------------------------------------------------------------------ key handling
    def seed(self, seed: int | None = None) -> None:
        """Reset the key to ``jax.random.key(seed)`` (``None``: fresh OS entropy).

        ``seed`` must be an int (or a 0-d integer array, which may be traced);
        floats, strings and bools are a ``TypeError`` and leave the key unchanged.

        Example:
            >>> from state_random import RandomState
            >>> rng = RandomState()
            >>> rng.seed(7); a = rng.uniform(size=2)
            >>> rng.seed(7); b = rng.uniform(size=2)
            >>> bool((a == b).all())
            True
        """
        self.value = key_from_seed(check_seed(seed, "seed"))

    def get_key(self) -> jax.Array:
        """The current key (a typed key, or a key array), recording a read.

        Example:
            >>> import jax
            >>> from state_random import RandomState
            >>> bool(RandomState(3).get_key() == jax.random.key(3))
            True
        """
        return self.value

    def set_key(self, key: ArrayLike) -> None:
        """Install ``key``: a typed key / key array, or raw ``uint32[..., 2]`` key data.

        Example:
            >>> import jax
            >>> from state_random import RandomState
            >>> rng = RandomState(0)
            >>> rng.set_key(jax.random.PRNGKey(5))     # raw data is wrapped
            >>> bool(rng.get_key() == jax.random.key(5))
            True
        """
        self.value = as_key(key, "set_key")

    def split_key(self, n: int | None = None) -> jax.Array:
        """Advance the state and return one new key (``n=None``) or ``n`` new keys.

        ``parts = jax.random.split(K, 2)``: the state keeps ``parts[0]``, ``parts[1]``
        is returned; with ``n``: ``parts = split(K, n + 1)``, the state keeps
        ``parts[0]`` and ``parts[1:]`` is returned.

        Example:
            >>> import jax
            >>> from state_random import RandomState
            >>> rng = RandomState(0)
            >>> k = rng.split_key()
            >>> parts = jax.random.split(jax.random.key(0))
            >>> bool(k == parts[1]), bool(rng.value == parts[0])
            (True, True)
            >>> rng.split_key(3).shape
            (3,)
        """
        if n is not None:
            n = check_count(n, "n", "split_key", minimum=1)
        key = self.value
        if key.ndim != 0:
            raise ValueError(
                f"split_key: {self.describe()} holds an array of keys of shape {key.shape}, "
                "not a single key. Draw inside a mapping transform that declares its axis "
                "(e.g. vmap2 with state_in_axes), or set a single key with set_key()."
            )
        if n is None:
            parts = jax.random.split(key, 2)
            self.value = parts[0]
            return parts[1]
        parts = jax.random.split(key, n + 1)
        self.value = parts[0]
        return parts[1:]

    def split_keys(self, n: int) -> jax.Array:
        """``n`` new keys (shape ``(n,)``); same as ``split_key(n)``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).split_keys(4).shape
            (4,)
        """
        return self.split_key(check_count(n, "n", "split_keys", minimum=1))

    def clone(self) -> "RandomState":
        """An independent RandomState that starts from the same key.

        Example:
            >>> from state_random import RandomState
            >>> a = RandomState(1); b = a.clone()
            >>> bool((a.normal(size=2) == b.normal(size=2)).all())
            True
        """
        return RandomState(self.value)

    def _source(self, key: Any, fn: str) -> Any:
        if key is None:
            return self.split_key
        return as_key(key, fn, "key", allow_batch=False)

    # ------------------------------------------------------------------ samplers
    def rand(self, *dn: int, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
        """Uniform samples in ``[0, 1)`` of shape ``dn`` (``rand()`` is a scalar).

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).rand(2, 3)
            >>> x.shape, bool(((0 <= x) & (x < 1)).all())
            ((2, 3), True)
        """
        return S.rand(self._source(key, "rand"), dn, dtype)

    def randn(self, *dn: int, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
        """Standard-normal samples of shape ``dn``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).randn(4).shape
            (4,)
        """
        return S.randn(self._source(key, "randn"), dn, dtype)

    def random(self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
        """Uniform samples in ``[0, 1)`` of shape ``size``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).random((2, 2)).dtype
            dtype('float32')
        """
        return S.random(self._source(key, "random"), size, dtype)

    def uniform(
        self, low: ArrayLike = 0.0, high: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Uniform samples in ``[low, high)`` (``jax.random.uniform(k, shape, dtype, low, high)``).

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).uniform(2.0, 3.0, size=5)
            >>> bool(((2 <= x) & (x < 3)).all())
            True
        """
        return S.uniform(self._source(key, "uniform"), low, high, size, dtype)

    def normal(
        self, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Normal samples: ``jax.random.normal(k, shape, dtype) * scale + loc``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> RandomState(0).normal(jnp.zeros(3), 2.0).shape
            (3,)
        """
        return S.normal(self._source(key, "normal"), loc, scale, size, dtype)

    def standard_normal(
        self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Standard-normal samples of shape ``size``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).standard_normal(3).shape
            (3,)
        """
        return S.standard_normal(self._source(key, "standard_normal"), size, dtype)

    def randint(
        self, low: ArrayLike, high: ArrayLike | None = None, size: Size = None,
        dtype: DTypeLike = int, *, key: ArrayLike | None = None,
    ) -> jax.Array:
        """Integers in ``[low, high)`` (``[0, low)`` when ``high`` is None); int32 by default.

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).randint(10, size=6)
            >>> x.dtype, bool(((0 <= x) & (x < 10)).all())
            (dtype('int32'), True)
        """
        return S.randint(self._source(key, "randint"), low, high, size, dtype)

    def bernoulli(self, p: ArrayLike = 0.5, size: Size = None, *, key: ArrayLike | None = None) -> jax.Array:
        """Boolean samples that are True with probability ``p`` (``p`` must be in [0, 1]).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).bernoulli(1.0, size=3)
            Array([ True,  True,  True], dtype=bool)
        """
        return S.bernoulli(self._source(key, "bernoulli"), p, size)

    def binomial(
        self, n: ArrayLike, p: ArrayLike, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Binomial counts of ``n`` trials with success probability ``p`` (int32 by default).

        ``dtype`` may be an integer or a floating dtype (``jax.random.binomial`` is float;
        the result is cast).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).binomial(10, 1.0, size=2)
            Array([10, 10], dtype=int32)
        """
        return S.binomial(self._source(key, "binomial"), n, p, size, dtype)

    def choice(
        self, a: int | ArrayLike, size: Size = None, replace: bool = True, p: ArrayLike | None = None,
        *, axis: int = 0, key: ArrayLike | None = None,
    ) -> jax.Array:
        """Random elements of ``a`` (or of ``arange(a)`` for an int), optionally weighted by ``p``.

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).choice(5, size=5, replace=False)
            >>> sorted(x.tolist())
            [0, 1, 2, 3, 4]
        """
        return S.choice(self._source(key, "choice"), a, size, replace, p, axis)

    def permutation(
        self, x: int | ArrayLike, axis: int = 0, independent: bool = False, *, key: ArrayLike | None = None
    ) -> jax.Array:
        """A permuted copy of ``x`` along ``axis`` (for an int: a permutation of ``arange(x)``).

        Example:
            >>> from state_random import RandomState
            >>> sorted(RandomState(0).permutation(4).tolist())
            [0, 1, 2, 3]
        """
        return S.permutation(self._source(key, "permutation"), x, axis, independent)

    def shuffle(self, x: ArrayLike, axis: int = 0, *, key: ArrayLike | None = None) -> jax.Array:
        """Return ``x`` shuffled along ``axis``.

        JAX arrays are immutable, so unlike ``numpy.random.shuffle`` this does not work
        in place: use the returned array (``x = rng.shuffle(x)``).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> sorted(RandomState(0).shuffle(jnp.arange(4)).tolist())
            [0, 1, 2, 3]
        """
        return S.shuffle(self._source(key, "shuffle"), x, axis)

    def truncated_normal(
        self, lower: ArrayLike, upper: ArrayLike, size: Size = None, loc: ArrayLike = 0.0,
        scale: ArrayLike = 1.0, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Normal(``loc``, ``scale``) samples truncated to ``[lower, upper]`` (bounds in output units).

        Computed as ``jax.random.truncated_normal(k, (lower-loc)/scale, (upper-loc)/scale,
        shape) * scale + loc``.

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).truncated_normal(-1.0, 1.0, size=100)
            >>> bool(((-1 <= x) & (x <= 1)).all())
            True
        """
        return S.truncated_normal(self._source(key, "truncated_normal"), lower, upper, size, loc, scale, dtype)

    def exponential(
        self, scale: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Exponential samples with mean ``scale``.

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).exponential(2.0, size=10) >= 0).all())
            True
        """
        return S.exponential(self._source(key, "exponential"), scale, size, dtype)

    def gamma(
        self, shape: ArrayLike, scale: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Gamma(``shape``, ``scale``) samples: ``jax.random.gamma(k, shape) * scale``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).gamma(2.0, 3.0, size=(2, 2)).shape
            (2, 2)
        """
        return S.gamma(self._source(key, "gamma"), shape, scale, size, dtype)

    def beta(
        self, a: ArrayLike, b: ArrayLike, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Beta(``a``, ``b``) samples in ``[0, 1]``.

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).beta(2.0, 5.0, size=4)
            >>> bool(((0 <= x) & (x <= 1)).all())
            True
        """
        return S.beta(self._source(key, "beta"), a, b, size, dtype)

    def poisson(
        self, lam: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Poisson counts with rate ``lam`` (int32 by default).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).poisson(0.0, size=3)
            Array([0, 0, 0], dtype=int32)
        """
        return S.poisson(self._source(key, "poisson"), lam, size, dtype)

    def categorical(
        self, logits: ArrayLike, axis: int = -1, size: Size = None, *, key: ArrayLike | None = None
    ) -> jax.Array:
        """Category indices drawn from unnormalised log-probabilities ``logits`` along ``axis``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> RandomState(0).categorical(jnp.array([-1e9, 0.0, -1e9]), size=3)
            Array([1, 1, 1], dtype=int32)
        """
        return S.categorical(self._source(key, "categorical"), logits, axis, size)

    def lognormal(
        self, mean: ArrayLike = 0.0, sigma: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """``exp(N(mean, sigma))`` samples: ``jax.random.lognormal(k, sigma, shape) * exp(mean)``.

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).lognormal(size=5) > 0).all())
            True
        """
        return S.lognormal(self._source(key, "lognormal"), mean, sigma, size, dtype)

    def laplace(
        self, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Laplace samples: ``jax.random.laplace(k, shape) * scale + loc``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).laplace(1.0, 0.0, size=2)
            Array([1., 1.], dtype=float32)
        """
        return S.laplace(self._source(key, "laplace"), loc, scale, size, dtype)

    def logistic(
        self, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Logistic samples: ``jax.random.logistic(k, shape) * scale + loc``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).logistic(size=(2, 3)).shape
            (2, 3)
        """
        return S.logistic(self._source(key, "logistic"), loc, scale, size, dtype)

    def gumbel(
        self, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Gumbel samples: ``jax.random.gumbel(k, shape) * scale + loc``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).gumbel(size=3).shape
            (3,)
        """
        return S.gumbel(self._source(key, "gumbel"), loc, scale, size, dtype)

    def cauchy(
        self, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0, size: Size = None, *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Cauchy samples: ``jax.random.cauchy(k, shape) * scale + loc``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).cauchy(size=3).shape
            (3,)
        """
        return S.cauchy(self._source(key, "cauchy"), loc, scale, size, dtype)

    def chisquare(
        self, df: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Chi-square samples with ``df`` degrees of freedom.

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).chisquare(3.0, size=5) >= 0).all())
            True
        """
        return S.chisquare(self._source(key, "chisquare"), df, size, dtype)

    def dirichlet(
        self, alpha: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Dirichlet samples; the output shape is ``size + alpha.shape[-1:]``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> x = RandomState(0).dirichlet(jnp.ones(3), size=2)
            >>> x.shape, bool(jnp.allclose(x.sum(-1), 1.0))
            ((2, 3), True)
        """
        return S.dirichlet(self._source(key, "dirichlet"), alpha, size, dtype)

    def multivariate_normal(
        self, mean: ArrayLike, cov: ArrayLike, size: Size = None, method: str = "cholesky", *,
        key: ArrayLike | None = None, dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Multivariate normal samples; the output shape is ``size + mean.shape[-1:]``.

        ``method`` is ``'cholesky'``, ``'eigh'`` or ``'svd'`` (as in ``jax.random``).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> RandomState(0).multivariate_normal(jnp.zeros(2), jnp.eye(2), size=5).shape
            (5, 2)
        """
        return S.multivariate_normal(self._source(key, "multivariate_normal"), mean, cov, size, method, dtype)

    def geometric(
        self, p: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Number of Bernoulli(``p``) trials up to and including the first success (>= 1).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).geometric(1.0, size=3)
            Array([1, 1, 1], dtype=int32)
        """
        return S.geometric(self._source(key, "geometric"), p, size, dtype)

    def pareto(
        self, a: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """NumPy's Pareto (Lomax / Pareto II, support ``[0, inf)``): ``jax.random.pareto(k, a) - 1``.

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).pareto(3.0, size=5) >= 0).all())
            True
        """
        return S.pareto(self._source(key, "pareto"), a, size, dtype)

    def weibull(
        self, a: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """NumPy's one-parameter Weibull (scale 1, shape ``a``): ``jax.random.weibull_min(k, 1, a)``.

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).weibull(1.5, size=5) >= 0).all())
            True
        """
        return S.weibull(self._source(key, "weibull"), a, size, dtype)

    def t(
        self, df: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Student's t samples with ``df`` degrees of freedom.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).t(5.0, size=(3,)).shape
            (3,)
        """
        return S.t(self._source(key, "t"), df, size, dtype)
