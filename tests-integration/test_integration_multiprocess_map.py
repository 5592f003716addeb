"""``state_nn.Map(behavior='shard')`` with its members on the devices of two processes.

Two worker processes (``_mp_worker_map.py``) join a ``jax.distributed`` job on
loopback, each with 4 CPU devices, and run a 16-member ensemble over the 8
global devices (2 members per device): init, then three update steps with
per-member random draws and a ``pmean`` over all members. Each worker gathers
the members' values from both processes; this test checks them against the same
ensemble run in this single process, by ``behavior='vmap'`` and by
``behavior='shard'`` on 8 local devices.
"""

from __future__ import annotations

import importlib.util
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
from numpy.testing import assert_allclose, assert_array_equal

import state_random

pytestmark = pytest.mark.multiprocess

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SRC_DIRS = [ROOT / "packages" / dist / "src" for dist in ("state-core", "state-random", "state-transform", "state-nn")]
WORKER = HERE / "_mp_worker_map.py"
NUM_PROCESSES = 2
LOCAL_DEVICES = 4
MEMBERS, STEPS, SEED = 16, 3, 11  # as in the worker
TIMEOUT = 150


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
    env.pop("XLA_FLAGS", None)  # the worker sets its own device count
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run_workers() -> list[dict]:
    port = _free_port()
    env = _worker_env()
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(port), str(pid), str(NUM_PROCESSES)],
            cwd=str(ROOT),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in range(NUM_PROCESSES)
    ]
    outputs = []
    try:
        deadline = time.monotonic() + TIMEOUT
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
    return sorted(records, key=lambda r: r["process_index"])


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return _run_workers()


def _single_process(behavior: str) -> dict:
    # The worker's model, loaded by path (this directory is not a package).
    spec = importlib.util.spec_from_file_location("_mp_map_model", HERE / "_mp_map_model.py")
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    run_ensemble = model.run_ensemble

    state_random.seed(SEED)
    ens, outs = run_ensemble(behavior=behavior, members=MEMBERS, steps=STEPS)
    return {
        "w": np.asarray(ens.module.w.value),
        "h": np.asarray(ens.module.h.value),
        "outs": [np.asarray(o) for o in outs],
        "key_after": np.asarray(jax.random.key_data(state_random.DEFAULT.value)),
    }


def test_members_are_spread_over_both_processes(records):
    for r in records:
        assert r["device_count"] == NUM_PROCESSES * LOCAL_DEVICES
        assert r["local_device_count"] == LOCAL_DEVICES
        assert r["w_shards_here"] == [[MEMBERS // (NUM_PROCESSES * LOCAL_DEVICES), 3]] * LOCAL_DEVICES
        assert len(r["w_devices"]) == NUM_PROCESSES * LOCAL_DEVICES


@pytest.mark.parametrize("behavior", ["vmap", "shard"])
def test_two_processes_equal_the_single_process_run(records, behavior):
    expected = _single_process(behavior)
    for r in records:
        # Initial weights and the random keys are bit-exact; the pmean sums over two
        # processes in another order, so the updated values agree to float rounding.
        assert_array_equal(np.asarray(r["w"], np.float32), expected["w"])
        assert_array_equal(np.asarray(r["key_after"], np.uint32), expected["key_after"])
        assert_allclose(np.asarray(r["h"], np.float32), expected["h"], rtol=1e-5, atol=1e-6)
        for got, want in zip(r["outs"], expected["outs"], strict=True):
            assert_allclose(np.asarray(got, np.float32), want, rtol=1e-5, atol=1e-5)
    assert len({tuple(row) for row in records[0]["w"]}) == MEMBERS  # every member drew its own weights
