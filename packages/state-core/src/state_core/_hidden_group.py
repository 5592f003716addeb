"""Hidden states that keep several same-shaped variables in one array (last axis).

A neuron model with a voltage and a few gating variables of the same shape can
keep them in one ``HiddenGroupState`` (one array, the variables on the last axis)
or one ``HiddenTreeState`` (built from named variables, possibly with different
units). One state instead of several keeps the state list of a large network
short, and one write updates every variable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._state_kinds import HiddenState
from .units import is_quantity

__all__ = ["HiddenGroupState", "HiddenTreeState"]

_Key = int | str


def _check_array(owner: str, value: Any, what: str) -> None:
    # Python lists and scalars are refused: the variables are stacked on the last
    # axis, which needs a shaped array from the start.
    if not (isinstance(value, np.ndarray | jax.Array) or is_quantity(value)):
        raise TypeError(
            f"{owner} holds arrays (numpy, jax or a unit library's Quantity); {what} is a "
            f"{type(value).__name__}. Convert it with jnp.asarray(...)."
        )


def _unit_of(value: Any) -> Any:
    """The unit of a quantity with a physical dimension, else ``None``."""
    if is_quantity(value) and not value.dim.is_dimensionless:
        return value.unit
    return None


def _mantissa_in(owner: str, value: Any, unit: Any, what: str) -> Any:
    """``value`` as a plain array expressed in ``unit`` (``None``: a plain number)."""
    dimensionless = unit is None or unit.dim.is_dimensionless
    if is_quantity(value):
        if unit is None:
            if not value.dim.is_dimensionless:
                raise ValueError(
                    f"{owner}: {what} is in {value.unit} but the variable has no unit; pass a plain array."
                )
            return jnp.asarray(value.to_decimal())
        return jnp.asarray(value.to_decimal(unit))
    if not dimensionless:
        raise ValueError(f"{owner}: {what} has no unit but the variable is in {unit}; multiply it by the unit.")
    return jnp.asarray(value)


class HiddenGroupState(HiddenState[Any]):
    """A hidden state holding several same-shaped variables stacked on the last axis.

    ``value`` has shape ``varshape + (num_state,)``; variable ``i`` is
    ``value[..., i]``, also reachable by its name ``str(i)``.

    Args:
        value: an array (or a Quantity) with at least 2 dimensions.
        name: the state's name.
        tag: a tag or tags.
        **kwargs: further ``State`` options (``strict=``, metadata).

    Raises:
        TypeError: ``value`` is not an array.
        ValueError: ``value`` has fewer than 2 dimensions.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import HiddenGroupState
        >>> h = HiddenGroupState(jnp.zeros((4, 3)))
        >>> h.varshape, h.num_state
        ((4,), 3)
        >>> h.set_value({1: jnp.ones(4)})
        >>> h.get_value(1)
        Array([1., 1., 1., 1.], dtype=float32)
    """

    __module__ = "state_core"

    def __init__(self, value: Any, name: str | None = None, tag: Any = None, **kwargs: Any) -> None:
        owner = type(self).__name__
        _check_array(owner, value, "the value")
        if np.ndim(value) < 2:
            raise ValueError(
                f"{owner} needs a value with at least 2 dimensions (the variables on the last "
                f"axis), got shape {tuple(np.shape(value))}. Use HiddenState for a single variable."
            )
        super().__init__(value, name, tag, **kwargs)
        self.name2index: dict[str, int] = {str(i): i for i in range(np.shape(value)[-1])}

    @property
    def varshape(self) -> tuple[int, ...]:
        """The shape of each variable (the value's shape without the last axis).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenGroupState
            >>> HiddenGroupState(jnp.zeros((2, 5, 3))).varshape
            (2, 5)
        """
        return tuple(np.shape(self.value))[:-1]

    @property
    def num_state(self) -> int:
        """How many variables the state holds (the size of the last axis).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenGroupState
            >>> HiddenGroupState(jnp.zeros((2, 3))).num_state
            3
        """
        return int(np.shape(self.value)[-1])

    def _index(self, item: Any) -> int:
        owner = type(self).__name__
        if isinstance(item, str):
            if item not in self.name2index:
                raise KeyError(f"{owner}: variable name {item!r} not found; the names are {sorted(self.name2index)}.")
            return self.name2index[item]
        if isinstance(item, int | np.integer) and not isinstance(item, bool):
            n = self.num_state
            if not -n <= item < n:
                raise IndexError(f"{owner}: variable index {item} out of range for {n} variables.")
            return int(item) % n
        raise TypeError(f"{owner}: a variable key should be int or str, got {type(item).__name__} {item!r}.")

    def _set_index(self, item: Any) -> int:
        # A write names variables by position 0..num_state-1 only (as brainstate's
        # set_value): a negative index there is more likely a bug than a wish.
        if isinstance(item, int | np.integer) and not isinstance(item, bool):
            n = self.num_state
            if not 0 <= item < n:
                raise ValueError(
                    f"{type(self).__name__}.set_value(): variable index {item} out of range; "
                    f"use 0 to {n - 1} (or a name)."
                )
            return int(item)
        return self._index(item)

    def _raw(self, index: int) -> Any:
        return self.value[..., index]

    def get_value(self, item: _Key) -> Any:
        """One variable, by index (negative counts from the end) or by name.

        Args:
            item: the variable's index or name.

        Returns:
            The variable, of shape ``varshape``.

        Raises:
            IndexError: the index is out of range.
            KeyError: no variable has that name.
            TypeError: ``item`` is neither an int nor a str.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenGroupState
            >>> HiddenGroupState(jnp.arange(6.).reshape(2, 3)).get_value(-1)
            Array([2., 5.], dtype=float32)
        """
        return self._raw(self._index(item))

    def _unit_at(self, index: int) -> Any:
        # the whole group shares the value's unit (kept even when dimensionless)
        return self.value.unit if is_quantity(self.value) else None

    def set_value(self, val: Mapping[_Key, Any] | Sequence[Any]) -> None:
        """Write some variables; the others keep their values.

        Args:
            val: ``{index or name: new value}``, or a sequence whose item ``i``
                is the new value of variable ``i``. Each new value has shape
                ``varshape`` (and the variable's unit, if it has one).

        Raises:
            TypeError: ``val`` is not a mapping or sequence, or a key is not an
                int or str.
            ValueError: an index is outside ``0 .. num_state - 1``, a new value
                has the wrong shape or unit, or ``val`` is empty. Nothing is
                written then.
            KeyError: no variable has a given name.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenGroupState
            >>> h = HiddenGroupState(jnp.zeros((2, 3)))
            >>> h.set_value([jnp.ones(2), jnp.full(2, 2.)])
            >>> h.value
            Array([[1., 2., 0.],
                   [1., 2., 0.]], dtype=float32)
        """
        owner = type(self).__name__
        if isinstance(val, list | tuple):
            val = dict(enumerate(val))
        if not isinstance(val, Mapping):
            raise TypeError(
                f"{owner}.set_value() takes a dictionary of hidden states {{index or name: value}} "
                f"or a sequence of them, got {type(val).__name__}."
            )
        if not val:
            raise ValueError(f"{owner}.set_value() got no variables to set.")
        indices: list[int] = []
        columns: list[Any] = []
        for key, new in val.items():
            index = self._index(key) if isinstance(key, str) else self._set_index(key)
            if tuple(np.shape(new)) != self.varshape:
                raise ValueError(
                    f"{owner}.set_value(): the shape of the hidden state should be {self.varshape}, "
                    f"got {tuple(np.shape(new))} for variable {key!r}."
                )
            columns.append(_mantissa_in(owner, new, self._unit_at(index), f"the value for variable {key!r}"))
            indices.append(index)
        self.value = self._scatter(np.asarray(indices), jnp.stack(columns, axis=-1))

    def _scatter(self, indices: Any, columns: Any) -> Any:
        current = self.value
        if is_quantity(current):
            base = jnp.asarray(current.mantissa)
            return type(current)(base.at[..., indices].set(columns.astype(base.dtype)), unit=current.unit)
        base = jnp.asarray(current)
        return base.at[..., indices].set(columns.astype(base.dtype))


class HiddenTreeState(HiddenGroupState):
    """Several named, same-shaped variables (each with its own unit) kept as one array.

    The value is the variables' mantissas stacked on the last axis; ``get_value``
    returns a variable with its unit again, and ``set_value`` converts new values
    to each variable's unit.

    Args:
        value: ``{name: array}`` or a sequence of arrays (named ``'0'``, ``'1'``,
            ...), all of the same shape; Quantities keep their units.
        name: the state's name.
        tag: a tag or tags.
        **kwargs: further ``State`` options (``strict=``, metadata).

    Raises:
        TypeError: ``value`` is not a dict or sequence, or a variable is not an array.
        ValueError: the variables' shapes differ, or there are none.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import HiddenTreeState
        >>> h = HiddenTreeState({'v': jnp.zeros(3), 'w': jnp.ones(3)})
        >>> h.varshape, h.num_state, h.name2index
        ((3,), 2, {'v': 0, 'w': 1})
        >>> h.get_value('w')
        Array([1., 1., 1.], dtype=float32)
    """

    __module__ = "state_core"

    def __init__(self, value: Any, name: str | None = None, tag: Any = None, **kwargs: Any) -> None:
        owner = type(self).__name__
        if isinstance(value, list | tuple):
            value = {str(i): v for i, v in enumerate(value)}
        if not isinstance(value, Mapping):
            raise TypeError(
                f"{owner} takes a dictionary/sequence of hidden states (same-shaped arrays), "
                f"got {type(value).__name__}."
            )
        if not value:
            raise ValueError(f"{owner} needs at least one variable.")
        for key, leaf in value.items():
            _check_array(owner, leaf, f"variable {key!r}")
        shapes = {str(k): tuple(np.shape(v)) for k, v in value.items()}
        if len(set(shapes.values())) > 1:
            raise ValueError(f"{owner} needs variables of one shape, got {shapes}.")
        units = {str(k): _unit_of(v) for k, v in value.items()}
        stacked = jnp.stack(
            [_mantissa_in(owner, v, units[str(k)], f"variable {k!r}") for k, v in value.items()], axis=-1
        )
        super().__init__(stacked, name, tag, **kwargs)
        self.name2index = {name_: i for i, name_ in enumerate(units)}
        self.name2unit: dict[str, Any] = units
        self.index2unit: dict[int, Any] = dict(enumerate(units.values()))
        self.index2name: dict[int, str] = dict(enumerate(units))

    @property
    def num_state(self) -> int:
        """How many variables the state holds.

        Raises:
            ValueError: the value's last axis no longer matches the variable names.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenTreeState
            >>> HiddenTreeState([jnp.zeros(2), jnp.zeros(2), jnp.zeros(2)]).num_state
            3
        """
        n = int(np.shape(self.value)[-1])
        if n != len(self.name2index):
            raise ValueError(
                f"{type(self).__name__}: the value holds {n} variables but {len(self.name2index)} are named "
                f"({sorted(self.name2index)}); write values of the original shape."
            )
        return n

    def _raw(self, index: int) -> Any:
        column = self.value[..., index]
        unit = self.index2unit[index]
        return column if unit is None else column * unit

    def _unit_at(self, index: int) -> Any:
        return self.index2unit[index]
