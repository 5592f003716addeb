"""Function forms of the module-tree hooks: ``init_all_states(module, ...)``, ``reset_all_states(module, ...)``."""

from __future__ import annotations

from typing import Any, TypeVar

from ._module import Module

__all__ = ["init_all_states", "reset_all_states"]

M = TypeVar("M", bound=Module)


def _check_target(target: Any, what: str) -> None:
    if not isinstance(target, Module):
        raise TypeError(f"{what} expects a state_nn.Module as its first argument, got {type(target).__name__}.")


def init_all_states(target: M, *args: Any, node_to_exclude: Any = None, **kwargs: Any) -> M:
    """Run ``init_state(*args, **kwargs)`` on every module of ``target`` and return ``target``.

    The function form of ``Module.init_all_states`` (brainstate's
    ``brainstate.nn.init_all_states``): children before parents, each module
    once, a ``Map`` handed the call as a whole.

    Args:
        target: the model.
        *args: passed to every ``init_state``.
        node_to_exclude: modules to skip (a Module, a class, a filter or a
            ``(path, module) -> bool`` function); see ``Module.init_all_states``.
        **kwargs: passed to every ``init_state``.

    Returns:
        ``target`` itself, so ``model = init_all_states(Model(), batch_size=4)`` works.

    Raises:
        TypeError: if ``target`` is not a ``Module``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> class Cell(state_nn.Module):
        ...     def init_state(self, batch_size=1, **kwargs):
        ...         self.h = state_core.HiddenState(jnp.zeros((batch_size, 3)))
        >>> cell = state_nn.init_all_states(Cell(), batch_size=2)
        >>> cell.h.value.shape
        (2, 3)
    """
    _check_target(target, "init_all_states")
    if node_to_exclude is None:
        target.init_all_states(*args, **kwargs)
    else:
        target.init_all_states(*args, node_to_exclude=node_to_exclude, **kwargs)
    return target


def reset_all_states(target: M, *args: Any, node_to_exclude: Any = None, **kwargs: Any) -> M:
    """Run ``reset_state(*args, **kwargs)`` on every module of ``target`` and return ``target``.

    The function form of ``Module.reset_all_states`` (brainstate's
    ``brainstate.nn.reset_all_states``).

    Args:
        target: the model.
        *args: passed to every ``reset_state``.
        node_to_exclude: modules to skip; see ``Module.init_all_states``.
        **kwargs: passed to every ``reset_state``.

    Returns:
        ``target`` itself.

    Raises:
        TypeError: if ``target`` is not a ``Module``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> class Counter(state_nn.Module):
        ...     def __init__(self):
        ...         self.n = state_core.ShortTermState(jnp.ones(()))
        ...     def reset_state(self, start=0.0):
        ...         self.n.value = jnp.asarray(start, dtype=jnp.float32)
        >>> state_nn.reset_all_states(Counter(), 5.0).n.value
        Array(5., dtype=float32)
    """
    _check_target(target, "reset_all_states")
    if node_to_exclude is None:
        target.reset_all_states(*args, **kwargs)
    else:
        target.reset_all_states(*args, node_to_exclude=node_to_exclude, **kwargs)
    return target
