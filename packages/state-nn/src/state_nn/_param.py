"""``Param``: a trainable value with an optional transform and regulariser."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from state_core import ParamState

from ._module import Module
from ._regularization import Regularization
from ._transform import IdentityT, Transform

__all__ = ["Param", "Const"]


def _as_float_array(value: Any) -> jax.Array:
    x = jnp.asarray(value)
    # An int or bool initial value would make the stored value unlearnable; an
    # explicit dtype also drops JAX's weak type, so the state's dtype is fixed.
    dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.result_type(float)
    return jnp.asarray(x, dtype=dtype)


def _stored_value(t: Transform, value: Any, where: str) -> jax.Array:
    """``t.inverse(value)``; a ``ValueError`` naming ``where`` if a concrete value is outside ``t``'s range.

    A traced value cannot be checked (its elements are unknown while tracing).
    """
    x = _as_float_array(value)
    stored = t.inverse(x)
    if not isinstance(stored, jax.core.Tracer):
        n_bad = int(jnp.size(stored)) - int(jnp.sum(jnp.isfinite(stored)))
        if n_bad:
            raise ValueError(
                f"{where}: {n_bad} of {int(jnp.size(stored))} element(s) of value (shape {x.shape}) are "
                f"outside the range of {t!r}: its inverse is not finite there. Give values "
                "strictly inside the transform's range."
            )
    return stored


def _like_stored(value: Any, stored: Any, where: str) -> jax.Array:
    """``value`` as an array of ``stored``'s shape and dtype, checked before anything else.

    Python numbers and integer or bool values take the parameter's dtype, as in the
    constructor; a floating value converts only when nothing is lost (``float16``
    into ``float32``). Anything else is a ``ValueError`` naming both shapes or dtypes.
    """
    x = jnp.asarray(value)
    shape, dtype = jnp.shape(stored), jnp.result_type(stored)
    if x.shape != shape:
        raise ValueError(
            f"{where}: the new value has shape {x.shape} but the parameter has shape {shape} (dtype "
            f"{dtype}); give a value of shape {shape} (broadcast it first if needed, e.g. "
            f"jnp.broadcast_to(value, {shape}))."
        )
    if x.dtype == dtype:
        return x
    converts = (
        isinstance(value, (int, float, bool))  # a Python number: no dtype of its own
        or jax.typeof(x).weak_type
        or jnp.issubdtype(x.dtype, jnp.integer)
        or x.dtype == jnp.bool_
        or jnp.promote_types(x.dtype, dtype) == dtype  # a narrower float; not float64 or complex into float32
    )
    if not converts:
        raise ValueError(
            f"{where}: the new value has dtype {x.dtype} but the parameter has dtype {dtype} (shape "
            f"{shape}), and {x.dtype} does not convert to {dtype} without loss; cast it first "
            f"(value.astype(jnp.{dtype})), or create the parameter from a {x.dtype} value."
        )
    return x.astype(dtype)


class Param(Module):
    """A parameter whose stored value passes through a transform ``t`` and may carry a regulariser ``reg``.

    The stored (unconstrained) value is ``t.inverse(value)``, in the
    ``ParamState`` ``val`` when ``fit=True`` (so optimisers and gradients see it)
    or as a plain array when ``fit=False``. ``value()`` returns
    ``t.forward(val)``, so, for example, ``SoftplusT`` keeps the value positive
    however the optimiser moves the stored one. ``reg_loss()`` is the
    regulariser's penalty on ``value()``; ``Module.reg_loss()`` sums it over a
    model.

    Args:
        value: the initial value (in the transform's range); ints become floats.
        t: a ``Transform`` (default ``IdentityT()``).
        reg: a ``Regularization`` such as ``L1Reg`` / ``L2Reg``, or ``None``.
        precompute: a function applied to the transformed value by ``value()``.
        fit: trainable (stored in a ``ParamState``) or fixed (a plain array).
        name: an optional name.

    Raises ``ValueError`` if ``value`` is outside the transform's range (its
    inverse is not finite).

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> tau = state_nn.Param(jnp.array([1.0, 2.0]), t=state_nn.SoftplusT(0.0), reg=state_nn.L2Reg(0.1))
        >>> tau.value()
        Array([1., 2.], dtype=float32)
        >>> jnp.round(tau.val.value, 4)  # the stored, unconstrained value
        Array([0.5413, 1.8546], dtype=float32)
        >>> tau.reg_loss()
        Array(0.5, dtype=float32)
        >>> tau.val.value = jnp.array([-5.0, 0.0])  # e.g. after an optimiser step
        >>> tau.value()  # still positive
        Array([0.00671535, 0.6931472 ], dtype=float32)
    """

    __module__ = "state_nn"
    _repr_attrs = ("t", "reg")

    def __init__(
        self,
        value: Any,
        t: Transform | None = None,
        reg: Regularization | None = None,
        precompute: Callable[[Any], Any] | None = None,
        fit: bool = True,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        if t is None:
            t = IdentityT()
        if not isinstance(t, Transform):
            raise TypeError(f"Param: t must be a state_nn Transform (such as SoftplusT(0.0)), got {type(t).__name__}.")
        if reg is not None and not isinstance(reg, Regularization):
            raise TypeError(
                f"Param: reg must be a state_nn Regularization (such as L2Reg(0.01)) or None, got {type(reg).__name__}."
            )
        if precompute is not None and not callable(precompute):
            raise TypeError(f"Param: precompute must be callable or None, got {type(precompute).__name__}.")
        stored = _stored_value(t, value, "Param")
        self.t = t
        self.reg = reg
        self.precompute = precompute
        self.fit = bool(fit)
        self.val: Any = ParamState(stored) if self.fit else stored

    def _stored(self) -> Any:
        return self.val.value if isinstance(self.val, ParamState) else self.val

    def value(self) -> jax.Array:
        """The parameter's value: ``t.forward(val)`` (then ``precompute`` if given).

        Example:
            >>> import state_nn
            >>> state_nn.Param(0.5, t=state_nn.ClipT(0.0, 1.0)).value()
            Array(0.5, dtype=float32)
        """
        out = self.t.forward(self._stored())
        if self.precompute is not None:
            out = self.precompute(out)
        return out

    def update(self) -> jax.Array:
        """Calling a ``Param`` returns ``value()``.

        Example:
            >>> import state_nn
            >>> state_nn.Param(2.0)()
            Array(2., dtype=float32)
        """
        return self.value()

    def set_value(self, value: Any) -> None:
        """Store ``t.inverse(value)``, so that ``value()`` returns ``value`` (clipped for ``ClipT``).

        Args:
            value: the new value, in the transform's range, with the parameter's shape.

        Raises:
            ValueError: if ``value``'s shape differs from the parameter's, or its
                dtype does not convert to the parameter's without loss (both are
                checked first, also for traced values; Python numbers, integers and
                narrower floats are converted), or a concrete ``value`` is outside
                the transform's range (as in the constructor; a traced value cannot
                be checked). The stored value is then unchanged.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> p = state_nn.Param(jnp.ones(2), t=state_nn.SoftplusT())
            >>> p.set_value(jnp.array([3.0, 0.25]))
            >>> jnp.round(p.value(), 4)
            Array([3.  , 0.25], dtype=float32)
            >>> p.set_value(jnp.array([1.0, -1.0]))
            Traceback (most recent call last):
            ...
            ValueError: Param.set_value: 1 of 2 element(s) of value (shape (2,)) are outside the range of ...
            >>> p.set_value(jnp.array([1.0, 2.0, 3.0]))
            Traceback (most recent call last):
            ...
            ValueError: Param.set_value: the new value has shape (3,) but the parameter has shape (2,) ...
        """
        self._assign(value, "set_value")

    def _assign(self, value: Any, method: str) -> None:
        label = f"Param {self.name!r}" if self.name else "Param"
        where = f"{label}.{method}"
        old = self._stored()
        # Shape and dtype first: a value of the wrong shape is named as such, not by
        # what the transform's range check happens to find in it.
        stored = _stored_value(self.t, _like_stored(value, old, where), where)
        if jnp.shape(stored) != jnp.shape(old):
            raise ValueError(
                f"{where}: {self.t!r}.inverse turned a value of shape {jnp.shape(old)} into one of shape "
                f"{jnp.shape(stored)}; a Transform must work element by element."
            )
        if isinstance(self.val, ParamState):
            self.val.value = stored
        else:
            self.val = stored

    def reg_loss(self) -> Any:
        """The regulariser's penalty on ``value()``; 0.0 without ``reg`` or when ``fit=False``.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> state_nn.Param(jnp.array([1., -2.]), reg=state_nn.L1Reg(0.5)).reg_loss()
            Array(1.5, dtype=float32)
            >>> state_nn.Param(jnp.array([1., -2.])).reg_loss()
            0.0
        """
        if not self.fit or self.reg is None:
            return 0.0
        return self.reg.loss(self.value())

    def reset_to_prior(self) -> None:
        """Set the value to the regulariser's ``reset_value()`` (every element); no-op without ``reg``.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> p = state_nn.Param(jnp.array([1., -2.]), reg=state_nn.L2Reg())
            >>> p.reset_to_prior()
            >>> p.value()
            Array([0., 0.], dtype=float32)
        """
        if self.reg is None:
            return
        stored = self._stored()
        self._assign(jnp.full(jnp.shape(stored), self.reg.reset_value(), jnp.result_type(stored)), "reset_to_prior")

    def clip(self, min_val: Any = None, max_val: Any = None) -> None:
        """Clip the value to ``[min_val, max_val]`` in place (``None`` = no bound on that side).

        Args:
            min_val: the lower bound; None: no lower bound.
            max_val: the upper bound; None: no upper bound.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> p = state_nn.Param(jnp.array([-2., 0.5, 3.]))
            >>> p.clip(0.0, 1.0)
            >>> p.value()
            Array([0. , 0.5, 1. ], dtype=float32)
        """
        self._assign(jnp.clip(self.value(), min_val, max_val), "clip")


class Const(Param):
    """A fixed parameter: ``Param(value, fit=False, ...)``; not a State, so no optimiser or gradient sees it.

    Args:
        value: the fixed value.
        **kwargs: the other arguments of ``Param`` (``t``, ``reg``, ``precompute``, ``name``); ``fit=True`` is a
            ``ValueError``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> c = state_nn.Const(jnp.array([1., 2.]))
        >>> c.value(), list(c.states())
        (Array([1., 2.], dtype=float32), [])
    """

    __module__ = "state_nn"

    def __init__(self, value: Any, **kwargs: Any) -> None:
        if kwargs.pop("fit", False):
            raise ValueError("Const is a fixed parameter: fit=True is not allowed (use Param instead).")
        super().__init__(value, fit=False, **kwargs)
