"""brainstate's ``graph`` helpers: split an object graph into structure and state values, and back.

``states`` collects a model's States (``path -> State``); ``treefy_states`` /
``treefy_split`` give their values as nested dicts keyed by attribute names, with a
``GraphDef`` for the structure; ``treefy_merge`` rebuilds a model from those, and
``update_states`` writes values back into an existing model. ``Node`` is an
optional base class for objects that hold States.

Example:
    >>> import jax.numpy as jnp
    >>> from state_core import ParamState
    >>> from state_core.graph import treefy_merge, treefy_split
    >>> class Net:
    ...     def __init__(self):
    ...         self.w = ParamState(jnp.ones(2))
    >>> graphdef, params = treefy_split(Net())
    >>> treefy_merge(graphdef, {'w': jnp.zeros(2)}).w.value
    Array([0., 0.], dtype=float32)
"""

from ._node import Node
from ._treefy import GraphDef, states, treefy_merge, treefy_split, treefy_states, update_states

__all__ = ["Node", "GraphDef", "states", "treefy_states", "treefy_split", "treefy_merge", "update_states"]
