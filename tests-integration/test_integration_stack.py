"""All four layers together, on the 8 forced CPU devices of ``conftest.py``.

* the seed examples (000 pmap2, 001 shard_map, 002 vmap2, 003 Map) end to end,
  with ``state_nn.Module`` models and the printed outputs as expected values;
* a stochastic ensemble (``state_nn.Map`` of 8 Linear + Dropout + noise members)
  trained with optax adam through ``state_transform.grad`` inside
  ``state_transform.jit``;
* one deterministic model run by ``vmap2``, ``pmap2``, ``shard_map``, ``Map``
  (vmap and pmap) and plain calls, all agreeing with a NumPy reference;
* seeded RandomState draws under ``vmap2``, ``pmap2`` and ``shard_map``: same
  numbers, same advanced key, distinct per lane.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose, assert_array_equal

import state_core
import state_nn
import state_random
from state_core.engine import jaxpr_consts, open_jaxpr
from state_core.filter import OfType, PathContains
from state_transform import StatefulMapping, grad, jit, pmap2, shard_map, vmap2

N_DEV = 8


@pytest.fixture(autouse=True)
def _eight_devices():
    assert jax.device_count() == N_DEV, "tests-integration/conftest.py must force 8 CPU devices"


def _mesh(n: int = N_DEV, name: str = "x") -> Mesh:
    return Mesh(np.array(jax.devices()[:n]), (name,))


def _np(x) -> np.ndarray:
    return np.asarray(x)


def _lane_keys(seed: int, lanes: int):
    """Key discipline (state-random README): ``P = split(K, B + 1)``; lane i uses ``P[1 + i]``.

    The state keeps ``split(P[0], 2)[1]``.
    """
    parts = jax.random.split(jax.random.key(seed), lanes + 1)
    return parts[1:], jax.random.split(parts[0], 2)[1]


def _draw_key(lane_key):
    """The key a single sampler call uses: ``split(k, 2)[1]``."""
    return jax.random.split(lane_key, 2)[1]


def _key_data(key) -> list:
    return _np(jax.random.key_data(key)).tolist()


# =========================================================================== #
# Seed 000: pmap2 with a state_nn.Module
# =========================================================================== #


class Affine(state_nn.Module):
    """Seed 000's model, written exactly as there (``__call__`` overridden)."""

    def __init__(self, size):
        super().__init__()
        self.weight = state_core.ParamState(jnp.ones((size,)))

    def __call__(self, delta):
        self.weight.value = self.weight.value + delta
        return self.weight.value


def _param_axes():
    return dict(
        state_in_axes={0: OfType(state_core.ParamState)},
        state_out_axes={0: OfType(state_core.ParamState)},
    )


def test_seed000_pmap2_module_over_all_devices():
    n = jax.local_device_count()
    model = Affine(size=n)
    pmapped_update = pmap2(model, axis_name="devices", in_axes=0, out_axes=0, **_param_axes())
    per_device_delta = jnp.arange(n * 4.0).reshape(n, 4)
    updated = pmapped_update(per_device_delta)
    assert updated.shape == (8, 4)
    expected = 1.0 + np.arange(32.0).reshape(8, 4)
    assert_allclose(_np(model.weight.value), expected)
    assert_allclose(_np(updated), expected)
    # Second call hits the cache and keeps accumulating on the (8, 4) state.
    pmapped_update(jnp.ones((n, 4)))
    assert_allclose(_np(model.weight.value), expected + 1.0)


def test_seed000_pairwise_devices_and_mapping_repr():
    logical_devices = jax.devices()[:2]
    model = Affine(size=len(logical_devices))
    pairwise_update = pmap2(model, axis_name="pair", in_axes=0, out_axes=0, devices=logical_devices, **_param_axes())
    deltas = jnp.stack([jnp.ones((4,)), -jnp.ones((4,))], axis=0)
    pairwise_update(deltas)
    assert_allclose(_np(model.weight.value), [[2.0] * 4, [0.0] * 4])

    parallel_mapping = pmap2(model, axis_name="devices", in_axes=0, out_axes=0, **_param_axes())
    assert type(parallel_mapping) is StatefulMapping
    assert str(type(parallel_mapping)) == "<class 'state_transform.StatefulMapping'>"
    assert parallel_mapping.origin_fun is model
    assert repr(parallel_mapping.origin_fun) == (
        "Affine(\n  weight=ParamState(\n    value=ShapedArray(float32[2,4])\n  )\n)"
    )
    assert str(parallel_mapping.state_in_axes) == "{0: OfType(<class 'state_core.ParamState'>)}"
    assert parallel_mapping.axis_name == "devices"


def test_seed000_static_broadcast_argument():
    @pmap2(axis_name="devices", in_axes=(0, None), out_axes=0)
    def add_with_scale(delta, scale):
        return delta + scale

    out = add_with_scale(jnp.arange(jax.local_device_count()), 0.5)
    assert_allclose(_np(out), np.arange(8) + 0.5)
    assert out.dtype == jnp.float32
    assert out.weak_type  # printed as `dtype=float32, weak_type=True` in the seed


def test_seed000_pmap2_random_lanes_differ_and_reproduce():
    sampler_axes = dict(
        state_in_axes={0: OfType(state_random.RandomState)},
        state_out_axes={0: OfType(state_random.RandomState)},
    )

    @pmap2(axis_name="devices", in_axes=0, out_axes=0, **sampler_axes)
    def sample_normal(scale):
        return state_random.normal(0.0, scale)

    scales = jnp.linspace(1.0, 2.0, jax.local_device_count())
    state_random.seed(2024)
    a = _np(sample_normal(scales))
    b = _np(sample_normal(scales))
    assert len(set(a.tolist())) == 8, f"devices drew equal numbers: {a}"
    assert not np.array_equal(a, b), "the global key did not advance between calls"
    state_random.seed(2024)
    assert_array_equal(_np(sample_normal(scales)), a)
    # And the numbers follow the documented key discipline.
    lanes, _ = _lane_keys(2024, 8)
    expected = [float(jax.random.normal(_draw_key(lanes[i]), ())) * float(scales[i]) for i in range(8)]
    assert_allclose(a, expected, rtol=1e-6)


def test_seed000_shared_key_numbers():
    @pmap2(axis_name="devices", in_axes=(None, 0), out_axes=0)
    def sample_shared(key, scale):
        return jax.random.normal(key, ()) * scale

    out = sample_shared(jax.random.PRNGKey(0), jnp.linspace(1.0, 2.0, 8))
    assert_allclose(
        _np(out),
        [1.6226422, 1.8544483, 2.0862544, 2.3180604, 2.5498662, 2.7816722, 3.0134785, 3.2452843],
        rtol=1e-6,
    )


def test_seed000_stateful_mapping_with_custom_pmap_and_donation():
    n = jax.local_device_count()
    model = Affine(size=n)
    custom_pmap = StatefulMapping(
        model,
        in_axes=0,
        out_axes=0,
        axis_name="devices",
        mapping_fn=lambda fun, *a, **kw: jax.pmap(fun, *a, donate_argnums=(0,), **kw),
        **_param_axes(),
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
        custom_pmap(jnp.ones((n, 4)))
    assert_allclose(_np(model.weight.value), np.full((8, 4), 2.0))


# =========================================================================== #
# Seed 001: shard_map, here also with Modules and path filters
# =========================================================================== #


def test_seed001_shard_map_examples():
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    data = jnp.arange(jax.device_count() * 2, dtype=jnp.float32)

    w = state_core.State(jnp.array(3.0))
    f = shard_map(lambda d: d * w.value, mesh, in_specs=(P("x"),), out_specs=P("x"))
    assert_allclose(_np(f(data)), 3.0 * np.arange(16.0))

    buffer = state_core.State(jnp.zeros(jax.device_count() * 2))

    def accumulate(d):
        buffer.value = buffer.value + d
        return d

    g = shard_map(
        accumulate,
        mesh,
        in_specs=(P("x"),),
        out_specs=P("x"),
        state_in_specs={buffer: P("x")},
        state_out_specs={buffer: P("x")},
    )
    g(jnp.ones(16))
    g(jnp.ones(16))
    assert_allclose(_np(buffer.value), np.full(16, 2.0))
    assert buffer.value.sharding.spec == P("x")

    total = shard_map(
        lambda d: jax.lax.psum(jnp.sum(d, keepdims=True), axis_name="x"),
        mesh,
        in_specs=(P("x"),),
        out_specs=P(),
    )
    assert_allclose(_np(total(data)), [120.0])

    bias = state_core.State(jnp.array(5.0))
    h = shard_map(lambda d: d + bias.value, mesh, in_specs=(P("x"),), out_specs=P("x"))
    assert_allclose(_np(jax.jit(h)(data)), np.arange(16.0) + 5.0)
    # Under the state-aware jit a new state value is picked up (no stale constant).
    jh = jit(h)
    assert_allclose(_np(jh(data)), np.arange(16.0) + 5.0)
    bias.value = jnp.array(6.0)
    assert_allclose(_np(jh(data)), np.arange(16.0) + 6.0)
    assert_allclose(_np(h(data)), np.arange(16.0) + 6.0)

    n = jax.device_count()
    mesh2d = jax.make_mesh((n // 2, 2), ("data", "model"))
    f2 = shard_map(lambda d: d + 1.0, mesh2d, in_specs=(P("data", "model"),), out_specs=P("data", "model"))
    assert_allclose(_np(f2(jnp.ones((n // 2, 2)))), np.full((4, 2), 2.0))


class Tracker(state_nn.Module):
    """A Linear layer plus a per-row statistics buffer (selected by path in the specs)."""

    def __init__(self, rows):
        super().__init__()
        self.layer = state_nn.Linear(3, 2, w_init=jnp.arange(6.0).reshape(3, 2) / 10.0, b_init=jnp.array([1.0, -1.0]))
        self.stats = state_core.ShortTermState(jnp.zeros((rows,)))

    def update(self, x):
        y = self.layer(x)
        self.stats.value = self.stats.value + y.sum(-1)
        return y


def test_shard_map_on_module_with_path_filter_matches_vmap2():
    x = jnp.asarray(np.linspace(-1.0, 1.0, 16 * 3, dtype=np.float32).reshape(16, 3))
    w = np.arange(6.0, dtype=np.float32).reshape(3, 2) / 10.0
    ref = _np(x) @ w + np.array([1.0, -1.0], np.float32)

    sharded = Tracker(16)
    f = shard_map(
        sharded,
        _mesh(),
        in_specs=(P("x"),),
        out_specs=P("x"),
        state_in_specs={PathContains("stats"): P("x")},
        state_out_specs={PathContains("stats"): P("x")},
    )
    out = f(x)
    f(x)
    assert_allclose(_np(out), ref, rtol=1e-6, atol=1e-6)
    assert_allclose(_np(sharded.stats.value), 2 * ref.sum(-1), rtol=1e-6, atol=1e-5)
    assert sharded.stats.value.sharding.spec == P("x")
    assert sharded.layer.weight.value.shape == (3, 2)  # replicated params untouched

    mapped = Tracker(16)
    v = vmap2(
        mapped,
        in_axes=0,
        out_axes=0,
        state_in_axes={0: PathContains("stats")},
        state_out_axes={0: PathContains("stats")},
    )
    assert_allclose(_np(v(x)), _np(out), rtol=1e-6, atol=1e-6)
    v(x)
    assert_allclose(_np(mapped.stats.value), _np(sharded.stats.value), rtol=1e-6, atol=1e-5)


# =========================================================================== #
# Seed 002: vmap2 with Modules (§1.5, §1.6, §2, §3.3 - §3.5, §4)
# =========================================================================== #


class Counter(state_nn.Module):
    def __init__(self):
        super().__init__()
        self.count = state_core.ShortTermState(jnp.zeros(4))

    def __call__(self, delta):
        self.count.value = self.count.value + delta
        return self.count.value


def _short_term_axes():
    return dict(
        state_in_axes={0: OfType(state_core.ShortTermState)},
        state_out_axes={0: OfType(state_core.ShortTermState)},
    )


def test_seed002_s1_5_counter_module():
    counter = Counter()
    vmap_counter = vmap2(counter, in_axes=0, out_axes=0, **_short_term_axes())
    counts = vmap_counter(jnp.array([1.0, 2.0, 3.0, 4.0]))
    assert_allclose(_np(counts), [1.0, 2.0, 3.0, 4.0])
    assert_allclose(_np(counter.count.value), [1.0, 2.0, 3.0, 4.0])
    vmap_counter(jnp.array([1.0, 1.0, 1.0, 1.0]))
    assert_allclose(_np(counter.count.value), [2.0, 3.0, 4.0, 5.0])


class LinearLayer(state_nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = state_core.ParamState(jnp.ones((in_features, out_features)))
        self.bias = state_core.ParamState(jnp.zeros((out_features,)))

    def __call__(self, x):
        return x @ self.weight.value + self.bias.value


def test_seed002_s1_6_module_params_broadcast():
    layer = LinearLayer(3, 2)
    out = vmap2(layer, in_axes=0, out_axes=0)(jnp.ones((4, 3)))
    assert out.shape == (4, 2)
    assert_allclose(_np(out), np.full((4, 2), 3.0))
    assert layer.weight.value.shape == (3, 2)  # not batched
    # The library's Linear gives the same numbers.
    lin = state_nn.Linear(3, 2, w_init=jnp.ones((3, 2)))
    assert_allclose(_np(vmap2(lin)(jnp.ones((4, 3)))), np.full((4, 2), 3.0))


def test_seed002_s1_7_undeclared_write_is_stacked():
    temp_state2 = state_core.ShortTermState(jnp.array(0.0))
    write_state2 = state_core.LongTermState(jnp.asarray(0.0))

    def update_temp2(x):
        temp_state2.value = temp_state2.value + x
        write_state2.value = temp_state2.value
        return temp_state2.value

    result2 = vmap2(update_temp2, in_axes=0, unexpected_out_state_mapping="ignore")(jnp.array([1.0, 2.0, 3.0]))
    assert_allclose(_np(result2), [1.0, 2.0, 3.0])
    assert_allclose(_np(write_state2.value), [1.0, 2.0, 3.0])


def test_seed002_s2_random_numbers_exact():
    state_random.seed(42)
    samples = vmap2(lambda scale: state_random.normal(0.0, scale), in_axes=0)(jnp.array([1.0, 2.0, 3.0, 4.0]))
    assert_allclose(_np(samples), [-1.0413289, -1.4796011, 2.222502, 6.412178], rtol=1e-6)

    state_random.seed(123)

    def sample_multiple(mean):
        return state_random.uniform(0.0, 1.0) + state_random.normal(mean, 1.0)

    results = vmap2(sample_multiple, in_axes=0)(jnp.array([0.0, 1.0, 2.0]))
    assert_allclose(_np(results), [1.063001, 2.0858884, 3.2780576], rtol=1e-6)

    # §2.2: shared vs unique keys.
    scales = jnp.array([1.0, 2.0, 3.0, 4.0])
    shared = vmap2(lambda k, s: jax.random.normal(k, ()) * s, in_axes=(None, 0))(jax.random.PRNGKey(0), scales)
    assert_allclose(_np(shared), [1.6226422, 3.2452843, 4.8679266, 6.4905686], rtol=1e-6)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    unique = vmap2(lambda k, s: jax.random.normal(k, ()) * s, in_axes=(0, 0))(keys, scales)
    assert_allclose(_np(unique), [1.0040143, -4.8849115, 3.8869078, -2.4877744], rtol=1e-6)


def test_seed002_s2_1_numbers_also_from_shard_map():
    """The same seeded draws through shard_map on a 4-device mesh (one shard per lane)."""
    state_random.seed(42)
    f = shard_map(lambda s: state_random.normal(0.0, s), _mesh(4), in_specs=(P("x"),), out_specs=P("x"))
    samples = f(jnp.array([1.0, 2.0, 3.0, 4.0]))
    assert_allclose(_np(samples), [-1.0413289, -1.4796011, 2.222502, 6.412178], rtol=1e-6)


class SeedDropout(state_nn.Module):
    """Seed 002 §2.3's Dropout module."""

    def __init__(self, rate=0.5):
        super().__init__()
        self.rate = rate

    def __call__(self, x, training=True):
        if not training:
            return x
        keep_mask = state_random.uniform(0.0, 1.0, x.shape) > self.rate
        return jnp.where(keep_mask, x / (1 - self.rate), 0.0)


def test_seed002_s2_3_dropout_module_pattern():
    state_random.seed(456)
    dropout = SeedDropout(rate=0.3)
    dropped = vmap2(lambda x: dropout(x, training=True), in_axes=0)(jnp.ones((4, 5)))
    k = 1.4285715
    expected = [
        [0.0, k, k, 0.0, k],
        [k, k, k, k, 0.0],
        [k, 0.0, k, 0.0, 0.0],
        [0.0, k, k, k, 0.0],
    ]
    assert_allclose(_np(dropped), expected, rtol=1e-6)


def test_library_dropout_under_vmap2_differs_per_row_and_reproduces():
    drop = state_nn.Dropout(0.5)
    f = vmap2(drop, in_axes=0)
    state_random.seed(9)
    a = _np(f(jnp.ones((8, 32))))
    assert set(np.unique(a).tolist()) <= {0.0, 2.0}
    assert len({tuple(r) for r in (a > 0).tolist()}) == 8, "rows share a dropout mask"
    assert 0.3 < (a > 0).mean() < 0.7
    state_random.seed(9)
    assert_array_equal(_np(f(jnp.ones((8, 32)))), a)
    assert_array_equal(_np(drop.eval()(jnp.ones(3))), np.ones(3))


class StatefulComputation(state_nn.Module):
    def __init__(self):
        super().__init__()
        self.temp = state_core.ShortTermState(jnp.zeros(3))
        self.param = state_core.ParamState(jnp.array(1.0))

    def __call__(self, x):
        self.temp.value = self.temp.value + x
        return self.temp.value * self.param.value


def test_seed002_s3_3_state_axis_inference_module():
    model = StatefulComputation()
    vmap_model = vmap2(model, in_axes=0, out_axes=0, **_short_term_axes())
    outputs = vmap_model(jnp.array([1.0, 2.0, 3.0]))
    assert_allclose(_np(outputs), [1.0, 2.0, 3.0])
    assert_allclose(_np(model.temp.value), [1.0, 2.0, 3.0])
    assert_allclose(_np(model.param.value), 1.0)
    assert model.param.value.shape == ()


def test_seed002_s3_1_attributes_and_s3_2_caching():
    accumulator = state_core.ShortTermState(jnp.zeros(4))

    def accumulate(x):
        accumulator.value = accumulator.value + x
        return accumulator.value

    mapped = vmap2(
        accumulate,
        in_axes=0,
        out_axes=0,
        axis_size=4,
        state_in_axes={0: OfType(state_core.ShortTermState)},
    )
    assert mapped.origin_fun is accumulate
    assert (mapped.in_axes, mapped.out_axes, mapped.axis_name, mapped.axis_size) == (0, 0, None, 4)
    assert str(mapped.state_in_axes) == "{0: OfType(<class 'state_core.ShortTermState'>)}"
    assert mapped.state_out_axes == {}

    calls = [0]

    def counting_function(x):
        calls[0] += 1
        return x * 2

    f = vmap2(counting_function, in_axes=0)
    r1 = f(jnp.array([1.0, 2.0, 3.0]))
    assert calls[0] == 1
    r2 = f(jnp.array([4.0, 5.0, 6.0]))
    assert calls[0] == 1, "the function ran again on a cache hit"
    assert_allclose(_np(r1), [2.0, 4.0, 6.0])
    assert_allclose(_np(r2), [8.0, 10.0, 12.0])


def test_seed002_s3_4_custom_mapping_fn_and_s3_5_jaxpr():
    import functools

    counter_state = state_core.ShortTermState(jnp.zeros(3))

    def increment(delta):
        counter_state.value = counter_state.value + delta
        return counter_state.value

    custom = StatefulMapping(
        increment,
        in_axes=0,
        out_axes=0,
        name="custom_increment",
        mapping_fn=functools.partial(jax.vmap, spmd_axis_name=None),
        **_short_term_axes(),
    )
    assert_allclose(_np(custom(jnp.array([1.0, 2.0, 3.0]))), [1.0, 2.0, 3.0])
    assert_allclose(_np(counter_state.value), [1.0, 2.0, 3.0])

    simple_state = state_core.State(jnp.array(1.0))

    def simple_op(x):
        result = x + simple_state.value
        simple_state.value = result
        return result * 2

    simple_vmap = vmap2(simple_op, in_axes=0, state_out_axes={0: OfType(state_core.State)})
    test_input = jnp.array([1.0, 2.0])
    assert_allclose(_np(simple_vmap(test_input)), [4.0, 6.0])
    assert_allclose(_np(simple_state.value), [2.0, 3.0])
    key = simple_vmap.get_arg_cache_key(test_input)
    closed = simple_vmap.get_jaxpr_by_cache(key)
    assert closed is not None
    # The jaxpr computes (2 * (x + s), x + s) for one lane.
    body = open_jaxpr(closed)
    outs = jax.core.eval_jaxpr(body, jaxpr_consts(closed), *[jnp.float32(1.0)] * len(body.invars))
    assert_allclose([float(o) for o in outs], [4.0, 2.0])


def test_seed002_s4_nested_and_jit_grad():
    vmap_rows = vmap2(lambda x, y: x * y, in_axes=(0, 0))
    vmap_matrix = vmap2(vmap_rows, in_axes=(0, 0))
    result = vmap_matrix(jnp.ones((3, 4)), jnp.arange(12).reshape(3, 4))
    assert result.shape == (3, 4)
    assert_allclose(_np(result), np.arange(12.0).reshape(3, 4))

    def loss_fn(x, target):
        return jnp.sum((x**2 - target) ** 2)

    batched_grad_jit = jit(vmap2(grad(loss_fn, argnums=0), in_axes=(0, 0)))
    g = batched_grad_jit(jnp.array([1.0, 2.0, 3.0]), jnp.array([2.0, 4.0, 6.0]))
    assert_allclose(_np(g), [-4.0, 0.0, 36.0])


# =========================================================================== #
# Seed 003: Map
# =========================================================================== #


class MyModule(state_nn.Module):
    def init_state(self, size=(5,), **kwargs):
        self.weight = state_core.ParamState(jnp.zeros(size))

    def update(self, x):
        return x @ self.weight.value


class OnesModule(state_nn.Module):
    def init_state(self, **kwargs):
        self.weight = state_core.ParamState(jnp.ones(5))

    def predict(self, x):
        return x @ self.weight.value


class MultiInputModule(state_nn.Module):
    def init_state(self, size, **kwargs):
        self.state = state_core.State(jnp.zeros(size))

    def process(self, x, y):
        return x + y, x * y


class StatefulModule(state_nn.Module):
    def init_state(self, size, **kwargs):
        self.params = state_core.ParamState(jnp.ones(size))
        self.buffer = state_core.State(jnp.zeros(size))

    def update(self, x):
        self.buffer.value = x
        return x @ self.params.value


def test_seed003_map_basic_and_pmap():
    module = MyModule()
    vmapper = state_nn.Map(module, init_map_size=10, in_axes=0, axis_name="batch")
    with pytest.raises(ValueError, match="init_all_states"):
        vmapper.update(jnp.ones((10, 5)))
    vmapper.init_all_states(size=(5,))
    assert module.weight.value.shape == (10, 5)
    assert list(vmapper.dict_vmap_states) == [0]
    assert vmapper.dict_vmap_states[0] == [module.weight]
    assert_allclose(_np(vmapper.update(jnp.ones((10, 5)))), np.zeros(10))
    module.weight.value = jnp.arange(50.0).reshape(10, 5)
    assert_allclose(_np(vmapper(jnp.ones((10, 5)))), np.arange(50.0).reshape(10, 5).sum(1))

    pmapper = state_nn.Map(MyModule(), init_map_size=jax.device_count(), behavior="pmap", axis_name="devices")
    pmapper.init_all_states(size=(5,))
    assert pmapper.module.weight.value.shape == (8, 5)
    pmapper.module.weight.value = jnp.arange(40.0).reshape(8, 5)
    assert_allclose(_np(pmapper.update(jnp.ones((8, 5)))), np.arange(40.0).reshape(8, 5).sum(1))


def test_seed003_map_methods_callables_and_axes():
    vmapper = state_nn.Map(OnesModule(), init_map_size=10)
    with pytest.raises(ValueError, match="init_all_states"):
        vmapper.map("predict")
    vmapper.init_all_states()
    inputs = jnp.ones((10, 5))
    assert_allclose(_np(vmapper.map("predict")(inputs)), np.full(10, 5.0))

    def custom_fn(module, x, scale):
        return module.predict(x) * scale

    assert_allclose(_np(vmapper.map(lambda m, x, s: custom_fn(m, x, s))(inputs, s=2.0)), np.full(10, 10.0))

    multi = state_nn.Map(MultiInputModule(), init_map_size=10)
    multi.init_all_states(size=(5,))
    x = jnp.arange(50.0).reshape(10, 5)
    y = jnp.full(5, 2.0)
    r1, r2 = multi.map("process", in_axes=(0, None), out_axes=(0, 0))(x, y)
    assert_allclose(_np(r1), _np(x) + 2.0)
    assert_allclose(_np(r2), _np(x) * 2.0)

    module = StatefulModule()
    stateful = state_nn.Map(module, init_map_size=10)
    stateful.init_all_states(size=(5,))
    outputs = stateful.map("update", state_axes={0: OfType(state_core.ParamState)})(x)
    assert_allclose(_np(outputs), _np(x).sum(1))
    assert_allclose(_np(module.buffer.value), _np(x))  # each member wrote its own row


# =========================================================================== #
# A stochastic ensemble trained with optax
# =========================================================================== #


class NoisyMember(state_nn.Module):
    """Linear + Dropout + additive noise; parameters are created per member in init_state."""

    def init_state(self, in_size=4, **kwargs):
        self.lin = state_nn.Linear(in_size, 1)
        self.drop = state_nn.Dropout(0.1)

    def update(self, x):
        y = self.lin(self.drop(x))
        return y + 0.01 * state_random.normal(size=y.shape)

    def predict(self, x):
        return self.lin(x)


def test_stochastic_ensemble_trains_with_optax_adam():
    members, n, d = 8, 64, 4
    state_random.seed(0)
    member = NoisyMember()
    ensemble = state_nn.Map(member, init_map_size=members)
    ensemble.init_all_states(in_size=d)
    w0 = _np(member.lin.weight.value)
    assert w0.shape == (members, d, 1)
    assert len({tuple(r) for r in w0.reshape(members, -1).tolist()}) == members, "members share init"

    rng = np.random.default_rng(0)
    true_w = rng.normal(size=(members, d, 1)).astype(np.float32)
    X = jnp.asarray(rng.normal(size=(members, n, d)).astype(np.float32))
    Y = jnp.asarray(_np(X) @ true_w + 0.5)

    params = ensemble.states(state_core.ParamState)
    assert sorted(params.keys()) == [("module", "lin", "bias"), ("module", "lin", "weight")]
    param_list = list(params.values())
    opt = optax.adam(0.05)
    opt_state = state_core.State(opt.init([p.value for p in param_list]), name="adam")

    predict = ensemble.map("predict")

    def eval_loss(x, y):
        return jnp.mean((predict(x) - y) ** 2, axis=(1, 2))

    def loss_fn(x, y):
        per_member = jnp.mean((ensemble(x) - y) ** 2, axis=(1, 2))
        return per_member.sum(), per_member

    loss_grad = grad(loss_fn, grad_states=param_list, has_aux=True)

    @jit
    def train_step(x, y):
        grads, per_member = loss_grad(x, y)
        updates, new_opt = opt.update(grads, opt_state.value, [p.value for p in param_list])
        for p, u in zip(param_list, updates, strict=True):
            p.value = p.value + u
        opt_state.value = new_opt
        return per_member

    before = _np(eval_loss(X, Y))
    keys = [_key_data(state_random.DEFAULT.value)]
    train_losses = []
    for _ in range(30):
        train_losses.append(_np(train_step(X, Y)))
        keys.append(_key_data(state_random.DEFAULT.value))
    after = _np(eval_loss(X, Y))

    assert np.all(np.isfinite(after))
    assert np.all(after < before / 4.0), f"per-member loss before {before}, after {after}"
    assert np.all(train_losses[-1] < train_losses[0] / 4.0), (train_losses[0], train_losses[-1])
    # The random stream advanced on every step (fresh dropout masks and noise).
    assert len({tuple(k) for k in keys}) == len(keys)
    # Members stay independent: distinct parameters, each tracking its own target.
    w = _np(member.lin.weight.value)
    assert w.shape == (members, d, 1)
    err_own = np.abs(w - true_w).mean(axis=(1, 2))
    err_other = np.abs(w - np.roll(true_w, 1, axis=0)).mean(axis=(1, 2))
    assert np.all(err_own < err_other), (err_own, err_other)
    # Dropout masks differ per member inside the ensemble.
    masks = _np(ensemble.map(lambda m, x: m.drop(x))(jnp.ones((members, 256))))
    assert len({tuple(r) for r in (masks > 0).tolist()}) == members


# =========================================================================== #
# One deterministic model under vmap2 / pmap2 / shard_map / Map
# =========================================================================== #


def _ref_mlp(x, w1, b1, w2, b2):
    return np.tanh(x @ w1 + b1) @ w2 + b2


class MLP(state_nn.Module):
    def __init__(self, w1, b1, w2, b2):
        super().__init__()
        self.l1 = state_nn.Linear(4, 8, w_init=w1, b_init=b1)
        self.l2 = state_nn.Linear(8, 2, w_init=w2, b_init=b2)

    def update(self, x):
        return self.l2(jnp.tanh(self.l1(x)))


def _mlp_params(seed, lead=()):
    rng = np.random.default_rng(seed)
    shapes = [(4, 8), (8,), (8, 2), (2,)]
    return [rng.normal(size=lead + s).astype(np.float32) * 0.5 for s in shapes]


def test_shared_params_batch_parallel_agree_everywhere():
    params = _mlp_params(1)
    x = np.random.default_rng(2).normal(size=(16, 4)).astype(np.float32)
    ref = _ref_mlp(x, *params)
    net = MLP(*[jnp.asarray(p) for p in params])
    tol = dict(rtol=1e-5, atol=1e-5)

    assert_allclose(_np(net(x)), ref, **tol)
    assert_allclose(_np(jit(net)(x)), ref, **tol)
    assert_allclose(_np(vmap2(net)(x)), ref, **tol)
    assert_allclose(_np(pmap2(net, axis_name="batch")(x.reshape(8, 2, 4))).reshape(16, 2), ref, **tol)
    assert_allclose(_np(shard_map(net, _mesh(), in_specs=(P("x"),), out_specs=P("x"))(x)), ref, **tol)
    assert_allclose(_np(jit(shard_map(net, _mesh(), in_specs=(P("x"),), out_specs=P("x")))(x)), ref, **tol)
    # Params were only read: unchanged and unbatched.
    assert_array_equal(_np(net.l1.weight.value), params[0])


class StackedMLP(MLP):
    """Per-member parameters stacked on axis 0, plus a per-member running sum it writes."""

    def __init__(self, stacked):
        super().__init__(*[jnp.asarray(p[0]) for p in stacked])
        for state, value in zip((self.l1.weight, self.l1.bias, self.l2.weight, self.l2.bias), stacked, strict=True):
            state.value = jnp.asarray(value)
        self.acc = state_core.ShortTermState(jnp.zeros((N_DEV, 2)))

    def update(self, x):
        y = super().update(x)
        self.acc.value = self.acc.value + y.sum(0)
        return y


def test_stacked_members_vmap2_pmap2_shard_map_agree():
    stacked = _mlp_params(3, lead=(N_DEV,))
    x = np.random.default_rng(4).normal(size=(N_DEV, 5, 4)).astype(np.float32)
    ref = np.stack([_ref_mlp(x[i], *(p[i] for p in stacked)) for i in range(N_DEV)])
    axes = dict(
        state_in_axes={0: (state_core.ParamState, state_core.ShortTermState)},
        state_out_axes={0: OfType(state_core.ShortTermState)},
    )
    tol = dict(rtol=1e-5, atol=1e-5)

    results = {}
    nets = {name: StackedMLP(stacked) for name in ("vmap2", "pmap2", "shard_map")}
    runners = {
        "vmap2": vmap2(nets["vmap2"], **axes),
        "pmap2": pmap2(nets["pmap2"], axis_name="members", **axes),
        # One member per shard; inside each shard a vmap2 over the local block of 1.
        "shard_map": shard_map(
            vmap2(nets["shard_map"], **axes),
            _mesh(),
            in_specs=(P("x"),),
            out_specs=P("x"),
            state_in_specs=P("x"),
            state_out_specs=P("x"),
        ),
    }
    for name, run in runners.items():
        first = _np(run(x))
        second = _np(run(x))
        assert first.shape == (N_DEV, 5, 2), name
        assert_allclose(first, ref, err_msg=name, **tol)
        assert_allclose(second, ref, err_msg=name, **tol)
        acc = _np(nets[name].acc.value)
        assert acc.shape == (N_DEV, 2), name
        assert_allclose(acc, 2 * ref.sum(1), err_msg=name, **tol)
        assert nets[name].l1.weight.value.shape == (N_DEV, 4, 8), name
        results[name] = (first, acc)
    for name in ("pmap2", "shard_map"):
        assert_allclose(results[name][0], results["vmap2"][0], err_msg=name, **tol)
        assert_allclose(results[name][1], results["vmap2"][1], err_msg=name, **tol)


class InitMember(state_nn.Module):
    def init_state(self, **kwargs):
        self.l1 = state_nn.Linear(4, 8)
        self.l2 = state_nn.Linear(8, 2, b_init=jax.nn.initializers.normal(1.0))
        self.calls = state_core.ShortTermState(jnp.zeros(()))

    def update(self, x):
        self.calls.value = self.calls.value + 1.0
        return self.l2(jnp.tanh(self.l1(x)))


def test_map_vmap_and_pmap_behaviours_agree_from_the_same_seed():
    maps = {}
    for behavior in ("vmap", "pmap"):
        state_random.seed(77)
        m = state_nn.Map(InitMember(), init_map_size=N_DEV, behavior=behavior, axis_name="members")
        m.init_all_states()
        maps[behavior] = m
    mv, mp = maps["vmap"].module, maps["pmap"].module
    for sv, sp in zip(
        (mv.l1.weight, mv.l1.bias, mv.l2.weight, mv.l2.bias),
        (mp.l1.weight, mp.l1.bias, mp.l2.weight, mp.l2.bias),
        strict=True,
    ):
        assert sv.value.shape[0] == N_DEV
        assert_allclose(_np(sv.value), _np(sp.value), rtol=1e-6, atol=1e-6)
    w1 = _np(mv.l1.weight.value)
    assert len({tuple(r) for r in w1.reshape(N_DEV, -1).tolist()}) == N_DEV, "members share init"

    x = np.random.default_rng(5).normal(size=(N_DEV, 3, 4)).astype(np.float32)
    params = [_np(s.value) for s in (mv.l1.weight, mv.l1.bias, mv.l2.weight, mv.l2.bias)]
    ref = np.stack([_ref_mlp(x[i], *(p[i] for p in params)) for i in range(N_DEV)])
    for behavior, m in maps.items():
        out = _np(m(x))
        m(x)
        assert_allclose(out, ref, rtol=1e-5, atol=1e-5, err_msg=behavior)
        assert_allclose(_np(m.module.calls.value), np.full(N_DEV, 2.0), err_msg=behavior)


# =========================================================================== #
# Seeded randomness: vmap2 vs pmap2 vs shard_map
# =========================================================================== #


def test_seeded_random_state_same_under_vmap2_pmap2_and_shard_map():
    seed = 11
    lanes, next_key = _lane_keys(seed, N_DEV)
    expected = np.stack([_np(jax.random.normal(_draw_key(lanes[i]), (3,))) for i in range(N_DEV)])
    zeros = jnp.zeros((N_DEV, 3))

    rng = state_random.RandomState(seed)

    def draw(x):
        return x + rng.normal(size=x.shape[-1:])

    runs = {
        "vmap2": vmap2(draw, in_axes=0),
        "pmap2": pmap2(draw, in_axes=0, axis_name="lanes"),
        "shard_map": shard_map(lambda x: x + rng.normal(size=x.shape), _mesh(), in_specs=(P("x"),), out_specs=P("x")),
    }
    outs = {}
    for name, f in runs.items():
        rng.seed(seed)
        first = _np(f(zeros))
        assert _key_data(rng.value) == _key_data(next_key), f"{name} left a different key"
        second = _np(f(zeros))
        assert first.shape == (N_DEV, 3)
        assert len({tuple(r) for r in first.tolist()}) == N_DEV, f"{name}: lanes drew equal numbers"
        assert not np.array_equal(first, second), f"{name}: the key did not advance"
        assert_allclose(first, expected, rtol=1e-6, atol=1e-6, err_msg=name)
        outs[name] = (first, second)
    for name in ("pmap2", "shard_map"):
        assert_allclose(outs[name][0], outs["vmap2"][0], rtol=1e-6, atol=1e-6, err_msg=name)
        assert_allclose(outs[name][1], outs["vmap2"][1], rtol=1e-6, atol=1e-6, err_msg=name)


def test_default_stream_same_under_vmap2_and_shard_map():
    seed = 5
    lanes, next_key = _lane_keys(seed, N_DEV)
    expected = np.stack(
        [_np(jax.random.uniform(_draw_key(lanes[i]), (2,), minval=-1.0, maxval=1.0)) for i in range(N_DEV)]
    )
    v = vmap2(lambda x: x + state_random.uniform(-1.0, 1.0, size=(2,)), in_axes=0)
    s = shard_map(
        lambda x: x + state_random.uniform(-1.0, 1.0, size=x.shape), _mesh(), in_specs=(P("x"),), out_specs=P("x")
    )
    zeros = jnp.zeros((N_DEV, 2))
    state_random.seed(seed)
    a = _np(v(zeros))
    key_v = _key_data(state_random.DEFAULT.value)
    state_random.seed(seed)
    b = _np(s(zeros))
    key_s = _key_data(state_random.DEFAULT.value)
    assert key_v == key_s == _key_data(next_key)
    assert_allclose(a, expected, rtol=1e-6, atol=1e-6)
    assert_allclose(b, a, rtol=1e-6, atol=1e-6)
    assert len({tuple(r) for r in a.tolist()}) == N_DEV


# =========================================================================== #
# pmap2 without an axis name (as jax.pmap allows)
# =========================================================================== #


def test_pmap2_and_pmap_map_work_without_axis_name():
    """``jax.pmap(f)`` needs no axis_name, so neither may ``pmap2`` (nor ``Map(behavior='pmap')``).

    The pmap2 docstring example itself is ``pmap2(lambda x: x * 2)(jnp.arange(n, ...))``.
    """
    x = jnp.arange(8.0)
    assert_allclose(_np(jax.pmap(lambda v: v * 2)(x)), np.arange(8.0) * 2)
    assert_allclose(_np(pmap2(lambda v: v * 2)(x)), np.arange(8.0) * 2)

    rng = state_random.RandomState(3)
    draws = _np(pmap2(lambda v: v + rng.normal())(jnp.zeros(8)))
    assert len(set(draws.tolist())) == 8

    ensemble = state_nn.Map(MyModule(), init_map_size=N_DEV, behavior="pmap")
    ensemble.init_all_states(size=(5,))
    ensemble.module.weight.value = jnp.arange(40.0).reshape(8, 5)
    assert_allclose(_np(ensemble(jnp.ones((8, 5)))), np.arange(40.0).reshape(8, 5).sum(1))
