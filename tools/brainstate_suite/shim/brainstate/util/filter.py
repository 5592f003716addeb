"""``brainstate.util.filter`` -> ``state_core.filter``."""

from state_core.filter import *  # noqa: F403
