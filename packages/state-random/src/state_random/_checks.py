"""Argument validation shared by ``RandomState`` and the samplers.

Every check here runs *before* a key is split, so a call that fails leaves the
random state untouched. Checks that need values (``p`` in ``[0, 1]``,
``scale >= 0``, no NaN ...) look only at host values: Python numbers, lists and
NumPy arrays. JAX arrays are never copied to the host to be checked (on an
accelerator that is a blocking transfer on every draw), and tracers have no value.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from state_core.engine import user_stacklevel

__all__ = [
    "Size",
    "Draw",
    "MAX_DRAW_BYTES",
    "check_size",
    "check_draw_size",
    "check_dims",
    "check_count",
    "float_dtype",
    "int_dtype",
    "as_param",
    "concrete",
    "check_values",
    "check_less",
    "check_sums_to_one",
    "shape_of",
    "dtype_of",
    "index",
    "out_shape",
    "is_key",
    "check_whole",
    "check_int_range",
    "check_psd",
    "finite",
    "check_span",
    "nonneg",
    "positive",
    "probability",
    "loc_scale",
]

Size = int | Sequence[int] | None

_Tracer = jax.core.Tracer
_T = TypeVar("_T")


class Draw(Protocol):
    """``RandomState._draw``: check the output size, split the key, run ``sample`` with a key, store the rest.

    The samplers (written on mixins) call it last, after validating their
    arguments; ``sample`` holds the whole computation that uses the key, so the
    state keeps its key when that computation raises.
    """

    def __call__(
        self, key: Any, fn: str, shape: tuple[int, ...], dtype: Any, sample: Callable[[jax.Array], _T], /
    ) -> _T: ...


# JAX aborts the whole process (it does not raise) when an array it builds reaches
# 2**63 bytes, and samplers build temporaries larger than their result (random bits,
# counters, rejection rounds: jax.random.gamma's reach four times its result). A
# result of at most 2**57 bytes keeps a 64-fold margin and is still far beyond any
# memory there is, so no draw that could run is refused.
MAX_DRAW_BYTES = 2**57


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_count(n: Any, name: str, fn: str, minimum: int = 0) -> int:
    """Return ``n`` as a Python int ``>= minimum``; ``TypeError``/``ValueError`` otherwise."""
    if not _is_int(n):
        raise TypeError(f"{fn}: `{name}` must be an int, got {type(n).__name__} {n!r}.")
    count = int(n)
    if count < minimum:
        raise ValueError(f"{fn}: `{name}` must be >= {minimum}, got {count}.")
    return count


def check_size(size: Any, fn: str, name: str = "size") -> tuple[int, ...] | None:
    """Normalise ``size`` (``None``, an int, or a tuple/list of ints) to ``None`` or a tuple."""
    if size is None:
        return None
    if _is_int(size):
        return (check_count(size, name, fn),)
    if isinstance(size, (tuple, list)):
        return tuple(check_count(d, f"{name}[{i}]", fn) for i, d in enumerate(size))
    if isinstance(size, (np.ndarray, jax.Array)) and not isinstance(size, _Tracer):
        arr = np.asarray(size)
        if arr.ndim <= 1 and np.issubdtype(arr.dtype, np.integer):
            return check_size(arr.tolist(), fn, name)
    raise TypeError(f"{fn}: `{name}` must be None, an int or a tuple of ints, got {type(size).__name__} {size!r}.")


def check_draw_size(shape: tuple[int, ...], dtype: Any, fn: str, source: str = "`size`") -> int:
    """Raise ``ValueError`` when an array of ``shape`` and ``dtype`` is more than a draw may hold.

    ``source`` names what the shape comes from in the message (``size`` by default).
    Returns the array's size in bytes.
    """
    count = math.prod(shape)
    nbytes = count * np.dtype(dtype).itemsize
    if nbytes > MAX_DRAW_BYTES:
        raise ValueError(
            f"{fn}: {source} asks for an array of shape {shape}: {count} elements of {np.dtype(dtype).name}, "
            f"{nbytes} bytes, more than the 2**{MAX_DRAW_BYTES.bit_length() - 1} bytes a draw may hold (JAX "
            "aborts the process near 2**63 bytes). Draw fewer values, or draw in pieces."
        )
    return nbytes


def check_dims(dims: tuple[Any, ...], fn: str) -> tuple[int, ...]:
    """Validate the ``*dn`` dimensions of ``rand`` / ``randn``."""
    return tuple(check_count(d, f"dimension {i}", fn) for i, d in enumerate(dims))


def _default_dtype(kind: type) -> np.dtype:
    return np.dtype(jax.dtypes.canonicalize_dtype(kind))


def float_dtype(dtype: Any, fn: str) -> np.dtype:
    """The floating dtype to draw (default: JAX's default float, float32 unless x64)."""
    if dtype is None:
        return _default_dtype(float)
    try:
        dt = np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    except TypeError:
        raise TypeError(f"{fn}: `dtype` must be a floating dtype, got {dtype!r}.") from None
    if not jnp.issubdtype(dt, jnp.floating):
        raise TypeError(f"{fn}: `dtype` must be a floating dtype, got {dt}.")
    return dt


def int_dtype(dtype: Any, fn: str) -> np.dtype:
    """The integer dtype to draw (default: JAX's default int, int32 unless x64)."""
    if dtype is None:
        return _default_dtype(int)
    try:
        dt = np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    except TypeError:
        raise TypeError(f"{fn}: `dtype` must be an integer dtype, got {dtype!r}.") from None
    if not jnp.issubdtype(dt, jnp.integer):
        raise TypeError(f"{fn}: `dtype` must be an integer dtype, got {dt}.")
    return dt


def as_param(x: Any, name: str, fn: str) -> Any:
    """Pass numbers and arrays through; turn lists/tuples into NumPy arrays; reject the rest.

    Lists become *NumPy* arrays so that their values stay on the host and can be
    checked; a NaN in a host value is a ``ValueError`` naming ``name``.
    """
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
            raise TypeError(f"{fn}: `{name}` must be numeric, got a sequence of dtype {x.dtype}.")
    elif isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{fn}: `{name}` must be a number or an array, got {type(x).__name__} {x!r}.")
    if isinstance(x, float):
        if x != x:
            raise ValueError(f"{fn}: `{name}` is NaN; pass a number.")
    elif isinstance(x, (np.ndarray, np.floating)) and np.issubdtype(x.dtype, np.inexact) and np.isnan(x).any():
        raise ValueError(f"{fn}: `{name}` contains NaN; pass finite values.")
    return x


def concrete(x: Any) -> np.ndarray | None:
    """``x`` as a NumPy array when it is a host value, else ``None``.

    Host values are Python numbers and NumPy arrays/scalars. JAX arrays (and
    tracers) give ``None``: reading them would copy device memory to the host.
    """
    if isinstance(x, (int, float, complex, np.ndarray, np.generic)):
        return np.asarray(x)
    return None


def _summary(arr: np.ndarray) -> str:
    if arr.ndim == 0:
        return str(arr[()])
    flat = arr.astype(np.float64)
    nan = " (contains NaN)" if np.isnan(flat).any() else ""
    if np.isnan(flat).all():
        return "an array of NaN"
    return f"an array with min {np.nanmin(arr)!s} and max {np.nanmax(arr)!s}{nan}"


def _plain_number(x: Any) -> bool:
    # A Python float, or an int that converts to one exactly (not a bool).
    return type(x) is float or (type(x) is int and -(2**53) <= x <= 2**53)


def check_values(x: Any, name: str, fn: str, ok: Callable[[Any], Any], what: str) -> None:
    """Raise ``ValueError`` if the concrete value of ``x`` violates ``ok`` (skipped when traced)."""
    if _plain_number(x) and ok(np.float64(x)):  # the common case, without building arrays
        return
    arr = concrete(x)
    if arr is None or arr.size == 0:
        return
    if not np.issubdtype(arr.dtype, np.number) and arr.dtype != np.bool_:
        raise TypeError(f"{fn}: `{name}` must be numeric, got dtype {arr.dtype}.")
    with np.errstate(invalid="ignore"):
        good = np.all(ok(arr.astype(np.float64)))
    if not good:
        raise ValueError(f"{fn}: `{name}` must be {what}, got {_summary(arr)}.")


def check_less(lo: Any, hi: Any, names: tuple[str, str], fn: str) -> None:
    """Raise ``ValueError`` unless ``lo < hi`` everywhere (skipped when either is traced)."""
    if _plain_number(lo) and _plain_number(hi) and lo < hi:
        return
    a, b = concrete(lo), concrete(hi)
    if a is None or b is None:
        return
    try:
        bad = not np.all(np.asarray(a, np.float64) < np.asarray(b, np.float64))
    except ValueError:  # shapes do not broadcast; reported by out_shape
        return
    if bad:
        raise ValueError(
            f"{fn}: `{names[0]}` must be less than `{names[1]}` everywhere, got "
            f"{names[0]}={_summary(a)} and {names[1]}={_summary(b)}."
        )


def check_sums_to_one(p: Any, name: str, fn: str) -> None:
    """Raise ``ValueError`` unless the concrete ``p`` sums to 1 (within float32 tolerance)."""
    arr = concrete(p)
    if arr is None:
        return
    total = float(np.sum(arr, dtype=np.float64))
    if not abs(total - 1.0) <= 1e-5:
        raise ValueError(f"{fn}: the probabilities `{name}` must sum to 1, they sum to {total!r}.")


def out_shape(size: tuple[int, ...] | None, fn: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The output shape: ``size`` (checked against the parameter shapes) or their broadcast."""
    try:
        bshape = np.broadcast_shapes(*shapes) if shapes else ()
    except ValueError:
        raise ValueError(
            f"{fn}: the parameter shapes {', '.join(map(str, shapes))} do not broadcast together."
        ) from None
    if size is None:
        return tuple(bshape)
    try:
        full = np.broadcast_shapes(size, bshape)
    except ValueError:
        full = None
    if full != tuple(size):
        raise ValueError(
            f"{fn}: `size` {tuple(size)} is not compatible with the parameter shape "
            f"{tuple(bshape)}; the parameters must broadcast to `size`."
        )
    return tuple(size)


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of a number, array or tracer."""
    return tuple(np.shape(x)) if not hasattr(x, "shape") else tuple(x.shape)


def dtype_of(x: Any) -> np.dtype[Any]:
    """The dtype of a number, array or tracer (never copies a device array)."""
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


_KEY_DTYPE_TYPES: set[type] = set()


def is_key(x: Any) -> bool:
    """True when ``x`` (array or tracer) has a typed PRNG key dtype."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return False
    kind = type(dtype)
    if kind in _KEY_DTYPE_TYPES:  # the common case on every write-back: one set lookup
        return True
    if isinstance(dtype, np.dtype) or not jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return False
    _KEY_DTYPE_TYPES.add(kind)
    return True


def index(x: Any, name: str, fn: str) -> int:
    """``operator.index`` with a message naming the argument."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{fn}: `{name}` must be an int, got bool.")
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{fn}: `{name}` must be an int, got {type(x).__name__} {x!r}.") from None


def check_whole(x: Any, name: str, fn: str) -> None:
    """Raise ``ValueError`` unless the host value ``x`` holds whole numbers (``2.0`` is fine)."""
    arr = concrete(x)
    if arr is None or arr.size == 0 or np.issubdtype(arr.dtype, np.integer):
        return
    with np.errstate(invalid="ignore"):
        flt = arr.astype(np.float64)
        good = bool(np.all(flt == np.floor(flt)))
    if not good:
        raise ValueError(f"{fn}: `{name}` must be a whole number of trials, got {_summary(arr)}.")


def check_int_range(x: Any, name: str, fn: str, dtype: Any) -> None:
    """Raise ``ValueError`` if the host value ``x`` does not fit the integer ``dtype``.

    JAX cannot pass an out-of-range Python int to a compiled call (it raises an
    ``OverflowError`` only after the key was split), so this runs first.
    """
    arr = concrete(x)
    if arr is None or arr.size == 0:
        return
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        lo, hi = float(np.min(arr)), float(np.max(arr))
    if lo < info.min or hi > info.max:
        raise ValueError(
            f"{fn}: `{name}` must fit in {np.dtype(dtype).name} "
            f"([{info.min}, {info.max}]), got {_summary(arr)}. Pass a smaller value or "
            "a wider `dtype` (64-bit integers need jax_enable_x64)."
        )


def check_psd(cov: Any, name: str, fn: str, check_valid: str = "raise", tol: Any = 1e-8) -> None:
    """NumPy's covariance check of ``multivariate_normal``, on the concrete matrix (stack) ``cov``.

    As in NumPy, ``cov`` is valid when the matrix rebuilt from its SVD
    (``V^T diag(s) V``) equals it within ``rtol = atol = tol``: that holds exactly
    for symmetric positive semi-definite matrices. An invalid ``cov`` raises
    ``ValueError`` (``check_valid='raise'``) or warns (``'warn'``, a
    ``RuntimeWarning``); ``'ignore'`` skips the check. Unlike the other value
    checks, a concrete JAX array is checked too (copied to the host): the draw
    factors the matrix anyway, so the check costs about what the draw does, and an
    invalid matrix would otherwise be drawn from without a word. Traced matrices
    have no value to check.
    """
    if check_valid not in ("warn", "raise", "ignore"):
        raise ValueError(f"{fn}: `check_valid` must be 'warn', 'raise' or 'ignore', got {check_valid!r}.")
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: `tol` must be a real number, got {type(tol).__name__} {tol!r}.")
    if not tol >= 0:
        raise ValueError(f"{fn}: `tol` must be >= 0, got {tol!r}.")
    if check_valid == "ignore":
        return
    arr = concrete(cov)
    if arr is None and isinstance(cov, jax.Array) and not isinstance(cov, _Tracer) and cov.is_fully_addressable:
        arr = np.asarray(cov)
    if arr is None or arr.size == 0 or arr.ndim < 2:
        return
    problem = _covariance_problem(arr.astype(np.float64), float(tol))
    if problem is None:
        return
    message = (
        f"{fn}: `{name}` must be {problem}. Pass a valid covariance matrix, a larger `tol`, or "
        "check_valid='warn' / 'ignore' to draw anyway (from the matrix's SVD, as NumPy does)."
    )
    if check_valid == "raise":
        raise ValueError(message)
    warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())


def _covariance_problem(a: np.ndarray, tol: float) -> str | None:
    """What NumPy's SVD check finds wrong with ``a`` (``None`` when it passes)."""
    if np.isnan(a).any():
        return "a finite, symmetric positive semi-definite matrix; it has NaN entries"
    if not np.isfinite(a).all():
        return "a finite, symmetric positive semi-definite matrix; it has infinite entries"
    _, s, vh = np.linalg.svd(a)
    rebuilt = np.swapaxes(vh, -1, -2) * s[..., None, :] @ vh
    if np.allclose(rebuilt, a, rtol=tol, atol=tol):
        return None
    if not np.allclose(a, np.swapaxes(a, -1, -2), rtol=tol, atol=tol):
        return f"a symmetric matrix; it is not symmetric (within tol={tol:g})"
    smallest = float(np.min(np.linalg.eigvalsh(a)))
    return f"positive semi-definite; its smallest eigenvalue is {smallest:.6g} (tol={tol:g})"


def finite(x: Any, name: str, fn: str) -> None:
    """``x`` finite (host values only), where NumPy refuses an infinite parameter."""
    check_values(x, name, fn, np.isfinite, "finite")


def check_span(low: Any, high: Any, names: tuple[str, str], fn: str) -> None:
    """``low``, ``high`` and ``high - low`` finite (host values only), as NumPy's ``uniform`` requires."""
    finite(low, names[0], fn)
    finite(high, names[1], fn)
    if _plain_number(low) and _plain_number(high) and math.isfinite(float(high) - float(low)):
        return
    a, b = concrete(low), concrete(high)
    if a is None or b is None:
        return
    with np.errstate(over="ignore", invalid="ignore"):
        span = np.asarray(b, np.float64) - np.asarray(a, np.float64)
    if not np.all(np.isfinite(span)):
        raise ValueError(
            f"{fn}: `{names[1]} - {names[0]}` must be finite (the range is too wide to draw from), got "
            f"{names[0]}={_summary(a)} and {names[1]}={_summary(b)}."
        )


def nonneg(x: Any, name: str, fn: str) -> None:
    """``x >= 0`` (host values only)."""
    check_values(x, name, fn, lambda a: a >= 0, ">= 0")


def positive(x: Any, name: str, fn: str) -> None:
    """``x > 0`` (host values only)."""
    check_values(x, name, fn, lambda a: a > 0, "> 0")


def probability(x: Any, name: str, fn: str) -> None:
    """``0 <= x <= 1`` (host values only)."""
    check_values(x, name, fn, lambda a: (a >= 0) & (a <= 1), "a probability in [0, 1]")


def loc_scale(fn: str, loc: Any, scale: Any, size: Any, dtype: Any) -> tuple[Any, ...]:
    """Validated ``(loc, scale, shape, dtype)`` of a location/scale sampler (``None`` = 0 / 1)."""
    dt = float_dtype(dtype, fn)
    loc = 0.0 if loc is None else as_param(loc, "loc", fn)
    scale = 1.0 if scale is None else as_param(scale, "scale", fn)
    nonneg(scale, "scale", fn)
    shape = out_shape(check_size(size, fn), fn, shape_of(loc), shape_of(scale))
    return loc, scale, shape, dt
