"""Steady calls update written states in place whenever nothing else holds their values.

The closures written out per program shape (and the general loop beyond them)
decide per call, as the general path does: donation switched on in every
thread, no JAX trace running, nothing but its State holding each written value,
and every argument on one device. A value anyone else can still reach is never
deleted, and no call shows JAX's warning about donated buffers it could not use.
"""

import sys
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

import state_core._steady_call as steady_module
from state_core import State, StatefulFunction, donation, set_donation
from state_core._donation import DONATION_SWITCH, exclusive_local_count
from state_core._switch import Switch


def _pointer(state):
    return state.value.unsafe_buffer_pointer()


def _program(*states, read=()):
    """A function adding x to every state in ``states`` (and reading ``read``), called twice."""

    def step(x):
        total = x
        for s in read:
            total = total + s.value
        for s in states:
            s.value = s.value + x
            total = total + s.value
        return total

    f = StatefulFunction(step)
    x = jnp.ones(2)
    f(x)
    f(x)
    return f, x


def _donates(f, x, *states):
    """Whether the next call ``f(x)`` reuses the buffer of every state in ``states``."""
    before = [_pointer(s) for s in states]
    f(x)
    return [_pointer(s) for s in states] == before


def test_written_out_steady_calls_donate_every_written_state():
    a, b, w = State(jnp.zeros(2), name="a"), State(jnp.zeros(2), name="b"), State(jnp.full(2, 5.0), name="w")
    f, x = _program(a, b, read=[w])
    (entry,) = f._cache.values()
    assert entry.runner.__name__ == "unrolled_steady_call"
    assert "donating" in entry.runner.__code__.co_filename
    assert _donates(f, x, a, b)
    out = f(x)
    # Four calls: a and b hold 4; the output is x + w + a + b.
    assert_allclose(np.asarray(out), np.full(2, 1.0 + 5.0 + 4.0 + 4.0))
    assert_allclose(np.asarray(a.value), [4.0, 4.0])
    assert_allclose(np.asarray(w.value), [5.0, 5.0])


def test_more_states_than_the_written_out_closures_take_donate_too():
    states = [State(jnp.full(2, float(i)), name=f"s{i}") for i in range(steady_module.UNROLLED_UP_TO + 1)]
    f, x = _program(*states)
    (entry,) = f._cache.values()
    assert entry.runner.__name__ == "plain_run"
    assert _donates(f, x, *states)
    assert_allclose(np.asarray(states[-1].value), np.full(2, len(states) + 2.0))


@pytest.mark.parametrize("n_states", [1, steady_module.UNROLLED_UP_TO + 1], ids=["written_out", "loop"])
def test_a_value_held_elsewhere_is_never_deleted(n_states):
    states = [State(jnp.zeros(2), name=f"s{i}") for i in range(n_states)]
    f, x = _program(*states)
    held = states[0].value  # the user keeps the old value
    pointer = held.unsafe_buffer_pointer()
    f(x)
    assert not held.is_deleted()
    assert_allclose(np.asarray(held), [2.0, 2.0])
    assert_allclose(np.asarray(states[0].value), [3.0, 3.0])
    assert states[0].value.unsafe_buffer_pointer() != pointer
    del held
    assert _donates(f, x, *states)  # nothing holds it any more: in place again


def test_a_state_value_passed_as_the_argument_is_not_donated():
    s = State(jnp.ones(2), name="s")
    f, _ = _program(s)
    x = s.value  # the argument is the state's own value
    out = f(x)
    assert not x.is_deleted()
    # s held 3 after two calls; now 3 + x = 6, and the output is x + 6.
    assert_allclose(np.asarray(out), [9.0, 9.0])
    assert_allclose(np.asarray(s.value), [6.0, 6.0])
    assert_allclose(np.asarray(x), [3.0, 3.0])


def test_no_donation_while_switched_off_in_this_thread_or_the_process():
    s = State(jnp.zeros(2), name="s")
    f, x = _program(s)
    with donation(False):
        assert DONATION_SWITCH.on_everywhere is False
        assert not _donates(f, x, s)
    assert DONATION_SWITCH.on_everywhere is True
    assert _donates(f, x, s)
    set_donation(False)
    try:
        assert not _donates(f, x, s)
    finally:
        set_donation(True)
    assert _donates(f, x, s)
    assert_allclose(np.asarray(s.value), [6.0, 6.0])


def test_another_threads_block_leaves_this_thread_donating():
    s = State(jnp.zeros(2), name="s")
    f, x = _program(s)
    inside, leave = threading.Event(), threading.Event()

    def hold_a_block():
        with donation(False):
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=hold_a_block)
    thread.start()
    try:
        inside.wait(10)
        assert DONATION_SWITCH.on_everywhere is False  # (the fast flag is off; the thread's own setting decides)
        assert _donates(f, x, s)
    finally:
        leave.set()
        thread.join()
    assert DONATION_SWITCH.on_everywhere is True


def test_the_fast_flag_of_a_switch_follows_its_default_and_open_blocks():
    switch = Switch(True, "probe")
    assert switch.on_everywhere
    with switch.block(True):
        assert not switch.on_everywhere and switch.on()  # a block is open: ask the thread
    assert switch.on_everywhere
    switch.set(False)
    assert not switch.on_everywhere
    with switch.block(True):
        assert switch.on()
    switch.set(True)
    assert switch.on_everywhere


def test_an_argument_on_several_devices_is_not_donated_and_warns_nothing():
    mesh = jax.make_mesh((8,), ("x",))
    s = State(jnp.zeros((8, 2)), name="s")

    def step(x):
        s.value = s.value + x
        return s.value.sum()

    f = StatefulFunction(step)
    x = jnp.ones((8, 2))
    f(x)
    f(x)
    spread = jax.device_put(x, NamedSharding(mesh, P("x")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # JAX warns when a donated buffer cannot be used
        assert float(f(spread)) == 3.0 * 16
        f(spread)
        f(spread)
    assert_allclose(np.asarray(s.value), np.full((8, 2), 5.0))
    # A direct call donates without asking where its arguments lie: none is made for spread ones.
    assert [part.arg_avals for part in f._cache._direct_parts] == [[x.aval]]
    f(x)
    assert_allclose(np.asarray(s.value), np.full((8, 2), 6.0))


def test_a_state_moved_onto_a_mesh_and_back_warns_nothing_and_donates_again():
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))  # (Auto axes: no mesh context needed)
    s = State(jnp.zeros((8, 2)), name="s")

    def step(x):
        # Split over the mesh, the new value comes out replicated: another layout than the
        # old one, whose buffers it cannot take (JAX would warn if they were donated).
        s.value = s.value.sum(0, keepdims=True) * jnp.ones((8, 1)) + x
        return s.value.sum()

    f = StatefulFunction(step)
    x = jnp.ones(2)
    f(x)
    f(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):  # placed anew before each call: the same aval object each time
            s.value = jax.device_put(s.value, NamedSharding(mesh, P("x")))
            f(x)
        assert len(s.value.sharding.device_set) == 8
        s.value = jax.device_put(s.value, jax.devices()[0])
        f(x)
        assert _donates(f, x, s)
    # Each call: every row becomes the column sums (8 x the row) plus 1.
    expected = np.zeros((8, 2))
    for _ in range(7):
        expected = expected.sum(0, keepdims=True) * np.ones((8, 1)) + 1.0
    assert_allclose(np.asarray(s.value), expected)


def test_a_value_on_several_devices_never_has_the_aval_of_a_one_device_value():
    # The steady calls rely on it: a state value that passes their aval check lies on
    # one device when the reference value did.
    one = jax.jit(lambda v: v * 2)(jnp.ones((8, 4)))
    for mesh in (jax.make_mesh((8,), ("x",)), jax.sharding.Mesh(np.array(jax.devices()), ("x",))):
        for spec in (P("x"), P()):
            spread = jax.device_put(one, NamedSharding(mesh, spec))
            assert spread.aval != one.aval
    on_device_3 = jax.device_put(one, jax.devices()[3])
    assert on_device_3.aval == one.aval  # (one device each: the same layout class)


def test_the_reference_count_of_a_written_out_call_is_calibrated():
    s = State(jnp.zeros(2))
    v0 = s._value
    assert sys.getrefcount(v0) == exclusive_local_count()


def _key_program():
    key = State(jax.random.key(0), name="key")

    def draw(x):
        k1, k2 = jax.random.split(key.value)
        key.value = k1
        return x + jax.random.normal(k2, x.shape)

    f = StatefulFunction(draw)
    x = jnp.zeros(3)
    f(x)
    f(x)
    return key, f, x


def _key_pointer(state):
    return jax.random.key_data(state.value).unsafe_buffer_pointer()


def test_a_written_typed_key_is_updated_in_place_by_the_written_out_call():
    key, f, x = _key_program()
    (entry,) = f._cache._entries.values()
    assert entry.runner.__name__ == "unrolled_steady_call"
    assert "1 keys" in entry.runner.__code__.co_filename
    before = _key_pointer(key)
    f(x)
    assert _key_pointer(key) == before
    expected = jax.random.split(jax.random.split(jax.random.split(jax.random.key(0))[0])[0])[0]
    assert_allclose(np.asarray(jax.random.key_data(key.value)), np.asarray(jax.random.key_data(expected)))


@pytest.mark.parametrize("held", ["key", "key data"])
def test_a_typed_key_held_elsewhere_is_never_deleted(held):
    key, f, x = _key_program()
    kept = key.value if held == "key" else jax.random.key_data(key.value)
    f(x)
    f(x)
    data = jax.random.key_data(kept) if held == "key" else kept
    assert not data.is_deleted()
    after_two_draws = jax.random.split(jax.random.split(jax.random.key(0))[0])[0]
    assert_allclose(np.asarray(data), np.asarray(jax.random.key_data(after_two_draws)))
