"""``brainstate.random`` -> ``state_random`` (every brainstate.random name exists there)."""

from state_random import *  # noqa: F403
