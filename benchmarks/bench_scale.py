"""Benchmark: one data-parallel training step on 8 devices against hand-written JAX.

The MLP of ``examples/data_parallel_mlp.py`` (wider here) takes one SGD step on
a batch sharded over a 1-D mesh of every device, parameters replicated (the
hand-written steps donate the old parameters):

* ``shard_map`` + nested ``grad`` against ``jax.shard_map`` + ``jax.grad``;
* ``jit`` on the sharded batch against ``jax.jit`` with the same in/out shardings.

    python benchmarks/bench_scale.py           # full repetitions
    python benchmarks/bench_scale.py --quick   # fewer repetitions

``rows(quick=False)`` returns the measurements as dicts, ``run(quick=False)`` the
formatted table (the format of ``bench_loops``).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

if jax.config.jax_num_cpu_devices != 8:  # bench.py may have set it already
    jax.config.update("jax_num_cpu_devices", 8)

import bench_loops
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "data_parallel_mlp.py"
SIZES = (32, 256, 256, 1)
BATCH = 2048


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("data_parallel_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _setup() -> tuple[Any, Any, list, jax.Array, jax.Array]:
    example = _example()
    mesh = example.make_mesh()
    rng = np.random.default_rng(0)
    weights = [
        (rng.normal(size=(n, m)).astype(np.float32) / np.sqrt(n), np.zeros(m, np.float32))
        for n, m in itertools.pairwise(SIZES)
    ]
    x = rng.normal(size=(BATCH, SIZES[0])).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    return example, mesh, weights, *example.shard_batch(mesh, x, y)


def make_case(kind: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``(ours, reference)``: zero-argument callables taking one training step each."""
    example, mesh, weights, x, y = _setup()
    model = example.MLP(weights)
    if kind == "shard_map":
        step, pure = example.shard_map_step(model, mesh), example.pure_shard_map_step(mesh)
    else:
        step, pure = example.jit_step(model), example.pure_jit_step(mesh)
    box = [jax.device_put([tuple(map(jnp.asarray, wb)) for wb in weights], NamedSharding(mesh, P()))]

    def reference() -> Any:
        box[0], loss = pure(box[0], x, y)
        return loss

    return (lambda: step(x, y)), reference


def _time(fn: Callable[[], Any], calls: int) -> float:
    jax.block_until_ready(fn())
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / calls


def rows(quick: bool = False) -> list[dict[str, Any]]:
    """Every measurement as ``{case, ours_ms, reference_ms, ratio, target}``."""
    calls, repeats = (5, 3) if quick else (20, 7)
    result = []
    for kind, label in (("shard_map", "shard_map(grad)"), ("jit", "jit, sharded batch")):
        ours, reference = make_case(kind)
        t_ours, t_ref = [], []
        for _ in range(repeats):
            t_ref.append(_time(reference, calls))
            t_ours.append(_time(ours, calls))
        o, r = statistics.median(t_ours), statistics.median(t_ref)
        case = f"DP step {jax.device_count()} dev, {label}"
        result.append(dict(case=case, ours_ms=o * 1e3, reference_ms=r * 1e3, ratio=o / r, target=1.2))
    return result


def run(quick: bool = False) -> str:
    """The data-parallel rows as a table."""
    return bench_loops.format_rows(rows(quick))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}, {jax.device_count()} device(s); MLP {SIZES}, batch {BATCH}\n")
    print(run(args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
