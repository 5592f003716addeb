"""Integer-valued samplers and random selection of ``RandomState`` (written once).

Validate first, then draw through ``self._draw(key, name, shape, dtype, sample)``,
so a failed call never advances the state.
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
    check_count,
    check_draw_size,
    check_int_range,
    check_less,
    check_size,
    check_sums_to_one,
    check_values,
    check_whole,
    concrete,
    dtype_of,
    finite,
    float_dtype,
    index,
    int_dtype,
    nonneg,
    out_shape,
    positive,
    probability,
    shape_of,
)

__all__ = ["DiscreteSamplers"]


def _count_dtype(dtype: Any, fn: str) -> np.dtype:
    # Counts default to int32; a floating dtype is allowed (the draw is cast).
    if dtype is not None and jnp.issubdtype(dtype, jnp.floating):
        return float_dtype(dtype, fn)
    return int_dtype(dtype, fn)


def _whole_nonneg(x: Any, name: str, fn: str) -> None:
    nonneg(x, name, fn)
    finite(x, name, fn)
    check_whole(x, name, fn)


def _trials(n: Any, fn: str, dtype: np.dtype) -> None:
    """A number of trials: a whole number >= 0 that fits the integer counts drawn (NumPy: an int64)."""
    _whole_nonneg(n, "n", fn)
    if jnp.issubdtype(dtype, jnp.integer):
        check_int_range(n, "n", fn, dtype)


def _poisson_rate_limit(dtype: np.dtype) -> int:
    # NumPy refuses rates above max - 10 * sqrt(max) of its int64 counts ("lam value
    # too large"): beyond, a draw may not fit. The same rule for the counts drawn here.
    top = int(np.iinfo(dtype).max)
    return int(top - 10.0 * np.sqrt(top))


class DiscreteSamplers:
    """``randint``, ``binomial``, ``poisson``, ``choice``, ``permutation`` ... (a mixin of ``RandomState``)."""

    _draw: Draw

    def _randint(self, fn: str, low: Any, high: Any, size: Size, dtype: Any, key: Any) -> jax.Array:
        dt = int_dtype(dtype, fn)
        low, high = as_param(low, "low", fn), as_param(high, "high", fn)
        check_int_range(low, "low", fn, dt)
        check_int_range(high, "high", fn, dt)
        check_less(low, high, ("low", "high"), fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(low), shape_of(high))
        return self._draw(key, fn, shape, dt, lambda k: jax.random.randint(k, shape, low, high, dt))

    def randint(
        self,
        low: ArrayLike,
        high: ArrayLike | None = None,
        size: Size = None,
        dtype: DTypeLike = int,
        *,
        key: ArrayLike | None = None,
    ) -> jax.Array:
        """Integers in ``[low, high)`` (``[0, low)`` when ``high`` is None); int32 by default.

        Args:
            low: the lower bound (included); with ``high`` None, the upper bound (excluded) and the lower bound is 0.
            high: the upper bound (excluded).
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            dtype: an integer dtype for the samples (default: JAX's default int).
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).randint(10, size=6)
            >>> x.dtype, bool(((0 <= x) & (x < 10)).all())
            (dtype('int32'), True)
        """
        if high is None:
            low, high = 0, low
        return self._randint("randint", low, high, size, dtype, key)

    def random_integers(
        self,
        low: ArrayLike,
        high: ArrayLike | None = None,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Integers in ``[low, high]``, both ends included (``[1, low]`` when ``high`` is None).

        Args:
            low: the lower bound (included); with ``high`` None, the upper bound and the lower bound is 1.
            high: the upper bound (included).
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: an integer dtype for the samples; None: JAX's default int (int32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).random_integers(3, size=20)
            >>> bool(((1 <= x) & (x <= 3)).all())
            True
        """
        fn = "random_integers"
        if high is None:
            low, high = 1, low
        low, high = as_param(low, "low", fn), as_param(high, "high", fn)
        lo, hi = concrete(low), concrete(high)
        if lo is not None and hi is not None and np.any(lo > hi):
            raise ValueError(f"{fn}: `low` must be <= `high` (both included), got low={lo} and high={hi}.")
        return self._randint(fn, low, high + 1, size, dtype, key)

    def randint_like(
        self,
        input: ArrayLike,
        low: ArrayLike = 0,
        high: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
        *,
        key: ArrayLike | None = None,
    ) -> jax.Array:
        """Integers in ``[low, high)`` with the shape of ``input`` (PyTorch's ``randint_like``).

        As in PyTorch, a single bound is ``high`` (``randint_like(x, 10)`` draws from
        ``[0, 10)``). The result has ``dtype``, else ``input``'s dtype.

        Args:
            input: an array whose shape (and, without ``dtype``, dtype) the result takes.
            low: the lower bound (included); alone, the upper bound (excluded) and the lower bound is 0.
            high: the upper bound (excluded).
            dtype: the dtype of the result; None: ``input``'s dtype.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> x = RandomState(0).randint_like(jnp.zeros((2, 2), jnp.int32), 5)
            >>> x.shape, x.dtype, bool(((0 <= x) & (x < 5)).all())
            ((2, 2), dtype('int32'), True)
        """
        if high is None:
            low, high = 0, low
        out = dtype if dtype is not None else getattr(input, "dtype", None)
        draw_dtype = out if out is not None and jnp.issubdtype(out, jnp.integer) else None
        x = self._randint("randint_like", low, high, shape_of(input), draw_dtype, key)
        return x if out is None else x.astype(out)

    def bernoulli(
        self, p: ArrayLike = 0.5, size: Size = None, *, key: ArrayLike | None = None, check_valid: bool = True
    ) -> jax.Array:
        """Boolean samples that are True with probability ``p`` (``p`` must be in [0, 1]).

        ``check_valid=False`` skips the range check of host values.

        Args:
            p: the probability of True, in ``[0, 1]``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            check_valid: check host values of the parameters (``p`` in ``[0, 1]``); False skips the check.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).bernoulli(1.0, size=3)
            Array([ True,  True,  True], dtype=bool)
        """
        fn = "bernoulli"
        p = as_param(p, "p", fn)
        if check_valid:
            probability(p, "p", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(p))
        return self._draw(key, fn, shape, np.bool_, lambda k: jax.random.bernoulli(k, p, shape))

    def binomial(
        self,
        n: ArrayLike,
        p: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
        check_valid: bool = True,
    ) -> jax.Array:
        """Binomial counts of ``n`` trials with success probability ``p`` (int32 by default).

        ``n`` must be a finite whole number ``>= 0`` that fits the integer ``dtype``
        (``check_valid=False`` skips the host value checks). ``dtype`` may be an integer or a floating dtype
        (``jax.random.binomial`` is float; the result is cast).

        Args:
            n: the number of trials, a whole number ``>= 0``.
            p: the success probability, in ``[0, 1]``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: an integer or floating dtype; None: JAX's default int.
            check_valid: check host values of the parameters (``n`` whole and ``>= 0``, ``p`` in ``[0, 1]``); False
                skips the check.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).binomial(10, 1.0, size=2)
            Array([10, 10], dtype=int32)
        """
        fn = "binomial"
        dt = _count_dtype(dtype, fn)
        n, p = as_param(n, "n", fn), as_param(p, "p", fn)
        if check_valid:
            _trials(n, fn, dt)
            probability(p, "p", fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(n), shape_of(p))
        return self._draw(key, fn, shape, dt, lambda k: jax.random.binomial(k, n, p, shape).astype(dt))

    def poisson(
        self,
        lam: ArrayLike = 1.0,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Poisson counts with rate ``lam`` (int32 by default).

        A host ``lam`` must be finite and at most ``max - 10 * sqrt(max)`` of the
        count dtype (NumPy's rule for its int64 counts), so that the counts fit.

        Args:
            lam: the rate, ``>= 0``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: an integer dtype for the samples; None: JAX's default int (int32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).poisson(0.0, size=3)
            Array([0, 0, 0], dtype=int32)
        """
        fn = "poisson"
        dt = int_dtype(dtype, fn)
        lam = as_param(lam, "lam", fn)
        nonneg(lam, "lam", fn)
        limit = _poisson_rate_limit(dt)
        check_values(
            lam,
            "lam",
            fn,
            lambda a: a <= limit,
            f"at most {limit}, for the counts to fit {dt.name} (or pass a wider `dtype`)",
        )
        shape = out_shape(check_size(size, fn), fn, shape_of(lam))
        return self._draw(key, fn, shape, dt, lambda k: jax.random.poisson(k, lam, shape, dt))

    def geometric(
        self, p: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Number of Bernoulli(``p``) trials up to and including the first success (>= 1).

        Args:
            p: the success probability of each trial, in ``(0, 1]``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: an integer dtype for the samples; None: JAX's default int (int32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).geometric(1.0, size=3)
            Array([1, 1, 1], dtype=int32)
        """
        fn = "geometric"
        dt = int_dtype(dtype, fn)
        p = as_param(p, "p", fn)
        check_values(p, "p", fn, lambda a: (a > 0) & (a <= 1), "a probability in (0, 1]")
        shape = out_shape(check_size(size, fn), fn, shape_of(p))
        return self._draw(key, fn, shape, dt, lambda k: jax.random.geometric(k, p, shape, dt))

    def negative_binomial(
        self,
        n: ArrayLike,
        p: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Failures before the ``n``-th success of Bernoulli(``p``) trials (a gamma-Poisson mixture).

        Args:
            n: the number of successes to reach, ``> 0``.
            p: the success probability of each trial, in ``(0, 1]``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: an integer dtype for the samples; None: JAX's default int (int32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).negative_binomial(3, 0.4, size=5) >= 0).all())
            True
        """
        fn = "negative_binomial"
        dt = int_dtype(dtype, fn)
        n, p = as_param(n, "n", fn), as_param(p, "p", fn)
        positive(n, "n", fn)
        finite(n, "n", fn)  # NumPy returns a meaningless overflowed count for an infinite n
        check_values(p, "p", fn, lambda a: (a > 0) & (a <= 1), "a probability in (0, 1]")
        shape = out_shape(check_size(size, fn), fn, shape_of(n), shape_of(p))
        p = jnp.asarray(p, jnp.float32)

        def sample(k: jax.Array) -> jax.Array:
            k_gamma, k_poisson = jax.random.split(k)
            rate = jax.random.gamma(k_gamma, n, shape) * ((1.0 - p) / p)
            return jax.random.poisson(k_poisson, rate, shape, dt)

        return self._draw(key, fn, shape, dt, sample)

    def hypergeometric(
        self,
        ngood: ArrayLike,
        nbad: ArrayLike,
        nsample: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> jax.Array:
        """Good items among ``nsample`` drawn without replacement from ``ngood`` good and ``nbad`` bad ones.

        Exact: one uniform per item drawn, so the cost grows with ``nsample``.

        Args:
            ngood: the number of good items, a whole number ``>= 0``.
            nbad: the number of bad items, a whole number ``>= 0``.
            nsample: the number of items drawn, at most ``ngood + nbad``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: an integer dtype for the samples; None: JAX's default int (int32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).hypergeometric(5, 5, 4, size=10)
            >>> bool(((0 <= x) & (x <= 4)).all())
            True
        """
        fn = "hypergeometric"
        dt = int_dtype(dtype, fn)
        ngood, nbad = as_param(ngood, "ngood", fn), as_param(nbad, "nbad", fn)
        nsample = as_param(nsample, "nsample", fn)
        for value, name in ((ngood, "ngood"), (nbad, "nbad"), (nsample, "nsample")):
            _whole_nonneg(value, name, fn)
        shape = out_shape(check_size(size, fn), fn, shape_of(ngood), shape_of(nbad), shape_of(nsample))
        g, b, s = concrete(ngood), concrete(nbad), concrete(nsample)
        if g is not None and b is not None and s is not None and np.any(s > g + b):
            raise ValueError(f"{fn}: `nsample` must be at most ngood + nbad, got nsample={s}, ngood + nbad={g + b}.")
        return self._draw(key, fn, shape, dt, lambda k: A.hypergeometric(k, ngood, nbad, nsample, shape, dt))

    def logseries(
        self, p: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Logarithmic-series samples (``>= 1``) with parameter ``0 <= p < 1``.

        Args:
            p: the parameter, in ``[0, 1)``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: an integer dtype for the samples; None: JAX's default int (int32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).logseries(0.6, size=5) >= 1).all())
            True
        """
        fn = "logseries"
        dt = int_dtype(dtype, fn)
        p = as_param(p, "p", fn)
        check_values(p, "p", fn, lambda a: (a >= 0) & (a < 1), "in [0, 1)")
        shape = out_shape(check_size(size, fn), fn, shape_of(p))
        return self._draw(key, fn, shape, dt, lambda k: A.logseries(k, p, shape, dt))

    def zipf(
        self, a: ArrayLike, size: Size = None, *, key: ArrayLike | None = None, dtype: DTypeLike | None = None
    ) -> jax.Array:
        """Zipf (zeta) samples ``>= 1`` with exponent ``a > 1``.

        Args:
            a: the exponent, ``> 1``.
            size: the output shape (an int or a tuple of ints); None: the broadcast shape of the parameters.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: an integer dtype for the samples; None: JAX's default int (int32 unless x64 is enabled).

        Example:
            >>> from state_random import RandomState
            >>> bool((RandomState(0).zipf(2.0, size=5) >= 1).all())
            True
        """
        fn = "zipf"
        dt = int_dtype(dtype, fn)
        a = as_param(a, "a", fn)
        check_values(a, "a", fn, lambda x: x > 1, "> 1")
        shape = out_shape(check_size(size, fn), fn, shape_of(a))
        return self._draw(key, fn, shape, dt, lambda k: A.zipf(k, a, shape, dt))

    def multinomial(
        self,
        n: ArrayLike,
        pvals: ArrayLike,
        size: Size = None,
        *,
        key: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
        check_valid: bool = True,
    ) -> jax.Array:
        """Counts of ``n`` draws over ``len(pvals)`` categories; shape ``size + pvals.shape[-1:]``.

        Drawn as successive binomials (exact, works with traced ``n``); the last
        category takes what remains, as in NumPy. ``check_valid=False`` skips the
        host value checks of ``n`` and ``pvals``.

        Args:
            n: the number of draws, a whole number ``>= 0``.
            pvals: the category probabilities, shape ``(..., k)``; the last category takes what the others leave.
            size: the batch shape of the counts (the ``k`` dimension is appended); None: the broadcast batch shape of
                ``n`` and ``pvals``.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.
            dtype: an integer or floating dtype; None: JAX's default int.
            check_valid: check host values of the parameters (``n`` whole and ``>= 0``, ``pvals`` in ``[0, 1]`` with
                ``sum(pvals[..., :-1]) <= 1``); False skips the check.

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).multinomial(10, [0.2, 0.3, 0.5], size=4)
            >>> x.shape, x.sum(-1).tolist()
            ((4, 3), [10, 10, 10, 10])
        """
        fn = "multinomial"
        dt = _count_dtype(dtype, fn)
        n, pvals = as_param(n, "n", fn), as_param(pvals, "pvals", fn)
        pshape = shape_of(pvals)
        if len(pshape) < 1 or pshape[-1] == 0:
            raise ValueError(f"{fn}: `pvals` must have at least one category, got shape {pshape}.")
        pv = concrete(pvals) if check_valid else None
        if check_valid:
            _trials(n, fn, dt)
            probability(pvals, "pvals", fn)
        if pv is not None and np.any(pv[..., :-1].sum(-1) > 1.0 + 1e-5):
            raise ValueError(f"{fn}: `sum(pvals[..., :-1])` must be <= 1, got {pv[..., :-1].sum(-1)}.")
        shape = out_shape(check_size(size, fn), fn, shape_of(n), pshape[:-1])
        pvals = jnp.asarray(pvals, jnp.float32)

        def sample(k: jax.Array) -> jax.Array:
            keys = jax.random.split(k, max(pshape[-1] - 1, 1))
            left = jnp.broadcast_to(jnp.asarray(n, jnp.float32), shape)
            mass = jnp.ones(shape, jnp.float32)
            counts = []
            for j in range(pshape[-1] - 1):
                pj = jnp.broadcast_to(pvals[..., j], shape)
                prob = jnp.clip(jnp.where(mass > 0, pj / jnp.where(mass > 0, mass, 1.0), 0.0), 0.0, 1.0)
                c = jax.random.binomial(keys[j], left, prob, shape)
                counts.append(c)
                left, mass = left - c, mass - pj
            counts.append(left)
            return jnp.stack(counts, -1).astype(dt)

        return self._draw(key, fn, (*shape, pshape[-1]), dt, sample)

    def categorical(
        self, logits: ArrayLike, axis: int = -1, size: Size = None, *, key: ArrayLike | None = None
    ) -> jax.Array:
        """Category indices drawn from unnormalised log-probabilities ``logits`` along ``axis``.

        Args:
            logits: unnormalised log-probabilities of the categories.
            axis: the axis of ``logits`` that holds the categories.
            size: the output shape; the batch shape of ``logits`` (its shape without ``axis``) must broadcast to it.
                None: that batch shape.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> RandomState(0).categorical(jnp.array([-1e9, 0.0, -1e9]), size=3)
            Array([1, 1, 1], dtype=int32)
        """
        fn = "categorical"
        logits = as_param(logits, "logits", fn)
        lshape = shape_of(logits)
        axis = index(axis, "axis", fn)
        if len(lshape) < 1 or not -len(lshape) <= axis < len(lshape):
            raise ValueError(f"{fn}: `axis` {axis} is out of range for logits of shape {lshape}.")
        if lshape[axis] == 0:
            raise ValueError(f"{fn}: `logits` has no categories (shape {lshape} along axis {axis}).")
        batch = tuple(np.delete(np.array(lshape, dtype=int), axis).tolist())
        size = check_size(size, fn)
        shape = None if size is None else out_shape(size, fn, batch)
        # Drawn as Gumbel noise over every category: the largest array is the output times the categories.
        noise = (*(batch if shape is None else shape), lshape[axis])
        check_draw_size(noise, float_dtype(None, fn), fn)
        return self._draw(
            key,
            fn,
            batch if shape is None else shape,
            int_dtype(None, fn),
            lambda k: jax.random.categorical(k, logits, axis, shape),
        )

    def choice(
        self,
        a: int | ArrayLike,
        size: Size = None,
        replace: bool = True,
        p: ArrayLike | None = None,
        *,
        axis: int = 0,
        key: ArrayLike | None = None,
    ) -> Any:
        """Random elements of ``a`` (or of ``arange(a)`` for an int), optionally weighted by ``p``.

        ``a`` may also be a sequence of non-numbers (strings, objects): the result
        is then a NumPy array (or a single element) of those items.

        Args:
            a: the population: an int ``n`` (``arange(n)``), an array, or a sequence of any items.
            size: the output shape; None: a single element.
            replace: draw with replacement; False draws each element at most once.
            p: the probability of each element, summing to 1; None: uniform.
            axis: the axis of ``a`` to draw elements along.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.

        Example:
            >>> from state_random import RandomState
            >>> x = RandomState(0).choice(5, size=5, replace=False)
            >>> sorted(x.tolist())
            [0, 1, 2, 3, 4]
            >>> str(RandomState(0).choice(["red", "green"], p=[0.0, 1.0]))
            'green'
        """
        fn = "choice"
        shape = check_size(size, fn) or ()
        axis = index(axis, "axis", fn)
        items = None
        if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
            n = check_count(a, "a", fn, minimum=1)
        else:
            if isinstance(a, (list, tuple, np.ndarray)):
                arr = np.asarray(a) if not isinstance(a, np.ndarray) else a
                if arr.dtype.kind not in "biufc":
                    items, a = arr, None  # type: ignore[assignment]  # `a` is now the items, not a count
            if a is not None:
                a = as_param(a, "a", fn)
            ashape = shape_of(items if a is None else a)
            if len(ashape) < 1:
                raise ValueError(f"{fn}: `a` must be an int or an array with at least one dimension.")
            if not -len(ashape) <= axis < len(ashape):
                raise ValueError(f"{fn}: `axis` {axis} is out of range for `a` of shape {ashape}.")
            n = ashape[axis]
            if n == 0:
                raise ValueError(f"{fn}: `a` must not be empty.")
        if not replace and int(np.prod(shape)) > n:
            raise ValueError(
                f"{fn}: cannot take {int(np.prod(shape))} samples from a population of {n} "
                "without replacement (replace=False)."
            )
        if p is not None:
            p = as_param(p, "p", fn)
            if shape_of(p) != (n,):
                raise ValueError(f"{fn}: `p` must have shape ({n},) to match `a`, got {shape_of(p)}.")
            probability(p, "p", fn)
            check_sums_to_one(p, "p", fn)
        if not replace or p is not None:  # drawn over the whole population (a permutation, or cumulative p)
            check_draw_size((n,), float_dtype(None, fn), fn, "`a`")
        if items is None:
            if isinstance(a, (int, np.integer)):
                out, dt = shape, int_dtype(None, fn)
            else:  # the picked slices of `a`, with `size` in place of the axis
                ax = axis % len(ashape)
                out, dt = (*ashape[:ax], *shape, *ashape[ax + 1 :]), dtype_of(a)
            return self._draw(key, fn, out, dt, lambda k: jax.random.choice(k, a, shape, bool(replace), p, axis))
        return self._draw(
            key,
            fn,
            shape,
            int_dtype(None, fn),
            lambda k: np.take(items, np.asarray(jax.random.choice(k, n, shape, bool(replace), p)), axis=axis),
        )

    def permutation(
        self, x: int | ArrayLike, axis: int = 0, independent: bool = False, *, key: ArrayLike | None = None
    ) -> jax.Array:
        """A permuted copy of ``x`` along ``axis`` (for an int: a permutation of ``arange(x)``).

        Args:
            x: an int ``n`` (permute ``arange(n)``) or an array to permute.
            axis: the axis to permute along.
            independent: permute each slice along ``axis`` independently instead of moving whole slices.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.

        Example:
            >>> from state_random import RandomState
            >>> sorted(RandomState(0).permutation(4).tolist())
            [0, 1, 2, 3]
        """
        return self._permute("permutation", x, axis, independent, key)

    def _permute(self, fn: str, x: Any, axis: Any, independent: bool, key: Any) -> jax.Array:
        axis = index(axis, "axis", fn)
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            x = check_count(x, "x", fn)
            shape: tuple[int, ...] = (x,)
            dt = int_dtype(None, fn)
            check_draw_size(shape, dt, fn, "`x`")
        else:
            x = as_param(x, "x", fn)
            xshape = shape_of(x)
            if len(xshape) < 1:
                raise ValueError(f"{fn}: `x` must be an int or an array with at least one dimension.")
            if not -len(xshape) <= axis < len(xshape):
                raise ValueError(f"{fn}: `axis` {axis} is out of range for `x` of shape {xshape}.")
            shape, dt = xshape, dtype_of(x)
        return self._draw(key, fn, shape, dt, lambda k: jax.random.permutation(k, x, axis, bool(independent)))

    def shuffle(self, x: ArrayLike, axis: int = 0, *, key: ArrayLike | None = None) -> jax.Array:
        """Return ``x`` shuffled along ``axis``.

        JAX arrays are immutable, so unlike ``numpy.random.shuffle`` this does not work
        in place: use the returned array (``x = rng.shuffle(x)``).

        Args:
            x: the array to shuffle (at least one dimension).
            axis: the axis to shuffle along.
            key: draw with this key (a typed key, raw ``uint32[2]`` key data or an int seed) instead of splitting the
                stream's own; the stream is then left unchanged.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_random import RandomState
            >>> sorted(RandomState(0).shuffle(jnp.arange(4)).tolist())
            [0, 1, 2, 3]
        """
        if isinstance(x, (int, np.integer, float)) or np.ndim(x) < 1:
            raise ValueError("shuffle: `x` must be an array with at least one dimension (use permutation(n) for ints).")
        return self._permute("shuffle", x, axis, False, key)
