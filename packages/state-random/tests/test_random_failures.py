"""Samplers never fail silently: infinite parameters as NumPy refuses them, impossible sizes,
draws that raise, non-PSD covariances, and no sampler that never returns."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_random as sr
from state_random import RandomState

INF = float("inf")


@pytest.fixture(autouse=True)
def _keep_default_key():
    saved = sr.DEFAULT._value
    yield
    sr.DEFAULT.restore_value(saved)


def _data(rng):
    return np.asarray(jax.random.key_data(rng.value))


def _refused_before_the_split(name, args, kwargs, exc, match):
    rng = RandomState(3)
    before = _data(rng)
    with pytest.raises(exc, match=match):
        getattr(rng, name)(*args, **kwargs)
    assert_array_equal(_data(rng), before)
    sr.seed(9)
    with pytest.raises(exc, match=match):
        getattr(sr, name)(*args, **kwargs)
    assert bool(sr.get_key() == jax.random.key(9))


# ---------------------------------------------------------------------- infinite parameters
# (sampler, args, message) where numpy.random.RandomState raises too (ValueError or OverflowError).
NUMPY_REFUSES = [
    ("uniform", (0.0, INF), r"uniform: `high` must be finite, got inf"),
    ("uniform", (-INF, 0.0), r"uniform: `low` must be finite, got -inf"),
    ("uniform", (-1e308, 1e308), r"uniform: `high - low` must be finite \(the range is too wide"),
    ("binomial", (INF, 0.5), r"binomial: `n` must be finite, got inf"),
    ("binomial", (1e19, 0.5), r"binomial: `n` must fit in int32"),
    ("binomial", (10, INF), r"binomial: `p` must be a probability in \[0, 1\], got inf"),
    (
        "poisson",
        (INF,),
        r"poisson: `lam` must be at most 2147020237, for the counts to fit int32 \(or pass a wider `dtype`\), got inf",
    ),
    ("poisson", (1e19,), r"poisson: `lam` must be at most 2147020237, .* got 1e\+19"),
    ("poisson", (-INF,), r"poisson: `lam` must be >= 0"),
    ("geometric", (INF,), r"geometric: `p` must be a probability in \(0, 1\]"),
    ("negative_binomial", (3.0, INF), r"negative_binomial: `p` must be a probability in \(0, 1\]"),
    ("logseries", (INF,), r"logseries: `p` must be in \[0, 1\)"),
    ("zipf", (-INF,), r"zipf: `a` must be > 1"),
    ("hypergeometric", (INF, 5, 4), r"hypergeometric: `ngood` must be finite"),
    ("randint", (0, INF), r"randint: `high` must fit in int32"),
    ("randint", (-INF, 10), r"randint: `low` must fit in int32"),
    ("multinomial", (INF, [0.5, 0.5]), r"multinomial: `n` must be finite"),
    ("multinomial", (10, [INF, 0.5]), r"multinomial: `pvals` must be a probability"),
    ("choice", (2,), r"choice: `p` must be a probability"),
    ("triangular", (INF, 0.0, 2.0), r"triangular: `left` must be less than `right`"),
    ("normal", (0.0, -INF), r"normal: `scale` must be >= 0"),
    ("gamma", (-INF,), r"gamma: `shape` must be > 0"),
    ("vonmises", (0.0, -INF), r"vonmises: `kappa` must be >= 0"),
    ("dirichlet", ([-INF, 1.0],), r"dirichlet: `alpha` must be > 0"),
]


def _kwargs(name):
    return {"p": [INF, 0.5]} if name == "choice" else {}


@pytest.mark.parametrize("name,args,match", NUMPY_REFUSES, ids=[f"{c[0]}-{i}" for i, c in enumerate(NUMPY_REFUSES)])
def test_infinite_parameter_numpy_refuses_is_a_value_error_before_the_split(name, args, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises((ValueError, OverflowError)):  # what we mirror
            getattr(np.random.RandomState(0), name)(*args, **_kwargs(name))
    _refused_before_the_split(name, args, _kwargs(name), ValueError, match)


def test_infinities_beyond_numpy():
    # NumPy returns an overflowed count for an infinite n; here it is refused.
    _refused_before_the_split("negative_binomial", (INF, 0.4), {}, ValueError, r"`n` must be finite")
    # truncated_normal (not in NumPy) divides by `scale`: an infinite loc or scale gives NaN.
    _refused_before_the_split("truncated_normal", (-1.0, 1.0), {"scale": INF}, ValueError, r"`scale` must be finite")
    _refused_before_the_split("truncated_normal", (-1.0, 1.0), {"loc": -INF}, ValueError, r"`loc` must be finite")
    # ... while infinite bounds are a plain normal, as in jax.random.truncated_normal.
    assert np.isfinite(RandomState(0).truncated_normal(-INF, INF, size=4)).all()


@pytest.mark.slow  # rejection loops compiled for several shapes: once per `hatch run test`
def test_infinite_parameters_numpy_accepts_still_draw():
    rng = RandomState(0)
    assert np.isinf(rng.normal(0.0, INF, size=3)).all()
    assert_array_equal(rng.exponential(INF, size=2), [INF, INF])
    assert_array_equal(rng.normal(INF, 1.0, size=2), [INF, INF])
    assert_array_equal(rng.noncentral_chisquare(3.0, INF, size=2), [INF, INF])
    # df <= 1 draws a Poisson mixture, whose int32 count used to clip to a finite number
    assert_array_equal(rng.noncentral_chisquare(0.5, INF, size=2), [INF, INF])
    # NumPy never returns for these two (an endless rejection loop); their limits are exact
    assert_allclose(rng.vonmises(0.5, INF, size=3), [0.5, 0.5, 0.5])
    assert_array_equal(rng.zipf(INF, size=3), [1, 1, 1])


# ---------------------------------------------------------------------- samplers that never returned
@pytest.mark.slow  # rejection loops compiled for several shapes: once per `hatch run test`
def test_vonmises_with_a_huge_concentration_returns_the_narrow_normal():
    # The rejection sampler never accepted from kappa ~ 1e8 on (float32); above 1e6 the
    # normal N(mu, 1 / kappa), as in NumPy.
    for kappa in (2e6, 1e8, 1e10):
        x = np.asarray(RandomState(1).vonmises(0.0, kappa, size=20_000), np.float64)
        assert abs(x.std() * np.sqrt(kappa) - 1.0) < 0.03, kappa
        assert abs(x.mean()) < 5 / np.sqrt(kappa), kappa
    # below float32's resolution around mu: mu itself
    assert_array_equal(RandomState(1).vonmises(0.5, 1e30, size=4), np.full(4, 0.5, np.float32))
    mixed = RandomState(2).vonmises(0.0, np.array([4.0, 1e9, INF]), size=(2, 3))
    assert mixed.shape == (2, 3) and np.isfinite(mixed).all()
    assert_array_equal(mixed[:, 2], [0.0, 0.0])


@pytest.mark.slow  # rejection loops compiled for several shapes: once per `hatch run test`
def test_zipf_with_a_large_exponent_returns_ones():
    # 2**(a - 1) overflows float32 from a = 129 on: the acceptance test was NaN and never true.
    for a in (129.0, 200.0, 1e30):
        assert_array_equal(RandomState(0).zipf(a, size=100), np.ones(100))
    x = RandomState(0).zipf(np.array([2.0, 300.0]), size=(500, 2))
    assert (x[:, 1] == 1).all() and (x[:, 0] > 1).any()


# ---------------------------------------------------------------------- impossible sizes
def _minimal_args():
    cov = np.eye(2)
    return {
        "random": (),
        "random_sample": (),
        "ranf": (),
        "sample": (),
        "uniform": (0.0, 1.0),
        "normal": (),
        "standard_normal": (),
        "truncated_normal": (-1.0, 1.0),
        "lognormal": (),
        "multivariate_normal": (np.zeros(2), cov),
        "exponential": (),
        "standard_exponential": (),
        "gamma": (2.0,),
        "standard_gamma": (2.0,),
        "beta": (2.0, 3.0),
        "chisquare": (3.0,),
        "t": (3.0,),
        "standard_t": (3.0,),
        "pareto": (3.0,),
        "power": (3.0,),
        "weibull": (1.5,),
        "weibull_min": (1.5,),
        "rayleigh": (),
        "maxwell": (),
        "loggamma": (2.0,),
        "laplace": (),
        "logistic": (),
        "gumbel": (),
        "cauchy": (),
        "standard_cauchy": (),
        "f": (5.0, 10.0),
        "noncentral_chisquare": (3.0, 2.0),
        "noncentral_f": (3.0, 20.0, 3.0),
        "triangular": (),
        "vonmises": (0.5, 4.0),
        "wald": (1.0, 2.0),
        "dirichlet": (np.ones(3),),
        "orthogonal": (3,),
        "randint": (10,),
        "random_integers": (10,),
        "bernoulli": (),
        "binomial": (10, 0.5),
        "poisson": (),
        "geometric": (0.5,),
        "negative_binomial": (3, 0.4),
        "hypergeometric": (5, 5, 4),
        "logseries": (0.6,),
        "zipf": (2.0,),
        "multinomial": (10, [0.5, 0.5]),
        "categorical": (np.zeros(3),),
        "choice": (5,),
    }


def test_every_sampler_with_a_size_is_covered():
    with_size = {
        name
        for name, member in inspect.getmembers(RandomState, inspect.isfunction)
        if not name.startswith("_") and "size" in inspect.signature(member).parameters
    }
    assert with_size == set(_minimal_args())


@pytest.mark.parametrize("name", sorted(_minimal_args()))
def test_a_size_jax_cannot_build_is_a_value_error_before_the_split(name):
    args = _minimal_args()[name]
    # (2**31, 2**31): 2**62 elements, which made JAX abort the process
    size = (2**31, 2**31)
    _refused_before_the_split(
        name, args, {"size": size}, ValueError, rf"{name}: `size` asks for an array of shape \(2147483648, 2147483648"
    )


def test_size_messages_name_the_count_and_the_bytes():
    with pytest.raises(
        ValueError,
        match=r"normal: `size` asks for an array of shape \(4611686018427387904,\): 4611686018427387904 elements of "
        r"float32, 18446744073709551616 bytes, more than the 2\*\*57 bytes a draw may hold",
    ):
        RandomState(0).normal(size=(2**62,))
    # bytes count, not elements: the same element count is fine for one dtype and not another
    with pytest.raises(ValueError, match=r"bernoulli: `size` .* 2\*\*57 bytes"):
        RandomState(0).bernoulli(size=(2**58,))
    with pytest.raises(ValueError, match=r"normal: `size` .* 72057594037927936 elements of float32"):
        RandomState(0).normal(size=(2**56,))
    fits = jax.eval_shape(lambda k: RandomState(0).bernoulli(size=(2**56,), key=k), jax.random.key(0))
    assert fits.shape == (2**56,)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda r: r.rand(2**31, 2**31), r"rand: the dimensions asks for an array of shape \(2147483648, 2147483648\)"),
        (lambda r: r.randn(2**40, 2**40), r"randn: the dimensions asks for an array"),
        (lambda r: r.permutation(2**62), r"permutation: `x` asks for an array of shape \(4611686018427387904,\)"),
        (lambda r: r.choice(2**62, size=3, replace=False), r"choice: `a` asks for an array of shape"),
        (
            lambda r: r.categorical(np.zeros(2**10), size=(2**50,)),
            r"categorical: `size` asks for .*\(1125899906842624, 1024\)",
        ),
        (
            lambda r: r.multinomial(3, np.full(2**10, 2.0**-10), size=(2**50,)),
            r"multinomial: `size` .*\(1125899906842624, 1024\)",
        ),
        (lambda r: r.orthogonal(2**20, size=(2**20,)), r"orthogonal: `size` .*\(1048576, 1048576, 1048576\)"),
        (lambda r: r.split_key(2**62), r"split_key: `n` asks for an array"),
        (lambda r: r.split_keys(2**62), r"split_key: `n` asks for an array"),
        (lambda r: r.self_assign_multi_keys(2**62), r"self_assign_multi_keys: `n` asks for an array"),
        (lambda r: r.normal(size=(3, -1)), r"normal: `size\[1\]` must be >= 0, got -1"),
    ],
)
def test_other_sizes_are_checked_before_the_split(call, match):
    rng = RandomState(0)
    before = _data(rng)
    with pytest.raises(ValueError, match=match):
        call(rng)
    assert_array_equal(_data(rng), before)


def test_non_integer_dimensions_stay_type_errors():
    with pytest.raises(TypeError, match=r"normal: `size\[0\]` must be an int, got float 2.5"):
        RandomState(0).normal(size=(2.5,))
    with pytest.raises(TypeError, match=r"rand: `dimension 1` must be an int"):
        RandomState(0).rand(2, 1.5)


def test_the_largest_sizes_that_fit_still_draw_lazily():
    # Only the abstract shape: no memory is used, but the check lets it through.
    out = jax.eval_shape(lambda k: RandomState(0).normal(size=(2**55,), key=k), jax.random.key(0))
    assert out.shape == (2**55,)


# ---------------------------------------------------------------------- a draw that raises keeps the key
class _DrawFailed(RuntimeError):
    pass


def _failing(*args, **kwargs):
    raise _DrawFailed("out of memory")


@pytest.mark.parametrize(
    "patched,call",
    [
        ("normal", lambda r: r.normal(1.0, 2.0, size=3)),
        ("uniform", lambda r: r.uniform(size=3)),
        ("poisson", lambda r: r.negative_binomial(3, 0.4, size=3)),  # fails after its gamma draw
        ("binomial", lambda r: r.multinomial(10, [0.2, 0.3, 0.5])),
        ("choice", lambda r: r.choice(["a", "b"], size=2)),
        ("permutation", lambda r: r.permutation(5)),
        ("chisquare", lambda r: r.noncentral_f(3.0, 20.0, 3.0)),
    ],
)
def test_a_draw_that_raises_leaves_the_key(monkeypatch, patched, call):
    monkeypatch.setattr(jax.random, patched, _failing)
    rng = RandomState(5)
    before = _data(rng)
    with pytest.raises(_DrawFailed):
        call(rng)
    assert_array_equal(_data(rng), before)
    sr.seed(5)
    with pytest.raises(_DrawFailed):
        call(sr)
    assert bool(sr.get_key() == jax.random.key(5))
    monkeypatch.undo()
    # and the next draw is the one an undisturbed stream makes
    assert_array_equal(call(rng), call(RandomState(5)))


_OUT_OF_MEMORY = """
import sys
import jax
jax.config.update("jax_cpu_enable_async_dispatch", sys.argv[1] == "async")
import numpy as np
import state_random as sr


def data(rng):
    return np.asarray(jax.random.key_data(rng.value)).tolist()


sr.seed(0)
rng = sr.RandomState(0)
# 512 TiB each: more than a 64-bit process can address, so they fail at once on every
# machine (a smaller size could be overcommitted, then filled).
for stream, draw in (
    (sr.DEFAULT, lambda: sr.normal(size=(2**47,))),
    (rng, lambda: rng.normal(size=(2**47,))),
    (sr.DEFAULT, lambda: sr.split_key(2**46)),  # (2**46 + 1) keys of two uint32 words
    (rng, lambda: rng.self_assign_multi_keys(2**46)),
):
    before = data(stream)
    try:
        draw()
    except jax.errors.JaxRuntimeError as err:  # at the call, before the key is stored
        print("Out of memory" in str(err), data(stream) == before)
    else:
        print("no-error")
assert rng.value.shape == ()  # still one key, and no backup left pending
rng.backup_key()
# the next draws are the ones an undisturbed stream makes
print(bool((rng.normal(size=3) == sr.RandomState(0).normal(size=3)).all()))
print(bool((sr.normal(size=3) == sr.RandomState(0).normal(size=3)).all()))
"""


@pytest.mark.multiprocess
@pytest.mark.parametrize("dispatch", ["async", "sync"])
def test_an_out_of_memory_draw_leaves_the_key(dispatch):
    # On CPU, JAX dispatches eager work asynchronously (the default): the allocation
    # fails only while the draw runs, after the call returned; the sampler waits for a
    # result this large before it stores the key.
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_OUT_OF_MEMORY), dispatch], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"] * 10


def test_only_large_draws_are_waited_for(monkeypatch):
    from state_random import _random_state

    waited = []
    monkeypatch.setattr(_random_state, "_wait_for", lambda out: waited.append(jnp.shape(out)))
    rng = RandomState(0)
    rng.normal(size=(1000,))  # 4 kB: dispatched, not waited for
    assert waited == []
    rng.normal(size=(_random_state._WAIT_BYTES // 4,))  # float32: exactly the threshold
    rng.randint(0, 5, size=(4, _random_state._WAIT_BYTES // 16))
    assert waited == [(_random_state._WAIT_BYTES // 4,), (4, _random_state._WAIT_BYTES // 16)]


# ---------------------------------------------------------------------- multivariate_normal covariances
INDEFINITE = [[1.0, 2.0], [2.0, 1.0]]


def test_check_valid_mirrors_numpy():
    rng = RandomState(0)
    before = _data(rng)
    with pytest.raises(ValueError, match=r"`cov` must be positive semi-definite; its smallest eigenvalue is -1"):
        rng.multivariate_normal([0.0, 0.0], INDEFINITE, check_valid="raise")
    assert_array_equal(_data(rng), before)
    with pytest.warns(RuntimeWarning, match=r"`cov` must be positive semi-definite") as caught:
        x = rng.multivariate_normal([0.0, 0.0], INDEFINITE, size=1000, check_valid="warn")
    assert caught[0].filename == __file__  # points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = rng.multivariate_normal([0.0, 0.0], INDEFINITE, size=1000, check_valid="ignore")
    # not NaN: drawn from the SVD, as NumPy does (its covariance is |cov| = [[1.5, 0.5]...] scaled)
    assert np.isfinite(x).all() and np.isfinite(y).all()
    numpy_x = np.random.RandomState(0).multivariate_normal([0.0, 0.0], INDEFINITE, size=20_000, check_valid="ignore")
    ours = RandomState(1).multivariate_normal([0.0, 0.0], INDEFINITE, size=20_000, check_valid="ignore")
    assert_allclose(np.cov(np.asarray(ours, np.float64).T), np.cov(numpy_x.T), atol=0.1)

    before = _data(rng)
    with pytest.raises(ValueError, match=r"`check_valid` must be 'warn', 'raise' or 'ignore', got 'strict'"):
        rng.multivariate_normal([0.0, 0.0], np.eye(2), check_valid="strict")
    with pytest.raises(ValueError, match=r"`tol` must be >= 0, got -1"):
        rng.multivariate_normal([0.0, 0.0], np.eye(2), tol=-1)
    with pytest.raises(TypeError, match=r"`tol` must be a real number, got str"):
        rng.multivariate_normal([0.0, 0.0], np.eye(2), tol="1e-8")
    assert_array_equal(_data(rng), before)


@pytest.mark.parametrize(
    "cov",
    [
        [[1.0, 1.0 + 1e-7], [1.0 + 1e-7, 1.0]],  # indefinite by 1e-7
        [[1.0, 1.0 + 1e-9], [1.0 + 1e-9, 1.0]],  # indefinite within tol
        [[1.0, 0.5], [0.5 + 1e-6, 1.0]],  # asymmetric by 1e-6
        [[1.0, 0.5], [0.5 + 1e-10, 1.0]],  # asymmetric within tol
        [[INF, 0.0], [0.0, 1.0]],
        np.eye(3),
        [[1.0, 1.0], [1.0, 1.0]],  # singular: valid
    ],
)
@pytest.mark.parametrize("tol", [1e-8, 1e-5])
def test_the_same_covariances_as_numpy_are_valid(cov, tol):
    mean = np.zeros(len(cov))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            np.random.RandomState(0).multivariate_normal(mean, cov, check_valid="raise", tol=tol)
            numpy_valid = True
        except ValueError:
            numpy_valid = False
    try:
        RandomState(0).multivariate_normal(mean, cov, check_valid="raise", tol=tol)
        ours_valid = True
    except ValueError:
        ours_valid = False
    assert ours_valid == numpy_valid


@pytest.mark.numerics  # sample statistics
@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_samples_are_finite_where_numpy_s_are(method):
    singular = np.array([[1.0, 1.0], [1.0, 1.0]]) * 0.1  # valid; Cholesky of it is NaN in float32
    mean = np.array([1.0, -1.0])
    x = np.asarray(RandomState(0).multivariate_normal(mean, singular, size=5000, method=method), np.float64)
    assert np.isfinite(x).all()
    assert_allclose(x[:, 0] - x[:, 1], 2.0, atol=1e-3)  # all the mass on the line x0 - x1 = 2
    assert_allclose(np.cov(x.T), singular, atol=0.01)
    # an unchecked device matrix never gives NaN either
    dev = RandomState(0).multivariate_normal(
        jnp.zeros(2), jnp.asarray(INDEFINITE), size=4, method=method, check_valid="ignore"
    )
    assert np.isfinite(dev).all()
    # a stack: only the broken matrix takes the SVD factor
    stack = jnp.stack([jnp.eye(2), jnp.asarray(INDEFINITE)])
    out = RandomState(0).multivariate_normal(jnp.zeros(2), stack, size=(3, 2), method=method, check_valid="ignore")
    assert np.isfinite(out).all()


@pytest.mark.parametrize(
    "cov,match",
    [
        (jnp.asarray(INDEFINITE), r"`cov` must be positive semi-definite; its smallest eigenvalue is -1 \(tol=1e-08\)"),
        (jnp.array([[1.0, 0.9], [0.0, 1.0]]), r"`cov` must be a symmetric matrix; it is not symmetric"),
        (jnp.array([[jnp.nan, 0.0], [0.0, 1.0]]), r"`cov` must be a finite, .* it has NaN entries"),
        (jnp.stack([jnp.eye(2), jnp.asarray(INDEFINITE)]), r"`cov` must be positive semi-definite"),
    ],
    ids=["indefinite", "asymmetric", "nan", "stack"],
)
def test_a_device_covariance_is_checked_before_the_split(cov, match):
    # A JAX array outside a trace is concrete: refused like a host one, with the fix.
    full = rf"multivariate_normal: {match}.*Pass a valid covariance matrix, a larger `tol`, or check_valid="
    _refused_before_the_split("multivariate_normal", (jnp.zeros(2), cov), {}, ValueError, full)
    with pytest.warns(RuntimeWarning, match=match):
        RandomState(0).multivariate_normal(jnp.zeros(2), cov, check_valid="warn")


def test_a_traced_covariance_cannot_be_checked():
    # Under jit the matrix has no value: an invalid one is drawn from as with
    # check_valid='ignore' (finite, from its SVD factor); NaN entries give NaN.
    draw = jax.jit(lambda c, k: RandomState(0).multivariate_normal(jnp.zeros(2), c, size=3, key=k))
    key = jax.random.key(1)
    assert np.isfinite(draw(jnp.asarray(INDEFINITE), key)).all()
    assert_allclose(
        draw(jnp.asarray(INDEFINITE), key),
        RandomState(0).multivariate_normal(jnp.zeros(2), jnp.asarray(INDEFINITE), 3, key=key, check_valid="ignore"),
        rtol=1e-5,
        atol=1e-6,
    )
    assert np.isnan(draw(jnp.array([[jnp.nan, 0.0], [0.0, 1.0]]), key)).all()


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_valid_covariances_draw_jax_s_numbers(method):
    mean, cov = jnp.array([1.0, -2.0]), jnp.array([[2.0, 0.3], [0.3, 0.5]])
    rng = RandomState(4)
    k = jax.random.split(jax.random.key(4))[1]
    expected = jax.random.multivariate_normal(k, mean, cov, (6,), jnp.float32, method)
    assert_array_equal(rng.multivariate_normal(mean, cov, size=6, method=method), expected)
