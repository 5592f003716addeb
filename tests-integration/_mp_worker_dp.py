"""Worker process for ``test_integration_multiprocess_dp.py`` (not a test module).

Usage: ``python _mp_worker_dp.py <port> <process_id> [num_processes] [steps]``

Joins a ``jax.distributed`` job on loopback with 4 CPU devices per process
(gloo collectives) and trains the data-parallel MLP of
``examples/data_parallel_mlp.py`` (same sizes, start and data) on a global 1-D
mesh over every device of both processes: once with ``state_transform.shard_map``
and a nested ``state_transform.grad``, once with ``state_transform.jit`` on the
sharded batch. Prints one JSON line (prefixed with ``RESULT ``) with the losses
and final parameters this process sees.
"""

from __future__ import annotations

import itertools
import json
import sys

# The example's constants (the test checks them against the example module).
SIZES = (4, 32, 32, 1)
BATCH = 64
LEARNING_RATE = 0.1


def main() -> None:
    port = int(sys.argv[1])
    process_id = int(sys.argv[2])
    num_processes = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 4

    import jax

    # Before anything touches the backend.
    jax.config.update("jax_num_cpu_devices", 4)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=num_processes,
        process_id=process_id,
        initialization_timeout=90,
    )

    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import state_transform as st
    from state_core import ParamState
    from state_nn import Linear, Module

    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))

    def global_array(value: np.ndarray, sharding: NamedSharding) -> jax.Array:
        return jax.make_array_from_callback(value.shape, sharding, lambda idx: value[idx])

    rng = np.random.default_rng(0)
    start = [
        (rng.normal(size=(n, m)).astype(np.float32) / np.sqrt(n), np.zeros(m, np.float32))
        for n, m in itertools.pairwise(SIZES)
    ]
    rng = np.random.default_rng(1)
    x_np = rng.normal(size=(BATCH, SIZES[0])).astype(np.float32)
    y_np = np.sin(x_np.sum(axis=1, keepdims=True)).astype(np.float32)
    x, y = global_array(x_np, batch), global_array(y_np, batch)

    class MLP(Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = [
                Linear(w.shape[0], w.shape[1], w_init=jnp.asarray(w), b_init=jnp.asarray(b)) for w, b in start
            ]
            for layer in self.layers:  # on a mesh spanning processes every input is a global array
                layer.weight.value = global_array(np.asarray(layer.weight.value), replicated)
                layer.bias.value = global_array(np.asarray(layer.bias.value), replicated)

        def update(self, v):
            for layer in self.layers[:-1]:
                v = jnp.tanh(layer(v))
            return self.layers[-1](v)

    def sgd(params, grads):
        values = params.to_values()
        params.assign_values({path: values[path] - LEARNING_RATE * grads[path] for path in values})

    def shard_map_step(model):
        params = model.states(ParamState)

        def loss_fn(x, y):
            return jax.lax.pmean(jnp.mean((model(x) - y) ** 2), "data")

        def local_step(x, y):
            grads, loss = st.grad(loss_fn, grad_states=params, return_value=True)(x, y)
            sgd(params, grads)
            return loss

        return st.shard_map(local_step, mesh, in_specs=(P("data"), P("data")), out_specs=P())

    def jit_step(model):
        params = model.states(ParamState)

        @st.jit
        def step(x, y):
            grads, loss = st.grad(lambda x, y: jnp.mean((model(x) - y) ** 2), grad_states=params, return_value=True)(
                x, y
            )
            sgd(params, grads)
            return loss

        return step

    def local(value: jax.Array) -> np.ndarray:
        """A replicated global array's value, read from this process's first shard."""
        return np.asarray(value.addressable_shards[0].data)

    record = {"process_index": jax.process_index(), "device_count": jax.device_count()}
    for name, make in (("shard_map", shard_map_step), ("jit", jit_step)):
        model = MLP()
        step = make(model)
        losses = [float(local(step(x, y))) for _ in range(steps)]
        weights = [[local(layer.weight.value).tolist(), local(layer.bias.value).tolist()] for layer in model.layers]
        record[name] = {"losses": losses, "weights": weights}
    print("RESULT " + json.dumps(record), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
