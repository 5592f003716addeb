"""Benchmark: a data-parallel training step via annotated ``jit`` against pure JAX.

An MLP whose ParamStates are annotated ``P()`` (replicated) is trained on a batch
split over the 8 devices of a ``('data',)`` mesh: ``state_transform.jit`` +
``grad``, with the shardings coming from the annotations. The reference is the
same step written by hand as a ``jax.jit`` with the same ``in_shardings`` /
``out_shardings``, the parameters threaded through by hand (and donated). Every call waits
for its result (XLA's CPU collectives can deadlock with many programs in flight
on a small machine). Goal: ratio <= 1.2x.

    python benchmarks/bench_sharding.py           # full repetitions
    python benchmarks/bench_sharding.py --quick   # fewer repetitions

``run(quick=False)`` returns the measurements as dicts for the main benchmark table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax

if __name__ == "__main__":  # run alone: expose 8 CPU devices before the backend starts
    jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from state_core import ParamState
from state_transform import grad, jit

D_IN, D_HIDDEN, BATCH, LEARNING_RATE = 32, 64, 256, 0.01


def _init() -> dict[str, jax.Array]:
    k1, k2 = jax.random.split(jax.random.key(0))
    return {
        "w1": jax.random.normal(k1, (D_IN, D_HIDDEN)) * 0.1,
        "b1": jnp.zeros(D_HIDDEN),
        "w2": jax.random.normal(k2, (D_HIDDEN, 1)) * 0.1,
    }


def _loss(params: dict, x: jax.Array, y: jax.Array) -> jax.Array:
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((hidden @ params["w2"] - y) ** 2)


def make_data_parallel_step() -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``(ours, reference)``: one data-parallel training step each, on all devices."""
    mesh = jax.make_mesh((jax.device_count(),), ("data",), axis_types=(AxisType.Auto,))
    batch = NamedSharding(mesh, P("data"))
    x = jax.device_put(jnp.linspace(-1.0, 1.0, BATCH * D_IN).reshape(BATCH, D_IN), batch)
    y = jax.device_put(jnp.sin(jnp.arange(BATCH, dtype=jnp.float32)).reshape(BATCH, 1), batch)
    init = _init()

    params = {name: ParamState(value, name=name, sharding=NamedSharding(mesh, P())) for name, value in init.items()}

    def loss_fn(x, y):
        return _loss({k: s.value for k, s in params.items()}, x, y)

    @jit
    def ours(x, y):
        grads, loss = grad(loss_fn, grad_states=params, return_value=True)(x, y)
        for name, g in grads.items():
            params[name].value = params[name].value - LEARNING_RATE * g
        return loss

    replicated = NamedSharding(mesh, P())
    shardings = {name: replicated for name in init}

    def pure_step(p, x, y):
        loss, grads = jax.value_and_grad(_loss)(p, x, y)
        return {k: p[k] - LEARNING_RATE * grads[k] for k in p}, loss

    pure_c = jax.jit(
        pure_step, in_shardings=(shardings, batch, batch), out_shardings=(shardings, replicated), donate_argnums=0
    )
    # (copies: ``jax.device_put`` onto a mesh shares the device-0 buffer with its input, and
    # the states' own placed values share it too; donating one would delete the other's)
    box = {"p": jax.device_put(jax.tree.map(jnp.copy, init), shardings)}

    def reference():
        box["p"], loss = pure_c(box["p"], x, y)
        return loss

    return (lambda: ours(x, y)), reference


def _time_per_call(fn: Callable[[], Any], calls: int) -> float:
    jax.block_until_ready(fn())
    start = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn())
    return (time.perf_counter() - start) / calls


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Every measurement as ``{case, ours_us, reference_us, ratio, target}``."""
    calls, repeats = (50, 5) if quick else (200, 9)
    ours, reference = make_data_parallel_step()
    t_ours, t_ref = [], []
    for _ in range(repeats):  # alternate, so both see the same machine load
        t_ref.append(_time_per_call(reference, calls))
        t_ours.append(_time_per_call(ours, calls))
    mine, theirs = statistics.median(t_ours), statistics.median(t_ref)
    case = f"annotated jit DP step, {jax.device_count()} dev"
    return [dict(case=case, ours_us=mine * 1e6, reference_us=theirs * 1e6, ratio=mine / theirs, target=1.2)]


def format_rows(table: list[dict[str, Any]]) -> str:
    lines = [f"{'case':<36} {'ours (us)':>10} {'hand-written (us)':>18} {'ratio':>7} {'target':>7}"]
    lines.append("-" * len(lines[0]))
    for r in table:
        lines.append(
            f"{r['case']:<36} {r['ours_us']:>10.1f} {r['reference_us']:>18.1f} {r['ratio']:>6.2f}x {r['target']:>6.1f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}, {jax.device_count()} device(s)\n")
    print(format_rows(run(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
