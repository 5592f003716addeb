"""Profile the Python cost of a cached state-aware call, next to the hand-written pure-JAX call.

For each selected case of ``bench.py`` this tool

1. times ours and pure JAX interleaved in the same process (``timeit``, many
   repeats, the **minimum** per call: on a shared machine the minimum is the
   least disturbed sample) and prints both, their difference (our Python
   overhead per call) and their ratio;
2. runs ours under ``cProfile`` for ``--calls`` calls and prints the functions
   sorted by own time, with the number of calls *per transformed call*, so a
   hot path that does more work than it should (re-flattening, re-tracing,
   taking a lock, a property per state) is visible at a glance.

Usage (from the repository root)::

    hatch run python benchmarks/profile_call.py                      # every case
    hatch run python benchmarks/profile_call.py --rows "1 state"     # cases whose label contains it
    hatch run python benchmarks/profile_call.py --rows Map --calls 20000 --top 25
    hatch run python benchmarks/profile_call.py --no-profile         # timings only

Only relative numbers mean something on a shared machine: compare the overhead
column before and after a change, in runs made close together.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import timeit
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench
import jax

# The steady rows of bench.py's main table (the one-shot init rows are left out).
CASES: list[tuple[str, Callable[[], Any]]] = [(row.label, row.make) for row in bench.rows() if row.kind == "steady"]


def min_time(fn: Callable[[], Any], number: int) -> float:
    """Seconds per call of the fastest of one ``timeit`` repeat of ``number`` calls."""
    return min(timeit.repeat(fn, number=number, repeat=1)) / number


def ab(ours: Callable[[], Any], pure: Callable[[], Any], number: int, repeats: int) -> tuple[float, float]:
    """Minimum seconds per call of ours and pure JAX, timed in alternation."""
    for _ in range(3):  # warm both (compile, caches)
        jax.block_until_ready(ours())
        jax.block_until_ready(pure())
    best_ours = best_pure = float("inf")
    for _ in range(repeats):
        best_pure = min(best_pure, min_time(pure, number))
        best_ours = min(best_ours, min_time(ours, number))
    jax.block_until_ready((ours(), pure()))
    return best_ours, best_pure


def profile(ours: Callable[[], Any], calls: int, top: int) -> None:
    """cProfile ``calls`` calls of ``ours``; print the ``top`` functions by own time, per call."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        ours()
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((tottime, ncalls, cumtime, f"{os.path.basename(filename)}:{line}({name})"))
    rows.sort(reverse=True)
    print(f"  {'calls/call':>10} {'own us/call':>11} {'cum us/call':>11}  function")
    for tottime, ncalls, cumtime, where in rows[:top]:
        print(f"  {ncalls / calls:>10.2f} {tottime / calls * 1e6:>11.2f} {cumtime / calls * 1e6:>11.2f}  {where}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="", help="only cases whose label contains this substring")
    parser.add_argument("--calls", type=int, default=10_000, help="calls under cProfile (default 10000)")
    parser.add_argument("--number", type=int, default=200, help="calls per timeit sample (default 200)")
    parser.add_argument("--repeats", type=int, default=15, help="timeit samples per side (default 15)")
    parser.add_argument("--top", type=int, default=15, help="functions shown per profile (default 15)")
    parser.add_argument("--no-profile", action="store_true", help="timings only")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}; min over {args.repeats} x {args.number} calls, ours and pure interleaved\n")
    for label, make in CASES:
        if args.rows not in label:
            continue
        built = make()
        if built is None:
            print(f"{label}: skipped (state_nn not installed)")
            continue
        ours, pure = built
        number = max(10, args.number // 10) if "1000" in label else args.number
        t_ours, t_pure = ab(ours, pure, number, args.repeats)
        print(
            f"{label:<28} ours {t_ours * 1e6:8.1f} us   pure {t_pure * 1e6:8.1f} us   "
            f"overhead {(t_ours - t_pure) * 1e6:7.1f} us   ratio {t_ours / t_pure:5.2f}x"
        )
        if not args.no_profile:
            calls = max(100, args.calls // 20) if "1000" in label else args.calls
            profile(ours, calls, args.top)
            jax.block_until_ready(ours())
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
