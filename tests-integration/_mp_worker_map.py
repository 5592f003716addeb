"""Worker process for ``test_integration_multiprocess_map.py`` (not a test module).

Usage: ``python _mp_worker_map.py <port> <process_id> [num_processes]``

Joins a ``jax.distributed`` job on loopback with 4 CPU devices per process
(gloo collectives) and runs a ``state_nn.Map(behavior='shard')`` ensemble of 16
members over the 8 global devices (2 members per device, each process holding
8 of them): ``init_all_states`` draws per-member weights, then three update
steps draw per-member noise and average over all members with ``lax.pmean``.
Prints one JSON line (prefixed with ``RESULT ``) with the members' values
gathered from both processes.
"""

from __future__ import annotations

import json
import sys

MEMBERS = 16
STEPS = 3
SEED = 11


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

    import numpy as np
    from _mp_map_model import run_ensemble
    from jax.experimental import multihost_utils

    import state_random

    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    state_random.seed(SEED)
    ens, outs = run_ensemble(behavior="shard", members=MEMBERS, steps=STEPS, mesh=mesh)

    def gather(value):
        return np.asarray(multihost_utils.process_allgather(value, tiled=True))

    module = ens.module
    w = module.w.value
    record = {
        "process_index": jax.process_index(),
        "device_count": jax.device_count(),
        "local_device_count": jax.local_device_count(),
        "w_shards_here": [list(s.data.shape) for s in w.addressable_shards],
        "w_devices": sorted(d.id for d in w.sharding.device_set),
        "w": gather(w).tolist(),
        "h": gather(module.h.value).tolist(),
        "outs": [gather(o).tolist() for o in outs],
        "key_after": gather(jax.random.key_data(state_random.DEFAULT.value)).tolist(),
    }
    print("RESULT " + json.dumps(record), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
