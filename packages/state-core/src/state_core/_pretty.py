"""Nested, two-space-indented reprs shared by states and modules."""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["format_fields"]


def format_fields(type_name: str, fields: Sequence[tuple[str, Any]]) -> str:
    """Render ``Name(\\n  key=value\\n)`` with each value's own lines indented.

    ``fields`` values are either strings (already rendered) or objects whose
    ``repr`` is used.

    Example:
        >>> print(format_fields('Point', [('x', '1'), ('y', '2')]))
        Point(
          x=1,
          y=2
        )
    """
    if not fields:
        return f"{type_name}()"
    rendered = []
    for key, value in fields:
        text = value if isinstance(value, str) else repr(value)
        text = text.replace("\n", "\n  ")
        rendered.append(f"  {key}={text}")
    return f"{type_name}(\n" + ",\n".join(rendered) + "\n)"
