"""Benchmark: our state-aware transforms against hand-written pure JAX, in one run.

Every steady case times an eager call of ours (state gathered, one compiled
program, results written back) against the physical limit: a hand-written
``jax.jit(jax.vmap(pure))`` (or ``jax.pmap`` / ``jax.jit(jax.shard_map)``) called
with the state values as arguments, the written ones donated (``donate_argnums``:
their old values are dead), and the new values threaded back by hand.

The main table gives ratios only: each row's time over its reference's time in
the same run. Steady rows are cached calls against the compiled pure-JAX program;
the one-shot ``Map.init_all_states`` rows are against an eager ``jax.vmap`` of the
init; the first-call rows (trace + compile of a new signature) against JAX's own
first call of ``jax.jit(jax.vmap(pure), donate_argnums=0)`` (``bench_first_call.py``); the memory row
against ``jax.jit(step, donate_argnums=0)`` (time and peak memory); the inline-grad
row against an eager ``jax.grad`` step. With ``--compare`` brainstate and flax.nnx
run the same cases in the same run (``compare.py``), as their users write them.

    hatch run bench              # all cases
    hatch run bench --quick      # fewer repetitions
    hatch run bench --rows Map   # only the cases whose label contains "Map"
    hatch run bench --profile    # under each row, where ours spends its time
    hatch run bench-compare      # also time brainstate and flax.nnx (the `compare` env, newest end)

``--profile`` adds a line under each steady row: ours minus pure JAX in
microseconds per call, then cProfile's time per call of the pure-JAX call and of
ours split by function (own time); under each first-call row, the phases of both
first calls as fractions of JAX's own (see ``bench_first_call.py``).

Run it on an otherwise idle machine; ratios are what to compare across machines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import state_core as sc  # noqa: E402
import state_random as sr  # noqa: E402
from state_core.filter import OfType  # noqa: E402
from state_transform import jit, pmap2, shard_map, vmap2  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_first_call  # noqa: E402
import bench_init  # noqa: E402
import bench_inline  # noqa: E402
import bench_inplace  # noqa: E402
import bench_loops  # noqa: E402
import bench_map  # noqa: E402
import bench_scale  # noqa: E402
import bench_sharding  # noqa: E402

BATCH = 16


def _block(x: Any) -> Any:
    return jax.block_until_ready(x)


def time_per_call(fn: Callable[[], Any], calls: int, repeats: int, sync: bool = False) -> float:
    """Median over ``repeats`` of the mean seconds per call over ``calls`` calls.

    ``sync`` waits for every call's result: XLA's CPU collectives can deadlock when
    many programs with collectives are in flight on a 2-core machine.
    """
    _block(fn())
    _block(fn())
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            out = fn()
            if sync:
                _block(out)
        _block(out)
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def interleaved(
    ours: Callable[[], Any], pure: Callable[[], Any], calls: int, repeats: int, sync: bool = False
) -> tuple[float, float]:
    """Alternate the two so both see the same machine load."""
    t_ours, t_pure = [], []
    for _ in range(repeats):
        t_pure.append(time_per_call(pure, calls, 1, sync))
        t_ours.append(time_per_call(ours, calls, 1, sync))
    return statistics.median(t_ours), statistics.median(t_pure)


# ---------------------------------------------------------------------- cases
def case_vmap_states(n_states: int) -> tuple[Callable, Callable]:
    states = [sc.ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(n_states)]
    x = jnp.ones((BATCH, 4))

    def step(inp):
        total = 0.0
        for s in states:
            s.value = s.value * 0.5 + inp
            total = total + s.value
        return total

    ours = vmap2(step, state_in_axes={0: OfType(sc.ShortTermState)}, state_out_axes={0: OfType(sc.ShortTermState)})

    def pure(values, inp):
        new = []
        total = 0.0
        for v in values:
            v = v * 0.5 + inp
            new.append(v)
            total = total + v
        return new, total

    pure_c = jax.jit(jax.vmap(pure, in_axes=(0, 0), out_axes=(0, 0)), donate_argnums=0)
    box = {"values": [s.value + 0.0 for s in states]}

    def run_pure():
        box["values"], out = pure_c(box["values"], x)
        return out

    return (lambda: ours(x)), run_pure


def case_vmap_random() -> tuple[Callable, Callable]:
    sr.seed(0)
    scales = jnp.linspace(1.0, 2.0, BATCH)
    ours = vmap2(lambda s: sr.normal(0.0, s, size=(4,)))

    def pure(key, s):
        parts = jax.random.split(key, BATCH + 1)
        lanes = parts[1:]

        def lane(k, sc_):
            kk = jax.random.split(k, 2)
            return jax.random.normal(kk[1], (4,)) * sc_

        return jax.vmap(lane)(lanes, s), jax.random.split(parts[0], 2)[1]

    pure_c = jax.jit(pure, donate_argnums=0)
    box = {"key": jax.random.key(0)}

    def run_pure():
        out, box["key"] = pure_c(box["key"], scales)
        return out

    return (lambda: ours(scales)), run_pure


def case_pmap() -> tuple[Callable, Callable]:
    n = jax.local_device_count()
    w = sc.ParamState(jnp.ones((n, 4)))

    def step(delta):
        w.value = w.value * 0.5 + delta
        return w.value.sum()

    ours = pmap2(
        step, axis_name="d", state_in_axes={0: OfType(sc.ParamState)}, state_out_axes={0: OfType(sc.ParamState)}
    )
    delta = jnp.ones((n, 4))
    pure_c = jax.pmap(lambda v, d: (v * 0.5 + d, (v * 0.5 + d).sum()), axis_name="d", donate_argnums=0)
    box = {"w": jnp.ones((n, 4))}

    def run_pure():
        box["w"], out = pure_c(box["w"], delta)
        return out

    return (lambda: ours(delta)), run_pure


def case_shard_map(jitted: bool = False) -> tuple[Callable, Callable]:
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    sharded = jax.sharding.NamedSharding(mesh, P("x"))
    buffer = sc.State(jax.device_put(jnp.zeros(jax.device_count() * 4), sharded))
    data = jax.device_put(jnp.ones(jax.device_count() * 4), sharded)

    def accumulate(d):
        buffer.value = buffer.value + d
        return jax.lax.psum(jnp.sum(d, keepdims=True), "x")

    ours = shard_map(
        accumulate,
        mesh,
        in_specs=(P("x"),),
        out_specs=P(),
        state_in_specs={buffer: P("x")},
        state_out_specs={buffer: P("x")},
    )
    if jitted:
        ours = jit(ours)

    def pure(b, d):
        return b + d, jax.lax.psum(jnp.sum(d, keepdims=True), "x")

    pure_c = jax.jit(
        jax.shard_map(pure, mesh=mesh, in_specs=(P("x"), P("x")), out_specs=(P("x"), P())), donate_argnums=0
    )
    box = {"b": jax.device_put(jnp.zeros(jax.device_count() * 4), sharded)}

    def run_pure():
        box["b"], out = pure_c(box["b"], data)
        return out

    return (lambda: ours(data)), run_pure


def case_jit_vmap(n_states: int = 10) -> tuple[Callable, Callable]:
    states = [sc.ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(n_states)]
    x = jnp.ones((BATCH, 4))

    def step(inp):
        for s in states:
            s.value = s.value * 0.5 + inp
        return states[0].value

    ours = jit(vmap2(step, state_in_axes={0: OfType(sc.ShortTermState)}, state_out_axes={0: OfType(sc.ShortTermState)}))

    def pure(values, inp):
        new = [v * 0.5 + inp for v in values]
        return new, new[0]

    pure_c = jax.jit(jax.vmap(pure), donate_argnums=0)
    box = {"v": [s.value + 0.0 for s in states]}

    def run_pure():
        box["v"], out = pure_c(box["v"], x)
        return out

    return (lambda: ours(x)), run_pure


def case_alternating(kind: str, n_signatures: int) -> tuple[Callable, Callable]:
    """Cycle through ``n_signatures`` cached batch sizes (train batch / eval batch / short last batch)."""
    w = sc.ParamState(jnp.linspace(0.0, 1.0, 4))
    h = sc.ShortTermState(jnp.zeros(4))
    batches = [jnp.ones((BATCH + i, 4)) for i in range(n_signatures)]

    def step(x):
        h.value = h.value * 0.5 + x.mean(0)
        return (x * w.value).sum(-1) + h.value.sum()

    def pure_step(wv, hv, x):
        new_h = hv * 0.5 + x.mean(0)
        return new_h, (x * wv).sum(-1) + new_h.sum()

    if kind == "vmap2":
        ours_fn = vmap2(lambda x: (x * w.value).sum(-1), in_axes=0)
        pure_c = jax.jit(jax.vmap(lambda wv, x: (x * wv).sum(-1), in_axes=(None, 0)))
        box = {"i": 0}

        def run_ours():
            box["i"] = (box["i"] + 1) % n_signatures
            return ours_fn(batches[box["i"]])

        def run_pure():
            box["i"] = (box["i"] + 1) % n_signatures
            return pure_c(w.value, batches[box["i"]])

        return run_ours, run_pure
    ours_fn = jit(step)
    pure_c = jax.jit(pure_step, donate_argnums=1)
    box = {"i": 0, "h": jnp.zeros(4)}

    def run_ours():
        box["i"] = (box["i"] + 1) % n_signatures
        return ours_fn(batches[box["i"]])

    def run_pure():
        box["i"] = (box["i"] + 1) % n_signatures
        box["h"], out = pure_c(w.value, box["h"], batches[box["i"]])
        return out

    return run_ours, run_pure


def case_map_update(members: int) -> tuple[Callable, Callable] | None:
    try:
        import state_nn
    except ImportError:
        return None

    class Cell(state_nn.Module):
        def init_state(self):
            self.v = sc.ShortTermState(jnp.zeros(4))
            self.w = sc.ParamState(jnp.ones(4))

        def update(self, x):
            self.v.value = self.v.value * 0.9 + x * self.w.value
            return self.v.value

    ens = state_nn.Map(Cell(), init_map_size=members)
    ens.init_all_states()
    x = jnp.ones((members, 4))

    def pure(v, w, inp):
        nv = v * 0.9 + inp * w
        return nv, nv

    pure_c = jax.jit(jax.vmap(pure), donate_argnums=0)
    box = {"v": jnp.zeros((members, 4)), "w": jnp.ones((members, 4))}

    def run_pure():
        box["v"], out = pure_c(box["v"], box["w"], x)
        return out

    return (lambda: ens.update(x)), run_pure


# ---------------------------------------------------------------------- the main table
PEERS = ("brainstate", "flax.nnx")
STEADY_TARGET, INIT_TARGET, FIRST_CALL_TARGET = 1.2, 2.0, 1.05
_OUR_PACKAGES = ("state_core", "state_transform", "state_nn", "state_random")


class Row(NamedTuple):
    """One row of the main table."""

    label: str
    kind: str  # "steady" (a cached call) or "init" (a one-shot initialisation)
    make: Callable[[], Any]  # -> (ours, pure) zero-argument callables, or None (state_nn missing)
    make_peers: Callable[[], dict[str, Callable[[], Any]]]  # -> {library: callable} (compare.py)
    reference: str  # what pure JAX runs


def rows() -> list[Row]:
    """Every row of the main table but the first calls, the memory row and the inline grad."""
    import compare  # beside this file (on sys.path, see the imports above)

    vmapped = "jax.jit(jax.vmap(pure))"

    def plural(n: int, what: str) -> str:
        return f"{n} {what}{'s' if n > 1 else ''}"

    def states(n: int) -> Row:
        return Row(
            f"vmap2, {plural(n, 'state')}",
            "steady",
            lambda: case_vmap_states(n),
            lambda: compare.peers_vmap_states(n),
            vmapped,
        )

    def jit_vmap(n: int) -> Row:
        return Row(
            f"jit(vmap2), {plural(n, 'state')}",
            "steady",
            lambda: case_jit_vmap(n),
            lambda: compare.peers_jit_vmap(n),
            vmapped,
        )

    def alternating(kind: str, n: int) -> Row:
        return Row(
            f"{kind}, {n} alternating sigs",
            "steady",
            lambda: case_alternating(kind, n),
            lambda: compare.peers_alternating(kind, n),
            vmapped if kind == "vmap2" else "jax.jit(pure)",
        )

    def map_update(n: int) -> Row:
        return Row(
            f"Map.update, {n} members",
            "steady",
            lambda: case_map_update(n),
            lambda: compare.peers_map_update(n),
            vmapped,
        )

    def map_init(n: int) -> Row:
        return Row(
            f"Map.init_all_states, {n} members",
            "init",
            lambda: bench_init.case_map_init(n),
            lambda: compare.peers_map_init(n),
            "eager jax.vmap of the init",
        )

    n_dev = jax.device_count()
    sharded = "jax.jit(jax.shard_map(pure))"
    return [
        states(1),
        states(10),
        states(100),
        states(1000),
        jit_vmap(1),
        jit_vmap(10),
        Row(
            "vmap2 + random draws (key split per lane)",
            "steady",
            case_vmap_random,
            compare.peers_vmap_random,
            "jax.jit(pure), keys split by hand",
        ),
        alternating("vmap2", 2),
        alternating("vmap2", 8),
        alternating("jit", 2),
        alternating("jit", 8),
        map_update(8),
        map_update(1000),
        Row(f"pmap2, {jax.local_device_count()} devices", "steady", case_pmap, compare.peers_pmap, "jax.pmap(pure)"),
        Row(
            f"shard_map, {n_dev} devices (psum)",
            "steady",
            case_shard_map,
            lambda: compare.peers_shard_map(False),
            sharded,
        ),
        Row(
            f"jit(shard_map), {n_dev} devices",
            "steady",
            lambda: case_shard_map(True),
            lambda: compare.peers_shard_map(True),
            sharded,
        ),
        map_init(8),
        map_init(1000),
    ]


def _calls_within(fn: Callable[[], Any], calls: int, budget: float) -> int:
    """How many calls of ``fn`` fit in ``budget`` seconds (1 to ``calls``), from one timed call."""
    _block(fn())
    start = time.perf_counter()
    _block(fn())
    one = max(time.perf_counter() - start, 1e-9)
    return max(1, min(calls, int(budget / one)))


def measure_row(
    ours: Callable[[], Any],
    pure: Callable[[], Any],
    peers: dict[str, Callable[[], Any]],
    calls: int,
    repeats: int,
    sync: bool,
) -> tuple[float, float, dict[str, float]]:
    """Median seconds per call of ours, pure JAX and each peer, all interleaved (same machine load).

    A peer that is much slower than pure JAX makes fewer calls per sample (about the
    time of ours' sample), so a slow library does not stretch the run.
    """
    t_ours, t_pure = [], []
    t_peers: dict[str, list[float]] = {name: [] for name in peers}
    peer_calls = {}
    if peers:
        budget = time_per_call(pure, calls, 1, sync) * calls * 2
        peer_calls = {name: _calls_within(fn, calls, budget) for name, fn in peers.items()}
    for _ in range(repeats):
        t_pure.append(time_per_call(pure, calls, 1, sync))
        t_ours.append(time_per_call(ours, calls, 1, sync))
        for name, fn in peers.items():
            t_peers[name].append(time_per_call(fn, peer_calls[name], 1, sync))
    return (
        statistics.median(t_ours),
        statistics.median(t_pure),
        {name: statistics.median(ts) for name, ts in t_peers.items()},
    )


def _profiled(fn: Callable[[], Any], calls: int) -> dict[tuple[str, int, str], tuple[Any, ...]]:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        out = fn()
    profiler.disable()
    _block(out)
    return pstats.Stats(profiler).stats  # type: ignore[attr-defined,no-any-return]


def profile_line(ours: Callable[[], Any], pure: Callable[[], Any], extra: float, calls: int, top: int = 4) -> str:
    """Where ours spends its time per call, next to the pure-JAX call, under cProfile.

    ``extra`` is ours minus pure JAX (seconds per call, from the timed run). The
    profile gives, per call, the whole pure-JAX call and ours split by function
    (own time): our functions by name, then the rest (JAX's Python and builtins).
    The compiled call itself is C++, so its time counts in the Python function that
    makes it (``run`` for ours). cProfile slows Python down: read shares, not
    absolute microseconds.
    """
    pure_total = sum(row[2] for row in _profiled(pure, calls).values()) / calls
    stats = _profiled(ours, calls)
    total = sum(row[2] for row in stats.values()) / calls
    mine = []
    for (filename, _, name), row in stats.items():
        parts = filename.replace("\\", "/").split("/")
        if any(p in _OUR_PACKAGES for p in parts):
            mine.append((row[2] / calls, name))
    mine.sort(reverse=True)
    shown = mine[:top]
    rest = total - sum(t for t, _ in shown)
    where = ", ".join(f"{name} {t * 1e6:.1f}" for t, name in shown)
    return (
        f"{extra * 1e6:+.1f} us/call vs pure JAX; cProfile us/call: pure {pure_total * 1e6:.1f} | "
        f"ours {total * 1e6:.1f} = {where}, other {rest * 1e6:.1f}"
    )


def _cell(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _print_row(label: str, ours: str, peers: dict[str, str], reference: str, show_peers: bool) -> None:
    cells = f"{label:<42} {ours:>12}"
    if show_peers:
        cells += "".join(f" {peers.get(name, 'n/a'):>12}" for name in PEERS)
    print(f"{cells}   {reference}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (noisier)")
    parser.add_argument("--compare", action="store_true", help="also time brainstate / flax.nnx if installed")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="under each row, where ours spends its time (cProfile per call; phases of the first calls)",
    )
    parser.add_argument("--skip-loops", action="store_true", help="leave out the (slower) simulation-loop cases")
    parser.add_argument(
        "--rows",
        default="",
        metavar="SUBSTRING",
        help="only the cases whose label contains SUBSTRING (e.g. --rows vmap2); implies --skip-loops",
    )
    args = parser.parse_args(argv)
    calls, repeats = (50, 5) if args.quick else (200, 9)
    import compare

    peers_found = compare.installed() if args.compare else []
    show_peers = args.compare
    print(f"jax {jax.__version__}, {jax.device_count()} CPU devices, {calls} calls x {repeats} repeats")
    if args.compare:
        print(f"peers in the same run: {', '.join(peers_found) or 'none installed (hatch run bench-compare)'}")
    print("ratio = time / the reference's time in the same run (the reference is hand-written pure JAX)\n")
    header = f"{'case':<42} {'ours':>12}"
    if show_peers:
        header += "".join(f" {name:>12}" for name in PEERS)
    print(header + "   reference")
    print("-" * (len(header) + 30))
    worst = {"steady": 0.0, "init": 0.0, "first call": 0.0}
    for label, kind, make, make_peers, reference in rows():
        if args.rows not in label:
            continue
        built = make()
        if built is None:
            print(f"{label:<42} {'skipped (state_nn not installed)':>34}")
            continue
        ours, pure = built
        peers = make_peers() if show_peers else {}
        if kind == "init":
            n, r = max(2, calls // 25), max(3, repeats // 2)
        else:
            n, r = (max(5, calls // 10) if "1000" in label else calls), repeats
        sync = "shard_map" in label
        t_ours, t_pure, t_peers = measure_row(ours, pure, peers, n, r, sync)
        ratio = t_ours / t_pure
        worst[kind] = max(worst[kind], ratio)
        _print_row(label, _cell(ratio), {k: _cell(v / t_pure) for k, v in t_peers.items()}, reference, show_peers)
        if args.profile:
            print(f"    {profile_line(ours, pure, t_ours - t_pure, max(n, 20))}")
    for n_states in bench_first_call.STATE_COUNTS:
        if args.rows not in bench_first_call.label_for(n_states):
            continue
        row = bench_first_call.measure(n_states, bench_first_call.repeats_for(n_states, args.quick), args.compare)
        worst["first call"] = max(worst["first call"], row["ratio"])
        peer_cells = {k: _cell(v) for k, v in row["peers"].items()}
        _print_row(bench_first_call.label(row), _cell(row["ratio"]), peer_cells, "JAX's own first call", show_peers)
        if args.profile:
            print(f"    {bench_first_call.phase_line(row)}")
    vs_brainstate = None
    if args.rows in bench_first_call.eager_label(1):
        row = bench_first_call.measure_eager(1, bench_first_call.repeats_for(1, args.quick), args.compare)
        peer_cells = {k: _cell(v) for k, v in row["peers"].items()}
        _print_row(bench_first_call.eager_label(1), _cell(row["ratio"]), peer_cells, "JAX's own first call", show_peers)
        vs_brainstate = row["vs_brainstate"]
    memory = inline = None
    if not args.rows:
        memory = bench_inplace.memory_row(args.quick, peers=args.compare)
        limit = next(m for m in memory if m["case"] == "pure JAX, donated")

        def memory_cell(variant: str) -> str:
            found = [m for m in memory if m["case"] == variant]
            if not found:
                return "n/a"
            m = found[0]
            peak = (bench_inplace.STATE_MB + m["extra_mb"]) / (bench_inplace.STATE_MB + limit["extra_mb"])
            return f"{m['seconds'] / limit['seconds']:.2f}x/{peak:.2f}x"

        _print_row(
            f"memory-bound step, {bench_inplace.STATE_MB} MB (time/peak)",
            memory_cell("ours"),
            {name: memory_cell(name) for name in PEERS},
            "jax.jit(step, donate_argnums=0)",
            show_peers,
        )
        inline = bench_inline.rows(args.quick, peers=args.compare)
        grad_row = inline[0]
        _print_row(
            "inline grad(...), eager SGD step",
            _cell(grad_row["ratio"]),
            {k: _cell(v / grad_row["pure"]) for k, v in grad_row.get("peers", {}).items()},
            "eager jax.grad step",
            show_peers,
        )
    print(
        f"\nworst: steady {worst['steady']:.2f}x (target <= {STEADY_TARGET}x), "
        f"init {worst['init']:.2f}x (target <= {INIT_TARGET}x), "
        f"first call {worst['first call']:.2f}x (target <= {FIRST_CALL_TARGET}x)"
    )
    if vs_brainstate is not None:
        print(f"op-by-op first call, 1 state, over brainstate's eager first call: {vs_brainstate:.2f}x (target <= 2x)")
    if not args.skip_loops and not args.rows:
        print("\nSimulation loops (state_transform.for_loop) against a hand-written jax.lax.scan:\n")
        print(bench_loops.format_rows(bench_loops.rows(args.quick)))
        print("(progress-bar row: the reference is the same loop without a bar)")
    if not args.rows:
        assert inline is not None and memory is not None
        print("\nTransformations built inline in every step (a new object per call):\n")
        print(bench_inline.format_rows(inline))
        print("\nIn-place updates (written States donated when nothing else holds them):\n")
        training = bench_inplace.training_row(args.quick)
        print(bench_inplace.format_rows(memory, training))
        print("\nData-parallel training step with sharding-annotated states (jit) against jax.jit:\n")
        print(bench_sharding.format_rows(bench_sharding.run(args.quick)))
        print("\nData-parallel training step (batch sharded, parameters replicated) against pure JAX:\n")
        print(bench_scale.run(args.quick))
        print(f"\nMap with more members than devices, against jax.pmap(jax.vmap(step)):\n\n{bench_map.run(args.quick)}")
        if args.compare:
            compare.run(time_per_call, max(10, calls // 4), repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
