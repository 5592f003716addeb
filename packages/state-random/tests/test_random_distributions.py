"""The samplers added for NumPy/brainstate coverage draw from the right distribution.

Fixed seeds make every check deterministic; tolerances are loose enough for any
correct sampler and far tighter than the distance to a wrong one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats

from state_random import RandomState

# What is drawn, checked against SciPy and NumPy: the newest end only. How a draw splits
# the key and takes key= is checked at both ends by test_random_samplers.py.
pytestmark = pytest.mark.numerics

N = 20_000


def _ks_ok(x, dist):
    result = stats.kstest(np.asarray(x, np.float64).ravel(), dist.cdf)
    assert result.pvalue > 1e-3, f"KS test rejected: statistic {result.statistic:.4f}, p {result.pvalue:.2e}"


CONTINUOUS = [
    ("standard_cauchy", (), stats.cauchy()),
    ("standard_exponential", (), stats.expon()),
    ("standard_gamma", (2.5,), stats.gamma(2.5)),
    ("standard_t", (5.0,), stats.t(5.0)),
    ("f", (5.0, 10.0), stats.f(5.0, 10.0)),
    ("noncentral_chisquare", (3.0, 2.0), stats.ncx2(3.0, 2.0)),
    ("noncentral_chisquare", (0.5, 2.0), stats.ncx2(0.5, 2.0)),
    ("noncentral_f", (3.0, 20.0, 3.0), stats.ncf(3.0, 20.0, 3.0)),
    ("loggamma", (2.0,), stats.loggamma(2.0)),
    ("maxwell", (), stats.maxwell()),
    ("power", (3.0,), stats.powerlaw(3.0)),
    ("rayleigh", (2.0,), stats.rayleigh(scale=2.0)),
    ("triangular", (-1.0, 0.0, 2.0), stats.triang(1 / 3, loc=-1.0, scale=3.0)),
    ("vonmises", (0.5, 4.0), stats.vonmises(4.0, loc=0.5)),
    ("wald", (1.5, 2.0), stats.invgauss(0.75, scale=2.0)),
    ("weibull_min", (2.0, 3.0), stats.weibull_min(2.0, scale=3.0)),
    ("chisquare", (4.0,), stats.chi2(4.0)),
]


# Statistical fits (N draws per sampler, a compile each): once per `hatch run test`, at the newest JAX.
@pytest.mark.slow
@pytest.mark.parametrize("name,args,dist", CONTINUOUS, ids=[f"{c[0]}{c[1]}" for c in CONTINUOUS])
def test_continuous_sampler_matches_scipy(name, args, dist):
    x = getattr(RandomState(7), name)(*args, size=N)
    assert x.shape == (N,) and x.dtype == jnp.float32
    _ks_ok(x, dist)


def _assert_pmf(x, pmf, support):
    x = np.asarray(x)
    freq = np.array([(x == k).mean() for k in support])
    assert_allclose(freq, [pmf(k) for k in support], atol=0.012)


DISCRETE = [
    ("hypergeometric", (7, 5, 6), stats.hypergeom(12, 7, 6).pmf, range(0, 7)),
    ("logseries", (0.6,), stats.logser(0.6).pmf, range(1, 8)),
    ("zipf", (2.5,), stats.zipf(2.5).pmf, range(1, 8)),
    ("negative_binomial", (3, 0.4), stats.nbinom(3, 0.4).pmf, range(0, 12)),
    ("random_integers", (2, 5), lambda k: 0.25 * (2 <= k <= 5), range(0, 8)),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,args,pmf,support", DISCRETE, ids=[d[0] for d in DISCRETE])
def test_discrete_sampler_matches_scipy(name, args, pmf, support):
    x = getattr(RandomState(11), name)(*args, size=N)
    assert x.shape == (N,) and jnp.issubdtype(x.dtype, jnp.integer)
    _assert_pmf(x, pmf, support)


def test_multinomial_counts_sum_to_n_with_multinomial_means():
    p = np.array([0.2, 0.3, 0.5])
    x = np.asarray(RandomState(3).multinomial(10, p, size=N))
    assert x.shape == (N, 3)
    assert_array_equal(x.sum(-1), np.full(N, 10))
    assert_allclose(x.mean(0), 10 * p, atol=0.05)
    assert_allclose(x.var(0), 10 * p * (1 - p), rtol=0.05)


def test_multinomial_with_array_n_and_pvals_batch():
    x = RandomState(0).multinomial(np.array([3, 7]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert_array_equal(x, [[3, 0], [0, 7]])


def test_orthogonal_matrices_are_orthogonal_and_haar_centred():
    q = np.asarray(RandomState(5).orthogonal(4, size=2000), np.float64)
    assert q.shape == (2000, 4, 4)
    assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(4), q.shape), atol=1e-5)
    # Haar measure: every entry has mean 0 and variance 1/n.
    assert_allclose(q.mean(0), np.zeros((4, 4)), atol=0.05)
    assert_allclose(q.var(0), np.full((4, 4), 0.25), atol=0.03)


def test_weibull_min_without_scale_is_weibull():
    assert_array_equal(RandomState(1).weibull_min(1.5, size=5), RandomState(1).weibull(1.5, size=5))


@pytest.mark.parametrize(
    "name,args",
    [
        ("standard_cauchy", ()),
        ("standard_exponential", ()),
        ("standard_gamma", (2.0,)),
        ("standard_t", (3.0,)),
        ("f", (2.0, 3.0)),
        ("noncentral_chisquare", (2.0, 1.0)),
        ("noncentral_f", (2.0, 3.0, 1.0)),
        ("loggamma", (1.0,)),
        ("maxwell", ()),
        ("power", (2.0,)),
        ("rayleigh", (1.0,)),
        ("triangular", (0.0, 0.5, 1.0)),
        ("vonmises", (0.0, 1.0)),
        ("wald", (1.0, 1.0)),
        ("weibull_min", (1.0,)),
        ("hypergeometric", (3, 3, 2)),
        ("logseries", (0.5,)),
        ("zipf", (2.0,)),
        ("negative_binomial", (2, 0.5)),
        ("multinomial", (4, [0.5, 0.5])),
        ("random_integers", (4,)),
        ("random_sample", ()),
        ("ranf", ()),
        ("sample", ()),
    ],
)
def test_one_split_per_draw_and_key_argument(name, args):
    """Each draw advances the state exactly once (keeps split(K, 2)[0]); key= leaves it alone."""
    rng = RandomState(0)
    k0 = rng.value
    a = getattr(rng, name)(*args, size=3)
    parts = jax.random.split(k0, 2)
    assert bool(rng.value == parts[0])
    b = getattr(rng, name)(*args, size=3, key=parts[1])
    assert bool(rng.value == parts[0])
    assert_array_equal(a, b)


def test_like_helpers_follow_the_template():
    rng = RandomState(0)
    template = jnp.zeros((2, 3), jnp.float16)
    u = rng.rand_like(template)
    assert u.shape == (2, 3) and u.dtype == jnp.float16
    n = rng.randn_like(jnp.zeros(4, jnp.int32))
    assert n.shape == (4,) and n.dtype == jnp.float32
    i = rng.randint_like(jnp.zeros(50, jnp.int32), 2, 5)
    assert i.dtype == jnp.int32 and set(np.asarray(i).tolist()) == {2, 3, 4}
    f = rng.randint_like(jnp.zeros(3, jnp.float32), 4)
    assert f.dtype == jnp.float32 and bool(((f >= 0) & (f < 4) & (f == jnp.floor(f))).all())


def test_aliases_of_random_draw_the_same_numbers():
    ref = RandomState(2).random(4)
    for name in ("random_sample", "ranf", "sample"):
        assert_array_equal(getattr(RandomState(2), name)(4), ref)
    assert_array_equal(RandomState(2).standard_t(3.0, size=4), RandomState(2).t(3.0, size=4))
    key = jax.random.split(jax.random.key(2))[1]
    assert_array_equal(RandomState(2).standard_cauchy(4), jax.random.cauchy(key, (4,)))


def test_normal_accepts_none_for_loc_and_scale():
    assert_array_equal(RandomState(4).normal(None, None, size=3), RandomState(4).normal(size=3))
    assert_array_equal(RandomState(4).laplace(None, 2.0, size=3), RandomState(4).laplace(0.0, 2.0, size=3))


def test_choice_over_non_numeric_sequences():
    colours = ["red", "green", "blue"]
    x = RandomState(0).choice(colours, size=50)
    assert isinstance(x, np.ndarray) and set(x.tolist()) == set(colours)
    assert RandomState(0).choice(colours, p=[0.0, 0.0, 1.0]) == "blue"
    objs = [object(), object()]
    picked = RandomState(1).choice(np.array(objs, dtype=object), size=4)
    assert all(any(p is o for o in objs) for p in picked)
    # Same indices as the numeric path.
    idx = np.asarray(RandomState(0).choice(3, size=50))
    assert_array_equal(x, np.array(colours)[idx])


def test_check_valid_false_skips_host_checks():
    with pytest.raises(ValueError, match=r"chisquare: `df` must be > 0"):
        RandomState(0).chisquare(-1.0)
    assert RandomState(0).chisquare(-1.0, check_valid=False).shape == ()  # no ValueError
    with pytest.raises(ValueError, match=r"truncated_normal: `loc` is more than 2 `scale` outside"):
        RandomState(0).truncated_normal(0.0, 1.0, loc=10.0)
    x = RandomState(0).truncated_normal(0.0, 1.0, size=4, loc=2.5, check_valid=False)
    assert x.shape == (4,)


def test_check_valid_on_the_brainstate_samplers_that_have_it():
    rng = RandomState(0)
    for call in (
        lambda **kw: rng.bernoulli(1.5, **kw),
        lambda **kw: rng.binomial(2.5, 0.5, **kw),
        lambda **kw: rng.power(-1.0, **kw),
        lambda **kw: rng.multinomial(3, [0.9, 0.9, 0.1], **kw),
    ):
        with pytest.raises(ValueError):
            call()
        call(check_valid=False)  # the draw happens; its values are the caller's business
