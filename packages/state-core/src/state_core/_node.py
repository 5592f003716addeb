"""``Node``: an optional base class for objects that hold States (brainstate's ``graph.Node``)."""

from __future__ import annotations

from typing import ClassVar

from ._pretty import format_object

__all__ = ["Node"]


class Node:
    """An optional base class for objects that hold States.

    Every object is walked for States (``collect_states``, ``graph.states``,
    ``graph.treefy_split``, the transforms' discovery): deriving from ``Node`` is
    not needed for that. It gives two things:

    * ``graph_invisible_attrs``: a class attribute naming attributes the walk
      skips (a cache, a back-reference to a parent, a handle to something
      else's States);
    * a readable ``repr`` listing the public attributes.

    ``state_nn.Module`` derives from it. A subclass does not need to call
    ``super().__init__()``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState, ShortTermState
        >>> from state_core.graph import Node, states
        >>> class Counter(Node):
        ...     graph_invisible_attrs = ('scratch',)
        ...     def __init__(self):
        ...         self.count = ShortTermState(jnp.asarray(0))
        ...         self.scratch = ShortTermState(jnp.zeros(3))
        >>> list(states(Counter()))
        [('count',)]
        >>> Counter()
        Counter(
          count=ShortTermState(
            value=ShapedArray(int32[], weak_type=True)
          )
        )
    """

    #: Attribute names the object-graph walk does not enter or report.
    graph_invisible_attrs: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        hidden = type(self).graph_invisible_attrs
        return format_object(
            self, lambda: [(k, v) for k, v in vars(self).items() if not k.startswith("_") and k not in hidden]
        )
