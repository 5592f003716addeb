"""Continuous one-parameter and location/scale samplers of ``RandomState`` (written once).

As everywhere in this package: validate first, then draw through
``self._draw(key, name, shape, dtype, sample)``, so a failed call never advances
the state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike, DTypeLike

from ._checks import Draw, Size, as_param, check_size, float_dtype, loc_scale, nonneg, out_shape, positive, shape_of

__all__ = ["ContinuousSamplers"]


def _one_param(
    fn: str, x: Any, name: str, size: Size, dtype: Any, check: Callable[..., None] | None
) -> tuple[Any, ...]:
    dt = float_dtype(dtype, fn)
    x = as_param(x, name, fn)
    if check is not None:
        check(x, name, fn)
    return x, out_shape(check_size(size, fn), fn, shape_of(x)), dt


def _standard(fn: str, size: Size, dtype: Any) -> tuple[Any, ...]:
    return check_size(size, fn) or (), float_dtype(dtype, fn)


class ContinuousSamplers:
    """Exponential, gamma, t, Weibull, location/scale families ... (a mixin of ``RandomState``)."""

    _draw: Draw

    def exponential(
        self,
        scale: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Exponential samples with mean ``scale``.

        Args:
            scale: the mean, ``>= 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).exponential(2.0, size=10) >= 0).all())
            True
        """
        scale, shape, dt = _one_param("exponential", 1.0 if scale is None else scale, "scale", size, dtype, nonneg)
        return self._draw(key, "exponential", shape, dt, lambda k: jax.random.exponential(k, shape, dt) * scale)

    def standard_exponential(
        self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Exponential samples with mean 1.

        Args:
            size: the output shape (an int or a tuple of ints); None: a single sample.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).standard_exponential((2, 2)).shape
            (2, 2)
        """
        shape, dt = _standard("standard_exponential", size, dtype)
        return self._draw(key, "standard_exponential", shape, dt, lambda k: jax.random.exponential(k, shape, dt))

    def gamma(
        self,
        shape: ArrayLike,
        scale: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Gamma(``shape``, ``scale``) samples: ``jax.random.gamma(k, shape) * scale``.

        Args:
            shape: the shape parameter, ``> 0``.
            scale: the scale, ``>= 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).gamma(2.0, 3.0, size=(2, 2)).shape
            (2, 2)
        """
        fn = "gamma"
        dt = float_dtype(dtype, fn)
        a = as_param(shape, "shape", fn)
        scale = 1.0 if scale is None else as_param(scale, "scale", fn)
        positive(a, "shape", fn)
        nonneg(scale, "scale", fn)
        out = out_shape(check_size(size, fn), fn, shape_of(a), shape_of(scale))
        return self._draw(key, fn, out, dt, lambda k: jax.random.gamma(k, a, out, dt) * scale)

    def standard_gamma(
        self, shape: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Gamma(``shape``) samples with scale 1.

        Args:
            shape: the shape parameter, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).standard_gamma(0.5, size=8) > 0).all())
            True
        """
        a, out, dt = _one_param("standard_gamma", shape, "shape", size, dtype, positive)
        return self._draw(key, "standard_gamma", out, dt, lambda k: jax.random.gamma(k, a, out, dt))

    def beta(
        self,
        a: ArrayLike,
        b: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Beta(``a``, ``b``) samples in ``[0, 1]``.

        Args:
            a: the first shape parameter, ``> 0``.
            b: the second shape parameter, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).beta(2.0, 5.0, size=4)
            >>> bool(((0 <= x) & (x <= 1)).all())
            True
        """
        fn = "beta"
        dt = float_dtype(dtype, fn)
        a, b = as_param(a, "a", fn), as_param(b, "b", fn)
        positive(a, "a", fn)
        positive(b, "b", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(a), shape_of(b))
        return self._draw(key, fn, shape, dt, lambda k: jax.random.beta(k, a, b, shape, dt))

    def chisquare(
        self,
        df: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
        check_valid: bool = True,
    ) -> jax.Array:
        """Chi-square samples with ``df`` degrees of freedom.

        ``check_valid=False`` skips the ``df > 0`` check of host values.

        Args:
            df: the degrees of freedom, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).
            check_valid: check host values of the parameters (``df > 0``); False skips the check.

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).chisquare(3.0, size=5) >= 0).all())
            True
        """
        df, shape, dt = _one_param("chisquare", df, "df", size, dtype, positive if check_valid else None)
        return self._draw(key, "chisquare", shape, dt, lambda k: jax.random.chisquare(k, df, shape, dt))

    def t(
        self, df: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Student's t samples with ``df`` degrees of freedom.

        Args:
            df: the degrees of freedom, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).t(5.0, size=(3,)).shape
            (3,)
        """
        df, shape, dt = _one_param("t", df, "df", size, dtype, positive)
        return self._draw(key, "t", shape, dt, lambda k: jax.random.t(k, df, shape, dt))

    def standard_t(
        self, df: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """NumPy's name for ``t``: Student's t samples with ``df`` degrees of freedom.

        Args:
            df: the degrees of freedom, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).standard_t(4.0, size=3) == RandomState(0).t(4.0, size=3)).all())
            True
        """
        df, shape, dt = _one_param("standard_t", df, "df", size, dtype, positive)
        return self._draw(key, "standard_t", shape, dt, lambda k: jax.random.t(k, df, shape, dt))

    def pareto(
        self, a: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """NumPy's Pareto (Lomax / Pareto II, support ``[0, inf)``): ``jax.random.pareto(k, a) - 1``.

        Args:
            a: the shape parameter, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).pareto(3.0, size=5) >= 0).all())
            True
        """
        a, shape, dt = _one_param("pareto", a, "a", size, dtype, positive)
        # NumPy's pareto is the Lomax (Pareto II) distribution: classical Pareto minus 1.
        return self._draw(key, "pareto", shape, dt, lambda k: jax.random.pareto(k, a, shape, dt) - 1)

    def power(
        self,
        a: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
        check_valid: bool = True,
    ) -> jax.Array:
        """Power-function samples in ``[0, 1]`` with density ``a * x**(a - 1)``: ``U ** (1 / a)``.

        ``check_valid=False`` skips the ``a > 0`` check of host values.

        Args:
            a: the exponent parameter, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).
            check_valid: check host values of the parameters (``a > 0``); False skips the check.

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).power(3.0, size=6)
            >>> bool(((0 <= x) & (x <= 1)).all())
            True
        """
        a, shape, dt = _one_param("power", a, "a", size, dtype, positive if check_valid else None)
        return self._draw(
            key, "power", shape, dt, lambda k: jax.random.uniform(k, shape, dt) ** (1.0 / jnp.asarray(a, dt))
        )

    def weibull(
        self, a: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """NumPy's one-parameter Weibull (scale 1, shape ``a``): ``jax.random.weibull_min(k, 1, a)``.

        Args:
            a: the shape parameter, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).weibull(1.5, size=5) >= 0).all())
            True
        """
        a, shape, dt = _one_param("weibull", a, "a", size, dtype, positive)
        return self._draw(key, "weibull", shape, dt, lambda k: jax.random.weibull_min(k, 1.0, a, shape, dt))

    def weibull_min(
        self,
        a: ArrayLike,
        scale: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Weibull samples with shape ``a`` and scale ``scale`` (SciPy's ``weibull_min``).

        Args:
            a: the shape parameter, ``> 0``.
            scale: the scale, ``> 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).weibull_min(2.0, 3.0, size=5) >= 0).all())
            True
        """
        fn = "weibull_min"
        dt = float_dtype(dtype, fn)
        a = as_param(a, "a", fn)
        scale = 1.0 if scale is None else as_param(scale, "scale", fn)
        positive(a, "a", fn)
        positive(scale, "scale", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(a), shape_of(scale))
        return self._draw(key, fn, shape, dt, lambda k: jax.random.weibull_min(k, scale, a, shape, dt))

    def rayleigh(
        self,
        scale: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Rayleigh samples with scale ``scale`` (mode of the distribution).

        Args:
            scale: the scale, ``> 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).rayleigh(2.0, size=5) >= 0).all())
            True
        """
        scale, shape, dt = _one_param("rayleigh", 1.0 if scale is None else scale, "scale", size, dtype, positive)
        return self._draw(key, "rayleigh", shape, dt, lambda k: jax.random.rayleigh(k, scale, shape, dt))

    def maxwell(self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
        """Maxwell-Boltzmann samples (scale 1): the length of a 3-d standard normal vector.

        Args:
            size: the output shape (an int or a tuple of ints); None: a single sample.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).maxwell(4) > 0).all())
            True
        """
        shape, dt = _standard("maxwell", size, dtype)
        return self._draw(key, "maxwell", shape, dt, lambda k: jax.random.maxwell(k, shape, dt))

    def loggamma(
        self, a: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """The logarithm of Gamma(``a``) samples, accurate for small ``a`` (``jax.random.loggamma``).

        Args:
            a: the shape parameter of the gamma distribution, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).loggamma(0.01, size=3).shape
            (3,)
        """
        a, shape, dt = _one_param("loggamma", a, "a", size, dtype, positive)
        return self._draw(key, "loggamma", shape, dt, lambda k: jax.random.loggamma(k, a, shape, dt))

    def laplace(
        self,
        loc: ArrayLike | None = 0.0,
        scale: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Laplace samples: ``jax.random.laplace(k, shape) * scale + loc``.

        Args:
            loc: the location (the peak); None means 0.
            scale: the scale, ``>= 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).laplace(1.0, 0.0, size=2)
            Array([1., 1.], dtype=float32)
        """
        loc, scale, shape, dt = loc_scale("laplace", loc, scale, size, dtype)
        return self._draw(key, "laplace", shape, dt, lambda k: jax.random.laplace(k, shape, dt) * scale + loc)

    def logistic(
        self,
        loc: ArrayLike | None = 0.0,
        scale: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Logistic samples: ``jax.random.logistic(k, shape) * scale + loc``.

        Args:
            loc: the location (the mean); None means 0.
            scale: the scale, ``>= 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).logistic(size=(2, 3)).shape
            (2, 3)
        """
        loc, scale, shape, dt = loc_scale("logistic", loc, scale, size, dtype)
        return self._draw(key, "logistic", shape, dt, lambda k: jax.random.logistic(k, shape, dt) * scale + loc)

    def gumbel(
        self,
        loc: ArrayLike | None = 0.0,
        scale: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Gumbel samples: ``jax.random.gumbel(k, shape) * scale + loc``.

        Args:
            loc: the location (the mode); None means 0.
            scale: the scale, ``>= 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).gumbel(size=3).shape
            (3,)
        """
        loc, scale, shape, dt = loc_scale("gumbel", loc, scale, size, dtype)
        return self._draw(key, "gumbel", shape, dt, lambda k: jax.random.gumbel(k, shape, dt) * scale + loc)

    def cauchy(
        self,
        loc: ArrayLike | None = 0.0,
        scale: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Cauchy samples: ``jax.random.cauchy(k, shape) * scale + loc``.

        Args:
            loc: the location (the median); None means 0.
            scale: the scale, ``>= 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).cauchy(size=3).shape
            (3,)
        """
        loc, scale, shape, dt = loc_scale("cauchy", loc, scale, size, dtype)
        return self._draw(key, "cauchy", shape, dt, lambda k: jax.random.cauchy(k, shape, dt) * scale + loc)

    def standard_cauchy(
        self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Cauchy samples with location 0 and scale 1.

        Args:
            size: the output shape (an int or a tuple of ints); None: a single sample.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).standard_cauchy(2).shape
            (2,)
        """
        shape, dt = _standard("standard_cauchy", size, dtype)
        return self._draw(key, "standard_cauchy", shape, dt, lambda k: jax.random.cauchy(k, shape, dt))
