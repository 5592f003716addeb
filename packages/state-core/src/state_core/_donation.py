"""In place by default: when the buffer of a written State may be handed to XLA to reuse.

A State owns its value. When a transformation writes a State and nothing but that
State refers to the old value, the old buffer is *donated* to the program, which
then updates it in place instead of allocating a second copy: the time and the
peak memory of hand-written JAX with ``donate_argnums``. When anything else can
still reach the value — a user variable, another State holding the same array,
the same array passed as an argument or read as a read-only state of the same
call, a value returned earlier, a container of the value the user kept — it is
not donated, so no array a user can still reach is ever deleted.

"Nothing else refers to it" is read from CPython's reference counts, on every
node of the value's pytree, at the moment of the call. The counts the engine's
own references add are measured once, at import, by running the same check on a
stand-in value held the same way.
"""

from __future__ import annotations

import contextlib
import operator
import sys
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ._jax_internals import ArrayImpl, PRNGKeyArray, debugging_nans_or_infs, eager_and_not_debugging
from ._switch import Switch

__all__ = [
    "exclusively_held",
    "exclusive_array_counts",
    "exclusive_local_count",
    "held_alone_check",
    "DONATION_SWITCH",
    "donation",
    "set_donation",
    "donation_enabled",
    "donation_allowed",
    "donation_switched_on",
    "set_donation_min_bytes",
    "donation_min_bytes",
    "donation_gate",
    "values_nbytes",
]

_rc = sys.getrefcount
_ARRAY_TYPES: tuple[type, ...] = (ArrayImpl,)
# Typed keys are looked into: their key data is an array a user may hold on its own.
_KEY_TYPES: tuple[type, ...] = (PRNGKeyArray,)
# Leaves that are never donated and never shared in a way that matters: JAX turns
# them into new device buffers at every call.
_PLAIN_LEAVES = (int, float, complex, bool, type(None), np.ndarray, np.generic, str)


def _children(node: Any, keys: tuple[type, ...]) -> list[Any] | None:
    """The children of a container JAX flattens the usual way, or None for other nodes.

    A typed PRNG key (a type in ``keys``) has one child, the array of its key data:
    ``jax.random.key_data(key)`` hands out that very array, and
    ``jax.random.wrap_key_data(data)`` wraps the caller's array without copying, so a
    user can hold a key's buffer without holding the key.
    """
    t = type(node)
    if t is tuple or t is list or isinstance(node, tuple):  # NamedTuples (optax states) included
        return list(node)
    if t is dict:
        return list(node.values())
    if t in keys:
        data = getattr(node, "_base_array", None)
        return None if data is None else [data]
    return None


def _check(
    rw: list[Any], top: int, inner: int, arrays: tuple[type, ...], keys: tuple[type, ...], seen: list[int] | None
) -> bool:
    """Whether every node of every value in ``rw`` has exactly the references the engine expects.

    ``top``: the count of a value held by its State and by ``rw`` alone; ``inner``:
    the count of a node held only by its parent (a container, or the typed key whose
    data it is). ``arrays``: the leaf types; ``keys``: the typed key types. With
    ``seen`` given, records the counts instead of comparing (the calibration).
    """
    for value in rw:
        count = _rc(value)
        if seen is not None:
            seen.append(count)
        elif count != top:
            return False
        if type(value) in arrays:
            continue
        pending = _children(value, keys)
        if pending is None:
            return False  # a pytree node we cannot see into: keep it
        while pending:
            node = pending.pop()
            if type(node) in _PLAIN_LEAVES:
                continue
            count = _rc(node)
            if seen is not None:
                seen.append(count)
            elif count != inner:
                return False
            if type(node) in arrays:
                continue
            kids = _children(node, keys)
            if kids is None:
                return False
            pending.extend(kids)
            del kids  # a reference of its own to the next node's children would be counted
    return True


class _Probe:
    """A stand-in array for the calibration (creating a real one would start the JAX backend)."""


class _ProbeKey:
    """A stand-in typed key for the calibration: it holds its key data as an attribute."""

    def __init__(self) -> None:
        self._base_array = _Probe()


class _Holder:
    """A stand-in State for the calibration."""

    _value: Any


def _calibrate() -> tuple[int, int]:
    holder = _Holder()
    holder.__dict__["_value"] = ([_Probe()], _Probe(), _ProbeKey())
    rw = [holder._value]  # as the runner holds it: the State's slot and the rw list
    seen: list[int] = []
    _check(rw, 0, 0, (_Probe,), (_ProbeKey,), seen)
    top, *inner = seen
    if len(set(inner)) != 1:  # every node below the top is held by its parent alone
        raise RuntimeError(f"state_core could not calibrate reference counts (saw {seen}); please report it.")
    return top, inner[0]


_TOP, _INNER = _calibrate()


def _calibrate_arrays() -> int:
    holder = _Holder()
    holder.__dict__["_value"] = _Probe()
    rw = [holder._value]
    (count,) = map(_rc, rw)
    return count


_TOP_OF_ARRAY = _calibrate_arrays()


_KEY_DATA = operator.attrgetter("_base_array")


def _key_data_counts(rw: list[Any]) -> list[int]:
    return list(map(_rc, map(_KEY_DATA, rw)))


def _calibrate_keys() -> int:
    holder = _Holder()
    holder.__dict__["_value"] = _ProbeKey()
    rw = [holder._value]
    (count,) = _key_data_counts(rw)
    return count


_KEY_DATA_ALONE = _calibrate_keys()


def _keys_checker(n: int) -> Callable[[list[Any]], bool]:
    """``exclusively_held`` for ``n`` values that are all typed PRNG keys, in two C-level steps."""
    keys_alone, data_alone = [_TOP_OF_ARRAY] * n, [_KEY_DATA_ALONE] * n

    def keys_held_alone(rw: list[Any]) -> bool:
        return list(map(_rc, rw)) == keys_alone and _key_data_counts(rw) == data_alone

    return keys_held_alone


def _calibrate_locals() -> tuple[int, int]:
    holder = _Holder()
    holder.__dict__["_value"] = _ProbeKey()
    v0 = holder._value  # as a written-out steady call holds it: the State's slot and one local
    return _rc(v0), _rc(v0._base_array)  # (the value itself; a key's data, read as that call reads it)


_TOP_OF_LOCAL, _KEY_DATA_OF_LOCAL = _calibrate_locals()


def exclusive_local_count() -> int:
    """What ``sys.getrefcount(v)`` gives for an array held by its State and one local variable alone.

    The test a steady call written out per state makes (``_steady_call``): it
    reads each written state's value into a local and compares its count with
    this one.
    """
    return _TOP_OF_LOCAL


def exclusive_local_key_data_count() -> int:
    """What ``sys.getrefcount(v0._base_array)`` gives when nothing but the typed key ``v0`` holds its key data.

    The second test a steady call written out per state makes for a written typed
    key held in the local ``v0`` (``jax.random.key_data(key)`` hands out the key's own
    buffer, which must not be donated while anyone holds it).
    """
    return _KEY_DATA_OF_LOCAL


def exclusive_array_counts(n: int) -> list[int]:
    """What ``list(map(sys.getrefcount, rw))`` gives when nothing but their States and ``rw`` hold ``n`` arrays.

    The fast form of ``exclusively_held`` for a program whose written states hold
    plain arrays (no containers to walk): one C-level comparison per call.

    Args:
        n: the number of written states.
    """
    return [_TOP_OF_ARRAY] * n


def held_alone_check(values: list[Any]) -> Callable[[list[Any]], bool]:
    """``exclusively_held`` in its fastest exact form for written values of these types.

    Plain arrays are compared with their counts in one step
    (``exclusive_array_counts``), typed keys alone in two (the key and its key
    data); any other values are walked by ``exclusively_held`` itself. The
    function returned takes ``rw`` as ``exclusively_held`` does.

    Args:
        values: the written states' current values (their types decide the form).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_core.engine import held_alone_check
        >>> s = State(jnp.zeros(3))
        >>> held_alone_check([s._value])([s._value])
        True
    """
    n = len(values)
    if all(type(v) in _ARRAY_TYPES for v in values):
        counts = exclusive_array_counts(n)

        def arrays_held_alone(rw: list[Any]) -> bool:
            return list(map(_rc, rw)) == counts

        return arrays_held_alone
    if all(type(v) in _KEY_TYPES for v in values):
        return _keys_checker(n)
    return exclusively_held


def exclusively_held(rw: list[Any]) -> bool:
    """True if nothing but its State (and the list ``rw``) refers to any part of any value in ``rw``.

    ``rw`` holds the values of the states a program writes, read straight from the
    states into this list (no other list, variable or argument of the caller may
    hold them). A value that is a pytree counts as held elsewhere when any of its
    containers or arrays is: a user who kept ``opt = opt_state.value`` keeps every
    array in it. A typed PRNG key counts as held elsewhere when its key data is
    (``jax.random.key_data(key)`` returns the key's own buffer).

    What the counts cannot see is another array object that JAX made to share the
    value's buffer (``jax.device_put(value, device)`` onto the device it already
    lies on, ``value.addressable_data(i)``, the shards of a value spread over
    devices): such an object is not a reference to the value.

    Args:
        rw: the written states' current values, one per state.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core import State
        >>> from state_core.engine import exclusively_held
        >>> s = State(jnp.zeros(3))
        >>> exclusively_held([s._value])
        True
        >>> kept = s.value
        >>> exclusively_held([s._value])
        False
        >>> key = State(jax.random.key(0))
        >>> data = jax.random.key_data(key.value)    # the key's own buffer
        >>> exclusively_held([key._value])
        False
    """
    return _check(rw, _TOP, _INNER, _ARRAY_TYPES, _KEY_TYPES, None)


_SWITCH = Switch(True, "donation")
DONATION_SWITCH = _SWITCH
"""The switch behind ``set_donation`` / ``donation``, for hot paths that read its ``on_everywhere`` flag."""

# Below this many bytes of written state values a program does not donate. Donating
# pays at every size on CPU once the decision is a few reference-count comparisons: a
# donated program neither allocates its outputs nor frees its inputs' buffers (hand-written
# ``jax.jit(jax.vmap(step), donate_argnums=0)`` runs a 1-state 16x4 step 6% faster than
# without donation, and 10 or 100 such states 18-25% faster, on JAX 0.10 and 0.12).
_MIN_BYTES = [0]
# A program whose first call may run op by op decides about donation with a trace of
# its compiled form that such a call never uses: below this size the trace costs the
# first call more than donating saves its later calls.
_OP_BY_OP_MIN_BYTES = 128 * 1024


def set_donation_min_bytes(n_bytes: int) -> int:
    """Donate only for programs whose written states hold at least ``n_bytes`` (default 0: any size).

    A program whose written state values are smaller allocates new buffers, as
    plain ``jax.jit`` does. By default every program donates when it may: on CPU
    a donated call is faster even for a few bytes (it neither allocates its
    outputs nor frees the old buffers). A gate saves the one compile of the
    non-donating form for programs whose old values a caller keeps holding. A
    program whose first call may run op by op (``grad``, one-shot
    initialisations, ``eager_first_calls``) donates only from 128 KiB whatever
    this setting: deciding would cost that first call a trace. A program decides
    when it is traced: the setting applies to programs traced after it changes
    (``state_core.clear_caches()`` re-traces the others). Results never depend on
    it; it trades memory for call overhead.

    Args:
        n_bytes: the smallest total size, in bytes, of the values of the states a
            program writes for it to donate them; 0 donates whenever possible.

    Returns:
        The previous setting.

    Raises:
        TypeError: ``n_bytes`` is not an int.
        ValueError: ``n_bytes`` is negative.

    Example:
        >>> from state_core.engine import set_donation_min_bytes
        >>> previous = set_donation_min_bytes(1 << 20)    # only programs writing >= 1 MiB donate
        >>> set_donation_min_bytes(previous)
        1048576
    """
    if not isinstance(n_bytes, int) or isinstance(n_bytes, bool):
        raise TypeError(f"set_donation_min_bytes: n_bytes must be an int, got {type(n_bytes).__name__}.")
    if n_bytes < 0:
        raise ValueError(f"set_donation_min_bytes: n_bytes must be >= 0, got {n_bytes}.")
    previous, _MIN_BYTES[0] = _MIN_BYTES[0], n_bytes
    return previous


def donation_min_bytes() -> int:
    """The current ``set_donation_min_bytes`` setting, in bytes.

    Example:
        >>> from state_core.engine import donation_min_bytes
        >>> donation_min_bytes()
        0
    """
    return _MIN_BYTES[0]


def donation_gate(op_by_op_first_call: bool) -> int:
    """The fewest bytes of written state values for which a program keeps its donating form.

    Args:
        op_by_op_first_call: the program has a form that its first call may run op
            by op (no compile).
    """
    if op_by_op_first_call:
        return max(_MIN_BYTES[0], _OP_BY_OP_MIN_BYTES)
    return _MIN_BYTES[0]


def values_nbytes(values: list[Any]) -> int:
    """The total size in bytes of the arrays in ``values`` (pytrees included; other leaves count 0)."""
    total = 0
    for leaf in jax.tree.leaves(values):
        size, dtype = getattr(leaf, "size", None), getattr(leaf, "dtype", None)
        itemsize = getattr(dtype, "itemsize", None)
        if isinstance(size, int) and isinstance(itemsize, int):
            total += size * itemsize
    return total


def set_donation(enabled: bool) -> None:
    """Switch in-place updates of written States on or off for the whole process (default: on).

    Args:
        enabled: ``False`` never donates a written state's old buffer (every write
            allocates a new one, as plain ``jax.jit`` without ``donate_argnums``).

    Example:
        >>> from state_core import donation_enabled, set_donation
        >>> set_donation(False); donation_enabled()
        False
        >>> set_donation(True); donation_enabled()
        True
    """
    _SWITCH.set(enabled)


def donation(enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Switch in-place updates of written States on or off inside the block (this thread only).

    Args:
        enabled: ``False`` keeps every old buffer inside the block.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, donation
        >>> from state_core.engine import exclusively_held
        >>> with donation(False):
        ...     pass  # transformations called here allocate new buffers for written states
    """
    return _SWITCH.block(enabled)


def donation_enabled() -> bool:
    """Whether transformations donate the old buffers of written States here and now.

    Off under ``jax_debug_nans`` / ``jax_debug_infs``: JAX then re-runs a program
    that produced a NaN with the same inputs, which must still exist.

    Example:
        >>> from state_core import donation_enabled
        >>> donation_enabled()
        True
    """
    return _SWITCH.on() and not debugging_nans_or_infs()


def donation_switched_on() -> bool:
    """Whether ``set_donation`` / ``donation`` leave in-place updates on in this thread (nothing else asked).

    The replay asks this and checks the rest itself (JAX's NaN flags, which it
    reads once per call, and whether a JAX transformation is tracing).
    """
    return _SWITCH.on()


def donation_allowed() -> bool:
    """Whether a written state's old buffer may be donated here and now, whoever holds it.

    True when donation is enabled (``set_donation`` / ``donation``), no JAX
    transformation is tracing in this thread (under ``jax.grad`` of a state-aware
    call the values must stay alive for the transformation) and neither
    ``jax_debug_nans`` nor ``jax_debug_infs`` is on. What else holds the values is
    ``exclusively_held``'s question.
    """
    return _SWITCH.on() and eager_and_not_debugging()
