"""``brainstate.graph`` -> ``state_core.graph``.

Not provided by ours (so not mapped): ``nodes``, ``pop_states``,
``clone``, ``graphdef``, ``flatten`` / ``unflatten``, ``RefMap``, the edge and
``NodeSpec`` classes, ``iter_node`` / ``iter_leaf``, ``register_graph_node_type``.
"""

from state_core.graph import *  # noqa: F403
