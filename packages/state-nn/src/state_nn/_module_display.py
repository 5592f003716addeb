"""How a ``Module`` shows itself: ``repr`` (abstract values), ``str`` (values), IPython and treescope."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import state_core.engine
from state_core import State

__all__ = ["ModuleDisplay"]


class _Label:
    """A non-Module layer of a ``Sequential``: its name in text reprs, the layer itself in treescope."""

    __slots__ = ("layer",)

    def __init__(self, layer: Any) -> None:
        self.layer = layer

    def __repr__(self) -> str:
        return str(getattr(self.layer, "__name__", type(self.layer).__name__))

    def __treescope_repr__(self, path: str | None, subtree_renderer: Any) -> Any:
        return subtree_renderer(self.layer, path=path)


def _contains_shown(value: Any, depth: int = 0) -> bool:
    if isinstance(value, (State, ModuleDisplay, _Label)):
        return True
    if depth < 8 and isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return any(_contains_shown(v, depth + 1) for v in items)
    return False


def _render(value: Any, show: Callable[[Any], str] = repr) -> str:
    """Text of a field: ``show`` of a State or Module, containers of them with other items left out.

    ``show`` is ``repr`` (abstract values) or ``str`` (values); anything else is its ``repr``.
    """
    if isinstance(value, (State, ModuleDisplay)):
        return show(value)
    if not isinstance(value, (list, tuple, dict)) or not _contains_shown(value):
        return repr(value)
    if isinstance(value, dict):
        entries = [f"{k!r}: {_render(v, show)}" for k, v in value.items() if _contains_shown(v)]
        open_, close = "{", "}"
    else:
        entries = [_render(v, show) for v in value if _contains_shown(v)]
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
    body = ",\n".join("  " + e.replace("\n", "\n  ") for e in entries)
    return f"{open_}\n{body}\n{close}"


def _shown_tree(value: Any) -> Any:
    """``value`` with the items of its lists, tuples and dicts that show nothing left out (for treescope)."""
    if not isinstance(value, (list, tuple, dict)) or not _contains_shown(value):
        return value
    if isinstance(value, dict):
        return {k: _shown_tree(v) for k, v in value.items() if _contains_shown(v)}
    shown = [_shown_tree(v) for v in value if _contains_shown(v)]
    return shown if isinstance(value, list) else tuple(shown)


class ModuleDisplay:
    """The display methods of ``Module`` (a base class; it holds no data).

    ``repr`` shows each state's abstract value (shape and dtype), ``str`` /
    IPython / treescope the values. The fields are the name and sizes, the
    attributes that hold states or submodules (directly or in lists, tuples and
    dicts), then the settings a class lists in ``_repr_attrs``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> class Bias(state_nn.Module):
        ...     def __init__(self):
        ...         self.b = state_core.ParamState(jnp.zeros(2))
        >>> Bias()
        Bias(
          b=ParamState(
            value=ShapedArray(float32[2])
          )
        )
        >>> print(Bias())
        Bias(
          b=ParamState(
            value=Array([0., 0.], dtype=float32)
          )
        )
    """

    # Plain (non-State) attributes a subclass shows in its repr, after the states.
    _repr_attrs: tuple[str, ...] = ()
    name: str | None
    in_size: tuple[int, ...] | None
    out_size: tuple[int, ...] | None

    def _display_fields(self) -> list[tuple[str, Any]]:
        """``(label, object)`` pairs every display shows, in order.

        Name and sizes first, then the attributes that hold states or submodules,
        then the settings the class lists in ``_repr_attrs``.
        """
        fields: list[tuple[str, Any]] = [
            (key, value)
            for key, value in (("name", self.name), ("in_size", self.in_size), ("out_size", self.out_size))
            if value is not None
        ]
        shown_attrs = set(type(self)._repr_attrs)
        for key, value in vars(self).items():
            if isinstance(key, str) and (key.startswith("_") or key in shown_attrs):
                continue
            if _contains_shown(value):
                fields.append((str(key), value))
        for key in type(self)._repr_attrs:
            value = getattr(self, key, None)
            if value is not None:
                fields.append((key, value))
        return fields

    def _format(self, show: Callable[[Any], str]) -> str:
        # A module reachable from itself shows as ``Name(...)`` the second time.
        return state_core.engine.format_object(
            self, lambda: [(key, _render(value, show)) for key, value in self._display_fields()]
        )

    def __repr__(self) -> str:
        """The module with its states' abstract values (shape and dtype), as brainstate prints it."""
        return self._format(repr)

    def __str__(self) -> str:
        """The module with its states' values: small arrays in full, large ones summarised.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> print(state_nn.Linear(2, 1, w_init=jnp.ones((2, 1))))
            Linear(
              in_size=(2,),
              out_size=(1,),
              weight=ParamState(
                value=Array([[1.], [1.]], dtype=float32)
              ),
              bias=ParamState(
                value=Array([0.], dtype=float32)
              )
            )
        """
        return self._format(str)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # IPython / Jupyter display: the values, like ``str`` (``repr`` keeps the abstract form).
        printer.text(f"{type(self).__name__}(...)" if cycle else str(self))

    def __treescope_repr__(self, path: str | None, subtree_renderer: Any) -> Any:
        """Render in treescope (notebooks) as a constructor call whose states show their values."""
        from treescope import repr_lib  # treescope calls this hook, so it is installed

        return repr_lib.render_object_constructor(
            object_type=type(self),
            attributes={key: _shown_tree(value) for key, value in self._display_fields()},
            path=path,
            subtree_renderer=subtree_renderer,
            roundtrippable=False,
        )
