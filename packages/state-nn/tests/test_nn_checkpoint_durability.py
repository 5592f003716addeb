"""state_nn.checkpoint never loses data: atomic overwrite, killed saves, all-or-nothing restore, damaged checkpoints."""

import gc
import json
import os
import shutil
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from state_core import ParamState, State
from state_nn import checkpoint
from state_random import RandomState


@pytest.fixture
def ckpt(tmp_path):
    return str(tmp_path / "ckpt")


def _only_the_checkpoint(tmp_path):
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no staging, set-aside or orbax temporary directory


def _restored(path, n=2):
    a = ParamState(jnp.zeros(n))
    checkpoint.restore(path, {"a": a})
    return np.asarray(a.value)


# ---------------------------------------------------------------------- overwrite is atomic
def test_overwrite_that_fails_while_writing_keeps_the_previous_checkpoint(ckpt, tmp_path, monkeypatch):
    checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 1.0))}, include_default=False)

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(ocp.JsonCheckpointHandler, "async_save", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 2.0))}, include_default=False, overwrite=True)
    monkeypatch.undo()

    np.testing.assert_array_equal(_restored(ckpt), [1.0, 1.0])
    _only_the_checkpoint(tmp_path)
    checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 3.0))}, include_default=False, overwrite=True)
    np.testing.assert_array_equal(_restored(ckpt), [3.0, 3.0])
    _only_the_checkpoint(tmp_path)


def test_overwrite_that_fails_between_the_renames_puts_the_previous_checkpoint_back(ckpt, tmp_path, monkeypatch):
    checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 1.0))}, include_default=False)
    rename, calls = os.rename, []

    def moving_in_fails(src, dst):
        if os.path.dirname(dst) == str(tmp_path):  # not orbax's own renames inside its directories
            calls.append(dst)
        if dst == ckpt and len(calls) == 2:  # the previous checkpoint is set aside, the new one not yet in place
            raise PermissionError("rename refused")
        rename(src, dst)

    monkeypatch.setattr(os, "rename", moving_in_fails)
    with pytest.raises(PermissionError, match="rename refused"):
        checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 2.0))}, include_default=False, overwrite=True)
    monkeypatch.undo()
    assert calls[1:] == [ckpt, ckpt]  # set aside, failed move in, put back
    np.testing.assert_array_equal(_restored(ckpt), [1.0, 1.0])
    _only_the_checkpoint(tmp_path)


_KILLED_SAVE = """
import os, shutil, sys
import jax.numpy as jnp
import orbax.checkpoint as ocp
from state_core import ParamState
from state_nn import checkpoint

path, where = sys.argv[1], sys.argv[2]
checkpoint.save(path, {"a": ParamState(jnp.full(2, 1.0))}, include_default=False)
if where == "writing":  # killed while orbax writes the new checkpoint
    def killed(*args, **kwargs):
        os._exit(3)
    ocp.JsonCheckpointHandler.async_save = killed
elif where == "swapping":  # killed after the previous checkpoint was set aside, before the new one is in place
    rename = os.rename
    def killed(src, dst):
        if dst == path:
            os._exit(3)
        rename(src, dst)
    os.rename = killed
else:  # killed while deleting the previous checkpoint, the new one in place
    def killed(path, *args, **kwargs):
        os._exit(3)
    shutil.rmtree = killed
checkpoint.save(path, {"a": ParamState(jnp.full(2, 2.0))}, include_default=False, overwrite=True)
"""


@pytest.mark.multiprocess
@pytest.mark.parametrize(("where", "survivor"), [("writing", 1.0), ("swapping", 1.0), ("deleting", 2.0)])
def test_killed_overwrite_leaves_a_restorable_checkpoint_and_the_next_save_cleans_up(ckpt, tmp_path, where, survivor):
    script = tmp_path.parent / f"killed_save_{where}.py"
    script.write_text(textwrap.dedent(_KILLED_SAVE))
    done = subprocess.run([sys.executable, str(script), ckpt, where], capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    assert len(os.listdir(tmp_path)) > 1  # the kill left something behind

    np.testing.assert_array_equal(_restored(ckpt), [survivor, survivor])
    assert checkpoint.read_metadata(ckpt)["paths"] == [("a",)]
    with pytest.raises(FileExistsError, match="already exists"):
        checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 3.0))}, include_default=False)
    np.testing.assert_array_equal(_restored(ckpt), [survivor, survivor])
    checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 3.0))}, include_default=False, overwrite=True)
    np.testing.assert_array_equal(_restored(ckpt), [3.0, 3.0])
    _only_the_checkpoint(tmp_path)


def test_orbax_temporary_directory_left_by_a_killed_write_is_removed(ckpt, tmp_path):
    checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 1.0))}, include_default=False)
    leftover = tmp_path / "ckpt.orbax-checkpoint-tmp"
    (leftover / "values").mkdir(parents=True)
    (leftover / "values" / "partial").write_bytes(b"\0" * 10)
    np.testing.assert_array_equal(_restored(ckpt), [1.0, 1.0])
    checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 2.0))}, include_default=False, overwrite=True)
    np.testing.assert_array_equal(_restored(ckpt), [2.0, 2.0])
    _only_the_checkpoint(tmp_path)


# ---------------------------------------------------------------------- restore is all or nothing
class _InterruptedState(State):
    """A state whose next write receives a KeyboardInterrupt (as from Ctrl-C) once armed."""

    armed = False

    def __setattr__(self, name, value):
        if name == "_value" and _InterruptedState.armed:
            _InterruptedState.armed = False
            raise KeyboardInterrupt
        super().__setattr__(name, value)


def test_interrupt_during_write_back_restores_every_state(ckpt):
    states = {f"s{i}": (_InterruptedState if i == 3 else State)(jnp.full(2, float(i))) for i in range(12)}
    checkpoint.save(ckpt, states, include_default=False)
    for s in states.values():
        s.value = jnp.full(2, -1.0)
    _InterruptedState.armed = True
    with pytest.raises(KeyboardInterrupt):
        checkpoint.restore(ckpt, states)
    assert not _InterruptedState.armed  # the interrupt did arrive during the write-back
    for i, s in enumerate(states.values()):
        np.testing.assert_array_equal(s.value, [float(i), float(i)])


# ---------------------------------------------------------------------- damaged checkpoints
def _truncate_meta(path):
    meta = os.path.join(path, "meta", "metadata")
    with open(meta) as f:
        text = f.read()
    with open(meta, "w") as f:
        f.write(text[: len(text) // 2])


def _drop_meta_file(path):
    os.remove(os.path.join(path, "meta", "metadata"))


def _drop_values(path):
    shutil.rmtree(os.path.join(path, "values"))


def _drop_array_data(path):
    for root, _, files in os.walk(os.path.join(path, "values")):
        for name in files:
            if name not in ("_METADATA", "_sharding", "_CHECKPOINT_METADATA", "manifest.ocdbt"):
                os.remove(os.path.join(root, name))


def _drop_leaves_list(path):
    meta = os.path.join(path, "meta", "metadata")
    with open(meta) as f:
        data = json.load(f)
    del data["states"][1]["leaves"]
    with open(meta, "w") as f:
        json.dump(data, f)


def _shape_disagrees_with_data(path):
    meta = os.path.join(path, "meta", "metadata")
    with open(meta) as f:
        data = json.load(f)
    data["states"][1]["leaves"][0]["shape"] = [4]  # the stored host array has 3 elements
    with open(meta, "w") as f:
        json.dump(data, f)


# orbax leaves an asyncio callback behind when a read fails; it is reported at garbage collection.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize(
    ("damage", "host_size", "message"),
    [
        (_truncate_meta, 3, r"is damaged: its metadata cannot be read \(JSONDecodeError"),
        (_drop_meta_file, 3, r"is damaged: its metadata cannot be read \(FileNotFoundError"),
        (_drop_values, 3, r"is incomplete: its array data \(the 'values' item\) is missing"),
        (_drop_array_data, 3, r"is damaged or incomplete: reading its arrays failed \(ValueError: NOT_FOUND"),
        (_drop_leaves_list, 3, r"is damaged: its metadata is malformed: state \['h'\] has no list of leaves"),
        (
            _shape_disagrees_with_data,
            4,
            r"is damaged: the array stored for state 'h' is float64\[3\] but its metadata says",
        ),
    ],
)
def test_damaged_checkpoint_is_a_value_error_and_restores_nothing(ckpt, damage, host_size, message):
    checkpoint.save(ckpt, {"a": ParamState(jnp.ones(2)), "h": State(np.ones(3))}, include_default=False)
    damage(ckpt)
    target = {"a": ParamState(jnp.full(2, 7.0)), "h": State(np.full(host_size, 7.0))}
    with pytest.raises(ValueError, match=f"checkpoint at '{ckpt}' " + message + r".*Re-save it"):
        checkpoint.restore(ckpt, target)
    np.testing.assert_array_equal(target["a"].value, [7.0, 7.0])
    np.testing.assert_array_equal(target["h"].value, np.full(host_size, 7.0))
    gc.collect()  # report orbax's leftover callback here, under this test's filter

    # a damaged checkpoint is still ours: overwrite=True replaces it
    checkpoint.save(ckpt, {"a": ParamState(jnp.full(2, 5.0))}, include_default=False, overwrite=True)
    np.testing.assert_array_equal(_restored(ckpt), [5.0, 5.0])


def test_paths_that_hold_no_checkpoint(tmp_path):
    target = {"a": ParamState(jnp.ones(1))}
    plain = tmp_path / "plain"
    (plain / "meta").mkdir(parents=True)  # a `meta` folder among other files is not enough
    (plain / "notes.txt").write_text("hi")
    with pytest.raises(ValueError, match=r"'.*plain' is not a checkpoint written by state_nn.checkpoint.save"):
        checkpoint.restore(str(plain), target)
    with pytest.raises(FileExistsError, match=r"is not a checkpoint written by state_nn.checkpoint.save"):
        checkpoint.save(str(plain), target, overwrite=True)
    assert (plain / "notes.txt").read_text() == "hi"
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match=r"'.*afile' is a file, not a checkpoint directory"):
        checkpoint.read_metadata(str(afile))


# ---------------------------------------------------------------------- zero-size states
def test_zero_size_states_round_trip(ckpt, tmp_path):
    states = {
        "empty": State(jnp.zeros((0, 3))),
        "host": State(np.zeros((2, 0), np.int64)),
        "half": ParamState(jnp.zeros((0,), jnp.bfloat16)),
        "keys": RandomState(jax.random.split(jax.random.key(0), 0)),
        "full": ParamState(jnp.arange(3.0)),
    }
    checkpoint.save(ckpt, states, include_default=False)
    fresh = {
        "empty": State(jnp.ones((0, 3))),
        "host": State(np.ones((2, 0), np.int64)),
        "half": ParamState(jnp.ones((0,), jnp.bfloat16)),
        "keys": RandomState(jax.random.split(jax.random.key(1), 0)),
        "full": ParamState(jnp.zeros(3)),
    }
    checkpoint.restore(ckpt, fresh)
    assert fresh["empty"].value.shape == (0, 3) and fresh["empty"].value.dtype == jnp.float32
    assert isinstance(fresh["host"].value, np.ndarray) and fresh["host"].value.shape == (2, 0)
    assert fresh["host"].value.dtype == np.int64
    assert fresh["half"].value.dtype == jnp.bfloat16
    assert jax.dtypes.issubdtype(fresh["keys"].value.dtype, jax.dtypes.prng_key) and fresh["keys"].value.shape == (0,)
    np.testing.assert_array_equal(fresh["full"].value, [0.0, 1.0, 2.0])

    with pytest.raises(ValueError, match=r"state 'empty': saved float32\[0, 3\], target holds float32\[0, 4\]"):
        checkpoint.restore(ckpt, {**fresh, "empty": State(jnp.zeros((0, 4)))})

    # only zero-size states: a checkpoint without array data, overwriting a full one
    only_empty = {"empty": State(jnp.zeros((0, 3)))}
    checkpoint.save(ckpt, only_empty, include_default=False, overwrite=True)
    checkpoint.restore(ckpt, only_empty)
    assert only_empty["empty"].value.shape == (0, 3)
    _only_the_checkpoint(tmp_path)
