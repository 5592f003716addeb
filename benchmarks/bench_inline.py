"""Benchmark: transformations built inline, in every step of an eager loop, as brainstate programs write them.

    grads = grad(loss, grad_states=params)(x, y)     # a new GradFunction every step
    out = vmap2(f)(x)                                # a new StatefulMapping every call

Each new object finds the program of the first one (programs belong to what a
transformation computes, not to the object), so after the first step a step
costs a compiled call. The references are what the same program costs in pure
JAX written the same way: an eager ``jax.grad(loss)(params, x, y)`` plus an eager
SGD update (JAX's own op-by-op dispatch, no ``jax.jit``), and
``jax.jit(jax.vmap(f))`` built once.

``rows(quick)`` returns the measurements for the main table.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from state_core import ParamState
from state_transform import grad, vmap2

WIDTH, DEPTH, BATCH, LR = 256, 4, 128, 1e-3


def _mlp(params: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def _init(key: jax.Array) -> list[tuple[jax.Array, jax.Array]]:
    sizes = [WIDTH] * DEPTH + [1]
    params = []
    for k, (n_in, n_out) in zip(jax.random.split(key, DEPTH), itertools.pairwise(sizes), strict=True):
        params.append((jax.random.normal(k, (n_in, n_out)) / n_in**0.5, jnp.zeros(n_out)))
    return params


def make_inline_grad_step() -> tuple[Callable[[], Any], Callable[[], Any]]:
    """One eager SGD step whose ``grad(...)`` is built inline, and the pure-JAX eager step."""
    key_data, key_params = jax.random.split(jax.random.key(0))
    x = jax.random.normal(key_data, (BATCH, WIDTH))
    y = jnp.sin(x[:, :1])
    init = _init(key_params)
    states = [(ParamState(w), ParamState(b)) for w, b in init]
    flat = [s for pair in states for s in pair]

    def loss(x: jax.Array, y: jax.Array) -> jax.Array:
        params = [(w.value, b.value) for w, b in states]
        return jnp.mean((_mlp(params, x) - y) ** 2)

    def ours() -> Any:
        grads = grad(loss, grad_states=flat)(x, y)  # built every step
        for state, g in zip(flat, grads, strict=True):
            state.value = state.value - LR * g
        return grads[-1]

    def pure_loss(params: list[tuple[jax.Array, jax.Array]], x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((_mlp(params, x) - y) ** 2)

    box = [init]

    def pure() -> Any:
        grads = jax.grad(pure_loss)(box[0], x, y)  # eager, as the reference users compare with
        box[0] = jax.tree.map(lambda p, g: p - LR * g, box[0], grads)
        return grads[-1][1]

    return ours, pure


def inline_grad_peers() -> dict[str, Callable[[], Any]]:
    """The same eager SGD step in brainstate (``grad`` built inline) and flax.nnx (``nnx.grad``), if installed."""
    key_data, key_params = jax.random.split(jax.random.key(0))
    x = jax.random.normal(key_data, (BATCH, WIDTH))
    y = jnp.sin(x[:, :1])
    init = _init(key_params)
    out: dict[str, Callable[[], Any]] = {}
    try:
        import brainstate
    except ImportError:
        brainstate = None
    if brainstate is not None:
        states = [(brainstate.ParamState(w), brainstate.ParamState(b)) for w, b in init]
        flat = [s for pair in states for s in pair]

        def bs_loss(x: jax.Array, y: jax.Array) -> jax.Array:
            return jnp.mean((_mlp([(w.value, b.value) for w, b in states], x) - y) ** 2)

        def bs_step() -> Any:
            grads = brainstate.transform.grad(bs_loss, grad_states=flat)(x, y)
            for state, g in zip(flat, grads, strict=True):
                state.value = state.value - LR * g
            return grads[-1]

        out["brainstate"] = bs_step
    try:
        from flax import nnx
    except ImportError:
        nnx = None
    if nnx is not None:

        class MLP(nnx.Module):
            def __init__(self) -> None:
                self.layers = nnx.List([nnx.Dict(w=nnx.Param(w), b=nnx.Param(b)) for w, b in init])

        model = MLP()

        def nnx_loss(m: Any, x: jax.Array, y: jax.Array) -> jax.Array:
            return jnp.mean((_mlp([(layer["w"][...], layer["b"][...]) for layer in m.layers], x) - y) ** 2)

        def nnx_step() -> Any:
            grads = nnx.grad(nnx_loss)(model, x, y)  # built every step, as the eager loop writes it
            params = nnx.state(model, nnx.Param)
            nnx.update(model, jax.tree.map(lambda p, g: p - LR * g, params, grads))
            return grads

        out["flax.nnx"] = nnx_step
    return out


def make_inline_vmap2() -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``vmap2(f)(x)`` built for every call, and ``jax.jit(jax.vmap(f))`` built once."""
    w = ParamState(jnp.linspace(0.0, 1.0, 32))
    x = jnp.ones((16, 32))

    def f(row: jax.Array) -> jax.Array:
        return jnp.tanh(row * w.value).sum()

    def ours() -> Any:
        return vmap2(f)(x)

    pure_f = jax.jit(jax.vmap(lambda wv, row: jnp.tanh(row * wv).sum(), in_axes=(None, 0)))

    def pure() -> Any:
        return pure_f(w.value, x)

    return ours, pure


def _median_time(fn: Callable[[], Any], calls: int, repeats: int) -> float:
    jax.block_until_ready(fn())
    jax.block_until_ready(fn())
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            out = fn()
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def rows(quick: bool = False, peers: bool = False) -> list[dict[str, Any]]:
    """``[{'case', 'ours', 'pure', 'reference', 'ratio', 'peers'}]`` (seconds per step), in one run.

    ``peers``: also time brainstate and flax.nnx on the inline-grad step where they
    are installed (``'peers': {library: seconds}``); all alternate with pure JAX.
    """
    # (Even quick runs time 20 calls: with fewer, the one wait for the last result
    # outweighs the asynchronous dispatch a steady step costs, and flatters ours.)
    calls, repeats = (20, 3) if quick else (20, 5)
    out = []
    for label, make, reference, make_peers in (
        (
            "grad built inline, eager SGD step (MLP 4x256)",
            make_inline_grad_step,
            "eager jax.grad step",
            inline_grad_peers,
        ),
        ("vmap2(f)(x) built every call", make_inline_vmap2, "jax.jit(jax.vmap(f))", None),
    ):
        ours, pure = make()
        others = make_peers() if peers and make_peers is not None else {}
        samples: dict[str, list[float]] = {"ours": [], "pure": [], **{name: [] for name in others}}
        for _ in range(repeats):  # alternating: every side sees the same machine load
            samples["pure"].append(_median_time(pure, calls, 1))
            samples["ours"].append(_median_time(ours, calls, 1))
            for name, fn in others.items():
                samples[name].append(_median_time(fn, max(1, calls // 4), 1))
        t = {name: statistics.median(ts) for name, ts in samples.items()}
        out.append(
            {
                "case": label,
                "reference": reference,
                "ours": t["ours"],
                "pure": t["pure"],
                "ratio": t["ours"] / t["pure"],
                "peers": {name: t[name] for name in others},
            }
        )
    return out


def format_rows(measured: list[dict[str, Any]]) -> str:
    """The rows as a text table (times in microseconds)."""
    lines = [f"{'case':<48} {'ours (us)':>10} {'reference (us)':>15} {'ratio':>7}  reference"]
    for r in measured:
        lines.append(
            f"{r['case']:<48} {r['ours'] * 1e6:>10.1f} {r['pure'] * 1e6:>15.1f} {r['ratio']:>6.2f}x  {r['reference']}"
        )
        for name, seconds in r.get("peers", {}).items():
            lines.append(f"{'  ' + name:<48} {seconds * 1e6:>10.1f} {'':>15} {seconds / r['pure']:>6.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_rows(rows()))
