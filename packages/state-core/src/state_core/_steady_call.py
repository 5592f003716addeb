"""The steady call of a plain program: read the states, run the compiled program, store the results.

A plain program has arrays (or typed keys) as state values and nothing around
its run: no placement, wait, check or failure hook, and in-place updates only
on one device, decided per call by reference counts (the written states' old
buffers donated when nothing else holds them). Its steady call is
a handful of Python operations, and each one counts: right after an XLA dispatch
the interpreter's caches are cold, so every step costs several times what it
costs in a loop. A loop over the states, the lists it builds and the slices that
split them cost ~0.6 us per call on a two-state program whose hand-written
pure-JAX call takes ~6 us, which is why a program with up to 16 states (arrays or
typed keys, with or without hand-out locks) gets a closure written out for its
shape (``_unrolled_factory``): one local per state, no loop, no list but the two
the program takes; a typed key is checked and counted through its key data as
plain attributes, which saves ~1.3 us per call of a one-key random program over
the general closure's per-value helpers. Larger programs get one general closure
(``plain_run``).

The same template also writes out a *direct call* for one argument signature
(``make_direct``): the signature check that ``StatefulFunction.__call__`` would
make and the steady call in one frame (see ``TraceCache.use_direct``).

Whatever a steady closure does not handle (a trace in progress, JAX's NaN checks,
the first call's op-by-op form, a state whose value is not what the last call
left, a tracer coming out) goes to the general closure of ``program_runner``
before anything runs, so every path behaves the same.
"""

from __future__ import annotations

import collections
import functools
import linecache
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax

from ._call_contexts import call_contexts_unchanged  # noqa: F401
from ._context import CTX, GENERATION, OPEN_STACKS  # noqa: F401
from ._donation import DONATION_SWITCH, exclusive_local_count, exclusive_local_key_data_count, exclusively_held

# (Some names are read only by the generated closures, as this module's globals: see ``_unrolled_factory``.)
from ._jax_internals import (  # noqa: F401
    EVAL_TRACE,
    SHARDING_ATTRIBUTE,
    TRACE_STATE,
    ArrayImpl,
    PRNGKeyArray,
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


def _kinds(ref_avals: list[Any]) -> str:
    """A letter per reference token: ``a`` for an array's aval, ``k`` for a typed key's ``(implementation, aval)``."""
    return "".join("k" if type(token) is tuple else "a" for token in ref_avals)


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
        ref_avals: the reference tokens ``run`` keeps up to date (an aval per
            array, ``(implementation, key data's aval)`` per typed key).
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
    # (Arrays and typed keys: the written-out closure counts each one's references itself.)
    if len(states) <= UNROLLED_UP_TO and len(write_back) <= UNROLLED_UP_TO:
        shape = _Shape(_kinds(ref_avals), n_rw, len(write_back), donating is not None, new_values_first, len(locks))
        common = (
            run,
            refused,
            eager,
            compiled,
            donating,
            states_on_one_device,
            ref_avals,
            write_back,
            nans,
            infs,
            locks,
        )
        steady = _unrolled_factory(shape)(*common, *states, *write_back)

        def make_direct(
            entry: CacheEntry[Any], arg_avals: list[Any], then: list[DirectCall], hit: list[Any]
        ) -> DirectCall | None:
            if eager[0] is not None:  # (only a program that has run: its first run took the op-by-op form)
                return None
            make = _unrolled_factory(
                shape._replace(n_args=len(arg_avals), graph=entry.graph is not None, env=entry.env_reads is not None)
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

# The closures written out for one shape of program. ``s<i>`` are the input states
# (the first n_rw written), ``v<i>`` their values, ``w<j>`` the states the new values
# go to, ``l<k>`` the hand-out locks (random keys) taken around read, run and write;
# ``avals[i]`` is read on every call because ``run`` renews it in place when a value
# with an equal signature comes in: an aval for an array, ``(implementation, key
# data's aval)`` for a typed key. A direct call also checks its positional
# arguments ``a<i>`` (each the array whose aval object ``arg_avals[i]`` holds) and
# sends other ones on to ``then[0]``. Several stores are all or nothing: an
# interrupt half-way finishes them (as ``write_state_values`` does). A call the
# closure does not serve runs nothing: the steady closure hands it to ``run``
# (after releasing the locks, which ``run`` takes itself), the direct call returns
# ``DIRECT_MISS``.
_CHANGED = {
    "a": 'getattr(v{i}, "aval", None) is not avals[{i}]',
    "k": "type(v{i}) is not PRNGKeyArray or v{i}._impl is not avals[{i}][0]"
    " or v{i}._base_array.aval is not avals[{i}][1]",
}
# Nothing but its State and the local holds the value (a key: nor its key data).
_HELD_ALONE = {
    "a": "_rc(v{i}) == EXCLUSIVE",
    "k": "_rc(v{i}) == EXCLUSIVE and _rc(v{i}._base_array) == EXCLUSIVE_KEY_DATA",
}


class _Lines:
    """Source lines at the current indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def add(self, *lines: str) -> None:
        self.lines.extend("    " * self.depth + line for line in lines)


class _Shape(NamedTuple):
    """What a written-out closure depends on: one source, and one factory, per shape."""

    kinds: str  # a letter per input state: ``a`` an array, ``k`` a typed key
    n_rw: int  # how many of them the program writes (the first ones)
    n_written: int  # how many states the new values go to
    donates: bool  # whether the program has a donating form
    new_values_first: bool  # whether that form returns (new values, output)
    n_locks: int  # the hand-out locks taken around read, run and store
    n_args: int | None = None  # a direct call's number of positional arrays (None: the steady closure)
    graph: bool = False  # whether the direct call checks the entry's object graph
    env: bool = False  # whether it checks the entry's call contexts


def _steady_source(shape: _Shape) -> str:
    """The source of the factory of a steady closure (a direct call when ``shape.n_args`` is given)."""
    kinds, n_rw, n_written, donates, new_values_first, n_locks, n_args, graph, env = shape
    n = len(kinds)
    values = [f"v{i}" for i in range(n)]
    direct = n_args is not None
    miss = "return DIRECT_MISS" if direct else "return run(leaves, who, eager_ok)"
    args = [f"a{i}" for i in range(n_args or 0)]
    params = ["run", "refused", "eager", "compiled", "donating", "states_on_one_device", "avals", "write_back"]
    params += ["nans", "infs", "locks"] + (["entry", "arg_avals", "then", "hit"] if direct else [])
    params += [f"s{i}" for i in range(n)] + [f"w{j}" for j in range(n_written)]
    src = _Lines()
    src.add(f"def make({', '.join(params)}):")
    src.depth = 1
    if n_locks:
        src.add(f"{', '.join(f'l{k}' for k in range(n_locks))}, = locks")
    if direct:
        src.add("def direct_call(leaves, who):")
        src.depth = 2
        src.add(f"if len(leaves) != {n_args}:", "    return then[0](leaves, who)")
        if args:
            checks = " or ".join(
                f"type({a}) is not ArrayImpl or {a}.aval is not arg_avals[{i}]" for i, a in enumerate(args)
            )
            src.add(f"{', '.join(args)}, = leaves", f"if {checks}:", "    return then[0](leaves, who)")
        flags = "(OPEN_STACKS.value and CTX.stacks) or nans.value or infs.value"
        flags += " or entry.graph_generation != GENERATION.value" if graph else ""
        flags += " or not call_contexts_unchanged(entry.env_reads)" if env else ""
    else:
        src.add("def unrolled_steady_call(leaves, who, eager_ok=False):")
        src.depth = 2
        flags = "(OPEN_STACKS.value and CTX.stacks) or eager[0] is not None or nans.value or infs.value"
    src.add(f"if {flags}:", f"    {miss}")
    if n_locks:
        src.add(*(f"l{k}.acquire()" for k in range(n_locks)), "try:")
        src.depth += 1
    src.add(*(f"v{i} = s{i}._value" for i in range(n)))
    usable = " or ".join(_CHANGED[kind].format(i=i) for i, kind in enumerate(kinds)) or "False"
    usable = f"not ({usable})" + (" and states_on_one_device[0]" if donates else "")
    src.add(f"if {usable}:")
    src.depth += 1
    if direct:  # (least-recently-used order, as ``TraceCache.touch`` keeps it)
        src.add("if hit[0] is not entry:", "    hit[0] = entry", "    entry.last_used = next(LRU_CLOCK)")
    call_args = ", ".join(
        [f"[{', '.join(values[:n_rw])}]", f"[{', '.join(values[n_rw:])}]", *args, *([] if direct else ["*leaves"])]
    )
    call = f"out, new_values = compiled({call_args})" if n_written else f"return compiled({call_args})[0]"
    if donates:
        # Donate when donation is on in this thread (the flag: in every thread), no JAX
        # trace runs, nothing but its State and the local holds each written value, and
        # every argument lies on one device (a direct call's were asked when it was made).
        held = " and ".join(_HELD_ALONE[kind].format(i=i) for i, kind in enumerate(kinds[:n_rw]))
        src.add(
            "donate = (DONATION_SWITCH.on_everywhere or DONATION_SWITCH.on())"
            f" and TRACE_STATE.value is EVAL_TRACE and {held}",
        )
        if not direct:
            src.add(
                "if donate:",
                "    for leaf in leaves:",
                f"        if type(leaf) is not ArrayImpl or type(leaf.{SHARDING_ATTRIBUTE})"
                " is not SingleDeviceSharding:",
                "            donate = each_on_one_device(leaves)",
                "            break",
            )
        results = "new_values, out" if new_values_first else "out, new_values"
        src.add("try:", "    if donate:", f"        {results} = donating({call_args})", "    else:", f"        {call}")
    else:
        src.add("try:", f"    {call}")
    src.add(
        "except (ValueError, KeyError) as err:",
        f"    refused(err, [{', '.join(values)}], leaves, who)",
        "    raise",
    )
    if n_written:
        # A tracer would leak (a plain JAX trace around the call): the general write-back refuses it.
        concrete = (
            "type(new_values[0]) is not ArrayImpl" if "k" not in kinds else "type(new_values[0]) not in CONCRETE_VALUES"
        )
        stores = [f"w{j}._value = new_values[{j}]" for j in range(n_written)]
        src.add(f"if {concrete}:", "    write_state_values(write_back, new_values, who)", "    return out")
        if n_written == 1:
            src.add(*stores)
        else:
            src.add("stored = False", "try:", *(f"    {line}" for line in stores), "    stored = True", "finally:")
            src.add("    if not stored:", *(f"        {line}" for line in stores))
        src.add("return out")
    src.depth -= 1
    if n_locks:
        src.depth -= 1
        src.add("finally:", *(f"    l{k}.release()" for k in reversed(range(n_locks))))
    src.add(miss + ("  # nothing ran: the general path decides" if not direct else ""))
    src.depth = 1
    src.add("return direct_call" if direct else "return unrolled_steady_call")
    return "\n".join(src.lines) + "\n"


EXCLUSIVE = exclusive_local_count()  # (read by the generated closures)
EXCLUSIVE_KEY_DATA = exclusive_local_key_data_count()  # (read by the generated closures)


_SHOWN: collections.OrderedDict[str, None] = collections.OrderedDict()
_SHOWN_AT_MOST = 256  # (twice the factories kept: a traceback of a closure still in use shows its line)


def _show_source(filename: str, source: str) -> None:
    """Register ``source`` with ``linecache`` under ``filename``, forgetting the oldest beyond ``_SHOWN_AT_MOST``."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    _SHOWN[filename] = None
    _SHOWN.move_to_end(filename)
    while len(_SHOWN) > _SHOWN_AT_MOST:
        linecache.cache.pop(_SHOWN.popitem(last=False)[0], None)


@functools.lru_cache(maxsize=128)
def _unrolled_factory(shape: _Shape) -> Callable[..., Callable[..., Any]]:
    """The factory of steady closures (or direct calls) for this shape of program.

    ``make(run, refused, eager, compiled, donating, states_on_one_device, avals,
    write_back, nans, infs, locks, *states, *targets)`` returns the steady closure;
    the direct call's ``make`` takes ``entry, arg_avals, then, hit`` before the
    states.

    Compiled once per shape (and kept for the 128 latest shapes). Its names
    (``OPEN_STACKS``, ``CTX``, ``ArrayImpl``, ``write_state_values``, the donation
    checks) are this module's globals. Its code is named after this module's
    directory, so JAX's traceback filter hides its frames as it hides ours, and its
    source is registered with ``linecache`` so an unfiltered traceback shows the
    line that raised.
    """
    source = _steady_source(shape)
    kinds, n_rw = shape.kinds, shape.n_rw
    name = f"{n_rw} written, {len(kinds) - n_rw} read, {shape.n_written} stored" + (
        ", donating" if shape.donates else ""
    )
    if "k" in kinds:
        name += f", {kinds.count('k')} keys"
    if shape.n_args is not None:
        name = f"direct, {shape.n_args} args, " + name
    filename = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"<steady call: {name}>")
    _show_source(filename, source)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), globals(), namespace)  # (our own template, filled with names)
    return namespace["make"]
