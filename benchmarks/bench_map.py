"""Benchmark: a ``Map`` ensemble with more members than devices (64 members on 8 devices).

``Map(behavior='pmap')`` puts 8 members on each of 8 devices. Its update step is
timed against the hand-written ``jax.pmap(jax.vmap(step))`` over the members
reshaped to ``(devices, members per device, ...)``, with the state values passed
as arguments (the written ones donated) and threaded back by hand. Initialisation (one-shot: per-member
random weights, then placement on the devices) is timed against an eager
``jax.vmap`` of the member's init followed by ``jax.device_put`` onto the same
sharding.

    hatch run python benchmarks/bench_map.py           # full
    hatch run python benchmarks/bench_map.py --quick   # fewer repetitions

``run(quick=False)`` returns the table as text for ``bench.py``; ``rows()`` the measurements.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import state_core as sc  # noqa: E402
import state_random as sr  # noqa: E402

MEMBERS = 64
N_IN, N_OUT = 32, 32


def _step(w: jax.Array, h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One member's update (shared by ours and the reference)."""
    h = jnp.tanh(x @ w + 0.9 * h)
    return h, h.sum()


def _time(fn: Callable[[], Any], calls: int) -> float:
    jax.block_until_ready(fn())
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / calls


def _interleaved(ours: Callable, ref: Callable, calls: int, repeats: int) -> tuple[float, float]:
    t_ours, t_ref = [], []
    for _ in range(repeats):  # interleaved: both see the same machine load
        t_ref.append(_time(ref, calls))
        t_ours.append(_time(ours, calls))
    return statistics.median(t_ours), statistics.median(t_ref)


def _layer_class() -> type:
    import state_nn

    class Layer(state_nn.Module):
        def init_state(self):
            self.w = sc.ParamState(sr.normal(0.0, 0.1, size=(N_IN, N_OUT)))
            self.h = sc.HiddenState(jnp.zeros(N_OUT))

        def update(self, x):
            self.h.value, total = _step(self.w.value, self.h.value, x)
            return total

    return Layer


def make_update(members: int = MEMBERS) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``Map(..., behavior='pmap').update`` against ``jax.pmap(jax.vmap(step))``."""
    import state_nn

    n_dev = jax.local_device_count()
    ens = state_nn.Map(_layer_class()(), init_map_size=members, behavior="pmap")
    ens.init_all_states()
    x = jnp.ones((members, N_IN))

    per_device = jax.pmap(jax.vmap(_step), donate_argnums=1)
    split = (n_dev, members // n_dev)
    box = {
        "w": jnp.asarray(ens.module.w.value).reshape(*split, N_IN, N_OUT),
        "h": jnp.zeros((*split, N_OUT)),
    }
    x_dev = x.reshape(*split, N_IN)

    def pure() -> Any:
        box["h"], total = per_device(box["w"], box["h"], x_dev)
        return total

    return (lambda: ens.update(x)), pure


def make_init(members: int = MEMBERS) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``Map(..., behavior='pmap').init_all_states()`` against an eager vmap + ``device_put``."""
    import state_nn

    layer_class = _layer_class()
    sr.seed(0)

    def ours() -> Any:
        layer = layer_class()
        state_nn.Map(layer, init_map_size=members, behavior="pmap").init_all_states()
        return layer.w.value

    mesh = Mesh(np.array(jax.local_devices()), ("members",))
    sharded = NamedSharding(mesh, P("members"))

    def member_init(key: Any) -> tuple:
        draw = jax.random.split(key, 2)[1]
        return 0.1 * jax.random.normal(draw, (N_IN, N_OUT)), jnp.zeros(N_OUT)

    box = {"key": jax.random.key(0)}

    def pure() -> Any:
        parts = jax.random.split(box["key"], members + 1)
        w, _ = jax.device_put(jax.vmap(member_init)(parts[1:]), sharded)
        box["key"] = jax.random.split(parts[0], 2)[1]
        return w

    return ours, pure


def rows(quick: bool = False) -> list[dict[str, Any]]:
    """Every measurement as ``{case, ours_ms, reference_ms, ratio, target}``."""
    calls, repeats = (50, 5) if quick else (200, 9)
    n_dev = jax.local_device_count()
    result = []

    def add(case: str, ours: float, ref: float, target: float) -> None:
        result.append(dict(case=case, ours_ms=ours * 1e3, reference_ms=ref * 1e3, ratio=ours / ref, target=target))

    add(f"Map.update {MEMBERS} members / {n_dev} dev", *_interleaved(*make_update(), calls, repeats), 1.5)
    add(f"Map init {MEMBERS} members / {n_dev} dev", *_interleaved(*make_init(), max(2, calls // 20), repeats), 3.0)
    return result


def format_rows(table: list[dict[str, Any]]) -> str:
    lines = [f"{'case':<36} {'ours (ms)':>10} {'hand-written (ms)':>18} {'ratio':>7} {'target':>7}"]
    lines.append("-" * len(lines[0]))
    for r in table:
        lines.append(
            f"{r['case']:<36} {r['ours_ms']:>10.3f} {r['reference_ms']:>18.3f} {r['ratio']:>6.2f}x {r['target']:>6.1f}x"
        )
    return "\n".join(lines)


def run(quick: bool = False) -> str:
    """The table as text (the update row's reference is ``jax.pmap(jax.vmap(step))``)."""
    return format_rows(rows(quick))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}, {jax.device_count()} device(s)\n")
    print(run(args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
