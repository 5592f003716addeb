"""Data-parallel training on a mesh spanning two processes equals the single-process run.

Two worker processes (``_mp_worker_dp.py``) join a ``jax.distributed`` job on
loopback, 4 CPU devices each, and train the MLP of ``examples/data_parallel_mlp.py``
with the batch sharded over all 8 devices, via ``state_transform.shard_map`` (nested
``grad``) and via ``state_transform.jit``. Both processes must report the losses
and parameters of the example's single-process run.
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
import pytest
from numpy.testing import assert_allclose

pytestmark = pytest.mark.multiprocess

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SRC_DIRS = [ROOT / "packages" / dist / "src" for dist in ("state-core", "state-random", "state-transform", "state-nn")]
WORKER = HERE / "_mp_worker_dp.py"
EXAMPLE = ROOT / "examples" / "data_parallel_mlp.py"
NUM_PROCESSES = 2
STEPS = 4
TIMEOUT = 180


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    port, env = _free_port(), _worker_env()
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(port), str(pid), str(NUM_PROCESSES), str(STEPS)],
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
    report = "\n".join(
        f"--- worker {pid}: exit {rc}\nstdout:\n{out[-2000:]}\nstderr:\n"
        + "\n".join(line for line in err.splitlines() if "[Gloo]" not in line)[-4000:]
        for pid, (rc, out, err) in enumerate(outputs)
    )
    assert all(rc == 0 for rc, _, _ in outputs), "multi-process workers failed:\n" + report
    records = []
    for _, out, _ in outputs:
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert len(lines) == 1, "a worker printed no RESULT line:\n" + report
        records.append(json.loads(lines[0][len("RESULT ") :]))
    return sorted(records, key=lambda r: r["process_index"])


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return _run_workers()


@pytest.fixture(scope="module")
def single_process() -> dict:
    example = _load(EXAMPLE, "data_parallel_mlp")
    worker = _load(WORKER, "_mp_worker_dp")
    # The worker rebuilds the example's model, start and data: same constants.
    assert (worker.SIZES, worker.BATCH, worker.LEARNING_RATE) == (example.SIZES, example.BATCH, example.LEARNING_RATE)
    return example.train(steps=STEPS)


def test_both_processes_span_the_global_mesh(records):
    assert [r["process_index"] for r in records] == [0, 1]
    assert all(r["device_count"] == 8 for r in records)


@pytest.mark.parametrize("variant", ["shard_map", "jit"])
def test_two_processes_equal_the_single_process_run(records, single_process, variant):
    losses, weights = single_process[variant]
    for r in records:
        got = r[variant]
        assert_allclose(got["losses"], losses, rtol=1e-5, atol=1e-6)
        flat = [leaf for layer in got["weights"] for leaf in layer]
        for g, want in zip(flat, jax.tree.leaves(weights), strict=True):
            assert_allclose(g, want, rtol=1e-5, atol=1e-6)
