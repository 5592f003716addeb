"""Quantities with physical units (brainunit) as sampler arguments, the way brainstate's samplers take them.

``state_random`` does not depend on a unit library: a quantity can only reach a
sampler if the program imported brainunit itself, so each sampler that may take
one is wrapped once (``add_unit_support``) by a function that does nothing but
call the sampler while no unit library is loaded or no argument is a quantity.
Otherwise it converts the quantities to plain numbers, calls the sampler (all
its checks then run on the numbers) and gives the result the unit:

* location/scale samplers draw in the unit their parameters share (``normal``,
  ``laplace``, ``logistic``, ``gumbel``, ``cauchy``, ``wald``, ``uniform``,
  ``truncated_normal``, ``triangular``): a plain parameter is read in that unit,
  a quantity in a compatible unit is converted, another dimension raises the
  unit library's ``UnitMismatchError``;
* scale samplers draw in the unit of the scale (``exponential``, ``gamma``,
  ``rayleigh``, ``weibull_min``; ``vonmises`` in the unit of ``mu``);
* ``choice``, ``permutation`` and ``shuffle`` return values in the unit of the
  array they draw from; ``multivariate_normal`` in the unit of ``mean``, with
  ``cov`` in that unit squared;
* ``rand_like``, ``randn_like`` and ``randint_like`` read only the shape (and
  dtype) of their input, whatever its unit;
* every other parameter (shapes, rates, probabilities, counts) must be
  dimensionless: a dimensionless quantity is used as its number, another is a
  ``ValueError``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from state_core.units import quantity_types, unit_library

__all__ = ["add_unit_support"]

# sampler -> its parameters that carry the output's unit, in the order that picks it
_UNIT_PARAMS: dict[str, tuple[str, ...]] = {
    "normal": ("loc", "scale"),
    "laplace": ("loc", "scale"),
    "logistic": ("loc", "scale"),
    "gumbel": ("loc", "scale"),
    "cauchy": ("loc", "scale"),
    "wald": ("mean", "scale"),
    "uniform": ("low", "high"),
    "truncated_normal": ("lower", "upper", "loc", "scale"),
    "triangular": ("left", "mode", "right"),
    "exponential": ("scale",),
    "gamma": ("scale",),
    "rayleigh": ("scale",),
    "weibull_min": ("scale",),
    "vonmises": ("mu",),
    "choice": ("a",),
    "permutation": ("x",),
    "shuffle": ("x",),
    "multivariate_normal": ("mean",),
}
# sampler -> the parameter it reads only the shape of
_SHAPE_OF = {"rand_like": "input", "randn_like": "input", "randint_like": "input"}
# samplers whose numeric parameters must all be dimensionless
_DIMENSIONLESS = (
    "lognormal",
    "standard_gamma",
    "beta",
    "chisquare",
    "t",
    "standard_t",
    "pareto",
    "power",
    "weibull",
    "loggamma",
    "f",
    "noncentral_chisquare",
    "noncentral_f",
    "dirichlet",
    "randint",
    "random_integers",
    "bernoulli",
    "binomial",
    "poisson",
    "geometric",
    "negative_binomial",
    "hypergeometric",
    "logseries",
    "zipf",
    "multinomial",
    "categorical",
)


def add_unit_support(cls: type) -> None:
    """Wrap the samplers of ``cls`` that may take quantities (see the module docstring)."""
    for name in (*_UNIT_PARAMS, *_SHAPE_OF, *_DIMENSIONLESS):
        setattr(cls, name, _unit_aware(getattr(cls, name), _UNIT_PARAMS.get(name, ()), _SHAPE_OF.get(name)))


def _unit_aware(method: Callable[..., Any], carriers: tuple[str, ...], shape_only: str | None) -> Callable[..., Any]:
    signature = inspect.signature(method)
    fn = method.__name__

    @functools.wraps(method)
    def sampler(*args: Any, **kwargs: Any) -> Any:
        types = quantity_types()
        if not types or not any(isinstance(v, types) for v in (*args, *kwargs.values())):
            return method(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        unit = _to_numbers(fn, bound.arguments, carriers, shape_only, types)
        out = method(*bound.args, **bound.kwargs)
        return out if unit is None else out * unit

    return sampler


def _to_numbers(
    fn: str, arguments: dict[str, Any], carriers: tuple[str, ...], shape_only: str | None, types: tuple[type, ...]
) -> Any:
    """Replace the quantities in ``arguments`` by numbers; return the output's unit (``None``: plain)."""
    unit, source = None, ""
    mean, covariance_done = arguments.get("mean"), False
    for name in carriers:
        value: Any = arguments.get(name)
        if _is_quantity(value, types) and not value.dim.is_dimensionless:
            unit, source = value.unit, name
            break
    for name, value in arguments.items():
        if not _is_quantity(value, types):
            continue
        if name == shape_only:
            arguments[name] = value.mantissa
        elif name in carriers and unit is not None:
            if value.dim != unit.dim:
                raise unit_library(value).UnitMismatchError(
                    f"{fn}: `{name}` is in {value.unit} but `{source}` is in {unit}; they must share one "
                    "physical dimension (the samples are drawn in that unit)."
                )
            arguments[name] = value.to_decimal(unit)
        elif value.dim.is_dimensionless:
            arguments[name] = value.to_decimal()
        elif fn == "multivariate_normal" and name == "cov":
            arguments[name] = _covariance(value, unit)
            covariance_done = True
        else:
            raise ValueError(
                f"{fn}: `{name}` must be dimensionless, got a quantity in {value.unit}; pass a plain number "
                "(units are carried only by location and scale parameters)."
            )
    if fn == "multivariate_normal" and unit is not None and not covariance_done:
        raise unit_library(mean).UnitMismatchError(
            f"multivariate_normal: `mean` is in {unit}, so `cov` must be a quantity in {unit**2}; got no unit."
        )
    return unit


def _is_quantity(value: Any, types: tuple[type, ...]) -> bool:
    # A function, not an inline isinstance: mypy would narrow `value` to `object`.
    return isinstance(value, types)


def _covariance(cov: Any, unit: Any) -> Any:
    if unit is None:
        raise ValueError(
            f"multivariate_normal: `cov` is a quantity in {cov.unit} but `mean` has no unit; give `mean` the unit "
            "whose square `cov` is in."
        )
    if cov.dim != (unit**2).dim:
        raise unit_library(cov).UnitMismatchError(
            f"multivariate_normal: `cov` is in {cov.unit} but must be in the square of `mean`'s unit {unit}."
        )
    return cov.to_decimal(unit**2)
