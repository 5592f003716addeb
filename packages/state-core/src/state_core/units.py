"""Optional support for unit-carrying values (``brainunit`` / ``saiunit`` quantities).

A ``brainunit.Quantity`` is a JAX pytree: its one leaf is the mantissa (the
numbers) and its unit travels in the tree structure. States hold quantities like
any other pytree, and state-aware transformations trace them unchanged. The
helpers here let the layers above recognise a quantity, take it apart and put it
back together, *without importing a unit library*: brainunit is an optional
extra (``pip install 'state-core[units]'``), and a value can only be a quantity
if the program already imported the library that made it. So the helpers look
the quantity class up in ``sys.modules`` and never import anything; without
brainunit they see plain arrays only.

Example:
    >>> import jax.numpy as jnp
    >>> from state_core import units
    >>> units.is_quantity(jnp.ones(2))
    False
    >>> units.split_unit(jnp.ones(2))
    (Array([1., 1.], dtype=float32), None)
"""

from __future__ import annotations

import sys
from typing import Any

import jax

__all__ = ["quantity_types", "is_quantity", "split_unit", "with_unit", "unit_library"]

# Libraries whose ``Quantity`` is a pytree of (mantissa, unit). brainunit >= 0.1
# re-exports saiunit's class; older brainunit releases had their own.
_LIBRARIES = ("saiunit", "brainunit")


def quantity_types() -> tuple[type, ...]:
    """The quantity classes of the unit libraries this program has imported (none: ``()``).

    Example:
        >>> from state_core.units import quantity_types
        >>> all(t.__name__ == 'Quantity' for t in quantity_types())
        True
    """
    found: list[type] = []
    for name in _LIBRARIES:
        module = sys.modules.get(name)
        cls = getattr(module, "Quantity", None) if module is not None else None
        if isinstance(cls, type) and cls not in found:
            found.append(cls)
    return tuple(found)


def is_quantity(x: Any) -> bool:
    """Whether ``x`` is a unit-carrying quantity (``False`` whenever no unit library is imported).

    Args:
        x: any value: a quantity, an array, a number, a pytree (a container of
            quantities is not itself a quantity).

    Example:
        >>> from state_core.units import is_quantity
        >>> is_quantity(3.0)
        False
    """
    types = quantity_types()
    return bool(types) and isinstance(x, types)


def split_unit(x: Any) -> tuple[Any, Any]:
    """``(mantissa, unit)`` of a quantity, ``(x, None)`` for anything else.

    A dimensionless quantity (unit ``1``, possibly scaled, such as ``ms / s``) is
    returned as a plain number in unit ``1`` with ``None`` as its unit.

    Args:
        x: any value; only a quantity itself is taken apart (not a pytree of them).

    Returns:
        ``(mantissa, unit)``: the numbers as an array or number, and the unit
        object of the library that made ``x``; ``(x, None)`` when ``x`` is not a
        quantity or is dimensionless.

    Example:
        >>> from state_core.units import split_unit
        >>> split_unit(2.5)
        (2.5, None)
    """
    if not is_quantity(x):
        return x, None
    if x.dim.is_dimensionless:
        return x.to_decimal(), None
    return x.mantissa, x.unit


def with_unit(x: Any, unit: Any) -> Any:
    """``x`` times ``unit`` (a quantity), or ``x`` itself when ``unit`` is ``None``.

    The inverse of ``split_unit``: ``with_unit(*split_unit(q))`` rebuilds ``q``
    (a dimensionless quantity comes back as a plain number).

    Args:
        x: the numbers (mantissa): an array or a number.
        unit: a unit of the library that made the quantity (the second item of
            ``split_unit``), or ``None`` for a value without unit.

    Example:
        >>> from state_core.units import with_unit
        >>> with_unit(1.5, None)
        1.5
    """
    return x if unit is None else x * unit


def unit_library(x: Any) -> Any:
    """The unit library (module) that made the quantity ``x``; ``None`` if ``x`` is not one.

    Use it for unit-aware math on a quantity you were handed, without importing
    (or depending on) a unit library yourself.

    Args:
        x: any value; only a quantity has a library.

    Example:
        >>> from state_core.units import unit_library
        >>> unit_library(1.0) is None
        True
    """
    if not is_quantity(x):
        return None
    return sys.modules[type(x).__module__.partition(".")[0]]


def describe_unit_mismatch(old: Any, new: Any) -> str | None:
    """Why ``new`` cannot replace ``old`` when the two differ in units only, else ``None``.

    Both values are compared with quantities taken as leaves: if that structure
    matches, the first leaf pair whose units differ is described with its path;
    a quantity against a plain value counts as a unit difference too.

    Args:
        old: the value a state holds.
        new: the value about to be written to it.

    Returns:
        A sentence for an error message (what differs, where, how to fix it), or
        ``None`` when the units agree or the structures differ otherwise.
    """
    types = quantity_types()
    if not types:
        return None

    def as_leaf(v: Any) -> bool:
        return isinstance(v, types)

    old_leaves, old_def = jax.tree.flatten_with_path(old, is_leaf=as_leaf)
    new_leaves, new_def = jax.tree.flatten(new, is_leaf=as_leaf)
    if old_def != new_def:  # type: ignore[operator]  # jaxlib PyTreeDef stub not found
        return None
    for (path, before), after in zip(old_leaves, new_leaves, strict=True):
        if not (as_leaf(before) or as_leaf(after)):
            continue
        if as_leaf(before) and as_leaf(after) and before.unit == after.unit:
            continue
        where = jax.tree_util.keystr(path)
        return _mismatch_text(before, after, where)
    return None


def _mismatch_text(before: Any, after: Any, where: str) -> str:
    at = f" at {where}" if where else ""
    if not is_quantity(after):
        return (
            f"the state holds a quantity in {before.unit}{at} but the new value has no unit. "
            f"Write a quantity in {before.unit} (multiply the numbers by the unit)."
        )
    if not is_quantity(before):
        return (
            f"the new value{at} is a quantity in {after.unit} but the state holds a plain array. "
            f"Write the numbers (`value.to_decimal(unit)`), or create the state with a quantity."
        )
    if before.unit.dim == after.unit.dim:
        return (
            f"the new value{at} is in {after.unit} but the state holds {before.unit}. A state keeps its "
            f"unit; convert first: `value.in_unit(<the state's unit>)`."
        )
    return (
        f"the new value{at} is in {after.unit} but the state holds {before.unit}: the physical "
        "dimensions differ, so this is probably a mistake in the update's units."
    )
