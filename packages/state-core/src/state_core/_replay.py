"""The one replay: run a cached program once and write its results back, all or nothing.

Every state-aware transformation (``jit``, ``grad``, ``vmap2``, ``pmap2``,
``shard_map``, ``Map``, the loops and branches, ``checkpoint``, the Jacobians) runs
its programs through ``program_runner``: read the input states once, check their
shapes/dtypes against the trace with a cheap per-leaf comparison (a mismatch means
the caller traces again; no exception decides), pass written and read-only state
values as separate program arguments, run the program exactly once, wait for the
results when the program may fail after dispatch, and write every new value back,
all or nothing.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax

from ._context import CTX, OPEN_STACKS
from ._device_mismatch import device_mismatch_message, labelled_inputs, placements_in
from ._donation import donation_switched_on, held_alone_check
from ._invalid_values import refuse_invalid_values
from ._jax_internals import (
    debugging_nans_or_infs,
    each_on_one_device,
    is_eager,
    open_jaxpr,
)
from ._program import CacheEntry, merger
from ._signature import reference_avals, values_unchanged
from ._state import State
from ._state_io import CONCRETE_VALUES, STORED_VALUE, write_state_values
from ._steady_call import plain_runner

__all__ = [
    "replay",
    "program_runner",
    "STATES_CHANGED",
    "may_fail_at_run_time",
    "runs_cheaply_op_by_op",
    "spans_devices",
    "handout_locks",
]

STATES_CHANGED: Any = type("StatesChanged", (), {"__repr__": lambda self: "<states changed>"})()
"""What a ``program_runner`` closure returns, having run nothing, when an input state changed shape/dtype."""


def handout_locks(states: Sequence[State[Any]]) -> tuple[threading.Lock, ...]:
    """The distinct ``handout_lock()`` of ``states``, in a fixed order (so two callers never deadlock).

    Args:
        states: the States a program reads or writes; those whose
            ``handout_lock()`` is None (most kinds) contribute nothing.

    Returns:
        The locks to acquire in order (and release in reverse) around the read,
        run and write-back of a program; empty for most programs.

    Example:
        >>> from state_core import State
        >>> from state_core.engine import handout_locks
        >>> handout_locks([State(1.0)])
        ()
    """
    locks: dict[int, threading.Lock] = {}
    for state in states:
        lock = state.handout_lock()
        if lock is not None:
            locks[id(lock)] = lock
    return tuple(lock for _, lock in sorted(locks.items()))


def program_runner(entry: CacheEntry[Any]) -> Callable[..., Any]:
    """``run(leaves, who, eager_ok=False)``: run ``entry``'s program once and write the results back.

    The closure reads the input states itself, straight into the lists of written
    and read-only values the program takes, and checks them (``values_unchanged``);
    when a state no longer matches the trace it returns ``STATES_CHANGED`` without
    running anything, and the caller resolves the program again. A program that
    writes a state with a ``handout_lock`` (random keys) reads and writes its states
    under that lock, so two threads never get the same key.

    When the program has a ``donating`` form, donation is enabled, nothing but
    their States refers to the written states' values (``exclusively_held``) and
    those values are the program's own outputs of a call that kept their layout
    (so the new values can take the old buffers' places), it runs that: the old
    buffers are reused in place. The first call never donates. The first run of a program
    that has an ``eager`` form runs that (no XLA compile) when ``eager_ok`` says it
    is the first call of a transform object (an object built inline for one call,
    or a one-shot initialisation).

    If the program raises (at dispatch, or while ``jax.block_until_ready`` waits for
    a program that may fail after dispatch) no state is written, ``on_failure``
    sees the input values, and the error propagates after this single run. The
    closure does not refer to ``entry``, so an evicted entry is freed at once.

    A program with nothing around its run (no placement, wait, check or failure
    hook, in-place updates only on one device, and state values that are arrays or
    typed keys) gets a shorter closure for its steady calls, with the same
    behaviour: it hands every other case to the general one before running anything.
    When that closure is written out for the program's shape, ``entry.direct_maker``
    is set to make its direct call (``plain_runner``); otherwise it is None.

    Args:
        entry: the cache entry whose ``trace`` and ``program`` to run.

    Returns:
        The ``run`` closure.
    """
    trace, program = entry.trace, entry.program
    if program is None:
        raise ValueError("program_runner: the entry has no program yet (it was only traced); compile it first.")
    entry.direct_maker = None
    compiled = program.run
    donating = program.donating
    eager: list[Callable[..., Any] | None] = [program.eager]
    write_back = list(program.write_back)
    block = program.block
    on_failure = program.on_failure
    prepare = program.prepare
    check = program.check
    placed_by = program.placed_by
    explain_failure = program.explain_failure
    closed_jaxpr = trace.closed_jaxpr  # searched for placements on the failure path only
    merge = merger(trace)
    rw_index, ro_index = trace.rw_index, trace.ro_index
    # The input states, their signatures and reference avals in program order:
    # the written states first, then the read-only ones.
    order = [*rw_index, *ro_index]
    states = [trace.in_states[i] for i in order]
    sigs = [trace.state_sigs[i] for i in order]
    values_now = [s._value for s in states]
    ref_avals = reference_avals(values_now)
    n_rw = len(rw_index)
    argument_labels = trace.argument_labels  # (asked on the failure path only)
    locks = handout_locks([*states, *write_back])
    # States the trace created: once written with concrete values they are usable again.
    created = list(trace.created_states)
    # Where each written input state's new value is among the program's new values,
    # and the ids of those new values after the last call whose written states kept
    # their layout (None: no such call yet). A donated buffer is reused in place only
    # when the new value has the old one's layout. For a program that keeps layouts on
    # one device, that holds whenever its states' values and arguments lie on one
    # device each (then it may donate from its first call: one compile, the donating
    # form). ``values_on_one_device[0]`` says whether the state values the last general
    # call accepted did: a value whose aval is the very object the signature check
    # keeps has that value's placement too (JAX's avals tell values on one device from
    # values spread over several), so the steady closure reads the flag instead of
    # asking each value. Any other program (or values spread over devices) donates
    # once its inputs are its own outputs of a call that kept their layout.
    position = {id(s): j for j, s in enumerate(write_back)}
    rw_out = [position[id(trace.in_states[k])] for k in rw_index] if donating is not None else []
    pick_rw_out = operator.itemgetter(*rw_out) if len(rw_out) > 1 else None
    one_device_program = program.keeps_layout_on_one_device
    values_on_one_device = [one_device_program and each_on_one_device(values_now)]
    # Whether nothing but their States holds the written values, in the fastest exact
    # form for their types (one step for plain arrays; a typed key's data is looked at too).
    held_alone = held_alone_check(values_now[:n_rw])
    del values_now
    may_donate = donating is not None and check is None and n_rw > 0
    donated_form = compiled if donating is None else donating
    # A donating form that lists the new values first (so XLA pairs each buffer with its
    # own state's new value) returns (new values, output).
    swapped_form = donating if program.donating_new_values_first else None
    steady: list[Any] = [None]

    unlock_order = tuple(reversed(locks))

    def refused(err: ValueError | KeyError, values: list[Any], leaves: Sequence[Any], who: str) -> None:
        # JAX refused an input's layout; its message would name the program's internal
        # arguments (or, for a KeyError, a bare mesh axis name). Raises ours, if any.
        inputs = labelled_inputs(states, values, leaves, argument_labels())
        message = None if explain_failure is None else explain_failure(who, inputs, err)
        if message is None and isinstance(err, ValueError):
            placements = [*placed_by, *placements_in(closed_jaxpr, who)]
            message = device_mismatch_message(who, inputs, placements)
        if message is not None:
            raise ValueError(message) from err

    def run(leaves: Sequence[Any], who: str, eager_ok: bool = False) -> Any:
        # One function on purpose: every call of a cached program passes here, and
        # each extra Python frame or check costs more than its own work (the XLA
        # dispatch next to it leaves the interpreter's caches cold).
        stacks = CTX.stacks if OPEN_STACKS.value else ()
        locked = locks and not stacks
        if locked:
            # Read under the hand-out locks (random keys): a value read before them
            # may have been handed out to another thread meanwhile.
            for lock in locks:
                lock.acquire()
        try:
            # The values go straight into the lists the program takes: no other list
            # of this module outlives the split, so a value's references can be counted.
            values = [s.value for s in states] if stacks else list(map(STORED_VALUE, states))
            if not values_unchanged(values, sigs, ref_avals):
                return STATES_CHANGED
            if prepare is None:
                rw, ro = values[:n_rw], values[n_rw:]
            else:
                placed, leaves = prepare(merge(values[:n_rw], values[n_rw:]), list(leaves))
                rw, ro = [placed[k] for k in rw_index], [placed[k] for k in ro_index]
                del placed
            del values
            # JAX's NaN / Inf checks, read once per call (off: nothing else is asked).
            debugging = not stacks and debugging_nans_or_infs()
            fn = compiled
            if eager[0] is not None:
                first, eager[0] = eager[0], None
                # Op by op only for a transform object's first call at the top level, with
                # values on one device (op by op, values spread over devices do not mix),
                # and not while JAX checks every operation for NaNs: library code makes and
                # masks NaNs on purpose (``jnp.var``), which only a compiled program hides.
                if eager_ok and not stacks and not debugging and each_on_one_device(rw, ro, leaves):
                    fn = first
            layout_kept = False
            consider = may_donate and fn is compiled and not stacks
            by_ids = True  # (see ``values_on_one_device`` above)
            if consider:
                if one_device_program:
                    values_on_one_device[0] = each_on_one_device(rw, ro)
                    by_ids = not values_on_one_device[0]
                layout_kept = list(map(id, rw)) == steady[0] if by_ids else each_on_one_device(leaves)
                # Not while JAX checks for NaNs (it re-runs a failing program on the same
                # inputs), nor under a plain JAX transformation (the values must stay alive).
                if layout_kept and not debugging and donation_switched_on() and is_eager() and held_alone(rw):
                    fn = donated_form  # nothing but the States holds the old values: reuse their buffers
            ok = False
            try:
                try:
                    if fn is swapped_form:
                        new_values, out = fn(rw, ro, *leaves)
                    else:
                        out, new_values = fn(rw, ro, *leaves)
                except (ValueError, KeyError) as err:
                    refused(err, [*rw, *ro], leaves, who)
                    raise
                if block and not stacks:
                    # Errors raised while the program runs (a failing callback, a device
                    # error) surface here, before any state sees the results.
                    jax.block_until_ready((out, new_values))
                if debugging:
                    # JAX checks a compiled call's results itself, but not on every path (a
                    # program compiled before the flag was set, a thread where a debug_nans
                    # block ran): check them here, before any state sees them.
                    refuse_invalid_values(who, out, write_back, new_values)
                if check is not None and not stacks:
                    out = check(out)
                ok = True
            finally:
                if not ok and on_failure is not None:
                    on_failure(merge(rw, ro))
            if consider and by_ids:
                if layout_kept:
                    kept = [new_values[rw_out[0]]] if pick_rw_out is None else pick_rw_out(new_values)
                    steady[0] = list(map(id, kept))
                else:  # compare layouts only while a later call may donate
                    outs = [new_values[j] for j in rw_out]
                    steady[0] = list(map(id, outs)) if _same_layout(rw, outs) else None
            write_state_values(write_back, new_values, who, created=created)
            return out
        finally:
            if locked:
                for lock in unlock_order:
                    lock.release()

    if prepare is not None or check is not None or block or on_failure is not None:
        return run
    if (may_donate and not one_device_program) or created or ref_avals is None:
        return run
    donation = None
    if may_donate:
        donation = (donated_form, swapped_form is not None, held_alone, values_on_one_device)
    steady_call, entry.direct_maker = plain_runner(
        run, refused, eager, compiled, states, ref_avals, n_rw, write_back, locks, donation
    )
    return steady_call


def _same_layout(before: list[Any], after: list[Any]) -> bool:
    """True if every leaf of ``after`` is a JAX array of the shape, dtype and sharding of its leaf in ``before``.

    Exactly then can the new value take the old one's buffer.
    """
    for old, new in zip(before, after, strict=True):
        old_leaves, new_leaves = jax.tree.leaves(old), jax.tree.leaves(new)
        if len(old_leaves) != len(new_leaves):
            return False
        for a, b in zip(old_leaves, new_leaves, strict=True):
            if type(a) not in CONCRETE_VALUES or type(b) not in CONCRETE_VALUES:  # tracers of a plain transformation
                return False
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            # (JAX gives outputs the full-rank form of a spec: P(None, None) for a declared P().)
            if a.sharding != b.sharding and not a.sharding.is_equivalent_to(b.sharding, a.ndim):
                return False
    return True


def replay(entry: CacheEntry[Any], leaves: Sequence[Any], who: str, eager_ok: bool = False) -> Any:
    """Run the program of ``entry`` once with the states' current values and write the results back.

    If the program raises, no state is written and the error propagates after this
    single run.

    Args:
        entry: the cache entry to run.
        leaves: the dynamic argument leaves of the call.
        who: names the transformation in messages.
        eager_ok: the call may run the program's ``eager`` form (see ``program_runner``).

    Returns:
        The program's output, or ``STATES_CHANGED`` (having run nothing) if an input
        state no longer matches the trace (another thread resized it in between).
    """
    run = entry.runner
    if run is None:
        run = entry.runner = program_runner(entry)
    return run(leaves, who, eager_ok)


def _uses_any(jaxpr: Any, names: frozenset[str]) -> bool:
    """True if ``jaxpr`` or any sub-jaxpr (loop bodies, branches, nested calls) holds a primitive named in ``names``."""
    import jax.extend.core as jex_core

    todo = [jaxpr]  # an explicit stack: deeply nested programs do not recurse
    while todo:
        current = todo.pop()
        for eqn in current.eqns:
            if eqn.primitive.name in names:
                return True
            todo.extend(open_jaxpr(sub) for sub in jex_core.jaxprs_in_params(eqn.params))
    return False


_CALLBACK_PRIMITIVES = frozenset({"debug_callback", "io_callback", "pure_callback", "callback"})


def may_fail_at_run_time(jaxpr: Any) -> bool:
    """True if ``jaxpr`` (or a sub-jaxpr) calls back into Python, which may raise after dispatch.

    Args:
        jaxpr: an open ``jax.extend.core.Jaxpr`` (``open_jaxpr(closed_jaxpr)``).
    """
    return _uses_any(jaxpr, _CALLBACK_PRIMITIVES)


# Primitives whose op-by-op execution compiles a program of its own around a body
# that was traced anew: a first call that meets one gains nothing from running op by
# op (it would compile twice). A nested ``jit`` is not one of them: library code
# (``jax.random``, ``jax.nn``) reuses the same jaxpr, so its compiled form is cached.
_COMPILING_PRIMITIVES = frozenset({"scan", "while", "cond", "xla_pmap", "shard_map"})


def runs_cheaply_op_by_op(jaxpr: Any) -> bool:
    """True if evaluating ``jaxpr`` op by op compiles no new program (no loops, branches, pmap or shard_map).

    Args:
        jaxpr: an open ``jax.extend.core.Jaxpr`` (``open_jaxpr(closed_jaxpr)``); its
            sub-jaxprs are searched too.
    """
    return not _uses_any(jaxpr, _COMPILING_PRIMITIVES)


# Primitives that place values on several devices: a program holding one does not
# keep its inputs' single-device layout.
_MULTI_DEVICE_PRIMITIVES = frozenset({"shard_map", "xla_pmap", "sharding_constraint", "device_put", "reshard"})


def spans_devices(jaxpr: Any) -> bool:
    """True if ``jaxpr`` (or a sub-jaxpr) places values on devices itself (shard_map, pmap, shardings).

    Args:
        jaxpr: an open ``jax.extend.core.Jaxpr`` (``open_jaxpr(closed_jaxpr)``).
    """
    return _uses_any(jaxpr, _MULTI_DEVICE_PRIMITIVES)
