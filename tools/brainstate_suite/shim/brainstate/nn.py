"""``brainstate.nn`` -> ``state_nn``.

Layers, metrics, initialisers (``brainstate.nn.init``) and the other
brainstate.nn names that ``state_nn`` does not provide are not mapped.
"""

from state_nn import *  # noqa: F403
