"""Benchmark: the first call of a new signature (trace + compile), against JAX's own first call.

A first call of ``vmap2(step)`` traces ``step`` once at per-lane shapes (finding
the States it reads and writes), decides every State's axis, then runs the
mapped program under ``jax.jit``, which traces, lowers and compiles it. The
reference is JAX's own first call of the same program written by hand:
``jax.jit(jax.vmap(pure), donate_argnums=0)(state_values, x)`` (the values donated
when ours donates them, as by default). Every repetition builds fresh
States, a fresh function and a fresh ``jax.jit``, so nothing is cached on either
side; the two alternate (which one goes first alternates too) so that both see
the same machine load, and the medians are compared.

Phases (``--profile`` in ``bench.py``, or this file run directly) split each
first call with JAX's own compile events (``jax.monitoring``) and a timer around
our trace of the user function:

* ``user trace``: our trace of the user function (``jax.make_jaxpr`` with the
  States' reads and writes recorded); JAX's own first call has no such phase;
* ``program trace``: ``jax.jit`` tracing the program (for JAX: its trace of ``pure``);
* ``lowering``: jaxpr to MLIR; ``compile``: XLA;
* ``rest``: everything else (for us: analysis, the object-graph snapshot, the
  donation check, the write-back; for JAX: argument handling and dispatch).

    python benchmarks/bench_first_call.py            # 1 and 1000 states, phases
    python benchmarks/bench_first_call.py --quick

``rows(quick)`` gives the measurements for ``bench.py`` (brainstate and flax.nnx
first calls included when they are installed).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax

if jax.config.jax_num_cpu_devices != 8:  # bench.py may have set it already
    jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp

import state_core as sc
from state_core.engine import donation_min_bytes
from state_core.filter import OfType
from state_transform import vmap2

BATCH = 16
PHASES = ("user trace", "program trace", "lowering", "compile", "rest")
_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "program trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering",
    "/jax/core/compile/backend_compile_duration": "compile",
}

FirstCall = Callable[[], Callable[[], Any]]  # builds fresh objects, returns their first call


# ---------------------------------------------------------------------- cases
def ours_first_call(n_states: int) -> FirstCall:
    """A first call of ``vmap2(step)`` over ``n_states`` fresh States of shape (16, 4)."""
    x = jnp.ones((BATCH, 4))

    def prepare() -> Callable[[], Any]:
        states = [sc.ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(n_states)]

        def step(inp: Any) -> Any:
            total = 0.0
            for s in states:
                s.value = s.value * 0.5 + inp
                total = total + s.value
            return total

        short = OfType(sc.ShortTermState)
        return lambda: vmap2(step, state_in_axes={0: short}, state_out_axes={0: short})(x)

    return prepare


def pure_first_call(n_states: int, donate: bool = False) -> FirstCall:
    """JAX's own first call of the same program: ``jax.jit(jax.vmap(pure))(values, x)``.

    ``donate``: with ``donate_argnums=0`` (the state values), as our program donates
    written states of at least ``donation_min_bytes()`` together (any size by default).
    """
    x = jnp.ones((BATCH, 4))
    donate_argnums = (0,) if donate else ()

    def prepare() -> Callable[[], Any]:
        values = [jnp.zeros((BATCH, 4)) + i for i in range(n_states)]

        def pure(values: list[Any], inp: Any) -> Any:
            new = []
            total = 0.0
            for v in values:
                v = v * 0.5 + inp
                new.append(v)
                total = total + v
            return new, total

        return lambda: jax.jit(jax.vmap(pure), donate_argnums=donate_argnums)(values, x)[1]

    return prepare


def brainstate_first_call(n_states: int) -> FirstCall | None:
    """brainstate's ``vmap2`` first call (eager: it runs the function under ``jax.vmap``)."""
    try:
        import brainstate
        from brainstate.util.filter import OfType as BsOfType
    except ImportError:
        return None
    x = jnp.ones((BATCH, 4))

    def prepare() -> Callable[[], Any]:
        states = [brainstate.ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(n_states)]

        def step(inp: Any) -> Any:
            total = 0.0
            for s in states:
                s.value = s.value * 0.5 + inp
                total = total + s.value
            return total

        short = BsOfType(brainstate.ShortTermState)
        return lambda: brainstate.transform.vmap2(step, state_in_axes={0: short}, state_out_axes={0: short})(x)

    return prepare


def nnx_first_call(n_states: int) -> FirstCall | None:
    """flax.nnx's first call of ``nnx.vmap(nnx.jit(step))`` over a module of ``n_states`` Variables."""
    try:
        from flax import nnx
    except ImportError:
        return None
    x = jnp.ones((BATCH, 4))

    class Bank(nnx.Module):
        def __init__(self) -> None:
            self.vs = nnx.List([nnx.Variable(jnp.zeros((BATCH, 4)) + i) for i in range(n_states)])

    def prepare() -> Callable[[], Any]:
        bank = Bank()

        def step(bank: Any, inp: Any) -> Any:
            total = 0.0
            for v in bank.vs:
                v[...] = v[...] * 0.5 + inp
                total = total + v[...]
            return total

        return lambda: nnx.vmap(nnx.jit(step), in_axes=(0, 0))(bank, x)

    return prepare


# ---------------------------------------------------------------------- phases
class _PhaseClock:
    """Seconds per phase of the calls made inside ``measuring()`` (see the module docstring)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._depth = 0  # inside our trace of the user function

    def on_event(self, event: str, duration: float, **_: Any) -> None:
        phase = _EVENTS.get(event)
        if phase is None:
            return
        if phase == "program trace" and self._depth:
            return  # JAX's trace of the user function inside ours: counted in "user trace"
        self.seconds[phase] += duration

    @contextlib.contextmanager
    def measuring(self) -> Iterator[None]:
        original = sc.StatefulFunction._trace_once
        clock = self

        def timed_trace(self: Any, *args: Any, **kwargs: Any) -> Any:
            outer = clock._depth == 0
            clock._depth += 1
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                clock._depth -= 1
                if outer:
                    clock.seconds["user trace"] += time.perf_counter() - start

        sc.StatefulFunction._trace_once = timed_trace  # type: ignore[method-assign]
        try:
            yield
        finally:
            sc.StatefulFunction._trace_once = original  # type: ignore[method-assign]


_CLOCKS: list[_PhaseClock] = []


def _dispatch_event(event: str, duration: float, **kwargs: Any) -> None:
    for clock in _CLOCKS:
        clock.on_event(event, duration, **kwargs)


jax.monitoring.register_event_duration_secs_listener(_dispatch_event)


def timed_first_call(prepare: FirstCall) -> dict[str, float]:
    """``{'total': s, <phase>: s, ...}`` of one first call (``rest`` is what no phase explains)."""
    first_call = prepare()
    clock = _PhaseClock()
    _CLOCKS.append(clock)
    try:
        with clock.measuring():
            start = time.perf_counter()
            jax.block_until_ready(first_call())
            total = time.perf_counter() - start
    finally:
        _CLOCKS.remove(clock)
    out = dict(clock.seconds)
    out["rest"] = total - sum(v for k, v in out.items() if k != "rest")
    out["total"] = total
    return out


def _median_phases(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def ours_donates(n_states: int) -> bool:
    """Whether our program for ``n_states`` states donates them (their bytes reach the gate)."""
    return n_states * BATCH * 4 * 4 >= donation_min_bytes()


def measure(n_states: int, repeats: int, peers: bool = True) -> dict[str, Any]:
    """Median phases of ours and JAX's own first call (and the peers' totals), in one run.

    JAX's own first call donates the state values (``donate_argnums=0``) exactly
    when ours does, as a hand-written step whose old values are dead would: XLA
    takes a little longer to compile a program that updates its inputs in place.
    """
    donates = ours_donates(n_states)
    sides = {"ours": ours_first_call(n_states), "pure": pure_first_call(n_states, donate=donates)}
    for prepare in sides.values():
        jax.block_until_ready(prepare()())  # JAX's one-time start-up is nobody's first call
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for i in range(repeats):
        order = list(sides.items())
        for label, fn in order[i % len(order) :] + order[: i % len(order)]:  # who goes first rotates
            samples[label].append(timed_first_call(fn))
    result: dict[str, Any] = {"n_states": n_states, "ours": _median_phases(samples["ours"])}
    result["pure"] = _median_phases(samples["pure"])

    def ratio(reference: str) -> float:
        return statistics.median(
            o["total"] / p["total"] for o, p in zip(samples["ours"], samples[reference], strict=True)
        )

    result["ratio"] = ratio("pure")
    result["donated"] = donates
    # Our time beside XLA's compile, over JAX's own first call: what our tracing and
    # analysis add (the compile of one program is the same for both, and the noisiest).
    result["overhead_beside_compile"] = statistics.median(
        ((o["total"] - o["compile"]) - (p["total"] - p["compile"])) / p["total"]
        for o, p in zip(samples["ours"], samples["pure"], strict=True)
    )
    result["peers"] = {}
    if peers:
        for label, make in (("brainstate", brainstate_first_call), ("flax.nnx", nnx_first_call)):
            fn = make(n_states)
            if fn is None:
                continue
            jax.block_until_ready(fn()())
            times = [timed_first_call(fn)["total"] for _ in range(max(1, repeats // 2))]
            result["peers"][label] = statistics.median(times) / result["pure"]["total"]
    return result


STATE_COUNTS = (1, 1000)  # the rows of bench.py


def ours_eager_first_call(n_states: int) -> FirstCall:
    """``ours_first_call`` under ``state_core.eager_first_calls(True)``: op by op, no XLA compile."""
    prepare = ours_first_call(n_states)

    def eager_prepare() -> Callable[[], Any]:
        first_call = prepare()

        def run() -> Any:
            with sc.eager_first_calls(True):
                return first_call()

        return run

    return eager_prepare


def measure_eager(n_states: int, repeats: int, peers: bool = True) -> dict[str, Any]:
    """Our op-by-op first call against JAX's own compiled one (``ratio``) and brainstate's eager one.

    ``peers`` maps each peer to its first call over JAX's (as in ``measure``);
    ``vs_brainstate`` is ours over brainstate's eager first call, the same run.
    """
    sides = {"ours": ours_eager_first_call(n_states), "pure": pure_first_call(n_states)}
    bs = brainstate_first_call(n_states) if peers else None
    if bs is not None:
        sides["brainstate"] = bs
    for prepare in sides.values():
        jax.block_until_ready(prepare()())
    totals: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(repeats):
        order = list(sides.items())
        for label, fn in order[i % len(order) :] + order[: i % len(order)]:
            totals[label].append(timed_first_call(fn)["total"])
    pure = statistics.median(totals["pure"])
    result: dict[str, Any] = {"n_states": n_states, "ratio": statistics.median(totals["ours"]) / pure}
    result["peers"] = {"brainstate": statistics.median(totals["brainstate"]) / pure} if bs is not None else {}
    result["vs_brainstate"] = (
        statistics.median(o / b for o, b in zip(totals["ours"], totals["brainstate"], strict=True))
        if bs is not None
        else None
    )
    return result


def eager_label(n_states: int) -> str:
    return f"first call op by op (eager_first_calls), {n_states} state{'s' if n_states > 1 else ''}"


def repeats_for(n_states: int, quick: bool) -> int:
    """First calls per side: many of a small program (they are noisy), fewer of a large one."""
    if n_states < 100:
        return 7 if quick else 15
    return 3 if quick else 5


def rows(quick: bool = False, peers: bool = True) -> list[dict[str, Any]]:
    """The first-call rows of ``bench.py``: 1 state and 1000 states."""
    return [measure(n, repeats_for(n, quick), peers) for n in STATE_COUNTS]


def label_for(n_states: int) -> str:
    return f"first call, {n_states} state{'s' if n_states > 1 else ''}"


def label(row: dict[str, Any]) -> str:
    return label_for(row["n_states"])


def phase_line(row: dict[str, Any]) -> str:
    """Where each first call's time goes, as fractions of JAX's own first call (medians)."""
    pure_total = row["pure"]["total"]

    def split(phases: dict[str, float], names: tuple[str, ...]) -> str:
        return " + ".join(f"{name} {phases[name] / pure_total:.3f}" for name in names)

    ours = split(row["ours"], PHASES)
    pure = split(row["pure"], PHASES[1:])
    line = f"ours {row['ours']['total'] / pure_total:.2f} = {ours}; JAX 1.00 = {pure}"
    line += f"; ours beside XLA's compile: {row['overhead_beside_compile']:+.3f}"
    if row["donated"]:
        line += "; both donate the state values"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (noisier)")
    parser.add_argument("--states", type=int, nargs="*", help="state counts (default: 1 and 1000)")
    parser.add_argument("--repeats", type=int, default=0, help="repetitions per side (default: by size)")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}; first call of vmap2 vs jax.jit(jax.vmap(pure)); fractions of JAX's own first call")
    if args.states:
        measured = [measure(n, args.repeats or repeats_for(n, args.quick)) for n in args.states]
    else:
        measured = rows(args.quick)
    for row in measured:
        peers = "".join(f", {name} {ratio:.2f}x" for name, ratio in row["peers"].items())
        print(f"\n{label(row)}: ours {row['ratio']:.2f}x (median of per-pair ratios){peers}")
        print(f"  {phase_line(row)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
