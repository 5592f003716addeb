"""Random-number semantics of the mapping transforms (needs ``state_random``).

Key discipline (state-random README): one draw splits ``K`` into ``parts = split(K, 2)`` (state keeps
``parts[0]``, sampler uses ``parts[1]``); mapping over ``B`` lanes uses ``P = split(K, B+1)``,
lane ``i`` starts from ``P[1+i]`` and afterwards the state holds ``split(P[0], 2)[1]``. A call that
fails (while tracing or while running) leaves every key as it was.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec
from numpy.testing import assert_allclose, assert_array_equal

import state_core
import state_random
from state_core.filter import OfType
from state_transform import (
    cond,
    for_loop,
    grad,
    jit,
    pmap2,
    pmap2_new_states,
    scan,
    shard_map,
    value_and_grad,
    vmap2,
    vmap2_new_states,
)


def key_data(key):
    return np.asarray(jax.random.key_data(key))


@jax.jit
def _draw_normal(keys, scales):
    # the sampler's key of each lane is split(lane_key, 2)[1]
    return jax.vmap(lambda k, s: jax.random.normal(jax.random.split(k, 2)[1], s.shape) * s)(keys, scales)


def ref_normals(keys, scales):
    return np.asarray(_draw_normal(keys, jnp.asarray(scales, jnp.float32)))


def lane_keys(seed_or_key, n):
    key = jax.random.key(seed_or_key) if isinstance(seed_or_key, int) else seed_or_key
    P = jax.random.split(key, n + 1)
    return P[1:], jax.random.split(P[0], 2)[1]


# ---------------------------------------------------------------- seed 002 §2
def test_seed002_s2_1_automatic_key_splitting_bit_exact():
    state_random.seed(42)

    def sample_normal(scale):
        return state_random.normal(0.0, scale)

    vmap_sample = vmap2(sample_normal, in_axes=0)
    samples = vmap_sample(jnp.array([1.0, 2.0, 3.0, 4.0]))
    expected = np.array([-1.0413289, -1.4796011, 2.222502, 6.412178], dtype=np.float32)
    assert_allclose(np.asarray(samples), expected, rtol=0, atol=1e-6)
    # and the exact float32 values of the key discipline
    keys, nxt = lane_keys(42, 4)
    assert_array_equal(np.asarray(samples), ref_normals(keys, [1.0, 2.0, 3.0, 4.0]))
    # the global key moved on to split(P[0], 2)[1]
    assert_array_equal(key_data(state_random.DEFAULT.value), key_data(nxt))


def test_seed002_s2_example2_uniform_plus_normal_bit_exact():
    state_random.seed(123)

    def sample_multiple(mean):
        sample1 = state_random.uniform(0.0, 1.0)
        sample2 = state_random.normal(mean, 1.0)
        return sample1 + sample2

    results = vmap2(sample_multiple, in_axes=0)(jnp.array([0.0, 1.0, 2.0]))
    assert_allclose(np.asarray(results), np.array([1.063001, 2.0858884, 3.2780576], np.float32), rtol=0, atol=1e-6)


def test_seed002_s2_3_dropout_mask_with_seed_456():
    class Dropout:
        def __init__(self, rate=0.5):
            self.rate = rate

        def __call__(self, x, training=True):
            if not training:
                return x
            keep_mask = state_random.uniform(0.0, 1.0, x.shape) > self.rate
            return jnp.where(keep_mask, x / (1 - self.rate), 0.0)

    state_random.seed(456)
    dropout = Dropout(rate=0.3)
    vmap_dropout = vmap2(lambda x: dropout(x, training=True), in_axes=0)
    batch_data = jnp.ones((4, 5))
    dropped = vmap_dropout(batch_data)
    v = np.float32(1.4285715)
    expected = np.array(
        [
            [0.0, v, v, 0.0, v],
            [v, v, v, v, 0.0],
            [v, 0.0, v, 0.0, 0.0],
            [0.0, v, v, v, 0.0],
        ],
        dtype=np.float32,
    )
    assert dropped.shape == (4, 5)
    assert_allclose(np.asarray(dropped), expected, rtol=1e-6)
    assert_array_equal(np.asarray(batch_data), np.ones((4, 5)))


def test_seed002_repeated_call_uses_fresh_keys():
    state_random.seed(42)
    f = vmap2(lambda s: state_random.normal(0.0, s))
    a = f(jnp.ones(4))
    b = f(jnp.ones(4))
    assert not np.allclose(np.asarray(a), np.asarray(b))
    state_random.seed(42)
    assert_array_equal(np.asarray(f(jnp.ones(4))), np.asarray(a))
    assert_array_equal(np.asarray(f(jnp.ones(4))), np.asarray(b))


# ---------------------------------------------------------------- seed 000 §2 (pmap random)
def _pmap_sampler():
    @pmap2(
        axis_name="devices",
        in_axes=0,
        out_axes=0,
        state_in_axes={0: OfType(state_random.RandomState)},
        state_out_axes={0: OfType(state_random.RandomState)},
    )
    def sample_normal(scale):
        return state_random.normal(0.0, scale)

    return sample_normal


def test_seed000_pmap_random_lanes_differ_unseeded():
    state_random.RandomState(0)  # created but unused, as in the seed
    state_random.seed(None)  # fresh entropy (the seed's numbers came from an unseeded generator)
    per_device_scales = jnp.linspace(1.0, 2.0, jax.local_device_count())
    out = _pmap_sampler()(per_device_scales)
    assert out.shape == (8,)
    assert out.dtype == jnp.float32
    assert len(set(np.asarray(out).tolist())) == 8
    assert np.all(np.isfinite(np.asarray(out)))


def test_seed000_pmap_random_seeded_call_reproduces_and_follows_discipline():
    per_device_scales = jnp.linspace(1.0, 2.0, 8)
    f = _pmap_sampler()
    state_random.seed(7)
    a = np.asarray(f(per_device_scales))
    after_a = key_data(state_random.DEFAULT.value)
    state_random.seed(7)
    b = np.asarray(f(per_device_scales))
    assert_array_equal(a, b)
    assert len(set(a.tolist())) == 8
    keys, nxt = lane_keys(7, 8)
    assert_allclose(a, ref_normals(keys, per_device_scales), rtol=1e-6)
    assert_array_equal(after_a, key_data(nxt))


# ---------------------------------------------------------------- explicit RandomState objects
def test_explicit_random_state_is_split_per_lane_and_advanced():
    rng = state_random.RandomState(3)
    f = vmap2(lambda x: x + rng.normal(0.0, 1.0))
    out = f(jnp.zeros(5))
    keys, nxt = lane_keys(3, 5)
    assert_allclose(np.asarray(out), ref_normals(keys, np.ones(5)), rtol=1e-6)
    assert_array_equal(key_data(rng.value), key_data(nxt))


def test_pre_split_key_array_with_declared_axis():
    keys = jax.random.split(jax.random.key(0), 4)
    rng = state_random.RandomState(keys)
    f = vmap2(
        lambda x: x + rng.normal(0.0, 1.0),
        state_in_axes={0: OfType(state_random.RandomState)},
        state_out_axes={0: OfType(state_random.RandomState)},
    )
    out = f(jnp.zeros(4))
    assert_allclose(np.asarray(out), ref_normals(keys, np.ones(4)), rtol=1e-6)
    # each lane kept its own advanced key
    assert rng.value.shape == (4,)
    expected_keys = key_data(jax.vmap(lambda k: jax.random.split(k, 2)[0])(keys))
    assert_array_equal(key_data(rng.value), expected_keys)


def test_random_inside_jit_of_vmap2_reproducible():
    f = jit(vmap2(lambda s: state_random.normal(0.0, s)))
    state_random.seed(42)
    out = f(jnp.array([1.0, 2.0, 3.0, 4.0]))
    assert_allclose(np.asarray(out), [-1.0413289, -1.4796011, 2.222502, 6.412178], rtol=0, atol=1e-6)
    _, nxt = lane_keys(42, 4)
    assert_array_equal(key_data(state_random.DEFAULT.value), key_data(nxt))


# ---------------------------------------------------------------- a failed call moves no key
def _failing_callback(x):
    raise RuntimeError("callback exploded")


def test_random_state_is_unchanged_after_execution_failure():
    rng = state_random.RandomState(11)
    other = state_core.ShortTermState(jnp.zeros(4), name="other")
    k0 = key_data(rng.value)

    def fn(x):
        noise = rng.normal(0.0, 1.0)
        other.value = other.value + x
        y = jax.pure_callback(_failing_callback, jax.ShapeDtypeStruct((), jnp.float32), x, vmap_method="sequential")
        return y + noise

    f = vmap2(
        fn, state_in_axes={0: OfType(state_core.ShortTermState)}, state_out_axes={0: OfType(state_core.ShortTermState)}
    )
    with pytest.raises(Exception, match="callback exploded"):
        f(jnp.ones(4))
    assert_array_equal(key_data(rng.value), k0)
    assert_array_equal(np.asarray(other.value), np.zeros(4))
    # The next successful call draws what a first call would have drawn.
    rng_twin = state_random.RandomState(11)
    expected = vmap2(lambda x: x + rng_twin.normal(0.0, 1.0))(jnp.ones(4))
    assert_array_equal(np.asarray(vmap2(lambda x: x + rng.normal(0.0, 1.0))(jnp.ones(4))), np.asarray(expected))
    assert_array_equal(key_data(rng.value), key_data(rng_twin.value))


_PRIVATE = state_random.RandomState(5)


def _draw_then(fail):
    """A function that draws from DEFAULT and from a private stream, then fails as ``fail`` says."""

    def fn(x):
        y = x + state_random.normal(size=jnp.shape(x)) + _PRIVATE.uniform(size=jnp.shape(x))
        if fail == "trace":
            raise RuntimeError("refused while tracing")
        if fail == "callback":  # a host callback that raises while the program runs
            shape = jax.ShapeDtypeStruct(jnp.shape(x), jnp.float32)
            y = y + jax.pure_callback(_failing_callback, shape, jax.lax.stop_gradient(y), vmap_method="sequential")
        if fail == "nan":
            y = y * jnp.nan  # refused by grad(..., debug_nan=True) after the run
        return jnp.sum(y)

    return fn


def _mesh():
    return jax.make_mesh((8,), ("x",))


_TRANSFORMS = {
    "jit": lambda fn, x: jit(fn)(x),
    "grad": lambda fn, x: grad(fn)(x),
    "value_and_grad": lambda fn, x: value_and_grad(fn)(x),
    "vmap2": lambda fn, x: vmap2(fn)(jnp.stack([x, x])),
    "jit(vmap2)": lambda fn, x: jit(vmap2(fn))(jnp.stack([x, x])),
    "pmap2": lambda fn, x: pmap2(fn)(jnp.stack([x, x])),
    "shard_map": lambda fn, x: shard_map(
        lambda v: fn(v)[None], _mesh(), in_specs=(PartitionSpec("x"),), out_specs=PartitionSpec("x")
    )(jnp.tile(x, 8)),
    "for_loop": lambda fn, x: for_loop(fn, jnp.stack([x, x])),
    "scan": lambda fn, x: scan(lambda c, v: (c + fn(v), None), 0.0, jnp.stack([x, x])),
    "cond": lambda fn, x: cond(True, fn, lambda v: jnp.sum(v), x),
}


# A host callback that fails inside a program spanning several devices leaves JAX's
# runtime unusable for later programs in the process (later waits abort or re-raise):
# those cases run in a process of their own, below.
_ONE_DEVICE = sorted(set(_TRANSFORMS) - {"pmap2", "shard_map"})


@pytest.mark.parametrize(
    ("transform", "fail"), [(t, "trace") for t in sorted(_TRANSFORMS)] + [(t, "callback") for t in _ONE_DEVICE]
)
def test_a_failed_call_leaves_every_random_key_unchanged(transform, fail):
    # Trace-time and run-time failures alike: DEFAULT and the private stream keep their keys,
    # so the next call draws exactly what it would have drawn without the failed one.
    state_random.seed(17)
    before = (key_data(state_random.DEFAULT.value), key_data(_PRIVATE.value))
    with pytest.raises(
        RuntimeError if fail == "trace" else jax.errors.JaxRuntimeError,
        match="refused while tracing" if fail == "trace" else "callback exploded",
    ):
        _TRANSFORMS[transform](_draw_then(fail), jnp.ones(2))
    assert_array_equal(key_data(state_random.DEFAULT.value), before[0])
    assert_array_equal(key_data(_PRIVATE.value), before[1])


_SEVERAL_DEVICES_CASES = """
import jax
jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P
import state_random
from state_transform import pmap2, shard_map

private = state_random.RandomState(5)
mesh = jax.make_mesh((8,), ("x",))


def refuse(x):
    raise RuntimeError("callback exploded")


def step(x):
    y = x + state_random.normal(size=x.shape) + private.uniform(size=x.shape)
    return y + jax.pure_callback(refuse, jax.ShapeDtypeStruct(x.shape, x.dtype), y)


def keys():
    return [np.asarray(jax.random.key_data(s.value)).tolist() for s in (state_random.DEFAULT, private)]


for which, f in [
    ("pmap2", pmap2(step)),
    ("shard_map", shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"))),
]:
    state_random.seed(17)
    before = keys()
    for attempt in range(2):  # the first call traces, the second replays the cached program
        try:
            f(jnp.ones(8))
        except jax.errors.JaxRuntimeError as err:
            assert "callback exploded" in str(err), (which, err)
        else:
            raise AssertionError(f"{which}: the failing call returned normally")
        assert keys() == before, (which, attempt, before, keys())
    print(which, "ok")
"""


def test_a_run_time_failure_on_several_devices_leaves_every_random_key_unchanged():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _SEVERAL_DEVICES_CASES], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["pmap2", "ok", "shard_map", "ok"]


def test_a_nan_refused_by_grad_debug_nan_moves_no_key():
    state_random.seed(17)
    before = (key_data(state_random.DEFAULT.value), key_data(_PRIVATE.value))
    with pytest.raises(FloatingPointError):
        grad(_draw_then("nan"), debug_nan=True)(jnp.ones(2))
    assert_array_equal(key_data(state_random.DEFAULT.value), before[0])
    assert_array_equal(key_data(_PRIVATE.value), before[1])


def test_a_mapped_call_with_an_invalid_out_axes_moves_no_key():
    rng, twin = state_random.RandomState(3), state_random.RandomState(3)
    before = key_data(rng.value)
    with pytest.raises(ValueError, match=r"out_axes='a'"):
        vmap2(lambda x: x + rng.normal(), out_axes="a")(jnp.ones(3))
    assert_array_equal(key_data(rng.value), before)
    # The next call draws what it would have drawn without the failed one.
    assert_array_equal(
        vmap2(lambda x: x + rng.normal())(jnp.zeros(3)), vmap2(lambda x: x + twin.normal())(jnp.zeros(3))
    )
    assert_array_equal(key_data(rng.value), key_data(twin.value))


# ---------------------------------------------------------------- *_new_states with random draws
class NoisyLayer:
    def __init__(self):
        self.calls = 0

    def init_all_states(self, size):
        self.calls += 1
        self.w = state_core.ParamState(jnp.zeros(size))
        self.noise = state_core.ShortTermState(state_random.normal(0.0, 1.0, size=(size,)))


def test_vmap2_new_states_random_copies_differ():
    state_random.seed(0)
    layer = NoisyLayer()
    groups = vmap2_new_states(layer, {"size": 3}, axis_size=5)
    assert list(groups) == [0]
    assert groups[0] == [layer.w, layer.noise]
    assert layer.calls == 1
    for s in groups[0]:
        assert not isinstance(s.value, jax.core.Tracer)
        assert s.value.shape == (5, 3)
    noise = np.asarray(layer.noise.value)
    assert len({tuple(r) for r in noise.tolist()}) == 5
    # bit-exact against the lane discipline
    keys, nxt = lane_keys(0, 5)
    assert_allclose(noise, ref_normals(keys, np.ones((5, 3))), rtol=1e-6)
    assert_array_equal(key_data(state_random.DEFAULT.value), key_data(nxt))


def test_vmap2_new_states_shared_random_state_is_an_error():
    state_random.seed(0)
    layer = NoisyLayer()
    with pytest.raises(ValueError, match=r"differs between copies|differ"):
        vmap2_new_states(layer, {"size": 3}, axis_size=4, state_out_axes={None: OfType(state_core.ShortTermState)})


def test_vmap2_new_states_shared_deterministic_with_random_sibling():
    state_random.seed(1)
    layer = NoisyLayer()
    groups = vmap2_new_states(layer, {"size": 2}, axis_size=3, state_out_axes={None: OfType(state_core.ParamState)})
    assert set(groups) == {None, 0}
    assert groups[None] == [layer.w]
    assert groups[0] == [layer.noise]
    assert layer.w.value.shape == (2,)
    assert layer.noise.value.shape == (3, 2)
    assert not isinstance(layer.noise.value, jax.core.Tracer)


def test_pmap2_new_states_random_copies_differ():
    state_random.seed(5)
    layer = NoisyLayer()
    groups = pmap2_new_states(layer, {"size": 2})
    assert list(groups) == [0]
    assert layer.noise.value.shape == (8, 2)
    assert layer.w.value.shape == (8, 2)
    noise = np.asarray(layer.noise.value)
    assert len({tuple(r) for r in noise.tolist()}) == 8
    assert not isinstance(layer.noise.value, jax.core.Tracer)


def test_nested_vmap2_random_all_lanes_differ_and_reproduce():
    f = vmap2(vmap2(lambda x: x + state_random.normal()))
    state_random.seed(0)
    a = np.asarray(f(jnp.zeros((2, 3))))
    state_random.seed(0)
    b = np.asarray(f(jnp.zeros((2, 3))))
    assert a.shape == (2, 3)
    assert len(set(a.ravel().tolist())) == 6
    np.testing.assert_array_equal(a, b)


def test_random_state_is_unchanged_when_tracing_raises():
    rng = state_random.RandomState(21)
    k0 = key_data(rng.value)

    def fn(x):
        rng.normal()
        raise RuntimeError("trace-time failure")

    with pytest.raises(RuntimeError, match="trace-time failure"):
        vmap2(fn)(jnp.ones(3))
    assert_array_equal(key_data(rng.value), k0)


def test_random_state_claimed_none_is_broadcast_not_split():
    # Only RandomStates that no filter claims are split per lane;
    # an explicit None broadcasts the same key to every lane.
    rng = state_random.RandomState(0)
    k0 = rng.value
    out = vmap2(lambda x: x + rng.normal(), state_in_axes={None: OfType(state_random.RandomState)})(jnp.zeros(3))
    parts = jax.random.split(k0, 2)
    expected = float(jax.random.normal(parts[1], ()))
    assert_allclose(np.asarray(out), np.full(3, expected), rtol=1e-6)
    assert rng.value.shape == ()
    assert_array_equal(key_data(rng.value), key_data(parts[0]))


def test_existing_state_written_with_random_value_during_init_is_concrete():
    class C:
        def __init__(self):
            self.e = state_core.State(jnp.zeros(2), name="existing")

        def init_all_states(self):
            self.e.value = state_random.normal(size=2)
            self.n = state_core.State(jnp.ones(2))

    state_random.seed(9)
    c = C()
    groups = vmap2_new_states(c, axis_size=3)
    assert groups == {0: [c.n]}
    for leaf in (c.e.value, c.n.value):
        assert not isinstance(leaf, jax.core.Tracer)
    assert c.n.value.shape == (3, 2)
    assert np.all(np.isfinite(np.asarray(c.e.value)))


def test_nested_pmap2_random_all_lanes_differ():
    f = pmap2(pmap2(lambda x: x + state_random.normal(), axis_name="c"), axis_name="r")
    state_random.seed(0)
    a = np.asarray(f(jnp.zeros((4, 2))))
    assert a.shape == (4, 2)
    assert len(set(a.ravel().tolist())) == 8
    state_random.seed(0)
    assert_array_equal(np.asarray(f(jnp.zeros((4, 2)))), a)
