"""Worker process for ``test_integration_multiprocess_annotated.py`` (not a test module).

Usage: ``python _mp_worker_annotated.py <port> <process_id> [num_processes]``

Joins a ``jax.distributed`` job on loopback with 4 CPU devices per process (gloo
collectives), sets a global 1-D mesh ``('x',)`` over every device of every
process, and trains a linear model data-parallel for a few steps with
``state_transform.jit`` + ``grad``: the parameters are ParamStates annotated
``P()`` (replicated on every device of both processes), the batch is a global
array split over ``'x'``. Prints one JSON line (prefixed with ``RESULT ``) with the
losses, the final parameters and their shardings as this process sees them.
"""

from __future__ import annotations

import json
import sys

STEPS = 4
LEARNING_RATE = 0.1


def batch_arrays(n_rows: int):
    """The global batch every process agrees on (the test builds the same one)."""
    import numpy as np

    x = np.linspace(-1.0, 1.0, n_rows * 3, dtype=np.float32).reshape(n_rows, 3)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)) + 0.25
    return x, y


def main() -> None:
    port = int(sys.argv[1])
    process_id = int(sys.argv[2])
    num_processes = int(sys.argv[3]) if len(sys.argv) > 3 else 2

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
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    from state_core import ParamState
    from state_transform import grad, jit

    n_global = jax.device_count()
    mesh = jax.make_mesh((n_global,), ("x",), axis_types=(AxisType.Auto,))
    x_np, y_np = batch_arrays(2 * n_global)
    batch = NamedSharding(mesh, P("x"))
    x = jax.make_array_from_callback(x_np.shape, batch, lambda idx: x_np[idx])
    y = jax.make_array_from_callback(y_np.shape, batch, lambda idx: y_np[idx])

    w = ParamState(jnp.zeros((3, 1), jnp.float32), name="w", sharding=P())
    b = ParamState(jnp.zeros((1,), jnp.float32), name="b", sharding=P())

    def loss_fn(x, y):
        return jnp.mean((x @ w.value + b.value - y) ** 2)

    @jit
    def train_step(x, y):
        (gw, gb), loss = grad(loss_fn, grad_states=[w, b], return_value=True)(x, y)
        w.value = w.value - LEARNING_RATE * gw
        b.value = b.value - LEARNING_RATE * gb
        return loss

    with jax.set_mesh(mesh):
        losses = [float(np.asarray(train_step(x, y).addressable_data(0))) for _ in range(STEPS)]

    def local(value):
        return np.asarray(value.addressable_data(0)).tolist()

    record = {
        "process_index": jax.process_index(),
        "device_count": n_global,
        "losses": losses,
        "w": local(w.value),
        "b": local(b.value),
        "w_spec": str(w.value.sharding.spec),
        "w_devices": len(w.value.sharding.device_set),
        "w_local_shards": [list(s.data.shape) for s in w.value.addressable_shards],
        "w_replicas_equal": all(
            np.array_equal(np.asarray(s.data), np.asarray(w.value.addressable_data(0)))
            for s in w.value.addressable_shards
        ),
    }
    print("RESULT " + json.dumps(record), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
