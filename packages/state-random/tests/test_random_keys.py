"""Key handling added for brainstate users: backups, raw key data, seed forms, NumPy seeding."""

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
    np_state = np.random.get_state()
    yield
    sr.DEFAULT.restore_value(saved)
    np.random.set_state(np_state)


def test_backup_and_restore_key():
    rng = RandomState(0)
    rng.backup_key()
    a = rng.normal(size=3)
    with pytest.raises(
        ValueError, match=r"backup_key: RandomState holding ShapedArray\(key<fry>\[\]\) already holds a backed-up key"
    ):
        rng.backup_key()
    rng.restore_key()
    assert bool(rng.value == jr.key(0))
    assert_array_equal(rng.normal(size=3), a)
    with pytest.raises(ValueError, match=r"restore_key: .* has no backed-up key; call backup_key\(\)"):
        rng.restore_key()


def test_split_key_backup_restores_the_pre_split_key():
    rng = RandomState(4, name="noise")
    k = rng.split_key(2, backup=True)
    assert k.shape == (2,)
    with pytest.raises(ValueError, match=r"RandomState 'noise' already holds a backed-up key"):
        rng.split_key(backup=True)
    assert bool(rng.value == jr.split(jr.key(4), 3)[0])  # the failed call did not split
    rng.restore_key()
    assert bool(rng.value == jr.key(4))
    sr.seed(8)
    sr.split_keys(3, backup=True)
    sr.restore_key()
    assert bool(sr.get_key() == jr.key(8))


def test_raw_key_data_is_converted_on_assignment():
    rng = RandomState(0, name="rng")
    rng.value = jr.PRNGKey(3)
    assert jax.dtypes.issubdtype(rng.value.dtype, jax.dtypes.prng_key)
    assert bool(rng.value == jr.key(3))
    rng.restore_value(np.asarray(jr.PRNGKey(5)))
    assert bool(rng.value == jr.key(5))
    assert rng.normal(size=2).shape == (2,)  # the next draw works


def test_state_dict_assign_values_with_raw_key_data():
    class Holder:
        def __init__(self):
            self.rng = RandomState(0, name="rng")
            self.w = state_core.ParamState(jnp.ones(2))

    holder = Holder()
    states = state_core.collect_states(holder)
    path = next(p for p, s in states.items() if s is holder.rng)
    states.assign_values({path: jr.key_data(jr.key(6))})
    assert bool(holder.rng.value == jr.key(6))
    assert_array_equal(holder.rng.normal(size=2), RandomState(6).normal(size=2))


@pytest.mark.parametrize(
    "bad,exc,match",
    [
        (
            jnp.zeros(2),
            TypeError,
            r"RandomState 'rng': `value` must be a typed PRNG key .* got ArrayImpl dtype\('float32'\)",
        ),
        (np.zeros(3, np.uint32), ValueError, r"RandomState 'rng': raw uint32 key data for `value` must have shape"),
        (1.5, TypeError, r"RandomState 'rng': `value` must be a typed PRNG key"),
    ],
)
def test_bad_key_values_are_refused_at_once_naming_the_state(bad, exc, match):
    rng = RandomState(0, name="rng")
    with pytest.raises(exc, match=match):
        rng.value = bad
    with pytest.raises(exc, match=match):
        rng.restore_value(bad)
    assert bool(rng.value == jr.key(0))


@pytest.mark.parametrize(
    "form",
    [5, np.int64(5), jr.key(5), jr.PRNGKey(5), np.asarray(jr.PRNGKey(5))],
    ids=["int", "np.int64", "typed", "raw", "raw-numpy"],
)
def test_seed_set_key_and_rng_accept_brainstate_forms(form):
    sr.seed(form)
    assert bool(sr.get_key() == jr.key(5))
    sr.set_key(form)
    assert bool(sr.get_key() == jr.key(5))
    rng = RandomState(0)
    rng.seed(form)
    assert bool(rng.value == jr.key(5))
    assert bool(sr.default_rng(form).value == jr.key(5))
    assert bool(sr.clone_rng(form).value == jr.key(5))
    k = jr.split(jr.key(5))[1]
    assert_array_equal(RandomState(1).normal(size=2, key=5), jr.normal(jr.key(5), (2,)))
    assert k.shape == ()


def test_seed_also_seeds_numpy():
    sr.seed(42)
    a = np.random.rand(3)
    np.random.seed(42)
    assert_array_equal(a, np.random.rand(3))
    sr.seed(-1)  # brainstate reduces ints modulo 2**32 for NumPy
    b = np.random.rand()
    np.random.seed(2**32 - 1)
    assert b == np.random.rand()
    sr.seed(jr.key(7))  # a key seeds NumPy with its first word
    c = np.random.rand()
    np.random.seed(int(_data(jr.key(7))[0]))
    assert c == np.random.rand()


def test_seed_none_leaves_numpy_alone():
    np.random.seed(3)
    before = np.random.get_state()[1].copy()
    sr.seed()
    assert_array_equal(np.random.get_state()[1], before)


def test_seed_context_seeds_and_restores_numpy_and_default():
    sr.seed(1)
    np.random.seed(0)
    key_before = sr.get_key()
    with sr.seed_context(42):
        inside = np.random.rand()
        sr.normal()
    assert bool(sr.get_key() == key_before)
    assert np.random.rand() == np.random.RandomState(0).rand()
    np.random.seed(42)
    assert inside == np.random.rand()
    with pytest.raises(RuntimeError, match="boom"), sr.seed_context(5):
        raise RuntimeError("boom")
    assert bool(sr.get_key() == key_before)


def test_bad_seed_changes_nothing():
    sr.seed(2)
    np.random.seed(2)
    numpy_before = np.random.get_state()[1].copy()
    for bad in (1.5, "x", True):
        with pytest.raises(TypeError, match=r"seed: `seed_or_key` must be an int"):
            sr.seed(bad)
    with pytest.raises(TypeError, match=r"seed_context: `seed_or_key`"), sr.seed_context(2.5):
        pass
    assert bool(sr.get_key() == jr.key(2))
    assert_array_equal(np.random.get_state()[1], numpy_before)


def test_default_rng_clone_rng_and_key_data():
    assert sr.default_rng() is sr.DEFAULT
    assert sr.clone_rng(clone=False) is sr.DEFAULT
    sr.seed(3)
    clone = sr.clone_rng()
    assert clone is not sr.DEFAULT and bool(clone.value == jr.key(3))
    assert_array_equal(sr.get_key_data(), _data(jr.key(3)))
    assert sr.get_key_data().dtype == np.uint32


def test_self_assign_multi_keys_and_restore():
    rng = RandomState(0)
    rng.self_assign_multi_keys(3)
    assert_array_equal(_data(rng.value), _data(jr.split(jr.key(0), 3)))
    with pytest.raises(ValueError, match=r"split_key: .* holds an array of keys of shape \(3,\)"):
        rng.normal()
    rng.restore_key()
    assert bool(rng.value == jr.key(0))
    sr.seed(2)
    sr.self_assign_multi_keys(2, backup=False)
    assert sr.get_key().shape == (2,)
    with pytest.raises(ValueError, match=r"restore_key: RandomState 'DEFAULT' has no backed-up key"):
        sr.restore_key()
