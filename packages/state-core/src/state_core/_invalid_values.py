"""Refuse a call's NaN / Inf results while ``jax_debug_nans`` / ``jax_debug_infs`` is on.

JAX checks the results of a compiled call for NaN and Inf when these flags are on,
but not on every path: a program compiled before ``jax.config.update`` set the flag,
or a thread in which a ``jax.debug_nans(...)`` block ran earlier (``jnp.var``,
``jax.checkpoint`` and an eager ``jax.vmap`` open one inside JAX), skips the check.
The replay asks ``refuse_invalid_values`` whenever a flag is on, so a call that
produced a NaN raises ``FloatingPointError`` before any State sees its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._graph import state_label
from ._jax_internals import debug_flags
from ._state import State

__all__ = ["refuse_invalid_values"]


def _invalid_kind(value: Any, nans: bool, infs: bool) -> str | None:
    """``'nan'`` or ``'inf'`` if a floating-point leaf of ``value`` holds one that is checked for, else None."""
    for leaf in jax.tree.leaves(value):
        dtype = getattr(leaf, "dtype", None)
        if dtype is None or not jnp.issubdtype(dtype, jnp.inexact):
            continue  # integers, booleans and typed keys hold neither
        host = np.asarray(leaf)
        if nans and np.isnan(host).any():
            return "nan"
        if infs and np.isinf(host).any():
            return "inf"
    return None


def refuse_invalid_values(who: str, out: Any, states: Sequence[State[Any]], new_values: Sequence[Any]) -> None:
    """Raise ``FloatingPointError`` if the output or a new state value holds a value the debug flags refuse.

    Waits for the values. A NaN is refused while ``jax_debug_nans`` is on, an
    infinity while ``jax_debug_infs`` is on (by ``jax.config.update`` or by the
    ``jax.debug_nans`` / ``jax.debug_infs`` context managers).

    Args:
        who: the function's name for the message ("" leaves it out).
        out: the call's return value (a pytree).
        states: the states that would receive ``new_values``.
        new_values: one new value (a pytree) per state.

    Raises:
        FloatingPointError: naming the State whose new value (or the return value)
            holds the NaN or infinity; the caller writes nothing.
    """
    nans, infs = debug_flags()
    if not (nans or infs):
        return
    flag = {"nan": "jax_debug_nans", "inf": "jax_debug_infs"}
    checked = [(f"the new value of {state_label(s)}", v) for s, v in zip(states, new_values, strict=True)]
    checked.append(("its return value", out))
    prefix = f"{who}: " if who else ""
    for label, value in checked:
        kind = _invalid_kind(value, nans, infs)
        if kind is not None:
            raise FloatingPointError(
                f"{prefix}{label} holds {kind} while {flag[kind]} is on; the call is refused and every "
                "State keeps its value from before the call. state_transform.debug_nan(fn, *args), "
                "called with the same arguments, names the operation that produced it."
            )
