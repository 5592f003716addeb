"""How a ``State`` shows itself: ``repr`` (abstract values), ``str`` (values), IPython and treescope."""

from __future__ import annotations

from typing import Any

import jax

from ._pretty import format_fields, format_value
from ._state_support import _leaf_aval_str, _ShownAval

__all__ = ["StateDisplay"]


class StateDisplay:
    """The display methods of ``State`` (a base class; it holds no data).

    ``repr`` shows the abstract value, ``str`` / IPython / treescope the values.

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
