"""Transforms for ``Param``: a map from an unconstrained stored value to the value used."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Transform", "IdentityT", "ClipT", "SoftplusT"]


def _concrete_number(x: Any) -> float | None:
    """``x`` as a float if it is a Python or NumPy real scalar, else ``None`` (arrays, tracers)."""
    if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool):
        return float(x)
    return None


class Transform:
    """Base class of ``Param`` transforms: ``forward`` maps the stored value to the value used.

    ``Param`` stores ``inverse(value)`` and returns ``forward(stored)``, so an
    optimiser moves the stored value freely while the value the model uses stays
    in the transform's range. Subclasses implement ``forward`` and ``inverse``;
    calling a transform calls ``forward``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> class Double(state_nn.Transform):
        ...     def forward(self, x):
        ...         return 2 * x
        ...     def inverse(self, y):
        ...         return y / 2
        >>> t = Double()
        >>> t(jnp.array(3.)), t.inverse(jnp.array(3.))
        (Array(6., dtype=float32, weak_type=True), Array(1.5, dtype=float32, weak_type=True))
    """

    __module__ = "state_nn"

    def forward(self, x: Any) -> jax.Array:
        """Map a stored (unconstrained) value to the value used. Override it.

        Args:
            x: the stored value.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> state_nn.IdentityT().forward(jnp.array([2.]))
            Array([2.], dtype=float32)
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement forward(x).")

    def inverse(self, y: Any) -> jax.Array:
        """Map a value in the transform's range back to a stored value. Override it.

        Args:
            y: a value in the transform's range.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> state_nn.IdentityT().inverse(jnp.array([2.]))
            Array([2.], dtype=float32)
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement inverse(y).")

    def __call__(self, x: Any) -> jax.Array:
        return self.forward(x)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class IdentityT(Transform):
    """The identity transform (the default of ``Param``): the stored value is the value used.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.IdentityT()(jnp.array([1., -1.]))
        Array([ 1., -1.], dtype=float32)
    """

    __module__ = "state_nn"

    def forward(self, x: Any) -> jax.Array:
        """Return ``x`` as an array.

        Args:
            x: the stored value.

        Example:
            >>> import state_nn
            >>> state_nn.IdentityT().forward(1.5)
            Array(1.5, dtype=float32, weak_type=True)
        """
        return jnp.asarray(x)

    def inverse(self, y: Any) -> jax.Array:
        """Return ``y`` as an array.

        Args:
            y: the value.

        Example:
            >>> import state_nn
            >>> state_nn.IdentityT().inverse(1.5)
            Array(1.5, dtype=float32, weak_type=True)
        """
        return jnp.asarray(y)


class ClipT(Transform):
    """Clip to ``[lower, upper]``: the value used never leaves the interval.

    Clipping is not invertible; ``inverse`` clips too, so a ``Param`` created
    with a value outside the interval stores the nearest bound. Gradients do not
    flow through a clipped element (its derivative is 0).

    Args:
        lower: the lower bound (a scalar or an array broadcastable to the
            parameter); must be below ``upper``.
        upper: the upper bound, like ``lower``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> t = state_nn.ClipT(0.0, 1.0)
        >>> t(jnp.array([-0.5, 0.5, 1.5]))
        Array([0. , 0.5, 1. ], dtype=float32)
        >>> t
        ClipT(lower=0.0, upper=1.0)
    """

    __module__ = "state_nn"

    def __init__(self, lower: Any, upper: Any) -> None:
        lo, hi = _concrete_number(lower), _concrete_number(upper)
        if lo is not None and hi is not None and not lo < hi:
            raise ValueError(f"ClipT: lower must be below upper, got lower={lower!r}, upper={upper!r}.")
        self.lower = lower
        self.upper = upper

    def forward(self, x: Any) -> jax.Array:
        """``clip(x, lower, upper)``.

        Args:
            x: the stored value.

        Example:
            >>> import state_nn
            >>> state_nn.ClipT(-1.0, 1.0).forward(3.0)
            Array(1., dtype=float32, weak_type=True)
        """
        return jnp.clip(x, self.lower, self.upper)

    def inverse(self, y: Any) -> jax.Array:
        """``clip(y, lower, upper)`` (clipping has no true inverse).

        Args:
            y: the value.

        Example:
            >>> import state_nn
            >>> state_nn.ClipT(-1.0, 1.0).inverse(0.25)
            Array(0.25, dtype=float32, weak_type=True)
        """
        return jnp.clip(y, self.lower, self.upper)

    def __repr__(self) -> str:
        return f"ClipT(lower={self.lower!r}, upper={self.upper!r})"


class SoftplusT(Transform):
    """``lower + softplus(x)``: keeps the value used above ``lower`` (positive by default).

    ``inverse(y)`` is ``z + log(-expm1(-z))`` with ``z = y - lower``, accurate
    for large and small ``z``; it is ``-inf`` at ``y == lower`` and NaN below.

    Args:
        lower: the lower bound (default 0.0).

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> t = state_nn.SoftplusT(1.0)
        >>> t(jnp.array([0., 20.]))
        Array([ 1.6931472, 21.       ], dtype=float32)
        >>> jnp.round(t.inverse(t(jnp.array([-3., 0.5]))), 4)
        Array([-3. ,  0.5], dtype=float32)
    """

    __module__ = "state_nn"

    def __init__(self, lower: Any = 0.0) -> None:
        self.lower = lower

    def forward(self, x: Any) -> jax.Array:
        """``lower + softplus(x)``.

        Args:
            x: the stored value.

        Example:
            >>> import state_nn
            >>> state_nn.SoftplusT().forward(0.0)
            Array(0.6931472, dtype=float32, weak_type=True)
        """
        return jax.nn.softplus(x) + self.lower

    def inverse(self, y: Any) -> jax.Array:
        """The ``x`` with ``forward(x) == y`` (for ``y > lower``).

        Args:
            y: a value above ``lower``.

        Example:
            >>> import state_nn
            >>> state_nn.SoftplusT().inverse(0.6931472)
            Array(0., dtype=float32, weak_type=True)
        """
        z = jnp.asarray(y) - self.lower
        return z + jnp.log(-jnp.expm1(-z))

    def __repr__(self) -> str:
        return f"SoftplusT(lower={self.lower!r})"
