"""Multi-parameter continuous samplers of ``RandomState``: F, non-central, triangular, von Mises ...

Written once (``_default`` binds them to ``DEFAULT``). Samplers that need more
than one random stream split the single key ``self._draw`` hands them, so every
call still advances the state exactly once (and not at all when it fails).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike, DTypeLike

from . import _algorithms as A
from ._checks import (
    Draw,
    Size,
    as_param,
    check_count,
    check_less,
    check_size,
    concrete,
    float_dtype,
    nonneg,
    out_shape,
    positive,
    shape_of,
)

__all__ = ["SpecialSamplers"]


def _noncentral_chisquare(key: jax.Array, df: Any, nonc: Any, shape: tuple[Any, ...], dt: Any) -> jax.Array:
    # df > 1: chi2(df - 1) + (N + sqrt(nonc))**2; otherwise the Poisson mixture
    # chi2(df + 2 * Poisson(nonc / 2)). Both are exact; the first avoids the mixture.
    kp, kn, kg = jax.random.split(key, 3)
    df = jnp.asarray(df, dt)
    nonc = jnp.asarray(nonc, dt)
    i = jax.random.poisson(kp, 0.5 * nonc, shape).astype(dt)
    big = df > 1.0
    dof = jnp.where(big, df - 1.0, df + 2.0 * i)
    chi2 = 2.0 * jax.random.gamma(kg, 0.5 * dof, shape, dt)
    n = jax.random.normal(kn, shape, dt) + jnp.sqrt(nonc)
    # An infinite non-centrality gives infinity (as in NumPy), not the int32-clipped Poisson count.
    return jnp.where(jnp.isinf(nonc), jnp.inf, jnp.where(big, chi2 + n * n, chi2))


class SpecialSamplers:
    """``f``, ``noncentral_*``, ``triangular``, ``vonmises``, ``wald``, ``dirichlet``, ``orthogonal``."""

    _draw: Draw

    def f(
        self,
        dfnum: ArrayLike,
        dfden: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """F (Fisher-Snedecor) samples with ``dfnum`` and ``dfden`` degrees of freedom.

        Args:
            dfnum: the degrees of freedom of the numerator, ``> 0``.
            dfden: the degrees of freedom of the denominator, ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).f(5.0, 10.0, size=4) > 0).all())
            True
        """
        fn = "f"
        dt = float_dtype(dtype, fn)
        dfnum, dfden = as_param(dfnum, "dfnum", fn), as_param(dfden, "dfden", fn)
        positive(dfnum, "dfnum", fn)
        positive(dfden, "dfden", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(dfnum), shape_of(dfden))
        return self._draw(key, fn, shape, dt, lambda k: jax.random.f(k, dfnum, dfden, shape, dt))

    def noncentral_chisquare(
        self,
        df: ArrayLike,
        nonc: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Non-central chi-square samples (``df > 0`` degrees of freedom, non-centrality ``nonc >= 0``).

        Args:
            df: the degrees of freedom, ``> 0``.
            nonc: the non-centrality, ``>= 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).noncentral_chisquare(3.0, 2.0, size=5) >= 0).all())
            True
        """
        fn = "noncentral_chisquare"
        dt = float_dtype(dtype, fn)
        df, nonc = as_param(df, "df", fn), as_param(nonc, "nonc", fn)
        positive(df, "df", fn)
        nonneg(nonc, "nonc", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(df), shape_of(nonc))
        return self._draw(key, fn, shape, dt, lambda k: _noncentral_chisquare(k, df, nonc, shape, dt))

    def noncentral_f(
        self,
        dfnum: ArrayLike,
        dfden: ArrayLike,
        nonc: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Non-central F samples: ``(noncentral_chisquare(dfnum, nonc) / dfnum) / (chisquare(dfden) / dfden)``.

        Args:
            dfnum: the degrees of freedom of the numerator, ``> 0``.
            dfden: the degrees of freedom of the denominator, ``> 0``.
            nonc: the non-centrality of the numerator, ``>= 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).noncentral_f(3.0, 20.0, 3.0, size=5) > 0).all())
            True
        """
        fn = "noncentral_f"
        dt = float_dtype(dtype, fn)
        dfnum, dfden = as_param(dfnum, "dfnum", fn), as_param(dfden, "dfden", fn)
        nonc = as_param(nonc, "nonc", fn)
        positive(dfnum, "dfnum", fn)
        positive(dfden, "dfden", fn)
        nonneg(nonc, "nonc", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(dfnum), shape_of(dfden), shape_of(nonc))

        def sample(k: jax.Array) -> jax.Array:
            k_num, k_den = jax.random.split(k)
            num = _noncentral_chisquare(k_num, dfnum, nonc, shape, dt) / jnp.asarray(dfnum, dt)
            den = jax.random.chisquare(k_den, dfden, shape, dt) / jnp.asarray(dfden, dt)
            return num / den

        return self._draw(key, fn, shape, dt, sample)

    def triangular(
        self,
        left: ArrayLike = 0.0,
        mode: ArrayLike = 0.5,
        right: ArrayLike = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Triangular samples on ``[left, right]`` peaking at ``mode`` (``left <= mode <= right``).

        Args:
            left: the lower end.
            mode: the peak, in ``[left, right]``.
            right: the upper end, ``> left``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).triangular(-1.0, 0.0, 2.0, size=6)
            >>> bool(((-1 <= x) & (x <= 2)).all())
            True
        """
        fn = "triangular"
        dt = float_dtype(dtype, fn)
        left, mode, right = (as_param(v, n, fn) for v, n in ((left, "left"), (mode, "mode"), (right, "right")))
        shape = out_shape(check_size(size, fn), fn, shape_of(left), shape_of(mode), shape_of(right))
        check_less(left, right, ("left", "right"), fn)
        lo, mid, hi = concrete(left), concrete(mode), concrete(right)
        if lo is not None and mid is not None and hi is not None and not ((lo <= mid) & (mid <= hi)).all():
            raise ValueError(f"{fn}: `mode` must lie in [left, right], got mode={mid}, left={lo}, right={hi}.")
        return self._draw(key, fn, shape, dt, lambda k: jax.random.triangular(k, left, mode, right, shape, dt))

    def vonmises(
        self,
        mu: ArrayLike,
        kappa: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Von Mises (circular normal) angles in ``[-pi, pi)`` with mean ``mu`` and concentration ``kappa``.

        Args:
            mu: the mean angle.
            kappa: the concentration, ``>= 0`` (0 is uniform on the circle).
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> import numpy as np
            >>> from state_random import RandomState
            >>> x = RandomState(0).vonmises(0.5, 4.0, size=6)
            >>> bool(((-np.pi <= x) & (x <= np.pi)).all())
            True
        """
        fn = "vonmises"
        dt = float_dtype(dtype, fn)
        mu, kappa = as_param(mu, "mu", fn), as_param(kappa, "kappa", fn)
        nonneg(kappa, "kappa", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(mu), shape_of(kappa))

        def sample(k: jax.Array) -> jax.Array:
            theta = A.vonmises_centered(k, kappa, shape, dt) + jnp.asarray(mu, dt)
            return (theta + jnp.pi) % (2.0 * jnp.pi) - jnp.pi

        return self._draw(key, fn, shape, dt, sample)

    def wald(
        self,
        mean: ArrayLike,
        scale: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Wald (inverse Gaussian) samples with mean ``mean`` and shape ``scale``.

        Uses ``IG(mean, scale) = scale * IG(mean / scale, 1)`` and ``jax.random.wald``.

        Args:
            mean: the mean, ``> 0``.
            scale: the shape parameter (often called lambda), ``> 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).wald(1.0, 2.0, size=5) > 0).all())
            True
        """
        fn = "wald"
        dt = float_dtype(dtype, fn)
        mean, scale = as_param(mean, "mean", fn), as_param(scale, "scale", fn)
        positive(mean, "mean", fn)
        positive(scale, "scale", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(mean), shape_of(scale))
        scale = jnp.asarray(scale, dt)
        return self._draw(
            key, fn, shape, dt, lambda k: jax.random.wald(k, jnp.asarray(mean, dt) / scale, shape, dt) * scale
        )

    def dirichlet(
        self, alpha: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Dirichlet samples; the output shape is ``size + alpha.shape[-1:]``.

        Args:
            alpha: the concentrations, shape ``(..., k)``, all ``> 0``.
            size: the batch shape of the samples (the ``k`` dimension is appended); None: ``alpha.shape[:-1]``.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> x = RandomState(0).dirichlet(jnp.ones(3), size=2)
            >>> x.shape, bool(jnp.allclose(x.sum(-1), 1.0))
            ((2, 3), True)
        """
        fn = "dirichlet"
        dt = float_dtype(dtype, fn)
        alpha = as_param(alpha, "alpha", fn)
        ashape = shape_of(alpha)
        if len(ashape) < 1:
            raise ValueError(f"{fn}: `alpha` must have at least one dimension, got a scalar.")
        positive(alpha, "alpha", fn)
        shape = out_shape(check_size(size, fn), fn, ashape[:-1])
        return self._draw(key, fn, (*shape, ashape[-1]), dt, lambda k: jax.random.dirichlet(k, alpha, shape, dt))

    def orthogonal(
        self, n: int, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Uniformly (Haar) distributed orthogonal ``n x n`` matrices; shape ``size + (n, n)``.

        Args:
            n: the matrix size, an int ``>= 1``.
            size: the batch shape (``(n, n)`` is appended); None: a single matrix.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> q = RandomState(0).orthogonal(3)
            >>> bool(jnp.allclose(q @ q.T, jnp.eye(3), atol=1e-5))
            True
        """
        fn = "orthogonal"
        dt = float_dtype(dtype, fn)
        n = check_count(n, "n", fn, minimum=1)
        shape = check_size(size, fn) or ()
        return self._draw(key, fn, (*shape, n, n), dt, lambda k: jax.random.orthogonal(k, n, shape, dt))
