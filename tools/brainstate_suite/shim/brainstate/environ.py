"""``brainstate.environ`` -> ``state_core.environ``."""

from state_core.environ import *  # noqa: F403
