"""``init_all_states`` / ``reset_all_states`` as functions, the way brainstate programs call them."""

from __future__ import annotations

from typing import Any, TypeVar

from ._module import Module

__all__ = ["init_all_states", "reset_all_states"]

M = TypeVar("M", bound=Module)


def _check(target: Any, fn: str) -> None:
    if not isinstance(target, Module):
        raise TypeError(f"{fn}: expected a state_nn.Module, got {type(target).__name__}.")


def init_all_states(target: M, *args: Any, **kwargs: Any) -> M:
    """``target.init_all_states(*args, **kwargs)``, returning ``target`` (brainstate's ``nn.init_all_states``).

    Args:
        target: the model.
        *args: passed to every ``init_state`` hook.
        **kwargs: passed to every ``init_state`` hook (for example ``batch_size=``).

    Returns:
        ``target``, so ``model = init_all_states(Model(...))`` works.

    Raises:
        TypeError: if ``target`` is not a Module.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> class Cell(state_nn.Dynamics):
        ...     def init_state(self, batch_size=None, **kwargs):
        ...         self.v = state_core.HiddenState(jnp.zeros(self.varshape))
        >>> state_nn.init_all_states(Cell(3)).v.value
        Array([0., 0., 0.], dtype=float32)
    """
    _check(target, "init_all_states")
    target.init_all_states(*args, **kwargs)
    return target


def reset_all_states(target: M, *args: Any, **kwargs: Any) -> M:
    """``target.reset_all_states(*args, **kwargs)``, returning ``target`` (brainstate's ``nn.reset_all_states``).

    Args:
        target: the model.
        *args: passed to every ``reset_state`` hook.
        **kwargs: passed to every ``reset_state`` hook.

    Returns:
        ``target``.

    Raises:
        TypeError: if ``target`` is not a Module.

    Example:
        >>> import state_nn
        >>> state_nn.reset_all_states(object())
        Traceback (most recent call last):
        ...
        TypeError: reset_all_states: expected a state_nn.Module, got object.
    """
    _check(target, "reset_all_states")
    target.reset_all_states(*args, **kwargs)
    return target
