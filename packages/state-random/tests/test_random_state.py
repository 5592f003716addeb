"""RandomState construction, key handling, laziness and integration with state_core."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from numpy.testing import assert_array_equal

import state_core
import state_random as sr
from state_random import RandomState


def _data(key):
    return np.asarray(jr.key_data(key))


@pytest.fixture(autouse=True)
def _keep_default_key():
    saved = sr.DEFAULT._value
    yield
    sr.DEFAULT.restore_value(saved)


def test_is_a_state_with_public_module_and_repr():
    rng = RandomState(0)
    assert isinstance(rng, state_core.State)
    assert RandomState.__module__ == "state_random"
    assert repr(rng) == "RandomState(\n  value=ShapedArray(key<fry>[])\n)"
    assert repr(RandomState(0, name="rng")) == "RandomState(\n  name='rng',\n  value=ShapedArray(key<fry>[])\n)"
    assert rng == rng and rng != RandomState(0)  # identity equality, as for every State


@pytest.mark.parametrize(
    "arg",
    [42, np.int64(42), jr.key(42), jr.PRNGKey(42), np.asarray(jr.PRNGKey(42)), jnp.int32(42)],
    ids=["int", "np.int64", "typed-key", "raw-PRNGKey", "raw-numpy", "0d-int-array"],
)
def test_constructor_accepts_seed_key_or_raw_data(arg):
    rng = RandomState(arg)
    key = rng.value
    assert jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) and key.shape == ()
    assert_array_equal(_data(key), _data(jr.key(42)))
    assert key.dtype == jr.key(42).dtype  # threefry2x32, like jax.random.key


def test_constructor_none_uses_fresh_entropy():
    a, b = RandomState(), RandomState()
    assert a.value.dtype == jr.key(0).dtype
    assert not np.array_equal(_data(a.value), _data(b.value))


def test_key_array_state():
    keys = jr.split(jr.key(0), 4)
    rng = RandomState(keys)
    assert rng.value.shape == (4,)
    raw = RandomState(jr.key_data(keys))  # raw uint32[4, 2]
    assert_array_equal(_data(raw.value), _data(keys))
    rng.set_key(jr.split(jr.key(1), 3))
    assert rng.value.shape == (3,)
    # Each key can be used by a plain jax.vmap, one lane per key.
    out = jax.vmap(lambda k: RandomState(k).normal())(rng.value)
    want = jnp.stack([jr.normal(jr.split(k)[1], ()) for k in jr.split(jr.key(1), 3)])
    assert_array_equal(np.asarray(out), np.asarray(want))
    with pytest.raises(ValueError, match="array of keys of shape \\(3,\\)"):
        rng.normal()
    assert rng.value.shape == (3,)


def test_int_seed_is_lazy_and_materialises_on_first_access():
    rng = RandomState(5)
    assert "_value" not in rng.__dict__  # no key (and no JAX computation) yet
    assert repr(rng) == "RandomState(\n  value=ShapedArray(key<fry>[])\n)"
    assert "_value" not in rng.__dict__  # repr does not create the key
    raw = rng._value  # direct reads of the raw slot see a real key, too
    assert_array_equal(_data(raw), _data(jr.key(5)))
    assert rng.__dict__["_value"] is raw
    lazy = RandomState()
    assert "_value" not in lazy.__dict__
    assert lazy.get_key().shape == ()


def test_lazy_key_first_read_inside_a_trace_is_concrete():
    rng = RandomState(11)
    f = state_core.StatefulFunction(lambda: rng.normal(size=2))
    out = f()
    assert not isinstance(rng._value, jax.core.Tracer)
    want = jr.normal(jr.split(jr.key(11))[1], (2,))
    assert_array_equal(np.asarray(out), np.asarray(want))
    # A plain jax.jit that only reads the key (explicit key= draws) leaves no tracer behind.
    lazy = RandomState(12)
    with state_core.plain_trace_policy("ignore"):  # the key is a constant of this program, on purpose
        jax.jit(lambda: jr.normal(lazy.get_key(), ()))()
    assert not isinstance(lazy._value, jax.core.Tracer)
    assert_array_equal(_data(lazy._value), _data(jr.key(12)))


@pytest.mark.parametrize("axis_type", ["Explicit", "Auto"])
def test_lazy_key_first_read_inside_shard_map_under_set_mesh(axis_type):
    # Inside a shard_map traced under jax.set_mesh the mesh axes are manual, and JAX cannot
    # compute there eagerly: the key is made outside that mesh context, still concrete.
    mesh = jax.make_mesh((8,), ("x",), axis_types=(getattr(jax.sharding.AxisType, axis_type),))
    lazy = RandomState(13)
    seen = []

    def body():
        seen.append(lazy._value)
        return ()

    with jax.set_mesh(mesh):
        jax.make_jaxpr(jax.shard_map(body, mesh=mesh, in_specs=(), out_specs=()))()
    assert not isinstance(seen[0], jax.core.Tracer)
    assert_array_equal(_data(lazy._value), _data(jr.key(13)))


def test_seed_resets_key_and_reproduces():
    rng = RandomState(0)
    rng.seed(3)
    a = rng.normal(size=4), rng.uniform(size=2)
    rng.seed(3)
    b = rng.normal(size=4), rng.uniform(size=2)
    assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))
    assert_array_equal(np.asarray(a[1]), np.asarray(b[1]))
    rng.seed(np.int32(3))
    assert_array_equal(_data(rng.value), _data(jr.key(3)))
    rng.seed(None)
    assert not np.array_equal(_data(rng.value), _data(jr.key(3)))


def test_split_key_discipline():
    rng = RandomState(9)
    k = rng.split_key()
    parts = jr.split(jr.key(9), 2)
    assert_array_equal(_data(k), _data(parts[1]))
    assert_array_equal(_data(rng.value), _data(parts[0]))
    ks = rng.split_key(3)
    parts2 = jr.split(parts[0], 4)
    assert ks.shape == (3,)
    assert_array_equal(_data(ks), _data(parts2[1:]))
    assert_array_equal(_data(rng.value), _data(parts2[0]))
    ks2 = rng.split_keys(2)
    assert_array_equal(_data(ks2), _data(jr.split(parts2[0], 3)[1:]))


def test_get_set_key():
    rng = RandomState(0)
    rng.set_key(jr.key(77))
    assert_array_equal(_data(rng.get_key()), _data(jr.key(77)))
    rng.set_key(jr.PRNGKey(78))
    assert_array_equal(_data(rng.get_key()), _data(jr.key(78)))
    assert rng.get_key().dtype == jr.key(0).dtype


def test_clone_is_independent():
    a = RandomState(4)
    b = a.clone()
    assert b is not a and isinstance(b, RandomState)
    assert_array_equal(np.asarray(a.normal(size=3)), np.asarray(b.normal(size=3)))
    a.normal()
    assert not np.array_equal(_data(a.value), _data(b.value))


def test_private_state_is_independent_of_default():
    sr.seed(0)
    default_before = _data(sr.get_key())
    rng = RandomState(0)
    x = rng.normal(size=3)
    assert_array_equal(_data(sr.get_key()), default_before)
    private_before = _data(rng.value)
    y = sr.normal(size=3)
    assert_array_equal(_data(rng.value), private_before)
    assert_array_equal(np.asarray(x), np.asarray(y))  # same seed, same numbers, separate streams


def test_reads_and_writes_are_recorded_on_trace_stacks():
    rng = RandomState(0)
    with state_core.StateTraceStack() as trace:
        rng.normal()
    assert trace.get_write_states() == [rng]
    trace.restore_original_values()
    assert_array_equal(_data(rng.value), _data(jr.key(0)))
    with state_core.StateTraceStack() as trace:
        rng.normal(key=jr.key(1))
    assert len(trace) == 0  # an explicit key touches no state


def test_strict_state_accepts_draws():
    rng = RandomState(0, strict=True, tag="rng")
    rng.normal()
    assert rng.tags == frozenset({"rng"})
    with state_core.strict_state_checks():
        sr.normal()


def test_catch_new_states_sees_random_states():
    with state_core.catch_new_states(tag="new") as caught:
        rng = RandomState(1)
    assert caught.get_states() == [rng] and "new" in rng.tags
