"""Data-parallel training via annotated ``jit`` on a mesh spanning two processes.

Two worker processes (``_mp_worker_annotated.py``) join a ``jax.distributed`` job
on loopback, 4 CPU devices each. The parameters are ParamStates annotated ``P()``
and the batch is a global array split over the 8 devices; ``state_transform.jit``
places the parameters on the global mesh and keeps them replicated. Both
processes must report the losses and parameters of a single-process run of the
same training.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

pytestmark = pytest.mark.multiprocess

HERE = Path(__file__).resolve().parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_annotated_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def worker():
    return _load("_mp_worker_annotated")


@pytest.fixture(scope="module")
def records(worker):
    # The two-process launcher of the shard_map test, pointed at this test's worker
    # (a private copy of that module, so the other test is not affected).
    launcher = _load("test_integration_multiprocess")
    launcher.WORKER = HERE / "_mp_worker_annotated.py"
    return sorted(launcher._run_workers(), key=lambda r: r["process_index"])


def _single_process_run(worker, n_rows: int) -> tuple[list, np.ndarray, np.ndarray]:
    x, y = (jnp.asarray(a) for a in worker.batch_arrays(n_rows))
    params = {"w": jnp.zeros((3, 1)), "b": jnp.zeros((1,))}

    def loss_fn(params):
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    losses = []
    for _ in range(worker.STEPS):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        params = {k: params[k] - worker.LEARNING_RATE * grads[k] for k in params}
        losses.append(float(loss))
    return losses, np.asarray(params["w"]), np.asarray(params["b"])


def test_both_processes_train_like_a_single_process(worker, records):
    assert [r["process_index"] for r in records] == [0, 1]
    losses, w, b = _single_process_run(worker, 2 * records[0]["device_count"])
    assert losses[-1] < losses[0]
    for r in records:
        assert_allclose(r["losses"], losses, rtol=1e-5, atol=1e-6)
        assert_allclose(np.asarray(r["w"]), w, rtol=1e-5, atol=1e-6)
        assert_allclose(np.asarray(r["b"]), b, rtol=1e-5, atol=1e-6)


def test_annotated_parameters_are_replicated_over_the_global_mesh(records):
    for r in records:
        assert r["device_count"] == 8
        assert r["w_spec"] in ("P()", "PartitionSpec()"), r["w_spec"]
        assert r["w_devices"] == 8  # the global mesh: devices of both processes
        assert r["w_local_shards"] == [[3, 1]] * 4  # a whole copy on each local device
        assert r["w_replicas_equal"]
