"""``exp_euler_step``: one exponential-Euler step of an ODE or SDE, with ``dt`` from ``state_core.environ``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import state_random
from state_core import environ
from state_core.units import is_quantity, split_unit, with_unit

__all__ = ["exp_euler_step"]

_FLOATS = (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64)


def exp_euler_step(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    r"""One exponential-Euler step of ``dx/dt = fn(x, *args)``, with the step ``dt = environ.get_dt()``.

    The update is :math:`x_{n+1} = x_n + dt\,\varphi(dt\,J)\,f(x_n)` with
    :math:`\varphi(z) = (e^z - 1)/z` and :math:`J` the element-wise derivative
    :math:`\partial f_i/\partial x_i`, computed by differentiating ``fn`` (a
    vector-Jacobian product with ones, as brainstate does). The linear part of an
    element-wise drift is integrated exactly: for
    :math:`dV/dt = (-V + I)/\tau` one step gives the closed-form solution.
    Coupling between elements (:math:`\partial f_i/\partial x_j`, :math:`i \ne j`)
    is treated like plain Euler.

    Called as ``exp_euler_step(fn, diffusion, x, *args)`` (a callable before
    ``x``), it integrates the SDE :math:`dx = f\,dt + g\,dW` and adds
    :math:`g(x, *args)\,\sqrt{dt}\,\xi` with standard-normal :math:`\xi` drawn
    from ``state_random``'s default stream.

    Works with physical units (brainunit quantities): with ``x`` in mV and
    ``dt`` in ms, ``fn`` returns mV/ms (and ``diffusion`` mV/ms^0.5); the result
    is in mV. Plain numbers work the same way without units.

    Args:
        fn: the drift ``fn(x, *args, **kwargs)``, element-wise in ``x``; it may
            read states but must not write them.
        *args: ``x`` (an array or quantity of floating dtype), then the further
            arguments of ``fn``; or ``diffusion, x, *rest`` for an SDE.
        **kwargs: keyword arguments of ``fn`` (and of ``diffusion``).

    Returns:
        ``x`` after one step of length ``dt``, in ``x``'s unit.

    Raises:
        TypeError: if ``fn`` is not callable or ``x`` is missing.
        ValueError: if ``x`` is not floating point, or the units of ``x``, ``dt``,
            the drift and the diffusion do not fit together.
        KeyError: if ``dt`` is not set in ``state_core.environ``.

    Example:
        >>> import math
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> from state_core import environ
        >>> tau, current = 10.0, 2.0
        >>> with environ.context(dt=0.5):
        ...     v = state_nn.exp_euler_step(lambda v, i: (-v + i) / tau, jnp.zeros(1), current)
        >>> exact = current * (1 - math.exp(-0.5 / tau))  # the closed-form solution after dt
        >>> bool(jnp.allclose(v, exact, rtol=1e-6))
        True
    """
    if not callable(fn):
        raise TypeError(
            f"exp_euler_step: fn (the drift, dx/dt = fn(x, ...)) must be callable, got {type(fn).__name__}."
        )
    diffusion = None
    if args and callable(args[0]):
        diffusion, args = args[0], args[1:]
    if not args:
        raise TypeError(
            "exp_euler_step: missing the state variable x; call exp_euler_step(fn, x, *args) "
            "(or exp_euler_step(fn, diffusion, x, *args) for an SDE)."
        )
    x, rest = args[0], args[1:]
    x_numbers, x_unit = split_unit(x)
    x_numbers = jnp.asarray(x_numbers)
    if x_numbers.dtype not in _FLOATS:
        raise ValueError(
            "exp_euler_step: the state variable must be float16, bfloat16, float32 or float64, "
            f"got {x_numbers.dtype}; cast it (x.astype(jnp.float32))."
        )
    dt = environ.get_dt()

    drift_unit: list[Any] = [None]

    def drift_numbers(numbers: Any) -> Any:
        value, drift_unit[0] = split_unit(fn(with_unit(numbers, x_unit), *rest, **kwargs))
        return jnp.asarray(value)

    drift, pullback = jax.vjp(drift_numbers, x_numbers)
    (slope,) = pullback(jnp.ones_like(drift))  # d drift_i / d x_i for an element-wise drift
    f_unit = drift_unit[0]
    rate_unit = _ratio(f_unit, x_unit)  # the unit of the slope: 1 / time
    z, z_unit = split_unit(dt * with_unit(slope, rate_unit))  # dimensionless: a plain number
    if z_unit is not None:
        raise ValueError(_drift_unit_message(x, dt, f_unit))
    step = dt * _exprel(z) * with_unit(drift, f_unit)
    x_next = x + step
    if diffusion is not None:
        noise = state_random.randn_like(x_numbers)
        kick = diffusion(x, *rest, **kwargs) * dt**0.5 * noise
        if _dimension(kick) != _dimension(x_next):
            raise ValueError(
                f"exp_euler_step: the diffusion term has {_unit_of(kick)} but the state has {_unit_of(x_next)}: "
                f"with dt in {_unit_of(dt)}, the diffusion must return {_unit_of(x)} per square root of "
                f"{_unit_of(dt)}."
            )
        x_next = x_next + kick
    return x_next


def _exprel(z: Any) -> jax.Array:
    """``(exp(z) - 1) / z``, accurate at and near 0, with the derivative 1/2 there."""
    z = jnp.asarray(z)
    small = jnp.abs(z) < 1e-3
    safe = jnp.where(small, jnp.ones_like(z), z)
    taylor = 1 + z / 2 + z * z / 6 + z * z * z / 24
    return jnp.where(small, taylor, jnp.expm1(safe) / safe)


def _ratio(numerator: Any, denominator: Any) -> Any:
    if denominator is None:
        return numerator
    return 1 / denominator if numerator is None else numerator / denominator


def _drift_unit_message(x: Any, dt: Any, f_unit: Any) -> str:
    returned = f"values in {f_unit}" if f_unit is not None else "plain numbers"
    x_unit = _unit_of(x) if is_quantity(x) else "1"
    if _dimension(dt) is None:
        return (
            f"exp_euler_step: dt is a plain number but the drift returned {returned} for x in {_unit_of(x)}; "
            "give dt a time unit (environ.set(dt=0.1 * u.ms)) or use plain numbers throughout."
        )
    return (
        f"exp_euler_step: the drift returned {returned}, but with x in {_unit_of(x)} and dt in {_unit_of(dt)} "
        f"it must return {x_unit} / {_unit_of(dt)}."
    )


def _unit_of(x: Any) -> str:
    return str(x.unit) if is_quantity(x) and not x.dim.is_dimensionless else "no unit"


def _dimension(x: Any) -> Any:
    return x.dim if is_quantity(x) and not x.dim.is_dimensionless else None
