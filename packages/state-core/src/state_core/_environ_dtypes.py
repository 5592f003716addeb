"""Precision and default dtypes of ``state_core.environ`` (``get_precision``, ``dftype`` ...)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ._environ import PRECISION, _canonical_precision, get, set

__all__ = ["set_precision", "get_precision", "dftype", "ditype", "dutype", "dctype", "tolerance"]

_FLOAT: dict[int | str, Any] = {
    64: np.float64,
    32: np.float32,
    16: np.float16,
    "bf16": jnp.bfloat16,
    8: jnp.float8_e5m2,
}
_INT: dict[int | str, Any] = {64: np.int64, 32: np.int32, 16: np.int16, "bf16": np.int16, 8: np.int8}
_UINT: dict[int | str, Any] = {64: np.uint64, 32: np.uint32, 16: np.uint16, "bf16": np.uint16, 8: np.uint8}


def _precision() -> int | str:
    return _canonical_precision(get(PRECISION))


def set_precision(precision: int | str) -> None:
    """Set the global precision: 8, 16, 32, 64 or ``'bf16'`` (``'64'`` and the like are accepted).

    It picks the dtypes of ``dftype()`` and the others, and, as in brainstate, sets
    ``jax_enable_x64`` (on for 64, off otherwise).

    Args:
        precision: the precision.

    Raises:
        ValueError: for an unsupported precision.

    Example:
        >>> from state_core import environ
        >>> with environ.context(precision=16):
        ...     environ.get_precision(), environ.dftype()
        (16, <class 'numpy.float16'>)
    """
    set(precision=precision)


def get_precision() -> int:
    """The precision in bits: 8, 16, 32 or 64 (``'bf16'`` counts as 16).

    Unset, it is 32, or 64 when ``jax_enable_x64`` is on.

    Example:
        >>> from state_core import environ
        >>> environ.get_precision()
        32
        >>> with environ.context(precision='bf16'):
        ...     environ.get_precision()
        16
    """
    precision = _precision()
    return 16 if precision == "bf16" else int(precision)


def dftype() -> Any:
    """The default floating dtype of the current precision (``np.float32`` at 32, ``jnp.bfloat16`` at ``'bf16'``).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import environ
        >>> jnp.zeros(2, dtype=environ.dftype()).dtype
        dtype('float32')
    """
    return _FLOAT[_precision()]


def ditype() -> Any:
    """The default signed integer dtype of the current precision (``np.int32`` at 32).

    Example:
        >>> from state_core import environ
        >>> environ.ditype()
        <class 'numpy.int32'>
    """
    return _INT[_precision()]


def dutype() -> Any:
    """The default unsigned integer dtype of the current precision (``np.uint32`` at 32).

    Example:
        >>> from state_core import environ
        >>> environ.dutype()
        <class 'numpy.uint32'>
    """
    return _UINT[_precision()]


def dctype() -> Any:
    """The default complex dtype: ``np.complex128`` at precision 64, ``np.complex64`` otherwise.

    Example:
        >>> from state_core import environ
        >>> environ.dctype()
        <class 'numpy.complex64'>
    """
    return np.complex128 if _precision() == 64 else np.complex64


def tolerance() -> np.ndarray:
    """A comparison tolerance for the current precision: 1e-12 at 64, 1e-5 at 32, 1e-2 below.

    Returns:
        A NumPy scalar array of the precision's float dtype (float16 below 32).

    Example:
        >>> from state_core import environ
        >>> environ.tolerance()
        array(1.e-05, dtype=float32)
    """
    bits = get_precision()
    if bits == 64:
        return np.asarray(1e-12, dtype=np.float64)
    if bits == 32:
        return np.asarray(1e-5, dtype=np.float32)
    return np.asarray(1e-2, dtype=np.float16)
