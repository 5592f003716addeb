"""The steady call of a plain program: read the states, run the compiled program, store the results.

A plain program has arrays (or typed keys) as state values and nothing around
its run: no placement, wait, check or failure hook, and in-place updates only
on one device, decided per call by reference counts (the written states' old
buffers donated when nothing else holds them). Its steady call is
a handful of Python operations, and each one counts: right after an XLA dispatch
the interpreter's caches are cold, so every step costs several times what it
costs in a loop. A loop over the states, the lists it builds and the slices that
split them cost ~0.6 us per call on a two-state program whose hand-written
pure-JAX call takes ~6 us, which is why a program with a few array states gets a
closure written out for its number of states (``_unrolled_factory``): one local
per state, no loop, no list but the two the program takes. Larger programs, and
those whose states need a hand-out lock or hold typed keys, get one general
closure (``plain_run``).

Whatever a steady closure does not handle (a trace in progress, JAX's NaN checks,
the first call's op-by-op form, a state whose value is not what the last call
left, a tracer coming out) goes to the general closure of ``program_runner``
before anything runs, so every path behaves the same.
"""

from __future__ import annotations

import functools
import linecache
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax

from ._call_contexts import call_contexts_unchanged  # noqa: F401
from ._context import CTX, GENERATION, OPEN_STACKS  # noqa: F401
from ._donation import DONATION_SWITCH, exclusive_local_count, exclusively_held

# (Some names are read only by the generated closures, as this module's globals: see ``_unrolled_factory``.)
from ._jax_internals import (  # noqa: F401
    EVAL_TRACE,
    SHARDING_ATTRIBUTE,
    TRACE_STATE,
    ArrayImpl,
    debug_flag_holders,
    each_on_one_device,
)
from ._program import LRU_CLOCK, CacheEntry  # noqa: F401
from ._signature import _AVAL, _NONE, value_token
from ._state import State
from ._state_io import CONCRETE_VALUES, STORED_VALUE, write_state_values

SingleDeviceSharding = jax.sharding.SingleDeviceSharding  # (read by the generated closures)

__all__ = ["plain_runner", "UNROLLED_UP_TO", "DIRECT_MISS", "DirectCall", "DirectCallMaker", "no_direct_call"]

UNROLLED_UP_TO = 16
"""Programs with at most this many input states and results get a closure written out for them."""

DIRECT_MISS: Any = type("DirectMiss", (), {"__repr__": lambda self: "<direct call missed>"})()
"""What a direct call returns, having run nothing, when its call is not the steady call it serves."""

DirectCall = Callable[[tuple[Any, ...], str], Any]
"""``direct(leaves, who)``: one signature's steady call, or ``DIRECT_MISS`` having run nothing."""

DirectCallMaker = Callable[[CacheEntry[Any], list[Any], list[DirectCall], list[Any]], DirectCall | None]
"""``make(entry, arg_avals, then, hit)``: the direct call of ``entry`` for arrays with these avals (or None).

``arg_avals`` are the avals of arrays that each lie on one device; the direct call
then asks no argument's placement. Arguments of another signature go to ``then[0]``,
which the caller may change; a call it serves stamps ``entry`` as the cache's latest
hit (``hit[0]``) when it is not.
"""


def no_direct_call(leaves: tuple[Any, ...], who: str) -> Any:
    """The end of a chain of direct calls: serves no call."""
    return DIRECT_MISS


def plain_runner(
    run: Callable[..., Any],
    refused: Callable[..., None],
    eager: list[Callable[..., Any] | None],
    compiled: Callable[..., Any],
    states: list[State[Any]],
    ref_avals: Any,
    n_rw: int,
    write_back: list[State[Any]],
    locks: tuple[threading.Lock, ...],
    donation: tuple[Callable[..., Any], bool, Callable[[list[Any]], bool], list[bool]] | None = None,
) -> tuple[Callable[..., Any], DirectCallMaker | None]:
    """The steady-call closure of a plain program (it hands anything else to ``run``), and its direct-call maker.

    Args:
        run: the general closure of ``program_runner`` (``run(leaves, who, eager_ok)``).
        refused: raises our message when JAX refuses an input's device or layout.
        eager: a one-element list holding the program's op-by-op first-call form
            until its first call (then None).
        compiled: the program, ``compiled(written values, read-only values, *leaves)``.
        states: the input states in program order (written ones first).
        ref_avals: the reference tokens ``run`` keeps up to date (a list of avals
            when every value is an array).
        n_rw: how many of ``states`` the program writes.
        write_back: the states the program's new values go to, in its order.
        locks: the states' hand-out locks (random keys), taken around read, run and write.
        donation: for a program that keeps its states' one-device layout and may
            donate, ``(donating form, whether it returns the new values first,
            whether nothing but their States holds the written values
            (``held_alone_check``), and a one-element list ``run`` keeps: whether
            the state values it last accepted lay on one device each)``; None when
            it never donates.
            While they did not, every call goes to ``run``. Otherwise the closure
            runs the donating form whenever donation is on in this thread, no JAX
            trace is running, nothing but their States holds the written values
            and every argument lies on one device, as ``run`` decides.

    Returns:
        ``(steady, make_direct)``. ``steady(leaves, who, eager_ok=False)`` returns
        what ``run`` would. ``make_direct(entry, arg_avals, then, hit)`` (None
        unless the closure is written out; see ``DirectCallMaker``) gives
        ``direct(leaves, who)``: the same steady call for positional arrays
        ``leaves`` when each has the very aval object in ``arg_avals``, entry's
        object graph and call contexts are unchanged, and nothing else stands in
        the way. Other arguments go to ``then[0](leaves, who)``; anything else runs
        nothing and returns ``DIRECT_MISS``.
        ``StatefulFunction.__call__`` tries it first, so the signature lookup and
        the steady call take one Python frame.
    """
    nans, infs = debug_flag_holders()
    donating, new_values_first, held_alone, states_on_one_device = (
        donation if donation is not None else (None, False, exclusively_held, [True])
    )
    # (Every value an array: the written-out closure counts each one's references itself.)
    if type(ref_avals) is list and not locks and len(states) <= UNROLLED_UP_TO and len(write_back) <= UNROLLED_UP_TO:
        shape = (n_rw, len(states) - n_rw, len(write_back), donating is not None, new_values_first)
        common = (run, refused, eager, compiled, donating, states_on_one_device, ref_avals, write_back, nans, infs)
        steady = _unrolled_factory(*shape)(*common, *states, *write_back)

        def make_direct(
            entry: CacheEntry[Any], arg_avals: list[Any], then: list[DirectCall], hit: list[Any]
        ) -> DirectCall | None:
            if eager[0] is not None:  # (only a program that has run: its first run took the op-by-op form)
                return None
            make = _unrolled_factory(
                *shape, n_args=len(arg_avals), graph=entry.graph is not None, env=entry.env_reads is not None
            )
            return make(*common, entry, arg_avals, then, hit, *states, *write_back)

        return steady, make_direct

    n = len(states)
    no_values: list[Any] = []  # (the program reads its argument lists, never changes them)
    written = write_back[0] if len(write_back) == 1 else None
    # Arrays: their avals; typed keys: their implementation and key data's aval (the
    # tokens ``values_unchanged`` compares, with the choice between them made once here).
    tokens_of, token_args = (getattr, (_AVAL, _NONE)) if type(ref_avals) is list else (value_token, ())
    unlock_order = tuple(reversed(locks))
    switch = DONATION_SWITCH

    def write(new_values: list[Any], who: str) -> None:
        if written is not None and type(new_values[0]) in CONCRETE_VALUES:
            written._value = new_values[0]
        else:  # several states (all or nothing), or a tracer that would leak (refused there)
            write_state_values(write_back, new_values, who)

    def plain_run(leaves: Sequence[Any], who: str, eager_ok: bool = False) -> Any:
        if (OPEN_STACKS.value and CTX.stacks) or eager[0] is not None or nans.value or infs.value:
            return run(leaves, who, eager_ok)
        for lock in locks:  # hand-out locks (random keys): read, run and write under them, as ``run`` does
            lock.acquire()
        try:
            values = list(map(STORED_VALUE, states))
            if list(map(tokens_of, values, *token_args)) == ref_avals and states_on_one_device[0]:
                if n_rw == n:
                    rw, ro = values, no_values
                else:
                    rw, ro = values[:n_rw], values[n_rw:]
                del values  # (only ``rw`` may hold the written values when their references are counted)
                try:
                    if (
                        donating is not None
                        and (switch.on_everywhere or switch.on())
                        and TRACE_STATE.value is EVAL_TRACE
                        and held_alone(rw)
                        and each_on_one_device(leaves)
                    ):
                        if new_values_first:
                            new_values, out = donating(rw, ro, *leaves)
                        else:
                            out, new_values = donating(rw, ro, *leaves)
                    else:
                        out, new_values = compiled(rw, ro, *leaves)
                except (ValueError, KeyError) as err:
                    refused(err, [*rw, *ro], leaves, who)
                    raise
                if write_back:
                    write(new_values, who)
                return out
        finally:
            for lock in unlock_order:
                lock.release()
        return run(leaves, who, eager_ok)  # a value changed: nothing ran, the general path decides

    return plain_run, None


_rc = sys.getrefcount

# The closure written out for one shape. ``s<i>`` are the input states (the first
# n_rw written), ``v<i>`` their values, ``w<j>`` the states the new values go to;
# ``avals[i]`` is read on every call because ``run`` renews it in place when a value
# with an equal aval comes in. Several stores are all or nothing: an interrupt
# half-way finishes them (as ``write_state_values`` does). ``{miss}`` is what a call
# the closure does not serve returns, having run nothing.
_HEAD = """\
def make(run, refused, eager, compiled, donating, states_on_one_device, avals, write_back, nans, infs, {params}):
    def unrolled_steady_call(leaves, who, eager_ok=False):
        if (OPEN_STACKS.value and CTX.stacks) or eager[0] is not None or nans.value or infs.value:
            {miss}
{reads}
        if {changed}:
            {miss}  # a value changed: nothing ran, the general path decides
"""
# The direct call also stands for the signature lookup: ``a<i>`` are the positional
# arguments, each the array whose aval object ``arg_avals[i]`` holds; arguments of
# another signature go on to ``then[0]`` (the direct call of the cache's other entry,
# or ``no_direct_call``). Entry's object graph and call contexts are checked as
# ``StatefulFunction.__call__`` checks them.
_DIRECT_HEAD = """\
def make(
    run, refused, eager, compiled, donating, states_on_one_device, avals, write_back, nans, infs,
    entry, arg_avals, then, hit, {params},
):
    def direct_call(leaves, who):
        if len(leaves) != {n_args}:
            return then[0](leaves, who)
{unpack}
        if {args_changed}:
            return then[0](leaves, who)
        if (OPEN_STACKS.value and CTX.stacks) or nans.value or infs.value{entry_checks}:
            {miss}
{reads}
        if {changed}:
            {miss}
        if hit[0] is not entry:  # (least-recently-used order, as ``TraceCache.touch`` keeps it)
            hit[0] = entry
            entry.last_used = next(LRU_CLOCK)
"""
_STEADY_MISS = "return run(leaves, who, eager_ok)"
_DIRECT_MISS = "return DIRECT_MISS"
_CALL = """\
        try:
            {call}
        except (ValueError, KeyError) as err:
            refused(err, [{values}], leaves, who)
            raise
"""
# Donate when donation is on in this thread (the flag: in every thread), no JAX trace runs,
# nothing but its State and the local holds each written value, and every argument lies
# on one device (the states' values do when ``states_on_one_device[0]``, see ``program_runner``).
_DONATION_DECISION = """\
        if not states_on_one_device[0]:
            {miss}  # values spread over devices: the general path decides
        donate = (
            (DONATION_SWITCH.on_everywhere or DONATION_SWITCH.on()) and TRACE_STATE.value is EVAL_TRACE and {exclusive}
        )
"""
_PLACEMENT_LOOP = """\
        if donate:
            for leaf in leaves:
                if type(leaf) is not ArrayImpl or type(leaf.{sharding}) is not SingleDeviceSharding:
                    donate = each_on_one_device(leaves)
                    break
"""
_EITHER_FORM = """\
if donate:
                {donated_call}
            else:
                {call}\
"""
_STORE_ONE = """\
        if type(new_values[0]) is not ArrayImpl:  # a tracer would leak: the general write-back refuses it
            write_state_values(write_back, new_values, who)
        else:
            w0._value = new_values[0]
        return out
"""
_STORE_ALL = """\
        if type(new_values[0]) is not ArrayImpl:  # a tracer would leak: the general write-back refuses it
            write_state_values(write_back, new_values, who)
            return out
        stored = False
        try:
{stores}
            stored = True
        finally:
            if not stored:
{stores_again}
        return out
"""
_TAIL = """\
    return unrolled_steady_call
"""
_DIRECT_TAIL = """\
    return direct_call
"""


def _steady_source(
    n_rw: int,
    n_ro: int,
    n_written: int,
    donates: bool,
    new_values_first: bool,
    n_args: int | None = None,
    graph: bool = False,
    env: bool = False,
) -> str:
    """The source of the factory of a steady closure (a direct call when ``n_args`` is given) for this shape."""
    n = n_rw + n_ro
    states = [f"s{i}" for i in range(n)]
    values = [f"v{i}" for i in range(n)]
    targets = [f"w{j}" for j in range(n_written)]
    params = ", ".join(states + targets) or "*_"
    reads = "\n".join(f"        v{i} = s{i}._value" for i in range(n))
    changed = " or ".join(f'getattr(v{i}, "aval", None) is not avals[{i}]' for i in range(n)) or "False"
    if n_args is None:
        miss, arguments = _STEADY_MISS, "*leaves"
        source = _HEAD.format(params=params, reads=reads, changed=changed, miss=miss)
    else:
        miss = _DIRECT_MISS
        args = [f"a{i}" for i in range(n_args)]
        arguments = ", ".join(args)
        source = _DIRECT_HEAD.format(
            params=params,
            n_args=n_args,
            entry_checks=(" or entry.graph_generation != GENERATION.value" if graph else "")
            + (" or not call_contexts_unchanged(entry.env_reads)" if env else ""),
            unpack=f"        {arguments}, = leaves" if args else "",
            args_changed=" or ".join(
                f"type(a{i}) is not ArrayImpl or a{i}.aval is not arg_avals[{i}]" for i in range(n_args)
            )
            or "False",
            reads=reads,
            changed=changed,
            miss=miss,
        )
    lists = [f"[{', '.join(values[:n_rw])}]", f"[{', '.join(values[n_rw:])}]"]
    call_args = ", ".join(lists + ([arguments] if arguments else []))
    call = f"return compiled({call_args})[0]" if not n_written else f"out, new_values = compiled({call_args})"
    if donates:
        source += _DONATION_DECISION.format(
            miss=miss, exclusive=" and ".join(f"_rc(v{i}) == EXCLUSIVE" for i in range(n_rw))
        )
        if n_args is None:  # (a direct call's arguments were asked when it was made)
            source += _PLACEMENT_LOOP.format(sharding=SHARDING_ATTRIBUTE)
        results = "new_values, out" if new_values_first else "out, new_values"
        call = _EITHER_FORM.format(donated_call=f"{results} = donating({call_args})", call=call)
    source += _CALL.format(call=call, values=", ".join(values))
    tail = _TAIL if n_args is None else _DIRECT_TAIL
    if not n_written:
        return source + tail
    if n_written == 1:
        return source + _STORE_ONE + tail
    stores = [f"w{j}._value = new_values[{j}]" for j in range(n_written)]
    return (
        source
        + _STORE_ALL.format(
            stores="\n".join(" " * 12 + line for line in stores),
            stores_again="\n".join(" " * 16 + line for line in stores),
        )
        + tail
    )


EXCLUSIVE = exclusive_local_count()  # (read by the generated closures)


@functools.lru_cache(maxsize=128)
def _unrolled_factory(
    n_rw: int,
    n_ro: int,
    n_written: int,
    donates: bool,
    new_values_first: bool,
    n_args: int | None = None,
    graph: bool = False,
    env: bool = False,
) -> Callable[..., Callable[..., Any]]:
    """The factory of steady closures (direct calls, for ``n_args`` positional arrays) for this shape of program.

    ``make(run, refused, eager, compiled, donating, states_on_one_device, avals,
    write_back, nans, infs, *states, *targets)`` returns the steady closure; the
    direct call's ``make`` takes ``entry, arg_avals`` before the states. ``graph``
    and ``env``: whether the direct call checks the entry's object graph and call
    contexts.

    Compiled once per shape (and kept for the 128 latest shapes). Its names
    (``OPEN_STACKS``, ``CTX``, ``ArrayImpl``, ``write_state_values``, the donation
    checks) are this module's globals. Its code is named after this module's
    directory, so JAX's traceback filter hides its frames as it hides ours, and its
    source is registered with ``linecache`` so an unfiltered traceback shows the
    line that raised.
    """
    source = _steady_source(n_rw, n_ro, n_written, donates, new_values_first, n_args, graph, env)
    shape = f"{n_rw} written, {n_ro} read, {n_written} stored" + (", donating" if donates else "")
    if n_args is not None:
        shape = f"direct, {n_args} args, " + shape
    filename = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"<steady call: {shape}>")
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), globals(), namespace)  # (our own template, filled with names)
    return namespace["make"]
