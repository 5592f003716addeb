"""state_nn: Neural-network layers and training utilities built on the state stack."""

from .__about__ import __version__

__all__ = ["__version__"]
