"""``state_core.environ``: global settings, nested blocks, precision, behaviours, threads and tracing."""

from __future__ import annotations

import os
import re
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import State, StatefulFunction, StateLeakError, environ


@pytest.fixture(autouse=True)
def _fresh_environment():
    """Each test starts and ends with no settings, no behaviours and x64 off."""
    environ.reset()
    x64 = jax.config.read("jax_enable_x64")
    yield
    environ.reset()
    jax.config.update("jax_enable_x64", x64)


# ---------------------------------------------------------------------------- get / set / pop
def test_set_get_pop_roundtrip():
    environ.set(dt=0.1, fit=True, my_key="x")
    assert environ.get_dt() == 0.1
    assert environ.get("fit") is True
    assert environ.get("my_key") == "x"
    assert environ.pop("my_key") == "x"
    assert environ.get("my_key", default=None) is None
    assert environ.pop("my_key", 7) == 7


def test_missing_key_raises_key_error_naming_key_and_description():
    with pytest.raises(KeyError, match=r"'t' is not set \(the current time\).*environ.context\(t=\.\.\.\)"):
        environ.get("t", desc="the current time")
    with pytest.raises(KeyError, match="'dt' is not set"):
        environ.get_dt()
    with pytest.raises(KeyError, match="'nothing' is not set"):
        environ.pop("nothing")


def test_constants_are_brainstates_keys():
    assert (environ.I, environ.T, environ.DT, environ.FIT, environ.PRECISION) == ("i", "t", "dt", "fit", "precision")
    assert environ.SUPPORTED_PRECISIONS == (8, 16, 32, 64, "bf16")
    assert environ.DEFAULT_PRECISION == 32


def test_dt_must_be_a_scalar():
    with pytest.raises(TypeError, match=r"dt must be a scalar, got a value of shape \(2,\)"):
        environ.set(dt=jnp.ones(2))
    with pytest.raises(TypeError, match="dt must be a scalar number or quantity, got str"):
        environ.set(dt="0.1")
    with pytest.raises(TypeError, match="dt must be a scalar"), environ.context(dt=np.ones(3)):
        pass
    assert environ.get("dt", None) is None
    environ.set(dt=np.float32(0.5))
    assert environ.get_dt() == np.float32(0.5)


def test_all_is_a_snapshot_with_precision():
    environ.set(dt=0.1)
    with environ.context(dt=0.2, fit=False) as inside:
        snap = environ.all()
    assert inside == snap == {"dt": 0.2, "fit": False, "precision": 32}
    snap["dt"] = 99
    assert environ.all() == {"dt": 0.1, "precision": 32}


# ---------------------------------------------------------------------------- context
def test_context_nests_and_restores():
    environ.set(dt=1.0)
    with environ.context(dt=0.1, t=0.0):
        assert (environ.get_dt(), environ.get("t")) == (0.1, 0.0)
        with environ.context(t=5.0):
            assert (environ.get_dt(), environ.get("t")) == (0.1, 5.0)
        assert environ.get("t") == 0.0
    assert environ.get_dt() == 1.0
    assert environ.get("t", None) is None


def test_context_restores_on_exception():
    environ.set(fit=True)
    with pytest.raises(ZeroDivisionError), environ.context(fit=False, i=3):
        assert environ.get("fit") is False
        _ = 1 / 0
    assert environ.get("fit") is True
    assert environ.get("i", None) is None


def test_context_refuses_platform_and_device_count():
    with (
        pytest.raises(ValueError, match=r"'platform' cannot be set for a block; use environ.set\(platform=\.\.\.\)"),
        environ.context(platform="cpu"),
    ):
        pass
    with (
        pytest.raises(ValueError, match="'host_device_count' cannot be set for a block"),
        environ.context(host_device_count=2),
    ):
        pass


def test_pop_refused_while_a_block_sets_the_key():
    environ.set(dt=0.1)
    with environ.context(dt=0.2), pytest.raises(ValueError, match=r"'dt' is set by an open `environ.context` block"):
        environ.pop("dt")
    assert environ.get_dt() == 0.1


def test_reset_clears_and_is_refused_inside_a_block():
    environ.set(dt=0.1)
    environ.register_default_behavior("dt", lambda v: None)
    with environ.context(t=0.0), pytest.raises(ValueError, match=r"called inside an `environ.context` block"):
        environ.reset()
    environ.reset()
    assert environ.all() == {"precision": 32}
    assert environ.list_registered_behaviors() == []


def test_reset_undoes_the_x64_switch_of_a_set_precision():
    assert not jax.config.read("jax_enable_x64")
    environ.set(precision=64)
    environ.set(precision="bf16")  # a second set: reset still goes back to the flag before the first
    environ.set(precision=64)
    assert environ.dftype() == jnp.float64
    environ.reset()
    assert not jax.config.read("jax_enable_x64")
    assert environ.get_precision() == 32 and environ.dftype() == jnp.float32


def test_reset_leaves_an_x64_flag_the_user_set_through_jax():
    jax.config.update("jax_enable_x64", True)
    environ.set(dt=0.1)
    environ.reset()
    assert jax.config.read("jax_enable_x64")
    environ.set(precision=32)  # switches x64 off ...
    assert not jax.config.read("jax_enable_x64")
    environ.reset()  # ... and reset restores the user's own setting
    assert jax.config.read("jax_enable_x64")


# ---------------------------------------------------------------------------- precision
@pytest.mark.parametrize(
    ("precision", "bits", "f", "i", "ui", "c"),
    [
        (8, 8, jnp.float8_e5m2, np.int8, np.uint8, np.complex64),
        (16, 16, np.float16, np.int16, np.uint16, np.complex64),
        ("bf16", 16, jnp.bfloat16, np.int16, np.uint16, np.complex64),
        (32, 32, np.float32, np.int32, np.uint32, np.complex64),
        ("64", 64, np.float64, np.int64, np.uint64, np.complex128),
    ],
)
def test_precision_picks_the_default_dtypes(precision, bits, f, i, ui, c):
    with environ.context(precision=precision):
        assert environ.get_precision() == bits
        assert (environ.dftype(), environ.ditype(), environ.dutype(), environ.dctype()) == (f, i, ui, c)


def test_precision_64_switches_x64_like_brainstate_and_the_block_restores_it():
    assert jax.config.read("jax_enable_x64") is False
    with environ.context(precision=64):
        assert jax.config.read("jax_enable_x64") is True
        assert jnp.zeros(1, environ.dftype()).dtype == jnp.float64
    assert jax.config.read("jax_enable_x64") is False
    environ.set_precision(64)
    assert jax.config.read("jax_enable_x64") is True
    assert environ.get("precision") == 64
    environ.set(precision=32)
    assert jax.config.read("jax_enable_x64") is False


def test_unset_precision_follows_jax_x64():
    jax.config.update("jax_enable_x64", True)
    assert environ.get_precision() == 64
    assert environ.dftype() is np.float64
    jax.config.update("jax_enable_x64", False)
    assert environ.get_precision() == 32


def test_invalid_precision_changes_nothing():
    with pytest.raises(ValueError, match=r"precision must be one of \(8, 16, 32, 64, 'bf16'\), got 12"):
        environ.set(precision=12, dt=0.1)
    with pytest.raises(ValueError, match="got True"):
        environ.set_precision(True)
    assert environ.get("dt", None) is None
    assert environ.get_precision() == 32


def test_tolerance_follows_precision():
    assert environ.tolerance() == np.float32(1e-5) and environ.tolerance().dtype == np.float32
    with environ.context(precision=16):
        assert environ.tolerance().dtype == np.float16
    with environ.context(precision=64):
        assert environ.tolerance() == 1e-12


# ---------------------------------------------------------------------------- platform and devices
def test_platform_and_device_count(monkeypatch):
    assert environ.get("platform") == environ.get_platform() == "cpu"
    with pytest.raises(ValueError, match="platform must be one of"):
        environ.set(platform="abacus")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_foo=1 --xla_force_host_platform_device_count=3")
    assert environ.get("host_device_count") == 3
    environ.set_host_device_count(5)
    assert os.environ["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=5", "--xla_cpu_foo=1"]
    assert environ.get_host_device_count() == 5
    monkeypatch.delenv("XLA_FLAGS")
    assert environ.get_host_device_count() == 1
    with pytest.raises(ValueError, match="host_device_count must be a positive int, got -1"):
        environ.set(host_device_count=-1)


# ---------------------------------------------------------------------------- behaviours
def test_behaviors_see_set_enter_and_exit():
    seen = []
    environ.register_default_behavior("dt", seen.append)
    environ.set(dt=0.1)
    with environ.context(dt=0.01):
        pass
    assert seen == [0.1, 0.01, 0.1]
    assert environ.list_registered_behaviors() == ["dt"]
    assert environ.unregister_default_behavior("dt") is True
    assert environ.unregister_default_behavior("dt") is False


def test_a_raising_behavior_fails_the_call_and_changes_nothing():
    def positive(value):
        if value <= 0:
            raise ValueError(f"batch must be positive, got {value}")

    environ.register_default_behavior("batch", positive)
    environ.set(batch=4)
    with pytest.raises(ValueError, match="batch must be positive, got -1"):
        environ.set(batch=-1)
    assert environ.get("batch") == 4
    with pytest.raises(ValueError, match="got 0"), environ.context(batch=0):
        pass
    assert environ.get("batch") == 4


def test_register_checks_its_arguments():
    with pytest.raises(TypeError, match="behavior must be callable, got int"):
        environ.register_default_behavior("dt", 3)
    with pytest.raises(TypeError, match="key must be a str, got int"):
        environ.register_default_behavior(1, print)
    environ.register_default_behavior("dt", print)
    with pytest.raises(ValueError, match="'dt' already has a behaviour; pass replace_if_exist=True"):
        environ.register_default_behavior("dt", repr)
    environ.register_default_behavior("dt", repr, replace_if_exist=True)


# ---------------------------------------------------------------------------- threads
def test_set_is_global_and_blocks_are_per_thread():
    environ.set(dt=0.25)
    seen = {}
    started, release = threading.Event(), threading.Event()

    def worker():
        seen["dt"] = environ.get_dt()
        with environ.context(t=7.0):
            started.set()
            release.wait(5)
            seen["t"] = environ.get("t")

    thread = threading.Thread(target=worker)
    thread.start()
    assert started.wait(5)
    assert environ.get("t", None) is None  # the worker's block is its own
    with environ.context(t=1.0):
        release.set()
        thread.join(5)
        assert environ.get("t") == 1.0
    assert seen == {"dt": 0.25, "t": 7.0}


# ---------------------------------------------------------------------------- tracing
def test_traced_values_in_a_block_inside_jit():
    @jax.jit
    def f(i, t):
        with environ.context(i=i, t=t):
            return environ.get("i") * 10 + environ.get("t")

    assert_allclose(f(2, 0.5), 20.5)
    assert environ.get("t", None) is None


def test_traced_block_inside_stateful_function_updates_a_state():
    v = State(jnp.zeros(2), name="v")

    def step(t):
        with environ.context(t=t):
            v.value = v.value + environ.get("t") * environ.get_dt()

    f = StatefulFunction(step)
    with environ.context(dt=0.5):
        f(jnp.asarray(1.0))
        f(jnp.asarray(3.0))
    assert_allclose(v.value, [2.0, 2.0])
    assert environ.get("t", None) is None


def test_set_with_a_tracer_is_caught_after_the_trace():
    @jax.jit
    def f(x):
        environ.set(i=x)
        return environ.get("i") + 1

    assert_allclose(f(1), 2)
    with pytest.raises(StateLeakError, match=r"'i' holds a JAX tracer.*`with environ.context\(i=\.\.\.\):`"):
        environ.get("i")
    environ.set(i=3)  # a concrete value replaces it
    assert environ.get("i") == 3


# ---------------------------------------------------------------------------- record_reads
def test_record_reads_keeps_outside_values_only():
    environ.set(dt=0.1)
    with environ.context(fit=True), environ.record_reads() as reads:
        with environ.context(t=1.0, dt=0.5):
            environ.get("t")
            environ.get_dt()
        environ.get_dt()
        environ.get("fit")
        environ.get("missing", None)
    assert reads == {"dt": 0.1, "fit": True, "missing": reads["missing"]}
    assert repr(reads["missing"]) == "<unset>"
    assert environ.reads_unchanged(reads) is False  # fit is no longer set
    with environ.context(fit=True):
        assert environ.reads_unchanged(reads) is True
        environ.set(missing=1)
        assert environ.reads_unchanged(reads) is False


def test_reads_unchanged_compares_arrays_by_value_and_tracers_by_identity():
    environ.set(scale=np.array([1.0, 2.0]))
    with environ.record_reads() as reads:
        environ.get("scale")
    environ.set(scale=np.array([1.0, 2.0]))  # a new but equal array
    assert environ.reads_unchanged(reads)
    environ.set(scale=np.array([1.0, 3.0]))
    assert not environ.reads_unchanged(reads)
    environ.set(scale=jnp.array([1.0, 3.0], jnp.float32))
    assert not environ.reads_unchanged({"scale": np.array([1.0, 3.0])})  # NumPy vs JAX: another type

    @jax.jit
    def traced(x):
        with environ.context(k=x):
            with environ.record_reads() as inner:
                environ.get("k")
            assert environ.reads_unchanged(inner)  # the same tracer
            same = environ.reads_unchanged({"k": x + 0})
        assert not same  # another tracer is never "the same"
        return x

    traced(1.0)


def test_all_records_what_it_returns():
    environ.set(dt=0.1)
    with environ.record_reads() as reads:
        environ.all()
    assert reads == {"dt": 0.1, "precision": reads["precision"]}
    assert re.fullmatch("<unset>", repr(reads["precision"]))


def test_a_precision_block_ending_in_one_thread_leaves_another_threads_block_alone():
    a_entered, a_left, b_done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        with environ.context(precision=64):
            a_entered.set()
            b_done.wait(5)  # A stays open until B has entered its own block
        a_left.set()

    def thread_b():
        a_entered.wait(5)
        with environ.context(precision=64):
            b_done.set()
            a_left.wait(5)  # A's block has ended; B's is still open
            seen["x64"] = jax.config.read("jax_enable_x64")
            seen["dtype"] = jnp.zeros(1, dtype=float).dtype
            seen["precision"] = environ.get_precision()

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"x64": True, "dtype": jnp.float64, "precision": 64}
    assert jax.config.read("jax_enable_x64") is False  # and neither block touched this thread
