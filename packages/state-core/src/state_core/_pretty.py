"""Reprs shared by states, collections and modules: nested fields and value summaries."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._jax_internals import is_tracer

__all__ = ["format_fields", "format_object", "format_value", "SUMMARY_THRESHOLD"]

# Arrays with more elements than this are summarised (shape, dtype, min/max/mean)
# instead of printed in full, like NumPy's own summarisation but much earlier,
# because a state is usually printed inside a larger model.
SUMMARY_THRESHOLD = 16


def format_fields(type_name: str, fields: Sequence[tuple[str, Any]]) -> str:
    """Render ``Name(\\n  key=value\\n)`` with each value's own lines indented.

    ``fields`` values are either strings (already rendered) or objects whose
    ``repr`` is used.

    Args:
        type_name: the name before the parentheses.
        fields: ``(key, value)`` pairs, in order; a value is a rendered string or an object shown by its ``repr``.

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


# Objects whose repr is being built on this thread: an object reachable from itself
# shows as ``Name(...)`` the second time instead of recursing forever.
_IN_REPR = threading.local()


def format_object(obj: Any, fields: Callable[[], Sequence[tuple[str, Any]]]) -> str:
    """``obj`` shown as ``Name(`` one ``key=value`` a line ``)``, or ``Name(...)`` when it is already being shown.

    This is how a ``State`` or a ``Module`` prints; a value's own lines are
    indented under its key. The guard is shared by every object formatted this way (nodes, modules), per
    thread, so a graph with cycles prints finitely.

    Args:
        obj: the object being shown.
        fields: called once, unless ``obj`` is already being shown: its ``(key, value)``
            pairs, in order; a value is a rendered string or an object shown by its ``repr``.

    Example:
        >>> from state_core.engine import format_object
        >>> class Loop:
        ...     def __repr__(self):
        ...         return format_object(self, lambda: [('me', self)])
        >>> print(repr(Loop()))
        Loop(
          me=Loop(...)
        )
    """
    active: set[int] | None = getattr(_IN_REPR, "ids", None)
    if active is None:
        active = _IN_REPR.ids = set()
    if id(obj) in active:
        return f"{type(obj).__name__}(...)"
    active.add(id(obj))
    try:
        return format_fields(type(obj).__name__, fields())
    finally:
        active.discard(id(obj))


class _Shown:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def format_value(tree: Any) -> str:
    """Render a pytree with its values: small arrays in full, large ones as a summary.

    Arrays with more than ``SUMMARY_THRESHOLD`` elements show their shape, dtype
    and min/max/mean (computed where the array lives, without copying it to the
    host); tracers and PRNG keys show their abstract value.

    Args:
        tree: any pytree (arrays, numbers, containers).

    Example:
        >>> import jax.numpy as jnp
        >>> print(format_value({'b': jnp.zeros(2), 'w': jnp.arange(100.0).reshape(10, 10)}))
        {'b': Array([0., 0.], dtype=float32), 'w': float32[10,10] min=0 max=99 mean=49.5}
    """
    leaves, treedef = jax.tree.flatten(tree)
    shown = [_Shown(_leaf_text(x)) for x in leaves]
    if treedef.num_leaves == 1 and treedef.num_nodes == 1:  # type: ignore[attr-defined]  # jaxlib PyTreeDef stub not found
        return shown[0].text
    return repr(jax.tree.unflatten(treedef, shown))


def _leaf_text(x: Any) -> str:
    if is_tracer(x):
        return repr(jax.typeof(x))
    if not isinstance(x, (jax.Array, np.ndarray)):
        return repr(x)
    if isinstance(x, jax.Array) and x.is_deleted():
        return f"<deleted {jax.typeof(x)!r}>"
    dtype = x.dtype
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return repr(jax.typeof(x))
    if x.size <= SUMMARY_THRESHOLD:
        # One line: the array's own line breaks would not line up once nested in fields.
        return " ".join(line.strip() for line in repr(x).splitlines())
    shape = ",".join(map(str, x.shape))
    head = f"{dtype.name}[{shape}]"
    if not (jnp.issubdtype(dtype, jnp.number) or dtype == np.bool_) or jnp.issubdtype(dtype, jnp.complexfloating):
        return head
    stats = jnp.stack([jnp.min(x), jnp.max(x), jnp.mean(x, dtype=jnp.float32)]).astype(jnp.float32)
    lo, hi, mean = (float(v) for v in np.asarray(stats))
    return f"{head} min={lo:.4g} max={hi:.4g} mean={mean:.4g}"
