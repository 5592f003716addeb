"""Every bad input fails with a clear error, before the key is touched."""

from __future__ import annotations

import jax.numpy as jnp
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


# (call on a RandomState, exception type, regex the message must match)
METHOD_ERRORS = [
    (lambda r: r.seed(2.5), TypeError, r"seed.*must be an int.*float"),
    (lambda r: r.seed("3"), TypeError, r"seed.*must be an int.*str"),
    (lambda r: r.seed(True), TypeError, r"seed.*must be an int.*bool"),
    (lambda r: r.seed(jnp.float32(1.0)), TypeError, r"seed"),
    (lambda r: r.seed(2**64), ValueError, r"seed.*64-bit"),
    (lambda r: r.set_key(2.5), TypeError, r"set_key: `key` must be an int.*or a PRNG key, got float"),
    (lambda r: r.set_key(jnp.zeros(2)), TypeError, r"set_key.*typed PRNG key"),
    (lambda r: r.set_key(np.zeros(3, np.uint32)), ValueError, r"set_key.*shape \(2,\)"),
    (lambda r: r.normal(size=-1), ValueError, r"normal: `size` must be >= 0, got -1"),
    (lambda r: r.normal(size=2.5), TypeError, r"normal: `size` must be None, an int or a tuple"),
    (lambda r: r.normal(size="3"), TypeError, r"normal: `size`.*str"),
    (lambda r: r.normal(size=(2, -1)), ValueError, r"`size\[1\]` must be >= 0"),
    (lambda r: r.uniform(size=(2, 1.5)), TypeError, r"`size\[1\]` must be an int"),
    (lambda r: r.rand(2.5), TypeError, r"rand: `dimension 0` must be an int"),
    (lambda r: r.randn(2, -3), ValueError, r"randn: `dimension 1` must be >= 0"),
    (lambda r: r.random(True), TypeError, r"random: `size`"),
    (lambda r: r.bernoulli(1.5), ValueError, r"bernoulli: `p` must be a probability in \[0, 1\], got 1.5"),
    (lambda r: r.bernoulli(-0.1, size=3), ValueError, r"bernoulli: `p`"),
    (lambda r: r.bernoulli(np.array([0.2, 1.2])), ValueError, r"`p`.*max 1.2"),
    (lambda r: r.bernoulli(float("nan")), ValueError, r"`p`"),
    (lambda r: r.binomial(5, 1.1), ValueError, r"binomial: `p`"),
    (lambda r: r.binomial(-1, 0.5), ValueError, r"binomial: `n` must be >= 0"),
    (lambda r: r.geometric(0.0), ValueError, r"geometric: `p` must be a probability in \(0, 1\]"),
    (lambda r: r.choice(3, p=[0.5, 0.6, -0.1]), ValueError, r"choice: `p` must be a probability"),
    (lambda r: r.choice(3, p=[0.2, 0.2, 0.2]), ValueError, r"choice: .*`p` must sum to 1"),
    (lambda r: r.choice(3, p=[0.5, 0.5]), ValueError, r"choice: `p` must have shape \(3,\)"),
    (lambda r: r.choice(3, size=4, replace=False), ValueError, r"without replacement"),
    (lambda r: r.choice(0), ValueError, r"choice: `a` must be >= 1"),
    (lambda r: r.choice(jnp.array(3.0)), ValueError, r"choice: `a` must be an int or an array"),
    (lambda r: r.randint(5, 5), ValueError, r"randint: `low` must be less than `high`"),
    (lambda r: r.randint(0, size=2), ValueError, r"randint: `low` must be less than `high`"),
    (lambda r: r.randint(3, dtype=jnp.float32), TypeError, r"randint: `dtype` must be an integer dtype"),
    (lambda r: r.normal(scale=-1.0), ValueError, r"normal: `scale` must be >= 0, got -1.0"),
    (lambda r: r.normal(dtype=jnp.int32), TypeError, r"normal: `dtype` must be a floating dtype"),
    (lambda r: r.normal("a"), TypeError, r"normal: `loc` must be a number or an array"),
    (lambda r: r.normal(jnp.zeros(2), size=3), ValueError, r"normal: `size` \(3,\) is not compatible"),
    (lambda r: r.normal(jnp.zeros(2), jnp.ones(3)), ValueError, r"do not broadcast"),
    (lambda r: r.truncated_normal(1.0, 0.0), ValueError, r"`lower` must be less than `upper`"),
    (lambda r: r.truncated_normal(0.0, 1.0, scale=0.0), ValueError, r"truncated_normal: `scale` must be > 0"),
    (lambda r: r.exponential(-2.0), ValueError, r"exponential: `scale`"),
    (lambda r: r.gamma(0.0), ValueError, r"gamma: `shape` must be > 0"),
    (lambda r: r.beta(1.0, -1.0), ValueError, r"beta: `b` must be > 0"),
    (lambda r: r.poisson(-1.0), ValueError, r"poisson: `lam` must be >= 0"),
    (lambda r: r.chisquare(0.0), ValueError, r"chisquare: `df`"),
    (lambda r: r.t(-1.0), ValueError, r"t: `df`"),
    (lambda r: r.pareto(0.0), ValueError, r"pareto: `a`"),
    (lambda r: r.weibull(-1.0), ValueError, r"weibull: `a`"),
    (lambda r: r.lognormal(0.0, -1.0), ValueError, r"lognormal: `sigma`"),
    (lambda r: r.laplace(0.0, -1.0), ValueError, r"laplace: `scale`"),
    (lambda r: r.dirichlet(1.0), ValueError, r"dirichlet: `alpha` must have at least one dimension"),
    (lambda r: r.dirichlet(np.array([1.0, 0.0])), ValueError, r"dirichlet: `alpha` must be > 0"),
    (lambda r: r.multivariate_normal(jnp.zeros(2), jnp.eye(2), method="qr"), ValueError, r"`method`"),
    (lambda r: r.multivariate_normal(jnp.zeros(2), jnp.eye(3)), ValueError, r"`cov` shape"),
    (lambda r: r.categorical(jnp.zeros(3), axis=1), ValueError, r"categorical: `axis` 1 is out of range"),
    (lambda r: r.permutation(jnp.array(3.0)), ValueError, r"permutation: `x` must be an int or an array"),
    (lambda r: r.permutation(-2), ValueError, r"permutation: `x` must be >= 0"),
    (lambda r: r.shuffle(3), ValueError, r"shuffle: `x` must be an array"),
    (lambda r: r.split_key(0), ValueError, r"split_key: `n` must be >= 1"),
    (lambda r: r.split_key(1.5), TypeError, r"split_key: `n` must be an int"),
    (lambda r: r.split_keys(-1), ValueError, r"split_keys: `n`"),
    (lambda r: r.normal(key=jnp.zeros(3)), TypeError, r"normal: `key` must be a typed PRNG key"),
    (lambda r: r.normal(key=jr.split(jr.key(0), 2)), ValueError, r"normal: `key` must be a single key"),
]


@pytest.mark.parametrize("call,exc,match", METHOD_ERRORS, ids=[f"case{i}" for i in range(len(METHOD_ERRORS))])
def test_method_error_leaves_key_unchanged(call, exc, match):
    rng = RandomState(0)
    rng.normal()  # a non-trivial key
    before = _data(rng.value)
    with pytest.raises(exc, match=match):
        call(rng)
    assert_array_equal(_data(rng.value), before)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: sr.seed(1.0), TypeError, r"seed"),
        (lambda: sr.seed("42"), TypeError, r"seed"),
        (lambda: sr.normal(size=-3), ValueError, r"size"),
        (lambda: sr.uniform(size=2.5), TypeError, r"size"),
        (lambda: sr.bernoulli(2.0), ValueError, r"`p`"),
        (lambda: sr.choice(2, size=3, replace=False), ValueError, r"replace"),
        (lambda: sr.set_key("key"), TypeError, r"set_key"),
        (lambda: sr.split_key(0), ValueError, r"`n`"),
    ],
)
def test_module_function_error_leaves_default_unchanged(call, exc, match):
    sr.seed(5)
    sr.normal()
    before = _data(sr.get_key())
    with pytest.raises(exc, match=match):
        call()
    assert_array_equal(_data(sr.get_key()), before)


@pytest.mark.parametrize(
    "arg,exc,match",
    [
        (1.5, TypeError, r"RandomState: `seed_or_key` must be None .*an int seed, a typed PRNG key.*got float 1.5"),
        ("seed", TypeError, r"`seed_or_key`.*got str"),
        (True, TypeError, r"`seed_or_key`.*got bool"),
        ([0, 1], TypeError, r"`seed_or_key`.*got list"),
        (np.zeros(3, np.uint32), ValueError, r"raw uint32 key data.*shape \(2,\).*got shape \(3,\)"),
        (np.zeros((), np.uint32) + 0.5, TypeError, r"`seed_or_key`"),
        (jnp.zeros(2), TypeError, r"`seed_or_key` must be a typed PRNG key"),
        (2**70, ValueError, r"64-bit"),
    ],
)
def test_constructor_errors(arg, exc, match):
    with pytest.raises(exc, match=match):
        RandomState(arg)
