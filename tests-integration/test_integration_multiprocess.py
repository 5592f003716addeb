"""``state_transform.shard_map`` on a mesh spanning two processes (``jax.distributed``).

Two worker processes (``_mp_worker.py``) join a ``jax.distributed`` job on
loopback, each with 4 CPU devices and gloo collectives, so the global mesh has
8 devices of which each process addresses 4. Each worker runs a state-aware
``shard_map`` twice with a ``P('x')``-sharded State buffer, a replicated
ParamState and a ``psum`` over ``'x'``, then one RandomState draw, and prints a
JSON line; this test checks both processes' views value by value.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from numpy.testing import assert_allclose

pytestmark = pytest.mark.multiprocess

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SRC_DIRS = [ROOT / "packages" / dist / "src" for dist in ("state-core", "state-random", "state-transform", "state-nn")]
WORKER = HERE / "_mp_worker.py"
NUM_PROCESSES = 2
LOCAL_DEVICES = 4
N_DEVICES = NUM_PROCESSES * LOCAL_DEVICES
SIZE = 2 * N_DEVICES  # 16 elements, 2 per device
WEIGHT = 3.0
TIMEOUT = 120


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker_env() -> dict:
    env = dict(os.environ)
    paths = [str(p) for p in SRC_DIRS]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # The worker sets its own device count; do not inherit an 8-device XLA flag.
    env.pop("XLA_FLAGS", None)
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run_workers() -> list[dict]:
    port = _free_port()
    env = _worker_env()
    procs: list[subprocess.Popen] = []
    outputs: list[tuple[int, str, str]] = []
    try:
        for pid in range(NUM_PROCESSES):
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(WORKER), str(port), str(pid), str(NUM_PROCESSES)],
                    cwd=str(ROOT),
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        deadline = time.monotonic() + TIMEOUT  # one bound for the whole job
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                err += f"\n[test] worker timed out after {TIMEOUT} s and was killed"
            outputs.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)

    def report() -> str:
        parts = []
        for pid, (rc, out, err) in enumerate(outputs):
            err_tail = "\n".join(line for line in err.splitlines() if "[Gloo]" not in line)[-4000:]
            parts.append(f"--- worker {pid}: exit {rc}\nstdout:\n{out[-2000:]}\nstderr:\n{err_tail}")
        return "\n".join(parts)

    assert all(rc == 0 for rc, _, _ in outputs), "multi-process workers failed:\n" + report()
    records = []
    for pid, (_, out, _) in enumerate(outputs):
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert len(lines) == 1, f"worker {pid} printed no RESULT line:\n" + report()
        records.append(json.loads(lines[0][len("RESULT ") :]))
    return records


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return sorted(_run_workers(), key=lambda r: r["process_index"])


def test_both_processes_see_the_global_mesh(records):
    assert [r["process_index"] for r in records] == [0, 1]
    for r in records:
        assert r["process_count"] == NUM_PROCESSES
        assert r["device_count"] == N_DEVICES
        assert r["local_device_count"] == LOCAL_DEVICES
        assert r["buffer_shape"] == [SIZE]
        assert r["buffer_spec"] in ("P('x',)", "PartitionSpec('x',)"), r["buffer_spec"]


def test_sharded_buffer_accumulates_twice_per_shard(records):
    data = np.arange(SIZE, dtype=np.float32)
    per_shard = SIZE // N_DEVICES
    for r in records:
        p = r["process_index"]
        # Each process addresses the 4 contiguous shards of its own devices.
        expected_index = [
            [(p * LOCAL_DEVICES + d) * per_shard, (p * LOCAL_DEVICES + d + 1) * per_shard] for d in range(LOCAL_DEVICES)
        ]
        assert r["buffer_shard_indices"] == expected_index
        assert len(r["buffer_shards"]) == LOCAL_DEVICES
        for (start, stop), shard in zip(expected_index, r["buffer_shards"], strict=True):
            assert_allclose(np.asarray(shard, np.float32), 2.0 * data[start:stop], rtol=0, atol=0)
    # Together the two processes hold the whole buffer exactly once.
    full = np.concatenate([np.asarray(s, np.float32) for r in records for s in r["buffer_shards"]])
    assert_allclose(full, 2.0 * data, rtol=0, atol=0)


def test_psum_over_all_processes_with_replicated_param(records):
    expected = float(np.arange(SIZE, dtype=np.float32).sum()) * WEIGHT  # 120 * 3 = 360
    for r in records:
        assert len(r["psum"]) == 2  # two calls
        for call in r["psum"]:
            # Replicated output: one copy per local device, each the global total.
            assert len(call) == LOCAL_DEVICES
            assert_allclose(np.asarray(call), np.full(LOCAL_DEVICES, expected), rtol=0, atol=0)
        assert r["weight_after"] == WEIGHT  # read, never written


def test_random_state_gets_one_key_per_shard_across_processes(records):
    # Key discipline (state-random README): P = split(K, B + 1); shard i uses P[1 + i];
    # afterwards the state holds split(P[0], 2)[1]. Inside, rng.normal keeps
    # split(k, 2)[0] and samples with split(k, 2)[1].
    per_shard = SIZE // N_DEVICES
    parts = jax.random.split(jax.random.key(7), N_DEVICES + 1)
    expected = {}
    for i in range(N_DEVICES):
        k = jax.random.split(parts[1 + i], 2)[1]
        expected[i * per_shard] = np.asarray(jax.random.normal(k, (per_shard,)))
    seen = {}
    for r in records:
        for start, values in r["noise_shards"]:
            seen[start] = np.asarray(values, np.float32)
    assert sorted(seen) == sorted(expected)
    for start, values in seen.items():
        assert_allclose(values, expected[start], rtol=1e-6, atol=1e-6, err_msg=f"shard at {start}")
    draws = np.stack([seen[s] for s in sorted(seen)])
    assert len({tuple(row) for row in draws.tolist()}) == N_DEVICES, "shards drew identical numbers"
    next_key = np.asarray(jax.random.key_data(jax.random.split(parts[0], 2)[1])).tolist()
    for r in records:
        assert r["rng_key_after"] == next_key, f"process {r['process_index']} ended with a different key"
