"""In place by default: a written State's old buffer is donated only when nothing else can reach it."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose, assert_array_equal

import state_random
from state_core import ParamState, State, StatefulFunction, donation, set_donation
from state_core.engine import exclusively_held
from state_nn import Map, Module
from state_transform import for_loop, jit, pmap2, shard_map, vmap2

N = jax.device_count()

# The states here are tiny; these tests are about who may be donated, not about the size gate.
pytestmark = pytest.mark.usefixtures("donate_small")


def _pointer(x):
    return x.addressable_shards[0].data.unsafe_buffer_pointer()


class Acc(Module):
    def init_state(self):
        self.v = State(jnp.zeros(4), name="v")

    def update(self, x):
        self.v.value = self.v.value * 0.5 + x
        return self.v.value.sum()


def _transform(kind, s, reads=()):
    """A call that writes ``s`` (``s.value = s.value * 0.5 + x``) under the given transformation."""

    def body(x):
        extra = sum(r.value.sum() for r in reads) * 0.0
        s.value = s.value * 0.5 + x + extra
        total = s.value.sum()
        return jax.lax.psum(total, "x") if kind == "shard_map" else total

    if kind == "jit":
        f = jit(body)
        return lambda x: f(x)
    if kind == "vmap2":
        f = vmap2(body, state_in_axes={0: s}, state_out_axes={0: s})
        return lambda x: f(jnp.broadcast_to(x, (N, *np.shape(x))))
    if kind == "pmap2":
        f = pmap2(body, state_in_axes={0: s}, state_out_axes={0: s})
        return lambda x: f(jnp.broadcast_to(x, (N, *np.shape(x))))
    if kind == "shard_map":
        mesh = jax.make_mesh((N,), ("x",))
        f = shard_map(body, mesh, in_specs=(P(),), out_specs=P(), state_in_specs={s: P("x")})
        return lambda x: f(x)
    if kind == "for_loop":
        return lambda x: for_loop(body, jnp.broadcast_to(x, (2, *np.shape(x))))
    raise AssertionError(kind)


def _start(kind):
    shape = (N, 4) if kind in ("vmap2", "pmap2") else (N * 2,) if kind == "shard_map" else (4,)
    return State(jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape) + 0.0, name="s")


KINDS = ["jit", "vmap2", "pmap2", "shard_map", "for_loop"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_array_the_user_holds_is_never_deleted(kind):
    s = _start(kind)
    call = _transform(kind, s)
    call(1.0)
    call(1.0)  # steady: the next call would donate if nothing held the value
    held = s.value
    expected = np.asarray(held).copy()
    call(1.0)
    assert not held.is_deleted()
    assert_array_equal(np.asarray(held), expected)


@pytest.mark.parametrize("kind", KINDS)
def test_another_state_or_a_read_only_state_holding_the_same_array_keeps_it(kind):
    s = _start(kind)
    call = _transform(kind, s)
    call(1.0)
    call(1.0)
    twin = State(s.value, name="twin")  # another State, never read by the call
    other = _start(kind)
    reader = State(other.value, name="reader")
    call_reading = _transform(kind, other, reads=(reader,))  # the same array read as a read-only state
    call_reading(1.0)
    other.value = reader.value  # written state and read-only state now share one array
    expected = np.asarray(reader.value).copy()
    call_reading(1.0)
    call(1.0)
    assert not twin.value.is_deleted() and not reader.value.is_deleted()
    assert_array_equal(np.asarray(reader.value), expected)


def test_an_array_passed_as_an_argument_in_the_same_call_is_kept():
    s = State(jnp.ones(4), name="s")
    f = jit(lambda x: setattr(s, "value", s.value + x) or None)
    f(jnp.ones(4))
    f(jnp.ones(4))
    same = s.value
    f(same)  # the written state's own value is also the argument
    assert not same.is_deleted()
    assert_allclose(np.asarray(s.value), np.full(4, 6.0))


def test_a_value_returned_by_an_earlier_call_stays_readable():
    s = State(jnp.ones(4), name="s")

    def step():
        s.value = s.value * 2
        return s.value

    f = jit(step)
    outs = [f() for _ in range(4)]
    for k, out in enumerate(outs):
        assert_allclose(np.asarray(out), np.full(4, 2.0 ** (k + 1)))


def test_a_container_the_user_kept_keeps_its_arrays():
    s = State({"a": jnp.ones(3), "b": (jnp.zeros(2), jnp.ones(1))}, name="tree")

    def step():
        s.value = jax.tree.map(lambda v: v + 1, s.value)

    f = jit(step)
    f()
    f()
    kept = s.value["b"]  # part of the value, held by the user
    f()
    assert not kept[0].is_deleted()
    assert_allclose(np.asarray(kept[0]), [2.0, 2.0])
    del kept
    pointer = s.value["a"].unsafe_buffer_pointer()
    f()
    assert s.value["a"].unsafe_buffer_pointer() == pointer  # nothing else holds it: in place
    assert_allclose(np.asarray(s.value["a"]), np.full(3, 5.0))


@pytest.mark.parametrize("kind", ["jit", "vmap2", "for_loop"])
def test_a_value_only_its_state_holds_is_updated_in_place(kind):
    s = _start(kind)
    call = _transform(kind, s)
    call(1.0)
    pointer = _pointer(s.value)
    call(1.0)
    assert _pointer(s.value) == pointer


@pytest.mark.parametrize("kind", ["pmap2", "shard_map"])
def test_values_on_several_devices_are_updated_in_place_once_they_keep_their_layout(kind):
    s = _start(kind)
    call = _transform(kind, s)
    call(1.0)  # the first call places the value where the program keeps it
    call(1.0)
    pointer = _pointer(s.value)
    call(1.0)
    assert _pointer(s.value) == pointer


def test_map_updates_its_members_in_place_and_keeps_what_the_user_holds():
    ens = Map(Acc(), init_map_size=8)
    ens.init_all_states()
    x = jnp.ones((8, 4))
    ens(x)
    ens(x)
    pointer = _pointer(ens.module.v.value)
    ens(x)
    assert _pointer(ens.module.v.value) == pointer
    held = ens.module.v.value
    ens(x)
    assert not held.is_deleted()


@pytest.mark.parametrize("kind", KINDS)
def test_results_are_bit_identical_with_donation_on_and_off(kind):
    def run():
        state_random.seed(3)
        s = _start(kind)
        call = _transform(kind, s)
        outs = [np.asarray(call(jnp.float32(k))) for k in range(4)]
        return outs, np.asarray(s.value)

    with donation(True):
        on = run()
    with donation(False):
        off = run()
    for a, b in zip(on[0], off[0], strict=True):
        assert_array_equal(a, b)
    assert_array_equal(on[1], off[1])


def test_set_donation_switches_it_off_for_the_process():
    s = State(jnp.ones(4), name="s")
    f = jit(lambda: setattr(s, "value", s.value + 1) or None)
    f()
    set_donation(False)
    try:
        pointer = s.value.unsafe_buffer_pointer()
        f()
        assert s.value.unsafe_buffer_pointer() != pointer
    finally:
        set_donation(True)


def test_a_program_that_may_fail_after_dispatch_never_donates_and_a_failure_keeps_the_states():
    s = State(jnp.ones(4), name="s")

    def check(v):
        if v > 10:
            raise RuntimeError("too large")

    def step(x):
        s.value = s.value * x
        jax.debug.callback(check, s.value.sum())

    f = jit(step)
    f(1.0)
    f(1.0)
    before = s.value
    with pytest.raises(Exception, match="too large"):
        f(3.0)
    assert not before.is_deleted()
    assert s.value is before
    assert_allclose(np.asarray(s.value), np.ones(4))


def test_a_write_that_changes_the_shape_donates_nothing_and_warns_nothing():
    s = State(jnp.ones(2), name="grows")
    f = jit(lambda: setattr(s, "value", jnp.concatenate([s.value, s.value])) or None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Some donated buffers were not usable" would fail here
        f()
        f()
        f()
    assert s.value.shape == (16,)


def test_donation_is_off_while_jax_checks_for_nans():
    s = State(jnp.ones(3), name="s")
    f = jit(lambda: setattr(s, "value", s.value + 1) or None)
    f()
    f()
    with jax.debug_nans(True):
        pointer = s.value.unsafe_buffer_pointer()
        f()
        assert s.value.unsafe_buffer_pointer() != pointer


def test_exclusively_held_counts_every_node_of_a_pytree():
    s = ParamState({"w": jnp.ones(2), "b": [jnp.zeros(1)]})
    assert exclusively_held([s._value])
    inner = s.value["b"]
    assert not exclusively_held([s._value])
    del inner
    assert exclusively_held([s._value])
    leaf = s.value["w"]
    assert not exclusively_held([s._value])
    del leaf
    twin = [s.value]  # a second list holding the value
    assert not exclusively_held([s._value])
    del twin


def _key_stepper(k, kind, donate_states):
    """A call that replaces the typed key in ``k`` by the first half of its split and returns a draw."""

    def draw():
        new, sub = jax.random.split(k.value)
        k.value = new
        return jax.random.uniform(sub)

    if kind == "jit":
        return jit(draw, donate_states=donate_states)
    return StatefulFunction(draw, donate_states=donate_states)


def _key_after(key_data, n):
    key = jax.random.wrap_key_data(jnp.asarray(key_data))
    for _ in range(n):
        key, _ = jax.random.split(key)
    return np.asarray(jax.random.key_data(key))


@pytest.mark.parametrize("kind", ["jit", "StatefulFunction"])
@pytest.mark.parametrize("donate_states", [True, "default"])
def test_key_data_the_user_holds_is_never_deleted(kind, donate_states):
    k = State(jax.random.key(7), name="k")
    start = np.asarray(jax.random.key_data(k.value))
    step = _key_stepper(k, kind, True if donate_states == "default" else donate_states)
    step()
    step()  # steady: the next call would donate if nothing held the key
    data = jax.random.key_data(k.value)  # the key's own buffer, held without the key
    step()
    assert not data.is_deleted()
    assert_array_equal(np.asarray(data), _key_after(start, 2))
    assert_array_equal(np.asarray(jax.random.key_data(k.value)), _key_after(start, 3))


def test_the_array_a_key_was_wrapped_around_is_never_deleted():
    raw = jax.random.key_data(jax.random.key(3))
    expected = np.asarray(raw).copy()
    k = State(jax.random.wrap_key_data(raw), name="k")  # the key's buffer is the user's array
    step = _key_stepper(k, "jit", True)
    step()
    step()
    assert not raw.is_deleted()
    assert_array_equal(np.asarray(raw), expected)
    assert_array_equal(np.asarray(jax.random.key_data(k.value)), _key_after(expected, 2))


def test_a_key_nothing_else_holds_is_still_updated_in_place():
    k = State(jax.random.key(5), name="k")
    step = _key_stepper(k, "jit", True)
    step()
    pointer = jax.random.key_data(k.value).unsafe_buffer_pointer()  # nothing keeps the key data
    step()
    assert jax.random.key_data(k.value).unsafe_buffer_pointer() == pointer


def test_an_unreferenced_old_value_is_donated_and_a_referenced_one_kept_with_donate_states_true():
    s = State(jnp.arange(4.0), name="s")
    f = jit(lambda: setattr(s, "value", s.value * 2.0), donate_states=True)
    f()
    f()
    held = s.value
    f()
    assert not held.is_deleted()
    assert_array_equal(np.asarray(held), [0.0, 4.0, 8.0, 12.0])
    assert_array_equal(np.asarray(s.value), [0.0, 8.0, 16.0, 24.0])
    del held
    pointer = s.value.unsafe_buffer_pointer()
    f()  # nothing but the State refers to the old value: donated, the new value takes its buffer
    assert s.value.unsafe_buffer_pointer() == pointer
    assert_array_equal(np.asarray(s.value), [0.0, 16.0, 32.0, 48.0])
