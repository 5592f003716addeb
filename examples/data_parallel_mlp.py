"""Data-parallel training of a small MLP on 8 CPU devices, two ways, checked against pure JAX.

The batch is split over a 1-D mesh ``('data',)`` of 8 devices; the parameters
(``ParamState`` objects of ``state_nn.Linear`` layers) are replicated, so every
device holds the whole model and sees 1/8 of the batch. One SGD step is written
twice:

(a) ``state_transform.shard_map`` with a nested ``state_transform.grad``: the
    step is written per shard. The loss is the *global* mean,
    ``jax.lax.pmean(local mean, 'data')``, so its gradient with respect to the
    replicated parameters is the gradient of the whole batch, the same on every
    device. (JAX types each value by the mesh axes it varies over: a replicated
    parameter meets the sharded batch through a ``pvary``, whose transpose sums
    the per-shard gradients. A nested state-aware transform is traced inside
    the shard_map, so it gets exactly these semantics.)

(b) ``state_transform.jit`` over the whole batch, given as an array sharded
    over the mesh (``NamedSharding(mesh, P('data'))``): the compiler partitions
    the computation and inserts the gradient all-reduce itself.

A hand-written pure-JAX step with the same shardings (parameters as a pytree of
arrays) is the reference for both. Running this file trains all four for a few
steps and checks that losses and parameters agree:

    python examples/data_parallel_mlp.py
"""

from __future__ import annotations

import itertools
import sys

import jax

if getattr(jax.config, "jax_num_cpu_devices", None) != 8:  # a test or benchmark importing this file may have set it
    jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import state_transform as st
from state_core import ParamState
from state_nn import Linear, Module

SIZES = (4, 32, 32, 1)
BATCH = 64  # 8 examples per device
LEARNING_RATE = 0.1
STEPS = 10


class MLP(Module):
    """A tanh MLP made of ``Linear`` layers; its weights are ``ParamState`` objects."""

    def __init__(self, weights: list[tuple[np.ndarray, np.ndarray]]) -> None:
        super().__init__()
        self.layers = [Linear(w.shape[0], w.shape[1], w_init=jnp.asarray(w), b_init=jnp.asarray(b)) for w, b in weights]

    def update(self, x: jax.Array) -> jax.Array:
        for layer in self.layers[:-1]:
            x = jnp.tanh(layer(x))
        return self.layers[-1](x)


def initial_weights(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """The same starting point for every variant (and for pure JAX)."""
    rng = np.random.default_rng(seed)
    return [
        (rng.normal(size=(n, m)).astype(np.float32) / np.sqrt(n), np.zeros(m, np.float32))
        for n, m in itertools.pairwise(SIZES)
    ]


def make_data(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, SIZES[0])).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    return x, y


def make_mesh() -> jax.sharding.Mesh:
    return jax.make_mesh((jax.device_count(),), ("data",))


def shard_batch(mesh: jax.sharding.Mesh, x: np.ndarray, y: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """The batch split along its first axis over the mesh."""
    sharding = NamedSharding(mesh, P("data"))
    return jax.device_put(x, sharding), jax.device_put(y, sharding)


# ---------------------------------------------------------------- (a) shard_map + nested grad
def shard_map_step(model: MLP, mesh: jax.sharding.Mesh):
    """``step(x, y) -> loss``: one SGD step written per shard, run on every device."""
    params = model.states(ParamState)

    def loss_fn(x, y):
        local = jnp.mean((model(x) - y) ** 2)
        return jax.lax.pmean(local, "data")  # the mean over the whole batch

    def local_step(x, y):
        grads, loss = st.grad(loss_fn, grad_states=params, return_value=True)(x, y)
        values = params.to_values()
        params.assign_values({path: values[path] - LEARNING_RATE * grads[path] for path in values})
        return loss

    # Parameters are not named in state_in_specs: they are replicated (P()).
    return st.shard_map(local_step, mesh, in_specs=(P("data"), P("data")), out_specs=P())


# ---------------------------------------------------------------- (b) jit on a sharded batch
def jit_step(model: MLP):
    """``step(x, y) -> loss``: one SGD step over the whole (sharded) batch."""
    params = model.states(ParamState)

    def loss_fn(x, y):
        return jnp.mean((model(x) - y) ** 2)

    @st.jit
    def step(x, y):
        grads, loss = st.grad(loss_fn, grad_states=params, return_value=True)(x, y)
        values = params.to_values()
        params.assign_values({path: values[path] - LEARNING_RATE * grads[path] for path in values})
        return loss

    return step


# ---------------------------------------------------------------- pure JAX, by hand
def pure_forward(weights: list, x: jax.Array) -> jax.Array:
    for w, b in weights[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = weights[-1]
    return x @ w + b


def pure_sgd(weights: list, grads: list) -> list:
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, weights, grads)


def pure_shard_map_step(mesh: jax.sharding.Mesh):
    """``(weights, x, y) -> (weights, loss)`` with jax.shard_map and jax.grad (the old weights donated)."""

    def local_step(weights, x, y):
        def loss_fn(weights):
            return jax.lax.pmean(jnp.mean((pure_forward(weights, x) - y) ** 2), "data")

        loss, grads = jax.value_and_grad(loss_fn)(weights)
        return pure_sgd(weights, grads), loss

    mapped = jax.shard_map(local_step, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P()))
    return jax.jit(mapped, donate_argnums=0)


def pure_jit_step(mesh: jax.sharding.Mesh):
    """``(weights, x, y) -> (weights, loss)`` with jax.jit over sharded inputs (the old weights donated)."""

    def step(weights, x, y):
        loss, grads = jax.value_and_grad(lambda w: jnp.mean((pure_forward(w, x) - y) ** 2))(weights)
        return pure_sgd(weights, grads), loss

    replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    return jax.jit(
        step, in_shardings=(replicated, batch, batch), out_shardings=(replicated, replicated), donate_argnums=0
    )


def model_weights(model: MLP) -> list[tuple[np.ndarray, np.ndarray]]:
    weights = []
    for layer in model.layers:
        assert layer.bias is not None  # every layer of this MLP has a bias
        weights.append((np.asarray(layer.weight.value), np.asarray(layer.bias.value)))
    return weights


def train(steps: int = STEPS) -> dict[str, tuple[list[float], list]]:
    """Train every variant from the same start; ``{name: (losses, final weights)}``."""
    mesh = make_mesh()
    x, y = shard_batch(mesh, *make_data())
    start = initial_weights()
    results = {}
    for name, make in (("shard_map", lambda m: shard_map_step(m, mesh)), ("jit", jit_step)):
        model = MLP(start)
        step = make(model)
        losses = [float(step(x, y)) for _ in range(steps)]
        results[name] = (losses, model_weights(model))
    for name, step in (("pure shard_map", pure_shard_map_step(mesh)), ("pure jit", pure_jit_step(mesh))):
        weights = jax.device_put([tuple(map(jnp.asarray, wb)) for wb in start], NamedSharding(mesh, P()))
        losses = []
        for _ in range(steps):
            weights, loss = step(weights, x, y)
            losses.append(float(loss))
        results[name] = (losses, [(np.asarray(w), np.asarray(b)) for w, b in weights])
    return results


def check(results: dict, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Raise if a variant's losses or final weights differ from its pure-JAX reference."""
    for ours, reference in (("shard_map", "pure shard_map"), ("jit", "pure jit"), ("shard_map", "jit")):
        np.testing.assert_allclose(results[ours][0], results[reference][0], rtol=rtol, atol=atol)
        for got, want in zip(jax.tree.leaves(results[ours][1]), jax.tree.leaves(results[reference][1]), strict=True):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def main() -> int:
    results = train()
    print(f"{'step':>4} " + " ".join(f"{name:>15}" for name in results))
    for i in range(STEPS):
        print(f"{i:>4} " + " ".join(f"{results[name][0][i]:>15.6f}" for name in results))
    check(results)
    print("all variants agree with pure JAX (losses and final parameters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
