"""The hook methods of ``State``: register, list and remove a state's own hooks.

They load the hook machinery (``_state_hooks``) when first called, so a program
that registers no hook never loads it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._state_hooks import HookContext, HookHandle

__all__ = ["HookMethods"]


class HookMethods:
    """The hook methods of ``State`` (a state's own hooks run after every state's)."""

    def register_hook(
        self,
        hook_type: str,
        callback: Callable[[HookContext], Any],
        priority: int = 0,
        name: str | None = None,
        enabled: bool = True,
    ) -> HookHandle:
        """Run ``callback(ctx)`` on this state's ``hook_type`` operations.

        The arguments, the order hooks run in and when they run are those of
        ``state_core.register_state_hook``; a state's own hooks run after the
        every-state ones, and ``'init'`` is for every-state hooks only (this
        state exists already). ``copy()`` and ``copy.deepcopy`` give a state
        without hooks.

        Args:
            hook_type: ``'read'``, ``'write_before'``, ``'write_after'`` or ``'restore'``.
            callback: a function of one ``HookContext``.
            priority: an int; higher runs first (default 0).
            name: a name for ``list_hooks`` (default: the callback's name).
            enabled: False registers the hook switched off.

        Returns:
            The ``HookHandle``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> v = State(jnp.zeros(3), name='v')
            >>> def clip(ctx):
            ...     ctx.transformed_value = jnp.clip(ctx.value, -1.0, 1.0)
            >>> _ = v.register_hook('write_before', clip)
            >>> v.value = jnp.array([5.0, -5.0, 0.5])
            >>> v.value
            Array([ 1. , -1. ,  0.5], dtype=float32)
        """
        from . import _state_hooks as hooks

        if hook_type == "init":
            raise ValueError(
                "register_hook: an 'init' hook of one state could never run (the state exists "
                "already); register it for every state with state_core.register_state_hook('init', ...)."
            )
        return hooks.table_of(self).add(hook_type, callback, priority, name, enabled, "register_hook")  # type: ignore[arg-type]

    def unregister_hook(self, handle: HookHandle) -> bool:
        """Remove a hook of this state; True if it was registered.

        Args:
            handle: the ``HookHandle`` ``register_hook`` returned.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(1))
            >>> h = s.register_hook('read', print)
            >>> s.unregister_hook(h), s.has_hooks()
            (True, False)
        """
        from . import _state_hooks as hooks

        own = hooks.own_table(self)
        if not isinstance(handle, hooks.HookHandle):
            raise TypeError(f"unregister_hook: expected a HookHandle, got {type(handle).__name__}.")
        return own is not None and handle._table is own and own.remove(handle)

    def list_hooks(self, hook_type: str | None = None) -> list[HookHandle]:
        """This state's own hooks (of ``hook_type``, or all), in the order they run.

        Args:
            hook_type: one of the hook types, or None for all.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(1))
            >>> _ = s.register_hook('read', print, name='low')
            >>> _ = s.register_hook('read', print, priority=5, name='high')
            >>> [h.name for h in s.list_hooks('read')]
            ['high', 'low']
        """
        from . import _state_hooks as hooks

        own = hooks.own_table(self)
        return own.handles(hook_type) if own is not None else []

    def clear_hooks(self, hook_type: str | None = None) -> None:
        """Remove this state's own hooks (of ``hook_type``, or all).

        Args:
            hook_type: one of the hook types, or None for all.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(1))
            >>> _ = s.register_hook('read', print)
            >>> s.clear_hooks(); s.has_hooks()
            False
        """
        from . import _state_hooks as hooks

        own = hooks.own_table(self)
        if own is not None:
            own.clear(hook_type, "clear_hooks")

    def has_hooks(self, hook_type: str | None = None) -> bool:
        """Whether this state has hooks of its own (of ``hook_type``, or any).

        Args:
            hook_type: one of the hook types, or None for any.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(1))
            >>> _ = s.register_hook('read', print)
            >>> s.has_hooks('read'), s.has_hooks('write_after')
            (True, False)
        """
        return bool(self.list_hooks(hook_type))

    def temporary_hook(
        self, hook_type: str, callback: Callable[[HookContext], Any], priority: int = 0, name: str | None = None
    ) -> contextlib.AbstractContextManager[HookHandle]:
        """A ``with`` block during which ``callback`` is a hook of this state (removed on exit, also on an error).

        Args:
            hook_type: ``'read'``, ``'write_before'``, ``'write_after'`` or ``'restore'``.
            callback: a function of one ``HookContext``.
            priority: an int; higher runs first (default 0).
            name: a name for ``list_hooks``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s, writes = State(jnp.zeros(1)), []
            >>> with s.temporary_hook('write_after', lambda ctx: writes.append(float(ctx.value[0]))):
            ...     s.value = jnp.ones(1)
            >>> s.value = jnp.full(1, 2.0)
            >>> writes, s.has_hooks()
            ([1.0], False)
        """
        from . import _state_hooks as hooks

        if hook_type == "init":
            raise ValueError("temporary_hook: 'init' hooks are for every state (state_core.register_state_hook).")
        return hooks.temporary(hooks.table_of(self), hook_type, callback, priority, name, "temporary_hook")  # type: ignore[arg-type]
