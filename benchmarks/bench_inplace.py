"""Benchmark: written States are updated in place, as pure JAX with ``donate_argnums`` is.

Memory-bound row: one float32 State of 256 MB and a compiled step
``w.value = w.value * 0.999 + 1``, each variant in a fresh process (so peak
memory is its own): ours by default, ours with donation switched off, pure JAX
``jax.jit(step, donate_argnums=0)`` (the limit) and without donation. Time per
step, and the peak resident memory of the whole run (state, compiling, steps)
above the process's memory before the state existed, less the state itself.

Training-step row: an MLP trained with optax adam inside ``jit`` (parameters and
optimiser state in States, donated by default) against the same pure-JAX step
with ``donate_argnums`` on parameters and optimiser state.

    python benchmarks/bench_inplace.py

``rows(quick)`` returns the measurements for the main table.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

STATE_MB = 256
_CHILD = "--child"


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # Linux: the peak resident size starts again from the current one
    except OSError:
        return False
    return True


def _child(variant: str, steps: int) -> dict[str, float]:
    import jax
    import jax.numpy as jnp

    jax.block_until_ready(jnp.zeros(1) + 1)  # the backend is up before the baseline
    baseline = _rss_mb()
    measured = _reset_peak()
    n = STATE_MB * 1024 * 1024 // 4
    if variant.startswith("ours"):
        from state_core import State, donation
        from state_transform import jit

        w = State(jnp.zeros(n, jnp.float32))

        def step() -> None:
            w.value = w.value * 0.999 + 1.0

        f = jit(step)

        def run() -> Any:  # returns nothing: holding the state's value would (rightly) block donation
            if variant == "ours, donation off":
                with donation(False):
                    f()
            else:
                f()

        def result() -> Any:
            return w.value

    elif variant == "brainstate":
        import brainstate

        bs_w = brainstate.State(jnp.zeros(n, jnp.float32))

        def bs_step() -> None:
            bs_w.value = bs_w.value * 0.999 + 1.0

        bs_f = brainstate.transform.jit(bs_step)

        def run() -> Any:
            bs_f()

        def result() -> Any:
            return bs_w.value

    elif variant == "flax.nnx":
        from flax import nnx

        class Holder(nnx.Module):
            def __init__(self) -> None:
                self.w = nnx.Variable(jnp.zeros(n, jnp.float32))

        holder = Holder()

        @nnx.jit
        def nnx_step(m: Any) -> None:
            m.w[...] = m.w[...] * 0.999 + 1.0

        def run() -> Any:
            nnx_step(holder)

        def result() -> Any:
            return holder.w[...]

    else:
        box = [jnp.zeros(n, jnp.float32)]
        g = jax.jit(lambda w: w * 0.999 + 1.0, donate_argnums=0 if variant == "pure JAX, donated" else ())

        def run() -> Any:
            box[0] = g(box[0])

        def result() -> Any:
            return box[0]

    for _ in range(3):
        run()
        jax.block_until_ready(result())
    start = time.perf_counter()
    for _ in range(steps):
        run()
    jax.block_until_ready(result())
    seconds = (time.perf_counter() - start) / steps
    # Everything the run needed above the baseline (compiling included), less the state itself.
    extra = _peak_mb() - baseline - STATE_MB if measured else float("nan")
    return {"seconds": seconds, "extra_mb": extra}


def memory_row(quick: bool = False, peers: bool = False) -> list[dict[str, Any]]:
    """Time per step and peak extra memory of each variant, each in a fresh process (median of runs).

    ``peers``: also brainstate's ``jit`` and ``nnx.jit`` on the same step, where installed.
    """
    steps, runs = (5, 1) if quick else (20, 3)
    variants: tuple[str, ...] = ("pure JAX, donated", "pure JAX, not donated", "ours", "ours, donation off")
    if peers:
        import importlib.util

        if importlib.util.find_spec("brainstate") is not None:
            variants += ("brainstate",)
        if importlib.util.find_spec("flax") is not None:
            variants += ("flax.nnx",)
    samples: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(runs):
        for variant in variants:  # alternate, so every variant sees the same machine load
            proc = subprocess.run(
                [sys.executable, os.path.abspath(__file__), _CHILD, variant, str(steps)],
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
            )
            samples[variant].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    out = []
    for variant in variants:
        out.append(
            {
                "case": variant,
                "seconds": statistics.median(s["seconds"] for s in samples[variant]),
                "extra_mb": statistics.median(s["extra_mb"] for s in samples[variant]),
            }
        )
    return out


def make_training_step(
    width: int = 1024, depth: int = 4, batch: int = 256
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """One adam step of an MLP in ``jit``: ours (States, donated by default) and pure JAX (donate_argnums)."""
    import jax
    import jax.numpy as jnp
    import optax

    from state_core import LongTermState, ParamState
    from state_transform import grad, jit

    key_x, key_p = jax.random.split(jax.random.key(0))
    x = jax.random.normal(key_x, (batch, width))
    y = jnp.sin(x[:, :1])
    keys = jax.random.split(key_p, depth + 1)
    sizes = [width] * (depth + 1) + [1]
    init = {
        f"l{i}": {"w": jax.random.normal(k, (a, b)) / a**0.5, "b": jnp.zeros(b)}
        for i, (k, a, b) in enumerate(zip(keys, sizes[:-1], sizes[1:], strict=True))
    }
    opt = optax.adam(1e-3)

    def mlp(params: dict[str, Any], x: jax.Array) -> jax.Array:
        for i in range(depth):
            x = jnp.tanh(x @ params[f"l{i}"]["w"] + params[f"l{i}"]["b"])
        last = params[f"l{depth}"]
        return x @ last["w"] + last["b"]

    def pure_loss(params: dict[str, Any], x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((mlp(params, x) - y) ** 2)

    @jax.jit
    def _copy(tree: Any) -> Any:
        return jax.tree.map(jnp.copy, tree)

    params = ParamState(_copy(init))
    opt_state = LongTermState(opt.init(params.value))

    @jit
    def ours_step(x: jax.Array, y: jax.Array) -> jax.Array:
        g, loss = grad(lambda: pure_loss(params.value, x, y), grad_states=params, return_value=True)()
        updates, opt_state.value = opt.update(g, opt_state.value, params.value)
        params.value = optax.apply_updates(params.value, updates)
        return loss

    def pure_step(p: Any, s: Any, x: jax.Array, y: jax.Array) -> tuple[Any, Any, jax.Array]:
        loss, g = jax.value_and_grad(pure_loss)(p, x, y)
        updates, s = opt.update(g, s, p)
        return optax.apply_updates(p, updates), s, loss

    pure_jit = jax.jit(pure_step, donate_argnums=(0, 1))
    box = [_copy(init), opt.init(init)]

    def ours() -> Any:
        return ours_step(x, y)

    def pure() -> Any:
        box[0], box[1], loss = pure_jit(box[0], box[1], x, y)
        return loss

    return ours, pure


def _median_time(fn: Callable[[], Any], calls: int, repeats: int) -> float:
    import jax

    for _ in range(3):
        jax.block_until_ready(fn())
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            out = fn()
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def training_row(quick: bool = False) -> dict[str, Any]:
    """Seconds per adam step, ours and pure JAX (interleaved repeats)."""
    calls, repeats = (5, 3) if quick else (20, 7)
    ours, pure = make_training_step()
    t_ours, t_pure = [], []
    for _ in range(repeats):
        t_pure.append(_median_time(pure, calls, 1))
        t_ours.append(_median_time(ours, calls, 1))
    a, b = statistics.median(t_ours), statistics.median(t_pure)
    return {"case": "MLP + adam step in jit (1024 wide)", "ours": a, "pure": b, "ratio": a / b}


def format_rows(memory: list[dict[str, Any]], training: dict[str, Any]) -> str:
    """The rows as a text table."""
    limit = next(r for r in memory if r["case"] == "pure JAX, donated")
    lines = [f"one float32 state of {STATE_MB} MB, w = w * 0.999 + 1 (each variant in a fresh process):"]
    lines.append(f"{'variant':<26} {'ms/step':>9} {'x donated':>10} {'peak above (MB)':>16} {'x state':>8}")
    for r in memory:
        lines.append(
            f"{r['case']:<26} {r['seconds'] * 1e3:>9.1f} {r['seconds'] / limit['seconds']:>9.2f}x "
            f"{r['extra_mb']:>16.0f} {(STATE_MB + r['extra_mb']) / STATE_MB:>7.2f}x"
        )
    lines.append("")
    lines.append(
        f"{training['case']:<40} ours {training['ours'] * 1e3:.2f} ms, pure JAX (donate_argnums) "
        f"{training['pure'] * 1e3:.2f} ms: {training['ratio']:.2f}x"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == _CHILD:
        print(json.dumps(_child(sys.argv[2], int(sys.argv[3]))))
    else:
        print(format_rows(memory_row(), training_row()))
