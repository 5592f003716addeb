"""The global ``DEFAULT`` stream, ``seed`` and ``seed_context``."""

from __future__ import annotations

import jax.random as jr
import numpy as np
import pytest
from numpy.testing import assert_array_equal

import state_random as sr
from state_random import RandomState


def _data(key):
    return np.asarray(jr.key_data(key))


@pytest.fixture(autouse=True)
def _keep_default_key():
    saved = sr.DEFAULT._value
    yield
    sr.DEFAULT.restore_value(saved)


def test_default_is_a_named_random_state():
    assert isinstance(sr.DEFAULT, RandomState)
    assert sr.DEFAULT.name == "DEFAULT"


def test_seed_sets_jax_random_key():
    sr.seed(42)
    assert_array_equal(_data(sr.get_key()), _data(jr.key(42)))
    assert sr.get_key().dtype == jr.key(42).dtype


def test_reproducibility_after_seed():
    sr.seed(10)
    a = [sr.normal(size=2), sr.randint(100, size=3), sr.choice(10, size=2), sr.bernoulli(size=2)]
    sr.seed(10)
    b = [sr.normal(size=2), sr.randint(100, size=3), sr.choice(10, size=2), sr.bernoulli(size=2)]
    for x, y in zip(a, b, strict=True):
        assert_array_equal(np.asarray(x), np.asarray(y))
    sr.seed(11)
    assert not np.array_equal(np.asarray(sr.normal(size=2)), np.asarray(a[0]))


def test_seed_none_gives_fresh_entropy():
    sr.seed(None)
    k1 = _data(sr.get_key())
    sr.seed()
    k2 = _data(sr.get_key())
    assert not np.array_equal(k1, k2)


def test_seed_context_restores_previous_key():
    sr.seed(1)
    sr.normal()
    before = _data(sr.get_key())
    with sr.seed_context(123):
        assert_array_equal(_data(sr.get_key()), _data(jr.key(123)))
        x = sr.normal(size=3)
    assert_array_equal(_data(sr.get_key()), before)
    assert_array_equal(np.asarray(x), np.asarray(jr.normal(jr.split(jr.key(123))[1], (3,))))


def test_seed_context_restores_on_exception_and_nests():
    sr.seed(2)
    before = _data(sr.get_key())
    with pytest.raises(RuntimeError, match="boom"), sr.seed_context(5):
        with sr.seed_context(6):
            assert_array_equal(_data(sr.get_key()), _data(jr.key(6)))
            sr.normal()
        assert_array_equal(_data(sr.get_key()), _data(jr.key(5)))
        raise RuntimeError("boom")
    assert_array_equal(_data(sr.get_key()), before)


def test_seed_context_rejects_bad_seed_without_touching_key():
    sr.seed(3)
    before = _data(sr.get_key())
    with pytest.raises(TypeError, match="seed"), sr.seed_context(1.5):
        pass  # pragma: no cover
    assert_array_equal(_data(sr.get_key()), before)


def test_module_key_functions():
    sr.set_key(jr.key(31))
    assert_array_equal(_data(sr.get_key()), _data(jr.key(31)))
    k = sr.split_key()
    parts = jr.split(jr.key(31))
    assert_array_equal(_data(k), _data(parts[1]))
    ks = sr.split_keys(2)
    assert_array_equal(_data(ks), _data(jr.split(parts[0], 3)[1:]))
    ks3 = sr.split_key(3)
    assert ks3.shape == (3,)


def test_public_api_is_complete():
    expected = {
        "RandomState",
        "DEFAULT",
        "seed",
        "seed_context",
        "get_key",
        "set_key",
        "split_key",
        "split_keys",
        "split_for_lanes",
        "is_single_key",
        "is_random_state",
        "__version__",
    }
    assert expected <= set(sr.__all__)
    for name in sr.__all__:
        assert hasattr(sr, name), name
