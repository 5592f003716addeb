"""The checked replay path: donation split, one run per call, transactional write-back."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

from state_core import ParamState, ShortTermState, State
from state_transform import grad, jit, vmap2

# A failed callback leaves an effect token that makes every later jax.effects_barrier()
# in the process raise again (JAX behaviour, on every device kind in JAX 0.10.0), which
# would break unrelated tests in the same worker; these cases run in their own process.
_RUNTIME_ERROR_CASES = """
import jax
jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P
from state_core import State
from state_transform import jit, pmap2, shard_map, vmap2

n = jax.device_count()
mesh = jax.make_mesh((n,), ("x",))
for which in ("jit", "vmap2", "pmap2", "shard_map"):
    state = State(jnp.arange(n, dtype=jnp.float32))
    calls = []

    def callback(x):
        calls.append(1)
        raise ValueError("callback refused")

    def step(x):
        state.value = state.value + x
        jax.debug.callback(callback, x)
        return state.value

    f = {
        "jit": lambda g: jit(g),
        "vmap2": lambda g: vmap2(g, state_in_axes={0: state}, state_out_axes={0: state}),
        "pmap2": lambda g: pmap2(g, state_in_axes={0: state}, state_out_axes={0: state}),
        "shard_map": lambda g: shard_map(g, mesh, in_specs=P("x"), out_specs=P("x"), state_in_specs={state: P("x")}),
    }[which](step)
    per_call = n if which in ("pmap2", "shard_map") else 1
    for attempt in range(2):  # the first call traces, the second replays the cached program
        calls.clear()
        try:
            f(jnp.ones(n))
        except (jax.errors.JaxRuntimeError, ValueError) as err:  # by path and JAX version
            assert "callback refused" in str(err), (which, err)
        else:
            raise AssertionError(f"{which}: the failing call returned normally")
        assert len(calls) == per_call, (which, attempt, len(calls))
        np.testing.assert_allclose(np.asarray(state.value), np.arange(n))
    print(which, "ok")
"""


def test_runtime_error_runs_once_and_keeps_every_state():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _RUNTIME_ERROR_CASES], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["jit", "ok", "vmap2", "ok", "pmap2", "ok", "shard_map", "ok"]


def test_donate_states_never_donates_read_only_states():
    w = ParamState(jnp.ones(3), name="w")
    b = ShortTermState(jnp.zeros(3), name="b")

    def step(x):
        b.value = b.value + w.value * x

    f = jit(step, donate_states=True)
    f(1.0)
    f(2.0)
    assert_allclose(np.asarray(w.value), [1.0, 1.0, 1.0])  # would raise "Array has been deleted"
    assert_allclose(np.asarray(b.value), [3.0, 3.0, 3.0])
    call = f.get_traced_call()
    assert [call.in_states[i] for i in call.rw_index] == [b]
    assert [call.in_states[i] for i in call.ro_index] == [w]


@pytest.mark.usefixtures("donate_small")
def test_a_written_buffer_is_donated_only_when_nothing_else_holds_it():
    b = ShortTermState(jnp.zeros(3))

    def step(x):
        b.value = b.value + x

    f = jit(step)
    f(1.0)
    old = b.value
    f(1.0)
    assert not old.is_deleted()  # held by the user: kept
    del old
    pointer = b.value.unsafe_buffer_pointer()
    f(1.0)
    assert b.value.unsafe_buffer_pointer() == pointer  # held by the state alone: in place
    assert_allclose(np.asarray(b.value), [3.0, 3.0, 3.0])


def test_debug_nans_apply_to_cached_calls():
    s = State(jnp.ones(()))

    def step(x):
        s.value = jnp.log(x)

    f = jit(step)
    f(1.0)
    with jax.debug_nans(True):
        for _ in range(2):
            with pytest.raises(FloatingPointError):
                f(-1.0)
            assert float(s.value) == 0.0


def test_keyboard_interrupt_in_write_back_writes_all_states(interrupted_state):
    a, b, c = State(jnp.zeros(())), interrupted_state(jnp.zeros(())), State(jnp.zeros(()))

    def step(x):
        a.value = a.value + x
        b.value = b.value + x
        c.value = c.value + x

    f = jit(step)
    f(1.0)
    b.armed = True
    with pytest.raises(KeyboardInterrupt):
        f(1.0)
    assert [float(s.value) for s in (a, b, c)] == [2.0, 2.0, 2.0]


def test_trace_time_error_keeps_states_and_runs_nothing():
    s = State(jnp.zeros(2))

    def step(x):
        if x.shape[0] == 3:
            raise ValueError("three is not allowed")
        s.value = s.value + x
        return s.value

    f = jit(step)
    f(jnp.ones(2))
    with pytest.raises(ValueError, match="three is not allowed"):
        f(jnp.ones(3))
    assert_allclose(np.asarray(s.value), [1.0, 1.0])
    f(jnp.ones(2))  # the cached signature still works
    assert_allclose(np.asarray(s.value), [2.0, 2.0])


def test_alternating_signatures_trace_once_each_for_jit_and_vmap2():
    w = ParamState(jnp.arange(4.0))
    traces = []

    def f(x):
        traces.append(x.shape)
        return (x * w.value).sum(-1)

    for make in (jit, vmap2):
        traces.clear()
        g = make(f)
        batches = [jnp.ones((n, 4)) for n in (3, 5, 7)]
        for _ in range(3):
            for x in batches:
                assert_allclose(np.asarray(g(x)), np.full(x.shape[0], 6.0))
        assert len(traces) == 3


def test_grad_retraces_when_a_state_changes_shape():
    w = ParamState(jnp.ones(2))
    g = grad(lambda: (w.value**2).sum(), grad_states=w)
    assert_allclose(np.asarray(g()), [2.0, 2.0])
    w.value = jnp.full(3, 2.0)
    assert_allclose(np.asarray(g()), [4.0, 4.0, 4.0])
    w.value = jnp.full(3, 2, dtype=jnp.int32).astype(jnp.float16)
    assert g().dtype == jnp.float16


def test_grad_of_a_state_listed_twice_gives_the_full_gradient_to_both():
    q = ParamState(jnp.array([1.0, 2.0]))
    g = grad(lambda: (q.value**2).sum(), grad_states=[q, q])
    first, second = g()
    assert_allclose(np.asarray(first), [2.0, 4.0])
    assert_allclose(np.asarray(second), [2.0, 4.0])


class _Cell:
    def init_all_states(self, size=2):
        self.v = ShortTermState(jnp.zeros(size))

    def update(self, x):
        self.v.value = self.v.value + x
        return self.v.value


@pytest.mark.parametrize("make", [jit, lambda f: vmap2(f, in_axes=None, axis_size=2)], ids=["jit", "vmap2"])
def test_new_states_in_the_object_graph_are_used_after_init(make):
    cell = _Cell()
    cell.init_all_states()
    f = make(cell.update)
    f(1.0)
    old = cell.v
    cell.init_all_states()  # replaces the State object the trace saw
    f(1.0)
    assert old is not cell.v
    assert float(np.asarray(old.value).ravel()[0]) == 1.0  # the detached state is left alone
    assert float(np.asarray(cell.v.value).ravel()[0]) == 1.0


def test_new_states_reached_through_a_closure_are_used():
    cell = _Cell()
    cell.init_all_states()
    f = jit(lambda x: cell.update(x))
    f(1.0)
    old = cell.v
    cell.init_all_states()
    f(2.0)
    assert_allclose(np.asarray(old.value), [1.0, 1.0])
    assert_allclose(np.asarray(cell.v.value), [2.0, 2.0])


def test_unrelated_new_states_do_not_retrace():
    cell = _Cell()
    cell.init_all_states()
    traces = []

    def update(x):
        traces.append(1)
        return cell.update(x)

    f = jit(update)
    f(1.0)
    State(jnp.zeros(()))  # created elsewhere: the graph is walked again but still matches
    f(1.0)
    assert len(traces) == 1
    assert_allclose(np.asarray(cell.v.value), [2.0, 2.0])


@pytest.mark.parametrize("make", [jit, vmap2, lambda f: grad(f, argnums=0)], ids=["jit", "vmap2", "grad"])
def test_library_frames_are_hidden_from_user_errors(make):
    import traceback

    def buggy(x):
        raise ValueError("user bug")

    with pytest.raises(ValueError, match="user bug") as info:
        make(buggy)(jnp.ones(2))
    files = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
    assert any(name.endswith("test_transform_replay.py") for name in files)
    ours = [name for name in files if "/state_core/" in name or "/state_transform/" in name]
    assert ours == [], ours


def test_jit_blocks_before_write_back_only_when_needed():
    from jax.sharding import NamedSharding

    n = jax.device_count()
    mesh = jax.make_mesh((n,), ("x",))
    on_mesh = State(jax.device_put(jnp.zeros(n), NamedSharding(mesh, P("x"))))
    local = State(jnp.zeros(n))

    def add_to(state):
        def step(x):
            state.value = state.value + x

        return step

    f, g = jit(add_to(on_mesh)), jit(add_to(local))
    f(1.0)
    g(1.0)
    assert f._entry(None).program.block  # spans several devices
    assert not g._entry(None).program.block  # one device, no callback: stays asynchronous
    assert_allclose(np.asarray(on_mesh.value), np.ones(n))
    assert_allclose(np.asarray(local.value), np.ones(n))


def test_debug_infs_apply_to_cached_vmap2_calls():
    s = ShortTermState(jnp.zeros(2))

    def step(x):
        s.value = 1.0 / x
        return s.value

    f = vmap2(step, state_in_axes={0: s}, state_out_axes={0: s})
    f(jnp.ones(2))
    with jax.debug_infs(True), pytest.raises(FloatingPointError):
        f(jnp.zeros(2))
    assert_allclose(np.asarray(s.value), [1.0, 1.0])
