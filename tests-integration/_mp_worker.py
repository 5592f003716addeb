"""Worker process for ``test_integration_multiprocess.py`` (not a test module).

Usage: ``python _mp_worker.py <port> <process_id> [num_processes]``

Joins a ``jax.distributed`` job on loopback with 4 CPU devices per process
(gloo collectives), builds a global 1-D mesh over every device of every
process, runs ``state_transform.shard_map`` twice with

* a ``P('x')``-sharded ``State`` buffer that accumulates the data,
* a replicated ``ParamState`` weight read inside,
* a ``jax.lax.psum`` over ``'x'`` of the (weighted) data,

and prints one JSON line (prefixed with ``RESULT ``) with what this process sees.
"""

from __future__ import annotations

import json
import sys


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
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import state_core
    import state_random
    import state_transform

    n_global = jax.device_count()
    mesh = jax.make_mesh((n_global,), ("x",))
    size = 2 * n_global  # 16 for 2 x 4 devices
    data_np = np.arange(size, dtype=np.float32)
    data = jax.make_array_from_callback((size,), NamedSharding(mesh, P("x")), lambda idx: data_np[idx])

    buffer = state_core.State(jnp.zeros(size, jnp.float32), name="buffer")
    weight = state_core.ParamState(jnp.asarray(3.0, jnp.float32), name="weight")

    def step(x):
        buffer.value = buffer.value + x
        local = jnp.sum(x * weight.value, keepdims=True)
        return jax.lax.psum(local, axis_name="x")

    f = state_transform.shard_map(
        step,
        mesh,
        in_specs=(P("x"),),
        out_specs=P(),
        state_in_specs={buffer: P("x")},
        state_out_specs={buffer: P("x")},
    )

    results = []
    for _ in range(2):
        out = f(data)
        results.append([float(v) for s in out.addressable_shards for v in np.asarray(s.data).ravel()])

    # A RandomState read inside shard_map: one distinct key per shard, across processes.
    rng = state_random.RandomState(7)

    def draw(x):
        return x * 0.0 + rng.normal(size=x.shape)

    g = state_transform.shard_map(draw, mesh, in_specs=(P("x"),), out_specs=P("x"))
    noise = g(data)
    noise_shards = [[s.index[0].start or 0, np.asarray(s.data).tolist()] for s in noise.addressable_shards]
    rng_key = np.asarray(jax.random.key_data(rng.value)).tolist()

    value = buffer.value
    record = {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "device_count": n_global,
        "local_device_count": jax.local_device_count(),
        "buffer_shape": list(value.shape),
        "buffer_spec": str(value.sharding.spec) if hasattr(value.sharding, "spec") else repr(value.sharding),
        "buffer_shards": [np.asarray(s.data).tolist() for s in value.addressable_shards],
        "buffer_shard_indices": [
            [sl.start or 0, sl.stop if sl.stop is not None else size]
            for s in value.addressable_shards
            for sl in s.index
        ],
        "psum": results,
        "noise_shards": noise_shards,
        "rng_key_after": rng_key,
        "weight_after": float(np.asarray(weight.value.addressable_shards[0].data))
        if hasattr(weight.value, "addressable_shards")
        else float(weight.value),
    }
    print("RESULT " + json.dumps(record), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
