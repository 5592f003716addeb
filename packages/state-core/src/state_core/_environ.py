"""The simulation environment: run-wide settings such as ``dt``, ``t``, ``i``, ``fit`` and the precision.

This is ``state_core.environ``, brainstate's ``brainstate.environ`` under the same
names and meanings. It lives in the lowest layer, state-core, because every
layer reads it: ``state_nn``'s ``Dropout`` reads ``fit`` and ``exp_euler_step``
reads ``dt``, user models read ``t`` and ``i``, and transformations
(``state_transform``) need to know which settings a traced function read.
Layers may import only from the layers below them, and state-core is the only
layer every other one sees.

Two kinds of value:

* ``set(...)`` stores *global* settings, shared by every thread (brainstate keeps
  them per thread; a worker thread there starts without the ``dt`` the main
  thread set, which is rarely what a program wants).
* ``context(...)`` pushes values for the duration of a ``with`` block. The
  blocks are per thread, nest, and restore the previous values on exit, also
  when the block raises. Inside a traced function (a loop body, a ``jit``) the
  values may be tracers: ``with environ.context(i=i, t=t): model.update(x)``
  in a ``for_loop`` body hands the traced step and time to everything the model
  calls, for that step only.

A value read inside a traced function is baked into the compiled program as a
constant (``dt`` read by ``exp_euler_step`` becomes a number in the program).
``record_reads`` and ``reads_unchanged`` let a transformation key its cached
programs by the settings they read.

Deliberate differences from brainstate 0.5.4 (see ``docs/coming-from-brainstate.md``):
global settings are shared by threads; importing does not touch JAX's
``jax_enable_x64`` and an unset precision follows it (32, or 64 under x64);
a registered behaviour that raises makes the call fail and changes nothing
(brainstate turns the exception into a warning); ``reset()`` warns nothing and
refuses to run inside a ``context`` block; there are no ``EnvironmentState``
objects or ``env=`` arguments.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from ._errors import StateLeakError
from ._jax_internals import is_eager, is_tracer

__all__ = [
    "set",
    "get",
    "all",
    "pop",
    "context",
    "reset",
    "get_dt",
    "set_platform",
    "get_platform",
    "set_host_device_count",
    "get_host_device_count",
    "register_default_behavior",
    "unregister_default_behavior",
    "list_registered_behaviors",
    "I",
    "T",
    "DT",
    "PRECISION",
    "PLATFORM",
    "HOST_DEVICE_COUNT",
    "JIT_ERROR_CHECK",
    "FIT",
    "DEFAULT_PRECISION",
    "SUPPORTED_PLATFORMS",
    "SUPPORTED_PRECISIONS",
]

# The keys brainstate programs use, under brainstate's constant names.
I = "i"  # noqa: E741  (brainstate's name)
"""The key of the index of the current step (``environ.get(environ.I)``)."""
T = "t"
"""The key of the current time."""
DT = "dt"
"""The key of the time step of numerical integration (``get_dt()``)."""
PRECISION = "precision"
"""The key of the precision: 8, 16, 32, 64 or ``'bf16'``, which sets the default dtypes."""
PLATFORM = "platform"
"""The key of the platform: ``'cpu'``, ``'gpu'`` or ``'tpu'``."""
HOST_DEVICE_COUNT = "host_device_count"
"""The key of the number of CPU devices XLA makes."""
JIT_ERROR_CHECK = "jit_error_check"
"""The key of brainstate's flag for checks inside compiled code."""
FIT = "fit"
"""The key of the training flag: ``True`` while training, ``False`` while evaluating."""

DEFAULT_PRECISION = 32
"""The precision when none is set and ``jax_enable_x64`` is off."""
SUPPORTED_PLATFORMS = ("cpu", "gpu", "tpu")
"""The values ``set_platform`` accepts."""
SUPPORTED_PRECISIONS = (8, 16, 32, 64, "bf16")
"""The values ``set_precision`` accepts."""


class _Unset:
    """The marker of a setting that has no value (in ``record_reads`` results)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


class _Global:
    """Settings shared by every thread: ``set`` values and registered behaviours."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.settings: dict[str, Any] = {}
        self.behaviors: dict[str, Callable[[Any], Any]] = {}
        # Keys whose global value holds a JAX tracer (``set`` called inside a trace):
        # reading one after its trace is over is an error, not a stale tracer.
        self.traced: builtins.set[str] = builtins.set()
        # ``jax_enable_x64`` as the first global ``set(precision=...)`` found it; ``reset``
        # puts it back, so that a reset also undoes what ``set`` did to JAX.
        self.x64_before_set: bool | None = None


class _Local(threading.local):
    """This thread's ``context`` blocks and read recorders."""

    def __init__(self) -> None:
        # key -> [(block level, value), ...]: the values of the open blocks that set the key.
        self.stacks: dict[str, list[tuple[int, Any]]] = {}
        self.depth = 0  # open ``context`` blocks
        # (depth when the recorder started, key -> value read from outside it)
        self.recorders: list[tuple[int, dict[str, Any]]] = []


_GLOBAL = _Global()
_LOCAL = _Local()


# ---------------------------------------------------------------------------- reading
def _lookup(local: _Local, key: str) -> tuple[Any, int]:
    """The current value of ``key`` and the level of the block that set it (-1: global or unset)."""
    stack = local.stacks.get(key)
    if stack:
        level, value = stack[-1]
        return value, level
    value = _GLOBAL.settings.get(key, _UNSET)
    if value is not _UNSET and key in _GLOBAL.traced and is_eager():
        raise StateLeakError(
            f"environ: the global setting {key!r} holds a JAX tracer: environ.set({key}=...) was called "
            "inside a traced function, and that trace is over. Inside a transformed function use "
            f"`with environ.context({key}=...):` instead, which lasts only for the block."
        )
    return value, -1


def _record(local: _Local, key: str, value: Any, level: int) -> None:
    # A value set by a block opened inside the recorded region comes from the traced
    # function itself, not from its surroundings: it is not part of the cache key.
    for start, reads in local.recorders:
        if level < start and key not in reads:
            reads[key] = value


def get(key: str, default: Any = _UNSET, desc: str | None = None) -> Any:
    """The current value of setting ``key``: the innermost ``context`` value, else the ``set`` value.

    ``'platform'`` and ``'host_device_count'`` report the system's values, and an
    unset ``'precision'`` is the default precision (see ``get_precision``).

    Args:
        key: the setting's name, e.g. ``'dt'``, ``'t'``, ``'i'``, ``'fit'``.
        default: returned when the setting has no value; without it a missing
            setting is a ``KeyError``.
        desc: what the setting means, added to the ``KeyError`` message.

    Returns:
        The value (inside a traced function it may be a tracer set by a ``context``
        block of that function).

    Raises:
        KeyError: if the setting has no value and no ``default`` is given.
        StateLeakError: if the global value is a tracer of a finished trace.

    Example:
        >>> from state_core import environ
        >>> with environ.context(t=2.5):
        ...     environ.get('t')
        2.5
        >>> environ.get('t', default=None) is None
        True
        >>> environ.get('t', desc='the current time')
        Traceback (most recent call last):
        ...
        KeyError: "environ: 't' is not set (the current time). Set it with environ.set(t=...) or ..."
    """
    if key == PLATFORM:
        return get_platform()
    if key == HOST_DEVICE_COUNT:
        return get_host_device_count()
    local = _LOCAL
    value, level = _lookup(local, key)
    if local.recorders:
        _record(local, key, value, level)
    if value is not _UNSET:
        return value
    if key == PRECISION:
        return _default_precision()
    if default is _UNSET:
        about = f" ({desc})" if desc else ""
        raise KeyError(
            f"environ: {key!r} is not set{about}. Set it with environ.set({key}=...) or in a "
            f"`with environ.context({key}=...):` block."
        )
    return default


def get_dt() -> Any:
    """The integration time step ``dt`` (a number or a quantity such as ``0.1 * u.ms``).

    Returns:
        The value of ``get('dt')``.

    Raises:
        KeyError: if ``dt`` is not set.

    Example:
        >>> from state_core import environ
        >>> with environ.context(dt=0.1):
        ...     environ.get_dt()
        0.1
    """
    return get(DT, desc="the time step of numerical integration")


def _snapshot(local: _Local, record: bool) -> dict[str, Any]:
    result = dict(_GLOBAL.settings)
    for key, stack in local.stacks.items():
        if stack:
            result[key] = stack[-1][1]
    result.setdefault(PRECISION, _default_precision())
    if record and local.recorders:
        for key in result:
            value, level = _lookup(local, key)
            _record(local, key, value, level)
    return result


def all() -> dict[str, Any]:
    """Every setting with its current value (``context`` values over ``set`` values), as a new dict.

    Returns:
        A snapshot: changing it does not change the environment. ``'precision'``
        is always present.

    Example:
        >>> from state_core import environ
        >>> with environ.context(dt=0.1, fit=True):
        ...     settings = environ.all()
        >>> settings['dt'], settings['fit'], settings['precision']
        (0.1, True, 32)
    """
    return _snapshot(_LOCAL, record=True)


# ---------------------------------------------------------------------------- checking
def _canonical_precision(precision: Any) -> int | str:
    # brainstate accepts the numbers and their strings ('64', 'bf16'); stored canonically.
    if not isinstance(precision, (bool, np.bool_)):
        for supported in SUPPORTED_PRECISIONS:
            if str(precision) == str(supported) or (
                isinstance(precision, (int, float, np.number)) and precision == supported
            ):
                return supported
    raise ValueError(f"environ: precision must be one of {SUPPORTED_PRECISIONS}, got {precision!r}.")


def _check_dt(dt: Any) -> None:
    shape = getattr(dt, "shape", None)
    if shape is None:
        if isinstance(dt, bool) or not isinstance(dt, (int, float)):
            raise TypeError(f"environ: dt must be a scalar number or quantity, got {type(dt).__name__} {dt!r}.")
    elif tuple(shape) != ():
        raise TypeError(f"environ: dt must be a scalar, got a value of shape {tuple(shape)}.")


def _check_platform(platform: Any) -> None:
    if platform not in SUPPORTED_PLATFORMS:
        raise ValueError(f"environ: platform must be one of {SUPPORTED_PLATFORMS}, got {platform!r}.")


def _check_device_count(n: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"environ: host_device_count must be a positive int, got {n!r}.")


def _run_behaviors(values: dict[str, Any]) -> None:
    # Before anything changes: a behaviour that raises (say, a validator) leaves the
    # environment as it was.
    behaviors = _GLOBAL.behaviors
    if behaviors:
        for key, value in values.items():
            behavior = behaviors.get(key)
            if behavior is not None:
                behavior(value)


def _contains_tracer(value: Any) -> bool:
    return any(is_tracer(leaf) for leaf in jax.tree.leaves(value))


# ---------------------------------------------------------------------------- writing
def set(
    platform: str | None = None,
    host_device_count: int | None = None,
    precision: int | str | None = None,
    dt: Any = None,
    **kwargs: Any,
) -> None:
    """Set global settings, seen by every thread until changed (``None`` arguments are left alone).

    Args:
        platform: ``'cpu'``, ``'gpu'`` or ``'tpu'`` (see ``set_platform``).
        host_device_count: how many CPU devices XLA makes (see ``set_host_device_count``).
        precision: 8, 16, 32, 64 or ``'bf16'`` (see ``set_precision``); 64 turns
            ``jax_enable_x64`` on, the others turn it off, as in brainstate.
        dt: the integration time step, a scalar number or quantity.
        **kwargs: any other settings (``fit=True``, ``i=0``, your own keys).

    Raises:
        ValueError: for an unsupported platform, precision or device count.
        TypeError: if ``dt`` is not a scalar.

    Example:
        >>> from state_core import environ
        >>> environ.set(dt=0.05, fit=False)
        >>> environ.get_dt(), environ.get('fit')
        (0.05, False)
        >>> _ = environ.pop('dt'), environ.pop('fit')
    """
    updates = dict(kwargs)
    if platform is not None:
        _check_platform(platform)
    if host_device_count is not None:
        _check_device_count(host_device_count)
    if precision is not None:
        updates[PRECISION] = _canonical_precision(precision)
    if dt is not None:
        _check_dt(dt)
        updates[DT] = dt
    _run_behaviors(updates)
    if platform is not None:
        set_platform(platform)
    if host_device_count is not None:
        set_host_device_count(host_device_count)
    with _GLOBAL.lock:
        for key, value in updates.items():
            _GLOBAL.settings[key] = value
            if _contains_tracer(value):
                _GLOBAL.traced.add(key)
            else:
                _GLOBAL.traced.discard(key)
    if PRECISION in updates:
        with _GLOBAL.lock:
            if _GLOBAL.x64_before_set is None:
                _GLOBAL.x64_before_set = bool(jax.config.read("jax_enable_x64"))
        _apply_precision(updates[PRECISION])


def pop(key: str, default: Any = _UNSET) -> Any:
    """Remove the global setting ``key`` and return its value.

    Args:
        key: the setting to remove.
        default: returned when the setting is not set; without it that is a ``KeyError``.

    Returns:
        The removed value (or ``default``).

    Raises:
        KeyError: if ``key`` is not set and no ``default`` is given.
        ValueError: if a ``context`` block of this thread sets ``key`` right now.

    Example:
        >>> from state_core import environ
        >>> environ.set(step_size=3)
        >>> environ.pop('step_size'), environ.pop('step_size', None)
        (3, None)
    """
    if _LOCAL.stacks.get(key):
        raise ValueError(
            f"environ.pop: {key!r} is set by an open `environ.context` block; pop it after the block ends."
        )
    with _GLOBAL.lock:
        if key in _GLOBAL.settings:
            _GLOBAL.traced.discard(key)
            return _GLOBAL.settings.pop(key)
    if default is _UNSET:
        raise KeyError(f"environ.pop: {key!r} is not set.")
    return default


@contextlib.contextmanager
def context(**kwargs: Any) -> Iterator[dict[str, Any]]:
    """Set values for the duration of a ``with`` block (this thread only; blocks nest).

    The previous values come back when the block ends, also when it raises.
    Inside a traced function the values may be tracers, for example the step
    and time of a loop body: ``with environ.context(i=i, t=t): model(x)``.
    ``precision`` switches ``jax_enable_x64`` for the block, in this thread only
    (``jax.enable_x64``), and restores it after.

    Args:
        **kwargs: the settings for the block (``dt=``, ``t=``, ``i=``, ``fit=``,
            ``precision=``, your own keys).

    Yields:
        All settings as ``all()`` gives them inside the block.

    Raises:
        ValueError: for ``platform`` or ``host_device_count`` (global only: use
            ``set``) and for an unsupported precision.
        TypeError: if ``dt`` is not a scalar.

    Example:
        >>> from state_core import environ
        >>> with environ.context(dt=0.1):
        ...     with environ.context(dt=0.01):
        ...         inner = environ.get_dt()
        ...     outer = environ.get_dt()
        >>> inner, outer, environ.get('dt', None)
        (0.01, 0.1, None)
    """
    for key in (PLATFORM, HOST_DEVICE_COUNT):
        if key in kwargs:
            raise ValueError(f"environ.context: {key!r} cannot be set for a block; use environ.set({key}=...).")
    if PRECISION in kwargs:
        kwargs[PRECISION] = _canonical_precision(kwargs[PRECISION])
    if DT in kwargs:
        _check_dt(kwargs[DT])
    _run_behaviors(kwargs)
    local = _LOCAL
    # JAX's own x64 switch for this thread only: a block ending in one thread must not
    # switch x64 off under another thread's block that is still open.
    x64 = jax.enable_x64(_canonical_precision(kwargs[PRECISION]) == 64) if PRECISION in kwargs else None
    level = local.depth
    stacks = local.stacks
    for key, value in kwargs.items():
        stack = stacks.get(key)
        if stack is None:
            stacks[key] = [(level, value)]
        else:
            stack.append((level, value))
    local.depth = level + 1
    entered = None
    try:
        if x64 is not None:
            x64.__enter__()
            entered = x64
        yield _snapshot(local, record=False)
    finally:
        local.depth = level
        for key in kwargs:
            stack = stacks[key]
            stack.pop()
            if not stack:
                del stacks[key]
        if entered is not None:
            entered.__exit__(None, None, None)
        behaviors = _GLOBAL.behaviors
        if behaviors:
            for key in kwargs:
                behavior = behaviors.get(key)
                previous = _lookup(local, key)[0] if behavior is not None else _UNSET
                if behavior is not None and previous is not _UNSET:
                    behavior(previous)


def reset() -> None:
    """Remove every global setting and registered behaviour.

    A precision set with ``set(precision=...)`` switched JAX's ``jax_enable_x64``;
    ``reset`` switches it back to what it was before the first such ``set`` (as
    brainstate's ``reset`` restores its default precision). An x64 flag changed
    with ``jax.config.update`` directly is left as it is.

    Raises:
        ValueError: inside a ``context`` block (its values would be lost half-way).

    Example:
        >>> from state_core import environ
        >>> environ.set(dt=0.1)
        >>> environ.reset()
        >>> environ.get('dt', None) is None
        True
        >>> import jax
        >>> environ.set(precision=64); jax.config.read('jax_enable_x64')
        True
        >>> environ.reset(); jax.config.read('jax_enable_x64')
        False
    """
    if _LOCAL.depth:
        raise ValueError("environ.reset: called inside an `environ.context` block; reset after the block ends.")
    with _GLOBAL.lock:
        _GLOBAL.settings.clear()
        _GLOBAL.behaviors.clear()
        _GLOBAL.traced.clear()
        x64_before, _GLOBAL.x64_before_set = _GLOBAL.x64_before_set, None
    if x64_before is not None:
        jax.config.update("jax_enable_x64", x64_before)


# ---------------------------------------------------------------------------- precision
# (the dtype functions are in _environ_dtypes; these two are what get/set/context need)
def _default_precision() -> int:
    # Not stored: an unset precision follows JAX's own default float.
    return 64 if jax.config.read("jax_enable_x64") else DEFAULT_PRECISION


def _apply_precision(precision: int | str) -> None:
    jax.config.update("jax_enable_x64", precision == 64)


# ---------------------------------------------------------------------------- platform and devices
def set_platform(platform: str) -> None:
    """Run on ``'cpu'``, ``'gpu'`` or ``'tpu'`` (JAX's ``jax_platform_name``; only before JAX starts).

    Args:
        platform: the platform.

    Raises:
        ValueError: for another platform.

    Example:
        >>> from state_core import environ
        >>> environ.set_platform('quantum')
        Traceback (most recent call last):
        ...
        ValueError: environ: platform must be one of ('cpu', 'gpu', 'tpu'), got 'quantum'.
    """
    _check_platform(platform)
    _run_behaviors({PLATFORM: platform})
    jax.config.update("jax_platform_name", platform)


def get_platform() -> str:
    """The platform of JAX's first device: ``'cpu'``, ``'gpu'`` or ``'tpu'`` (starts JAX's backend).

    Example:
        >>> from state_core import environ
        >>> environ.get_platform()
        'cpu'
    """
    platform: str = jax.devices()[0].platform
    return platform


_DEVICE_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\S+)")


def set_host_device_count(n: int) -> None:
    """Ask XLA for ``n`` CPU devices (in ``XLA_FLAGS``; only before JAX starts its backend).

    Args:
        n: the number of CPU devices, at least 1.

    Raises:
        ValueError: if ``n`` is not a positive int.

    Example:
        >>> from state_core import environ
        >>> environ.set_host_device_count(0)
        Traceback (most recent call last):
        ...
        ValueError: environ: host_device_count must be a positive int, got 0.
    """
    _check_device_count(n)
    _run_behaviors({HOST_DEVICE_COUNT: n})
    others = _DEVICE_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).split()
    os.environ["XLA_FLAGS"] = " ".join([f"--xla_force_host_platform_device_count={n}", *others])


def get_host_device_count() -> int:
    """The CPU device count asked for in ``XLA_FLAGS`` (1 when not asked).

    Example:
        >>> from state_core import environ
        >>> isinstance(environ.get_host_device_count(), int)
        True
    """
    match = _DEVICE_FLAG.search(os.environ.get("XLA_FLAGS", ""))
    return int(match.group(1)) if match else 1


# ---------------------------------------------------------------------------- behaviours
def register_default_behavior(key: str, behavior: Callable[[Any], Any], replace_if_exist: bool = False) -> None:
    """Call ``behavior(value)`` whenever ``key`` changes: on ``set``, and on entering and leaving a ``context``.

    On leaving a block it is called with the value that comes back (if any). It
    runs before the change: if it raises, the call fails and nothing changes, so
    a behaviour can validate values.

    Args:
        key: the setting to watch.
        behavior: a callable taking the new value.
        replace_if_exist: replace a behaviour already registered for ``key``.

    Raises:
        TypeError: if ``key`` is not a str or ``behavior`` is not callable.
        ValueError: if ``key`` has a behaviour and ``replace_if_exist`` is False.

    Example:
        >>> from state_core import environ
        >>> seen = []
        >>> environ.register_default_behavior('dt', seen.append)
        >>> with environ.context(dt=0.1):
        ...     pass
        >>> seen
        [0.1]
        >>> environ.unregister_default_behavior('dt')
        True
    """
    if not isinstance(key, str):
        raise TypeError(f"environ.register_default_behavior: key must be a str, got {type(key).__name__}.")
    if not callable(behavior):
        raise TypeError(f"environ.register_default_behavior: behavior must be callable, got {type(behavior).__name__}.")
    with _GLOBAL.lock:
        if key in _GLOBAL.behaviors and not replace_if_exist:
            raise ValueError(
                f"environ.register_default_behavior: {key!r} already has a behaviour; "
                "pass replace_if_exist=True to replace it."
            )
        _GLOBAL.behaviors[key] = behavior


def unregister_default_behavior(key: str) -> bool:
    """Remove the behaviour registered for ``key``; ``True`` if there was one.

    Args:
        key: the setting whose behaviour (registered with
            ``register_default_behavior``) is removed; an unknown key is not an
            error (the result is ``False``).

    Example:
        >>> from state_core import environ
        >>> environ.unregister_default_behavior('no such key')
        False
    """
    with _GLOBAL.lock:
        return _GLOBAL.behaviors.pop(key, None) is not None


def list_registered_behaviors() -> list[str]:
    """The keys that have a registered behaviour.

    Example:
        >>> from state_core import environ
        >>> environ.list_registered_behaviors()
        []
    """
    return list(_GLOBAL.behaviors)
