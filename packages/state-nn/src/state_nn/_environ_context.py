"""``EnvironContext``: a module that runs another one inside ``environ.context``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from state_core import environ

from ._module import Module

__all__ = ["EnvironContext"]


class EnvironContext(Module):
    """Run ``layer`` with environment settings (``fit``, ``dt``, ...) in force.

    Each call enters ``state_core.environ.context(**settings)`` around the
    wrapped module's call, so code that reads the environment (``Dropout``'s
    ``fit``, ``Dynamics``' ``dt``) sees these settings only for this layer.

    Args:
        layer: the module to run.
        **context: the environment settings, passed to ``environ.context``.

    Raises:
        TypeError: ``layer`` is not a ``Module``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> from state_core import environ
        >>> class ReadDt(state_nn.Module):
        ...     def update(self, x):
        ...         return x * environ.get_dt()
        >>> layer = state_nn.EnvironContext(ReadDt(), dt=0.5)
        >>> layer(jnp.ones(2))
        Array([0.5, 0.5], dtype=float32)
        >>> layer(jnp.ones(2), context={'dt': 0.25})
        Array([0.25, 0.25], dtype=float32)
    """

    __module__ = "state_nn"

    def __init__(self, layer: Module, **context: Any) -> None:
        super().__init__()
        if not isinstance(layer, Module):
            raise TypeError(
                f"EnvironContext wraps a Module, got {type(layer).__name__}; wrap a function in a Module "
                "subclass whose update calls it."
            )
        self.layer = layer
        self.context: dict[str, Any] = dict(context)

    def update(self, *args: Any, context: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """Call the wrapped module inside the environment context.

        Args:
            *args: passed to the wrapped module.
            context: settings for this call only, added to (and overriding) the
                stored ones.
            **kwargs: passed to the wrapped module.

        Returns:
            What the wrapped module returns.

        Example:
            >>> import state_nn
            >>> from state_core import environ
            >>> class ReadFit(state_nn.Module):
            ...     def update(self):
            ...         return environ.get('fit')
            >>> state_nn.EnvironContext(ReadFit(), fit=True).update(context={'fit': False})
            False
        """
        settings = {**self.context, **(context or {})}
        with environ.context(**settings):
            return self.layer(*args, **kwargs)

    def add_context(self, **context: Any) -> None:
        """Add settings to (or change settings of) the stored context.

        Args:
            **context: the settings to add or change.

        Example:
            >>> import state_nn
            >>> wrapped = state_nn.EnvironContext(state_nn.Module(), fit=True)
            >>> wrapped.add_context(fit=False, dt=0.1)
            >>> wrapped.context
            {'fit': False, 'dt': 0.1}
        """
        self.context.update(context)
