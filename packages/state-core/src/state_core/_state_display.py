"""How a ``State`` shows itself: ``repr`` (abstract values), ``str`` (values), IPython, treescope, and to JAX."""

from __future__ import annotations

from typing import Any

import jax

from ._pretty import format_fields, format_value
from ._state_support import _leaf_aval_str, _ShownAval

__all__ = ["StateDisplay"]


class StateDisplay:
    """The display methods of ``State`` (a base class; it holds no data).

    ``repr`` shows the abstract value, ``str`` / IPython / treescope the values.
    Handed to JAX where an array is expected (``jnp.zeros_like(state)``, an
    optimizer's ``init`` given a ``StateDict``), a state raises a ``TypeError``
    that says to pass its value.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> State(jnp.zeros(2), name='s')
        State(
          name='s',
          value=ShapedArray(float32[2])
        )
    """

    __slots__ = ()
    _name: str | None
    _tags: frozenset[str]
    _value: Any

    def __str__(self) -> str:
        """The state with its value: small arrays in full, large ones summarised."""
        fields = [(k, self._value_text() if k == "value" else v) for k, v in self._repr_fields()]
        return format_fields(type(self).__name__, fields)

    def _value_text(self) -> str:
        return format_value(self._value)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # IPython / Jupyter display: show values (``repr`` keeps the abstract form).
        printer.text(f"{type(self).__name__}(...)" if cycle else str(self))

    def __treescope_repr__(self, path: str | None, subtree_renderer: Any) -> Any:
        """Render in treescope (notebooks) as a constructor call with the value's leaves."""
        from treescope import repr_lib  # treescope calls this hook, so it is installed

        attributes: dict[str, Any] = {}
        if self._name is not None:
            attributes["name"] = self._name
        if self._tags:
            attributes["tag"] = sorted(self._tags)
        attributes["value"] = self._value
        return repr_lib.render_object_constructor(
            object_type=type(self),
            attributes=attributes,
            path=path,
            subtree_renderer=subtree_renderer,
            roundtrippable=False,
        )

    # -- to JAX -----------------------------------------------------------------------------
    @property
    def __jax_array__(self) -> Any:
        """Refuse to stand in for an array, with a message that says what to pass instead.

        JAX looks this attribute up on any object it is asked to treat as an
        array; raising here turns "requires ndarray or scalar arguments" deep
        inside a library (``optax.adam(...).init(model.states(ParamState))``)
        into an error that names the state and the fix. It is a property so
        that every lookup raises, whichever way JAX probes for it.
        """
        what = f"{type(self).__name__} {self._name!r}" if self._name is not None else type(self).__name__
        raise TypeError(
            f"{what} was given where JAX expects an array; a State is a container, "
            "not an array. Pass its value (`state.value`); for a StateDict such as "
            "`model.states(ParamState)`, pass `states.to_values()` (a dict path -> array) and write "
            "the results back with `states.assign_values(...)`."
        )

    # -- misc -------------------------------------------------------------------------------
    def _aval_repr(self) -> str:
        leaves, treedef = jax.tree.flatten(self._value)
        shown = [_ShownAval(_leaf_aval_str(x)) for x in leaves]
        if len(leaves) == 1 and jax.tree_util.treedef_is_leaf(treedef):
            return repr(shown[0])
        return repr(jax.tree.unflatten(treedef, shown))

    def _repr_fields(self) -> list[tuple[str, Any]]:
        fields: list[tuple[str, Any]] = []
        if self._name is not None:
            fields.append(("name", repr(self._name)))
        if self._tags:
            tags = sorted(self._tags)
            fields.append(("tag", repr(tags[0] if len(tags) == 1 else tags)))
        fields.append(("value", self._aval_repr()))
        return fields

    def __repr__(self) -> str:
        return format_fields(type(self).__name__, self._repr_fields())
