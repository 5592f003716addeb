"""Regularisers for ``Param``: a penalty on the parameter's value to add to the loss."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Regularization", "L1Reg", "L2Reg"]


def _check_weight(weight: Any, owner: str) -> Any:
    """A concrete weight must be a finite, non-negative real number; arrays pass through."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.integer, np.floating, jax.Array, np.ndarray)):
        raise TypeError(f"{owner}: weight must be a real number, got {type(weight).__name__} {weight!r}.")
    if isinstance(weight, (int, float, np.integer, np.floating)) and not (np.isfinite(weight) and weight >= 0):
        raise ValueError(f"{owner}: weight must be a finite number >= 0, got {weight!r}.")
    return weight


class Regularization:
    """Base class of ``Param`` regularisers: ``loss(value)`` is the penalty, ``reset_value()`` the prior's centre.

    ``Param.reg_loss()`` evaluates ``loss`` on the parameter's value and
    ``Module.reg_loss()`` adds it up over a model. Subclasses implement ``loss``
    (and ``reset_value`` if the prior is not centred at 0).

    Args:
        fit_hyper: accepted for brainstate compatibility and stored; the weights
            of ``L1Reg`` and ``L2Reg`` are constants either way.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> class MaxAbs(state_nn.Regularization):
        ...     def loss(self, value):
        ...         return jnp.max(jnp.abs(value))
        >>> MaxAbs().loss(jnp.array([1., -3.]))
        Array(3., dtype=float32)
    """

    __module__ = "state_nn"

    def __init__(self, fit_hyper: bool = False) -> None:
        self.fit_hyper = bool(fit_hyper)

    def loss(self, value: Any) -> jax.Array:
        """The penalty for ``value`` (a scalar). Override it.

        Args:
            value: the parameter's value.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> state_nn.L1Reg(2.0).loss(jnp.array([1., -1.]))
            Array(4., dtype=float32)
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement loss(value).")

    def reset_value(self) -> Any:
        """The value ``Param.reset_to_prior()`` sets (default 0.0, the centre of the prior).

        Example:
            >>> import state_nn
            >>> state_nn.L2Reg().reset_value()
            0.0
        """
        return 0.0

    def __call__(self, value: Any) -> jax.Array:
        return self.loss(value)


class L1Reg(Regularization):
    """L1 (lasso) penalty ``weight * sum(|value|)``; it pushes values to exactly zero.

    Args:
        weight: the penalty's weight (a number >= 0; default 1.0).
        fit_hyper: see ``Regularization``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.L1Reg(weight=0.01).loss(jnp.array([1.0, -2.0, 0.5]))
        Array(0.035, dtype=float32)
    """

    __module__ = "state_nn"

    def __init__(self, weight: Any = 1.0, fit_hyper: bool = False) -> None:
        super().__init__(fit_hyper)
        self.weight = _check_weight(weight, "L1Reg")

    def loss(self, value: Any) -> jax.Array:
        """``weight * sum(|value|)``.

        Args:
            value: the parameter's value (an array or anything ``jnp.asarray`` takes).

        Example:
            >>> import state_nn
            >>> state_nn.L1Reg(0.5).loss([2.0, -2.0])
            Array(2., dtype=float32)
        """
        return self.weight * jnp.sum(jnp.abs(jnp.asarray(value)))

    def __repr__(self) -> str:
        return f"L1Reg(weight={self.weight!r})"


class L2Reg(Regularization):
    """L2 (ridge, weight-decay) penalty ``weight * sum(value ** 2)``; it keeps values small.

    Args:
        weight: the penalty's weight (a number >= 0; default 1.0).
        fit_hyper: see ``Regularization``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> state_nn.L2Reg(weight=0.01).loss(jnp.array([1.0, -2.0, 0.5]))
        Array(0.0525, dtype=float32)
    """

    __module__ = "state_nn"

    def __init__(self, weight: Any = 1.0, fit_hyper: bool = False) -> None:
        super().__init__(fit_hyper)
        self.weight = _check_weight(weight, "L2Reg")

    def loss(self, value: Any) -> jax.Array:
        """``weight * sum(value ** 2)``.

        Args:
            value: the parameter's value (an array or anything ``jnp.asarray`` takes).

        Example:
            >>> import state_nn
            >>> state_nn.L2Reg(0.5).loss([2.0, -2.0])
            Array(4., dtype=float32)
        """
        value = jnp.asarray(value)
        return self.weight * jnp.sum(value * value)

    def __repr__(self) -> str:
        return f"L2Reg(weight={self.weight!r})"
