"""State hooks: callbacks run when Python code reads, writes, restores or creates a State.

Hooks are registered on one state (``State.register_hook``) or on every state
(``register_state_hook``). They run where Python touches the value: on every
eager read, write and ``restore_value``, and while a transformation traces the
function (with tracers as values). A compiled call replays the traced program
and runs no hook; what a ``write_before`` hook did to the traced value is part
of that program.

While no hook is registered anywhere, a State pays one module-global test per
read, write or restore. The module itself is loaded when the first hook is
registered (``State``'s hook methods and ``state_core``'s hook functions import
it then), so a program without hooks never loads it.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ._errors import StateError
from ._state import set_hooks_on

if TYPE_CHECKING:
    from ._state import State

__all__ = [
    "HOOK_TYPES",
    "HookCancellationError",
    "HookContext",
    "HookHandle",
    "clear_state_hooks",
    "has_state_hooks",
    "list_state_hooks",
    "register_state_hook",
    "unregister_state_hook",
]

#: The operations a hook can follow, in the order of a state's life.
HOOK_TYPES = ("init", "read", "write_before", "write_after", "restore")

_LOCK = threading.RLock()
_COUNT = [0]  # hooks registered anywhere (global and per state); 0: no State runs any hook code
_ON_CHANGE: list[Callable[[bool], None]] = [set_hooks_on]  # how ``State`` learns of the count


class HookCancellationError(StateError, ValueError):
    """A ``write_before`` hook refused a write (``ctx.cancel = True``); the state keeps its value.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import HookCancellationError, State
        >>> s = State(jnp.zeros(2), name='rate')
        >>> def no_negatives(ctx):
        ...     if (ctx.value < 0).any():
        ...         ctx.cancel, ctx.cancel_reason = True, 'rates are non-negative'
        >>> _ = s.register_hook('write_before', no_negatives)
        >>> try:
        ...     s.value = jnp.array([1.0, -1.0])
        ... except HookCancellationError as e:
        ...     print(e)
        State 'rate': a write_before hook cancelled the write: rates are non-negative
        >>> s.value
        Array([0., 0.], dtype=float32)
    """


class HookContext:
    """What a hook receives: the operation, the state and the values involved.

    Attributes:
        operation: ``'init'``, ``'read'``, ``'write_before'``, ``'write_after'`` or ``'restore'``.
        state: the State.
        value: the value read, being written, written, restored or the initial value.
        timestamp: when the operation happened (``time.time()``).
        metadata: a dict the hooks of one operation may share notes in.
        old_value: the value before a write or restore (not set for ``init`` and ``read``).
        init_metadata: for ``init``: the state's ``name`` (also under
            brainstate's key ``_name``), ``tag`` (a frozenset), ``strict`` and
            its metadata keywords.
        transformed_value: for ``write_before``: None, or the value a hook wants
            written instead (later hooks see it; the write uses the last one).
        cancel: for ``write_before``: set True to refuse the write
            (``HookCancellationError``); ``cancel_reason`` says why.

    Attributes that do not apply to an operation are absent (``hasattr`` is False).

    Args:
        operation: the operation (one of ``HOOK_TYPES``).
        state: the State operated on.
        value: the value of the operation.
        **extra: the operation's other attributes (``old_value`` ...).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> s = State(jnp.zeros(2), name='v')
        >>> seen = []
        >>> _ = s.register_hook('write_after', lambda ctx: seen.append((ctx.operation, ctx.state_name)))
        >>> s.value = jnp.ones(2)
        >>> seen
        [('write_after', 'v')]
    """

    # Set only for the operations they belong to (annotations alone create no attribute).
    old_value: Any
    init_metadata: dict[str, Any]
    transformed_value: Any
    cancel: bool
    cancel_reason: str | None

    def __init__(self, operation: str, state: State[Any], value: Any, **extra: Any) -> None:
        self.operation = operation
        self.state = state
        self.value = value
        self.timestamp = time.time()
        self.metadata: dict[str, Any] = {}
        self.__dict__.update(extra)

    @property
    def state_name(self) -> str | None:
        """The state's name (None when it has none).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> from state_core import HookContext
            >>> HookContext('read', State(jnp.zeros(1), name='w'), None).state_name
            'w'
        """
        return self.state.name

    def __repr__(self) -> str:
        return f"HookContext({self.operation!r}, {self.state.describe()})"


class HookHandle:
    """A registered hook: switch it off and on, or remove it.

    ``register_hook`` and ``register_state_hook`` return one; ``list_hooks``
    lists them. The hooks of a state are removed when the state is garbage
    collected.

    Args:
        table: the hooks of the owner it belongs to (one state, or every state).
        hook_type: the operation it follows.
        callback: the function run with a ``HookContext``.
        priority: higher runs first.
        name: its name in listings.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> s, reads = State(jnp.zeros(1)), []
        >>> h = s.register_hook('read', lambda ctx: reads.append(1), name='count')
        >>> _ = s.value; h.disable(); _ = s.value; h.enable(); _ = s.value
        >>> len(reads), h.name, h.is_enabled()
        (2, 'count', True)
        >>> h.remove(), h.is_removed(), s.has_hooks()
        (True, True, False)
    """

    def __init__(
        self, table: HookTable, hook_type: str, callback: Callable[[HookContext], Any], priority: int, name: str
    ) -> None:
        self._table = table
        self.hook_type = hook_type
        self.callback = callback
        self.priority = priority
        self.name = name
        self._enabled = True
        self._removed = False

    def enable(self) -> None:
        """Run the hook again (after ``disable``).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(1))
            >>> h = s.register_hook('read', print, enabled=False)
            >>> h.enable(); h.is_enabled()
            True
        """
        self._enabled = True

    def disable(self) -> None:
        """Skip the hook until ``enable``; it stays registered.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(1))
            >>> h = s.register_hook('read', print)
            >>> h.disable(); h.is_enabled()
            False
        """
        self._enabled = False

    def remove(self) -> bool:
        """Unregister the hook; True if it was registered.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(1))
            >>> h = s.register_hook('read', print)
            >>> h.remove(), h.remove()
            (True, False)
        """
        return self._table.remove(self)

    def is_enabled(self) -> bool:
        """Whether the hook runs (registered and not disabled).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(1))
            >>> s.register_hook('read', print).is_enabled()
            True
        """
        return self._enabled and not self._removed

    def is_removed(self) -> bool:
        """Whether the hook was unregistered.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(1))
            >>> s.register_hook('read', print).is_removed()
            False
        """
        return self._removed

    def __repr__(self) -> str:
        state = "removed" if self._removed else "enabled" if self._enabled else "disabled"
        return f"HookHandle({self.hook_type!r}, name={self.name!r}, priority={self.priority}, {state})"


def _set_count(delta: int) -> None:
    with _LOCK:
        before = _COUNT[0] > 0
        _COUNT[0] += delta
        after = _COUNT[0] > 0
        if before != after:
            for notify in _ON_CHANGE:
                notify(after)


class HookTable:
    """The hooks of one owner (one State, or every State), by type; readers take an immutable snapshot."""

    __slots__ = ("_by_type",)

    def __init__(self) -> None:
        self._by_type: dict[str, tuple[HookHandle, ...]] = {}

    def add(self, hook_type: Any, callback: Any, priority: Any, name: Any, enabled: Any, where: str) -> HookHandle:
        if hook_type not in HOOK_TYPES:
            raise ValueError(f"{where}: hook_type must be one of {HOOK_TYPES}, got {hook_type!r}.")
        if not callable(callback):
            raise TypeError(f"{where}: callback must be callable (it receives a HookContext), got {callback!r}.")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"{where}: priority must be an int (higher runs first), got {priority!r}.")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"{where}: name must be a str or None, got {type(name).__name__}.")
        label = name if name is not None else getattr(callback, "__name__", type(callback).__name__)
        handle = HookHandle(self, hook_type, callback, priority, label)
        if not enabled:
            handle.disable()
        with _LOCK:
            hooks = (*self._by_type.get(hook_type, ()), handle)
            # Higher priority first; equal priorities keep registration order (sorted is stable).
            self._by_type[hook_type] = tuple(sorted(hooks, key=lambda h: -h.priority))
            _set_count(1)
        return handle

    def remove(self, handle: HookHandle) -> bool:
        with _LOCK:
            hooks = self._by_type.get(handle.hook_type, ())
            if handle not in hooks:
                return False
            self._by_type[handle.hook_type] = tuple(h for h in hooks if h is not handle)
            handle._removed = True
            _set_count(-1)
        return True

    def clear(self, hook_type: str | None, where: str) -> None:
        if hook_type is not None and hook_type not in HOOK_TYPES:
            raise ValueError(f"{where}: hook_type must be None or one of {HOOK_TYPES}, got {hook_type!r}.")
        for handle in self.handles(hook_type):
            self.remove(handle)

    def handles(self, hook_type: str | None = None) -> list[HookHandle]:
        if hook_type is not None:
            return list(self._by_type.get(hook_type, ()))
        return [h for t in HOOK_TYPES for h in self._by_type.get(t, ())]

    def snapshot(self, hook_type: str) -> tuple[HookHandle, ...]:
        return self._by_type.get(hook_type, ())


GLOBAL_HOOKS = HookTable()


def own_table(obj: Any) -> HookTable | None:
    """The hook table of one state, or None while it has never had a hook of its own."""
    table: HookTable | None = obj.__dict__.get("_hooks")
    return table


def run_hooks(hook_type: str, state: State[Any], ctx_args: dict[str, Any], value: Any) -> HookContext | None:
    """Run the enabled hooks of ``hook_type`` (every state's first, then ``state``'s); None when there are none."""
    own = own_table(state)
    hooks = GLOBAL_HOOKS.snapshot(hook_type) + (own.snapshot(hook_type) if own is not None else ())
    if not hooks:
        return None
    ctx = HookContext(hook_type, state, value, **ctx_args)
    for handle in hooks:
        if handle.is_enabled():
            handle.callback(ctx)
            if hook_type == "write_before" and ctx.cancel:
                reason = ctx.cancel_reason or "no reason given"
                raise HookCancellationError(f"{state.describe()}: a write_before hook cancelled the write: {reason}")
    return ctx


def table_of(state: State[Any]) -> HookTable:
    """``state``'s own hook table, made on first use; its hooks are unregistered when the state is collected."""
    with _LOCK:
        table = own_table(state)
        if table is None:
            table = state.__dict__["_hooks"] = HookTable()
            # A dropped state's hooks can never run again: stop counting them, so that
            # States stop paying for hooks once none is left.
            weakref.finalize(state, table.clear, None, "a collected state").atexit = False
    return table


@contextlib.contextmanager
def temporary(
    table: HookTable, hook_type: str, callback: Any, priority: int, name: Any, where: str
) -> Iterator[HookHandle]:
    handle = table.add(hook_type, callback, priority, name, True, where)
    try:
        yield handle
    finally:
        handle.remove()


def register_state_hook(
    hook_type: str,
    callback: Callable[[HookContext], Any],
    priority: int = 0,
    name: str | None = None,
    enabled: bool = True,
) -> HookHandle:
    """Run ``callback(ctx)`` on the ``hook_type`` operations of every State.

    Every state's hooks run before a state's own; within each, higher
    ``priority`` first, then in registration order. A hook runs where Python
    touches the value: on each eager read, write or ``restore_value``, and
    while a transformation traces the function (``ctx.value`` is then a
    tracer, and transformations restore the states' values after tracing). A
    compiled call replays its program and runs no hook; what a
    ``write_before`` hook did to a traced value (a clip, say) is part of the
    program. An error in a hook propagates to the operation.

    Args:
        hook_type: ``'init'`` (a State was created; only every-state hooks see
            it), ``'read'``, ``'write_before'`` (may replace the value through
            ``ctx.transformed_value`` or refuse it with ``ctx.cancel``),
            ``'write_after'`` or ``'restore'`` (``restore_value``).
        callback: a function of one ``HookContext``; its return value is ignored.
        priority: an int; higher runs first (default 0).
        name: a name for ``list_state_hooks`` (default: the callback's name).
        enabled: False registers the hook switched off (``handle.enable()``).

    Returns:
        The ``HookHandle`` (``remove()``, ``disable()`` ...).

    Raises:
        ValueError: an unknown ``hook_type``.
        TypeError: ``callback`` is not callable, or ``priority`` / ``name`` has the wrong type.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, register_state_hook
        >>> created = []
        >>> handle = register_state_hook('init', lambda ctx: created.append(ctx.init_metadata['name']))
        >>> a, b = State(jnp.zeros(2), name='a'), State(jnp.ones(1), name='b')
        >>> handle.remove()
        True
        >>> created
        ['a', 'b']
    """
    return GLOBAL_HOOKS.add(hook_type, callback, priority, name, enabled, "register_state_hook")


def unregister_state_hook(handle: HookHandle) -> bool:
    """Remove a hook ``register_state_hook`` returned; True if it was registered.

    Args:
        handle: the ``HookHandle``.

    Example:
        >>> from state_core import register_state_hook, unregister_state_hook
        >>> h = register_state_hook('read', print)
        >>> unregister_state_hook(h), unregister_state_hook(h)
        (True, False)
    """
    if not isinstance(handle, HookHandle):
        raise TypeError(f"unregister_state_hook: expected a HookHandle, got {type(handle).__name__}.")
    return handle.remove()


def clear_state_hooks(hook_type: str | None = None) -> None:
    """Remove every hook ``register_state_hook`` registered (of ``hook_type``, or all).

    States' own hooks stay.

    Args:
        hook_type: one of the hook types, or None for all.

    Example:
        >>> from state_core import clear_state_hooks, has_state_hooks, register_state_hook
        >>> _ = register_state_hook('read', print)
        >>> clear_state_hooks(); has_state_hooks()
        False
    """
    GLOBAL_HOOKS.clear(hook_type, "clear_state_hooks")


def has_state_hooks(hook_type: str | None = None) -> bool:
    """Whether ``register_state_hook`` registered a hook (of ``hook_type``, or any).

    Args:
        hook_type: one of the hook types, or None for any.

    Example:
        >>> from state_core import has_state_hooks
        >>> has_state_hooks('write_after')
        False
    """
    return bool(GLOBAL_HOOKS.handles(hook_type))


def list_state_hooks(hook_type: str | None = None) -> list[HookHandle]:
    """The handles of the every-state hooks (of ``hook_type``, or all), in the order they run.

    Args:
        hook_type: one of the hook types, or None for all.

    Example:
        >>> from state_core import list_state_hooks, register_state_hook
        >>> h = register_state_hook('read', print, name='echo')
        >>> [x.name for x in list_state_hooks('read')]
        ['echo']
        >>> h.remove()
        True
    """
    return GLOBAL_HOOKS.handles(hook_type)
