"""Validation the README promises: bad host parameters raise ValueError naming the argument
before the key is split; device arrays are never copied to the host to be checked."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_array_equal

import state_random as sr
from state_random import RandomState


@pytest.fixture(autouse=True)
def _keep_default_key():
    saved = sr.DEFAULT._value
    yield
    sr.DEFAULT.restore_value(saved)


NAN = float("nan")

CASES = [
    ("uniform", (1.0, 0.0), {}, r"uniform: `low` must be less than `high`.*low=1.0 and high=0.0"),
    ("uniform", (NAN, 1.0), {}, r"uniform: `low` is NaN"),
    ("binomial", (2.5, 0.5), {}, r"binomial: `n` must be a whole number of trials, got 2.5"),
    ("binomial", (np.array([2.0, 3.5]), 0.5), {}, r"binomial: `n` must be a whole number"),
    (
        "multivariate_normal",
        (np.zeros(2), [[1.0, 2.0], [2.0, 1.0]]),
        {},
        r"`cov` must be positive semi-definite; its smallest eigenvalue is -1",
    ),
    ("multivariate_normal", (np.zeros(2), [[1.0, 0.5], [0.0, 1.0]]), {}, r"`cov` must be a symmetric matrix"),
    ("normal", (NAN,), {}, r"normal: `loc` is NaN"),
    ("normal", (0.0, np.array([1.0, NAN])), {}, r"normal: `scale` contains NaN"),
    ("normal", ([0.0, NAN],), {}, r"normal: `loc` contains NaN"),
    ("gamma", (NAN,), {}, r"gamma: `shape` is NaN"),
    (
        "randint",
        (0, 2**40),
        {},
        r"randint: `high` must fit in int32 \(\[-2147483648, 2147483647\]\), got 1099511627776",
    ),
    ("randint", (-(2**40), 0), {}, r"randint: `low` must fit in int32"),
    ("categorical", ([],), {}, r"categorical: `logits` has no categories \(shape \(0,\) along axis -1\)"),
    ("categorical", (np.zeros((3, 0)),), {}, r"categorical: `logits` has no categories"),
    ("f", (0.0, 1.0), {}, r"f: `dfnum` must be > 0"),
    ("noncentral_chisquare", (1.0, -1.0), {}, r"noncentral_chisquare: `nonc` must be >= 0"),
    ("noncentral_f", (1.0, 0.0, 1.0), {}, r"noncentral_f: `dfden` must be > 0"),
    ("triangular", (0.0, 2.0, 1.0), {}, r"triangular: `mode` must lie in \[left, right\]"),
    ("triangular", (1.0, 1.0, 1.0), {}, r"triangular: `left` must be less than `right`"),
    ("vonmises", (0.0, -1.0), {}, r"vonmises: `kappa` must be >= 0"),
    ("wald", (-1.0, 1.0), {}, r"wald: `mean` must be > 0"),
    ("weibull_min", (1.0, 0.0), {}, r"weibull_min: `scale` must be > 0"),
    ("power", (0.0,), {}, r"power: `a` must be > 0"),
    ("rayleigh", (-1.0,), {}, r"rayleigh: `scale` must be > 0"),
    ("loggamma", (0.0,), {}, r"loggamma: `a` must be > 0"),
    ("standard_gamma", (-1.0,), {}, r"standard_gamma: `shape` must be > 0"),
    ("standard_t", (0.0,), {}, r"standard_t: `df` must be > 0"),
    ("hypergeometric", (2, 2, 5), {}, r"hypergeometric: `nsample` must be at most ngood \+ nbad"),
    ("hypergeometric", (2.5, 2, 1), {}, r"hypergeometric: `ngood` must be a whole number"),
    ("logseries", (1.0,), {}, r"logseries: `p` must be in \[0, 1\)"),
    ("zipf", (1.0,), {}, r"zipf: `a` must be > 1"),
    ("negative_binomial", (0.0, 0.5), {}, r"negative_binomial: `n` must be > 0"),
    ("negative_binomial", (1.0, 0.0), {}, r"negative_binomial: `p` must be a probability in \(0, 1\]"),
    ("multinomial", (5, [0.7, 0.7, 0.1]), {}, r"multinomial: `sum\(pvals\[..., :-1\]\)` must be <= 1"),
    ("multinomial", (5, []), {}, r"multinomial: `pvals` must have at least one category"),
    ("multinomial", (2.5, [0.5, 0.5]), {}, r"multinomial: `n` must be a whole number"),
    ("orthogonal", (0,), {}, r"orthogonal: `n` must be >= 1"),
    ("random_integers", (3, 1), {}, r"random_integers: `low` must be <= `high` \(both included\)"),
    ("randint_like", (np.zeros(3), 5, 5), {}, r"randint_like: `low` must be less than `high`"),
    ("choice", (["a", "b"],), {"p": [0.5, 0.6]}, r"choice: the probabilities `p` must sum to 1"),
    ("choice", ([],), {}, r"choice: `a` must not be empty"),
]


@pytest.mark.parametrize("name,args,kwargs,match", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_host_parameter_raises_before_the_split(name, args, kwargs, match):
    rng = RandomState(3)
    before = np.asarray(jax.random.key_data(rng.value))
    with pytest.raises(ValueError, match=match):
        getattr(rng, name)(*args, **kwargs)
    assert_array_equal(np.asarray(jax.random.key_data(rng.value)), before)
    # The module-level function validates the same way and leaves DEFAULT alone.
    sr.seed(9)
    with pytest.raises(ValueError, match=match):
        getattr(sr, name)(*args, **kwargs)
    assert bool(sr.get_key() == jax.random.key(9))


def test_device_array_parameters_are_not_copied_to_the_host(monkeypatch):
    scale = jnp.ones(4_000_000, jnp.float32)
    loc = jnp.zeros(4_000_000, jnp.float32)
    copies = []

    def spy(self, *args, **kwargs):
        copies.append(self.shape)
        raise AssertionError("a device array was copied to the host for validation")

    array_type = type(scale)
    for attr in ("__array__", "tolist", "item", "__float__", "__int__", "__bool__"):
        monkeypatch.setattr(array_type, attr, spy, raising=False)
    rng = RandomState(0)
    x = rng.normal(loc, scale)
    y = rng.uniform(loc, scale + 1.0)
    z = rng.exponential(scale)
    b = rng.bernoulli(scale * 0.5)
    monkeypatch.undo()
    assert copies == []
    assert x.shape == y.shape == z.shape == b.shape == (4_000_000,)
    assert float(jnp.std(x)) == pytest.approx(1.0, abs=0.01)


def test_device_array_values_are_not_checked_host_values_are():
    # The documented trade-off: a negative scale in a device array is not detected
    # (checking it would cost a blocking device-to-host copy on every draw).
    x = RandomState(0).normal(0.0, jnp.array([-1.0, 1.0]))
    assert x.shape == (2,)
    with pytest.raises(ValueError, match=r"normal: `scale` must be >= 0"):
        RandomState(0).normal(0.0, np.array([-1.0, 1.0]))


def test_traced_parameters_skip_value_checks():
    rng = RandomState(0)
    out = jax.jit(lambda lo, hi, k: rng.uniform(lo, hi, key=k))(1.0, 0.0, jax.random.key(1))
    assert out.shape == ()


def test_valid_boundary_values_are_accepted():
    rng = RandomState(0)
    assert rng.binomial(3.0, 0.5).dtype == jnp.int32
    assert rng.randint(-(2**31), 2**31 - 1, size=2).shape == (2,)
    assert rng.multivariate_normal(np.zeros(2), np.array([[1.0, 1.0], [1.0, 1.0]])).shape == (2,)
    assert rng.random_integers(2, 2, size=3).tolist() == [2, 2, 2]
