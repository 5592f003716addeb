"""Benchmark: our state-aware transforms against hand-written pure JAX, in one run.

Every case times an eager call of ours (state gathered, one compiled program,
results written back) against the physical limit: a hand-written
``jax.jit(jax.vmap(pure))`` (or ``jax.pmap`` / ``jax.jit(jax.shard_map)``) called
with the state values as arguments and the new values threaded back by hand.
The table reports the median time per call of each and their ratio.

    hatch run bench              # all cases
    hatch run bench --quick      # fewer repetitions
    hatch run bench --rows Map   # only the cases whose label contains "Map"
    hatch run bench-compare      # also time brainstate and flax.nnx (the `compare` env, newest end)

Run it on an otherwise idle machine; ratios are what to compare across machines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import state_core as sc  # noqa: E402
import state_random as sr  # noqa: E402
from state_core.filter import OfType  # noqa: E402
from state_transform import jit, pmap2, shard_map, vmap2  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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

    pure_c = jax.jit(jax.vmap(pure, in_axes=(0, 0), out_axes=(0, 0)))
    box = {"values": [s.value for s in states]}

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

    pure_c = jax.jit(pure)
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
    pure_c = jax.pmap(lambda v, d: (v * 0.5 + d, (v * 0.5 + d).sum()), axis_name="d")
    box = {"w": jnp.ones((n, 4))}

    def run_pure():
        box["w"], out = pure_c(box["w"], delta)
        return out

    return (lambda: ours(delta)), run_pure


def case_shard_map() -> tuple[Callable, Callable]:
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

    def pure(b, d):
        return b + d, jax.lax.psum(jnp.sum(d, keepdims=True), "x")

    pure_c = jax.jit(jax.shard_map(pure, mesh=mesh, in_specs=(P("x"), P("x")), out_specs=(P("x"), P())))
    box = {"b": jax.device_put(jnp.zeros(jax.device_count() * 4), sharded)}

    def run_pure():
        box["b"], out = pure_c(box["b"], data)
        return out

    return (lambda: ours(data)), run_pure


def case_jit_vmap() -> tuple[Callable, Callable]:
    states = [sc.ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(10)]
    x = jnp.ones((BATCH, 4))

    def step(inp):
        for s in states:
            s.value = s.value * 0.5 + inp
        return states[0].value

    ours = jit(vmap2(step, state_in_axes={0: OfType(sc.ShortTermState)}, state_out_axes={0: OfType(sc.ShortTermState)}))

    def pure(values, inp):
        new = [v * 0.5 + inp for v in values]
        return new, new[0]

    pure_c = jax.jit(jax.vmap(pure))
    box = {"v": [s.value for s in states]}

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
    pure_c = jax.jit(pure_step)
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

    pure_c = jax.jit(jax.vmap(pure))
    box = {"v": jnp.zeros((members, 4)), "w": jnp.ones((members, 4))}

    def run_pure():
        box["v"], out = pure_c(box["v"], box["w"], x)
        return out

    return (lambda: ens.update(x)), run_pure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (noisier)")
    parser.add_argument("--compare", action="store_true", help="also time brainstate / flax.nnx if installed")
    parser.add_argument("--skip-loops", action="store_true", help="leave out the (slower) simulation-loop cases")
    parser.add_argument(
        "--rows",
        default="",
        metavar="SUBSTRING",
        help="only the cases whose label contains SUBSTRING (e.g. --rows vmap2); implies --skip-loops",
    )
    args = parser.parse_args(argv)
    calls, repeats = (50, 5) if args.quick else (200, 9)

    cases: list[tuple[str, Callable[[], Any]]] = [
        ("vmap2, 1 state", lambda: case_vmap_states(1)),
        ("vmap2, 100 states", lambda: case_vmap_states(100)),
        ("vmap2, 1000 states", lambda: case_vmap_states(1000)),
        ("vmap2 + random draws", case_vmap_random),
        (f"pmap2, {jax.local_device_count()} devices", case_pmap),
        (f"shard_map, {jax.device_count()} devices (psum)", case_shard_map),
        ("jit(vmap2), 10 states", case_jit_vmap),
        ("vmap2, 2 alternating sigs", lambda: case_alternating("vmap2", 2)),
        ("vmap2, 8 alternating sigs", lambda: case_alternating("vmap2", 8)),
        ("jit, 2 alternating sigs", lambda: case_alternating("jit", 2)),
        ("jit, 8 alternating sigs", lambda: case_alternating("jit", 8)),
        ("Map.update, 8 members", lambda: case_map_update(8)),
        ("Map.update, 1000 members", lambda: case_map_update(1000)),
        *bench_init.init_cases(),
    ]
    print(f"jax {jax.__version__}, {jax.device_count()} CPU devices, {calls} calls x {repeats} repeats\n")
    header = f"{'case':<28} {'ours (us)':>11} {'pure JAX (us)':>14} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    worst = 0.0
    for label, make in cases:
        if args.rows not in label:
            continue
        built = make()
        if built is None:
            print(f"{label:<28} {'skipped (state_nn not installed)':>34}")
            continue
        ours, pure = built
        n = max(5, calls // 10) if "1000" in label else calls
        t_ours, t_pure = interleaved(ours, pure, n, repeats, sync="shard_map" in label)
        ratio = t_ours / t_pure
        worst = max(worst, ratio)
        print(f"{label:<28} {t_ours * 1e6:>11.1f} {t_pure * 1e6:>14.1f} {ratio:>6.2f}x")
    print(f"\nworst ratio: {worst:.2f}x (target <= 1.5x; Map.init_all_states <= 3x)")
    if not args.skip_loops and not args.rows:
        print("\nSimulation loops (state_transform.for_loop) against a hand-written jax.lax.scan:\n")
        print(bench_loops.format_rows(bench_loops.rows(args.quick)))
        print("(progress-bar row: the reference is the same loop without a bar)")
    if not args.rows:
        print("\nTransformations built inline in every step (a new object per call):\n")
        print(bench_inline.format_rows(bench_inline.rows(args.quick)))
        print("\nIn-place updates (written States donated when nothing else holds them):\n")
        print(bench_inplace.format_rows(bench_inplace.memory_row(args.quick), bench_inplace.training_row(args.quick)))
    print("\nData-parallel training step with sharding-annotated states (jit) against jax.jit:\n")
    print(bench_sharding.format_rows(bench_sharding.run(args.quick)))
    print("\nData-parallel training step (batch sharded, parameters replicated) against pure JAX:\n")
    print(bench_scale.run(args.quick))
    print(f"\nMap with more members than devices, against jax.pmap(jax.vmap(step)):\n\n{bench_map.run(args.quick)}")
    if args.compare:
        _compare_others(calls, repeats)
    return 0


def _compare_others(calls: int, repeats: int) -> None:
    import compare  # beside this file (on sys.path, see the imports above)

    compare.run(time_per_call, max(10, calls // 4), repeats)


if __name__ == "__main__":
    sys.exit(main())
