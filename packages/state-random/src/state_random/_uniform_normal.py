"""Uniform and normal samplers of ``RandomState`` (each written once; ``_default`` binds them to ``DEFAULT``).

Every sampler validates its arguments first and then hands the computation that
uses the key to ``self._draw(key, name, shape, dtype, sample)``, which checks the
output size, splits the state's key, runs ``sample`` and only then stores the
state's next key. So a call with bad arguments, and a draw that raises, never
advance a random state.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike, DTypeLike

from . import _algorithms as A
from ._checks import (
    Draw,
    Size,
    as_param,
    check_dims,
    check_draw_size,
    check_less,
    check_psd,
    check_size,
    check_span,
    concrete,
    finite,
    float_dtype,
    loc_scale,
    nonneg,
    out_shape,
    positive,
    shape_of,
)

__all__ = ["UniformNormalSamplers"]


def _like_float_dtype(x: Any, dtype: Any, fn: str) -> np.dtype:
    if dtype is not None:
        return float_dtype(dtype, fn)
    own = getattr(x, "dtype", None)
    if own is not None and jnp.issubdtype(own, jnp.floating):
        found: np.dtype[Any] = np.dtype(own)
        return found
    return float_dtype(None, fn)


class UniformNormalSamplers:
    """``rand``, ``uniform``, ``normal`` and their relatives (a mixin of ``RandomState``)."""

    _draw: Draw

    def _uniform01(self, fn: str, size: Size, key: Any, dtype: Any) -> jax.Array:
        shape, dt = check_size(size, fn) or (), float_dtype(dtype, fn)
        return self._draw(key, fn, shape, dt, lambda k: jax.random.uniform(k, shape, dt))

    def rand(self, *dn: int, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
        """Uniform samples in ``[0, 1)`` of shape ``dn`` (``rand()`` is a scalar).

        Args:
            *dn: the output shape, one int per dimension (none: a single sample).
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).rand(2, 3)
            >>> x.shape, bool(((0 <= x) & (x < 1)).all())
            ((2, 3), True)
        """
        shape, dt = check_dims(dn, "rand"), float_dtype(dtype, "rand")
        check_draw_size(shape, dt, "rand", "the dimensions")
        return self._draw(key, "rand", shape, dt, lambda k: jax.random.uniform(k, shape, dt))

    def randn(self, *dn: int, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
        """Standard-normal samples of shape ``dn``.

        Args:
            *dn: the output shape, one int per dimension (none: a single sample).
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).randn(4).shape
            (4,)
        """
        shape, dt = check_dims(dn, "randn"), float_dtype(dtype, "randn")
        check_draw_size(shape, dt, "randn", "the dimensions")
        return self._draw(key, "randn", shape, dt, lambda k: jax.random.normal(k, shape, dt))

    def random(self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
        """Uniform samples in ``[0, 1)`` of shape ``size``.

        Args:
            size: the output shape (an int or a tuple of ints); None: a single sample.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).random((2, 2)).dtype
            dtype('float32')
        """
        return self._uniform01("random", size, key, dtype)

    def random_sample(
        self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """NumPy's name for ``random``: uniform samples in ``[0, 1)``.

        Args:
            size: the output shape (an int or a tuple of ints); None: a single sample.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).random_sample(3) == RandomState(0).random(3)).all())
            True
        """
        return self._uniform01("random_sample", size, key, dtype)

    def ranf(self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
        """NumPy's alias of ``random_sample``: uniform samples in ``[0, 1)``.

        Args:
            size: the output shape (an int or a tuple of ints); None: a single sample.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).ranf((2,)).shape
            (2,)
        """
        return self._uniform01("ranf", size, key, dtype)

    def sample(self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None) -> jax.Array:
        """NumPy's alias of ``random_sample``: uniform samples in ``[0, 1)``.

        Args:
            size: the output shape (an int or a tuple of ints); None: a single sample.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).sample(5).shape
            (5,)
        """
        return self._uniform01("sample", size, key, dtype)

    def uniform(
        self,
        low: ArrayLike = 0.0,
        high: ArrayLike = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Uniform samples in ``[low, high)`` (``jax.random.uniform(k, shape, dtype, low, high)``).

        ``low`` must be less than ``high``, and both and their difference finite
        (checked for host values; NumPy refuses infinite bounds too).

        Args:
            low: the lower bound (included); an array broadcasts with ``high``.
            high: the upper bound (excluded).
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).uniform(2.0, 3.0, size=5)
            >>> bool(((2 <= x) & (x < 3)).all())
            True
        """
        fn = "uniform"
        dt = float_dtype(dtype, fn)
        low, high = as_param(low, "low", fn), as_param(high, "high", fn)
        check_less(low, high, ("low", "high"), fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(low), shape_of(high))
        check_span(low, high, ("low", "high"), fn)
        return self._draw(key, fn, shape, dt, lambda k: jax.random.uniform(k, shape, dt, low, high))

    def normal(
        self,
        loc: ArrayLike | None = 0.0,
        scale: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Normal samples: ``jax.random.normal(k, shape, dtype) * scale + loc``.

        ``loc=None`` / ``scale=None`` mean 0 and 1 (as in brainstate).

        Args:
            loc: the mean; None means 0.
            scale: the standard deviation, ``>= 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> RandomState(0).normal(jnp.zeros(3), 2.0).shape
            (3,)
        """
        loc, scale, shape, dt = loc_scale("normal", loc, scale, size, dtype)
        return self._draw(key, "normal", shape, dt, lambda k: jax.random.normal(k, shape, dt) * scale + loc)

    def standard_normal(
        self, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Standard-normal samples of shape ``size``.

        Args:
            size: the output shape (an int or a tuple of ints); None: a single sample.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).standard_normal(3).shape
            (3,)
        """
        fn = "standard_normal"
        shape, dt = check_size(size, fn) or (), float_dtype(dtype, fn)
        return self._draw(key, fn, shape, dt, lambda k: jax.random.normal(k, shape, dt))

    def truncated_normal(
        self,
        lower: ArrayLike,
        upper: ArrayLike,
        size: Size = None,
        loc: ArrayLike = 0.0,
        scale: ArrayLike = 1.0,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
        check_valid: bool = True,
    ) -> jax.Array:
        """Normal(``loc``, ``scale``) samples truncated to ``[lower, upper]`` (bounds in output units).

        Computed as ``jax.random.truncated_normal(k, (lower-loc)/scale, (upper-loc)/scale,
        shape) * scale + loc``. With ``check_valid`` (the default) host values are
        checked: finite ``loc`` and ``scale > 0`` (the bounds may be infinite),
        ``lower < upper``, and ``loc`` within 2 ``scale`` of ``[lower, upper]``
        (farther out the sampler loses accuracy).

        Args:
            lower: the lower bound of the samples (in output units).
            upper: the upper bound of the samples (in output units).
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            loc: the mean of the normal before truncation.
            scale: its standard deviation, ``> 0``.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).
            check_valid: check host values of the parameters (the conditions above); False skips the check.

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).truncated_normal(-1.0, 1.0, size=100)
            >>> bool(((-1 <= x) & (x <= 1)).all())
            True
        """
        fn = "truncated_normal"
        dt = float_dtype(dtype, fn)
        lower, upper = as_param(lower, "lower", fn), as_param(upper, "upper", fn)
        loc, scale = as_param(loc, "loc", fn), as_param(scale, "scale", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(lower), shape_of(upper), shape_of(loc), shape_of(scale))
        if check_valid:
            finite(loc, "loc", fn)
            finite(scale, "scale", fn)
            positive(scale, "scale", fn)
            check_less(lower, upper, ("lower", "upper"), fn)
            _check_loc_near(lower, upper, loc, scale, fn)
        # All four are numbers or arrays after as_param; mypy keeps the declared (bool-including) union.
        a, b = (lower - loc) / scale, (upper - loc) / scale  # type: ignore[operator]
        return self._draw(key, fn, shape, dt, lambda k: jax.random.truncated_normal(k, a, b, shape, dt) * scale + loc)

    def lognormal(
        self,
        mean: ArrayLike | None = 0.0,
        sigma: ArrayLike | None = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """``exp(N(mean, sigma))`` samples: ``jax.random.lognormal(k, sigma, shape) * exp(mean)``.

        Args:
            mean: the mean of the underlying normal; None means 0.
            sigma: the standard deviation of the underlying normal, ``>= 0``; None means 1.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).lognormal(size=5) > 0).all())
            True
        """
        fn = "lognormal"
        dt = float_dtype(dtype, fn)
        mean = 0.0 if mean is None else as_param(mean, "mean", fn)
        sigma = 1.0 if sigma is None else as_param(sigma, "sigma", fn)
        nonneg(sigma, "sigma", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(mean), shape_of(sigma))
        return self._draw(key, fn, shape, dt, lambda k: jax.random.lognormal(k, sigma, shape, dt) * jnp.exp(mean))

    def multivariate_normal(
        self,
        mean: ArrayLike,
        cov: ArrayLike,
        size: Size = None,
        method: str = "cholesky",
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
        check_valid: str = "raise",
        tol: float = 1e-8,
    ) -> jax.Array:
        """Multivariate normal samples; the output shape is ``size + mean.shape[-1:]``.

        ``method`` is ``'cholesky'``, ``'eigh'`` or ``'svd'``: how ``cov`` is factored
        (as in ``jax.random``). When the Cholesky or eigen factor of a matrix has
        NaNs (the matrix is singular or not positive semi-definite) that matrix is
        factored by SVD instead, as NumPy always does, so the samples are never NaN.

        A concrete ``cov`` (a list, a NumPy array, or a JAX array outside a trace) is
        checked before the key is split, as NumPy's ``check_valid`` checks it: it must
        be symmetric positive semi-definite within ``tol`` (the matrix rebuilt from its
        SVD, ``V^T diag(s) V``, equals it within ``rtol = atol = tol``, default
        ``1e-8``), with no NaN or infinite entry. ``check_valid`` says what an invalid
        ``cov`` does: ``'raise'`` (the default here, like every other invalid argument
        of this package; NumPy's default is ``'warn'``) raises ``ValueError`` and
        leaves the stream where it was, ``'warn'`` issues a ``RuntimeWarning`` and
        draws, ``'ignore'`` draws without checking (and without copying a device
        ``cov`` to the host to check it).

        Under ``jit`` (or any transform) a ``cov`` that is an argument or a State is
        traced and cannot be checked: an invalid matrix is then drawn from as with
        ``check_valid='ignore'`` (finite samples from its SVD factor, which are not
        samples of any normal with that covariance), and one with NaN or infinite
        entries gives NaN samples. Check such a matrix eagerly first if it may be
        invalid.

        Args:
            mean: the mean vector(s), shape ``(..., n)``.
            cov: the covariance matrix (or matrices), shape ``(..., n, n)``.
            size: the batch shape of the samples (the vector dimension is appended); None: the broadcast batch shape of
                ``mean`` and ``cov``.
            method: how ``cov`` is factorised: ``'cholesky'``, ``'eigh'`` or ``'svd'``.
            check_valid: what a concrete ``cov`` that is not a symmetric positive semi-definite matrix
                does: ``'raise'`` (a ``ValueError``, the default), ``'warn'`` (a ``RuntimeWarning``, then
                draw from its SVD as NumPy does) or ``'ignore'`` (draw without checking).
            tol: the tolerance of that check (NumPy's ``tol``: the matrix rebuilt from its SVD must equal
                ``cov`` within ``rtol = atol = tol``).
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: a floating dtype for the samples; None: JAX's default float (float32 unless x64 is enabled).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> RandomState(0).multivariate_normal(jnp.zeros(2), jnp.eye(2), size=5).shape
            (5, 2)
            >>> RandomState(0).multivariate_normal([0.0, 0.0], jnp.array([[1.0, 2.0], [2.0, 1.0]]))
            Traceback (most recent call last):
            ...
            ValueError: multivariate_normal: `cov` must be positive semi-definite; its smallest eigenvalue is -1 ...
            >>> x = RandomState(0).multivariate_normal([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]], check_valid="ignore")
            >>> bool(jnp.isfinite(x).all())
            True
        """
        fn = "multivariate_normal"
        dt = float_dtype(dtype, fn)
        if method not in ("cholesky", "eigh", "svd"):
            raise ValueError(f"{fn}: `method` must be 'cholesky', 'eigh' or 'svd', got {method!r}.")
        mean, cov = as_param(mean, "mean", fn), as_param(cov, "cov", fn)
        mshape, cshape = shape_of(mean), shape_of(cov)
        if len(mshape) < 1 or len(cshape) < 2 or cshape[-2:] != (mshape[-1], mshape[-1]):
            raise ValueError(
                f"{fn}: `mean` must have shape (..., n) and `cov` shape (..., n, n); got {mshape} and {cshape}."
            )
        check_psd(cov, "cov", fn, check_valid, tol)
        shape = out_shape(check_size(size, fn), fn, mshape[:-1], cshape[:-2])
        m, c = jnp.asarray(mean), jnp.asarray(cov)
        return self._draw(
            key, fn, (*shape, mshape[-1]), dt, lambda k: A.multivariate_normal(k, m, c, shape, dt, method)
        )

    def rand_like(self, input: ArrayLike, dtype: DTypeLike | None = None, *, key: ArrayLike | None = None) -> jax.Array:
        """Uniform ``[0, 1)`` samples with the shape of ``input`` (PyTorch's ``rand_like``).

        The dtype is ``dtype``, else ``input``'s floating dtype, else the default float.

        Args:
            input: an array (or anything with a shape) whose shape the samples take.
            dtype: a floating dtype; None: ``input``'s floating dtype, else JAX's default float.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> RandomState(0).rand_like(jnp.zeros((2, 3), jnp.float16)).dtype
            dtype('float16')
        """
        fn = "rand_like"
        dt, shape = _like_float_dtype(input, dtype, fn), shape_of(input)
        return self._draw(key, fn, shape, dt, lambda k: jax.random.uniform(k, shape, dt))

    def randn_like(
        self, input: ArrayLike, dtype: DTypeLike | None = None, *, key: ArrayLike | None = None
    ) -> jax.Array:
        """Standard-normal samples with the shape of ``input`` (PyTorch's ``randn_like``).

        Args:
            input: an array (or anything with a shape) whose shape the samples take.
            dtype: a floating dtype; None: ``input``'s floating dtype, else JAX's default float.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> RandomState(0).randn_like(jnp.zeros(4)).shape
            (4,)
        """
        fn = "randn_like"
        dt, shape = _like_float_dtype(input, dtype, fn), shape_of(input)
        return self._draw(key, fn, shape, dt, lambda k: jax.random.normal(k, shape, dt))


def _check_loc_near(lower: Any, upper: Any, loc: Any, scale: Any, fn: str) -> None:
    # Run after out_shape, so the host values broadcast together.
    lo, hi, mu, sd = (concrete(v) for v in (lower, upper, loc, scale))
    if lo is None or hi is None or mu is None or sd is None:
        return
    if np.any((mu < lo - 2 * sd) | (mu > hi + 2 * sd)):
        raise ValueError(
            f"{fn}: `loc` is more than 2 `scale` outside [lower, upper]; the samples would be "
            "inaccurate. Move `loc` closer or pass check_valid=False."
        )
