"""Seed 002 (vmap2 tutorial): every non-random example with its printed output.

The seeded random examples (§2.1, §2 example 2, §2.3) are in ``test_transform_random.py``.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core.engine import is_jaxpr, open_jaxpr
from state_core.filter import OfType
from state_transform import StatefulMapping, grad, jit, vmap2


# ---------------------------------------------------------------- §1.1 in_axes
def test_s1_1_example1_square():
    def square(x):
        return x**2

    vmap_square = vmap2(square, in_axes=0)
    xs = jnp.array([1.0, 2.0, 3.0, 4.0])
    assert xs.shape == (4,)
    out = vmap_square(xs)
    assert_allclose(np.asarray(out), [1.0, 4.0, 9.0, 16.0])
    assert vmap_square(xs).shape == (4,)


def test_s1_1_example2_weighted_sum_broadcast_weight():
    def weighted_sum(x, weight):
        return x * weight

    vmap_weighted = vmap2(weighted_sum, in_axes=(0, None))
    batch_x = jnp.array([1.0, 2.0, 3.0])
    result = vmap_weighted(batch_x, 2.0)
    assert_allclose(np.asarray(result), [2.0, 4.0, 6.0])


def test_s1_1_example3_matrix_vector_product():
    def matrix_vector_product(matrix, vector):
        return matrix @ vector

    batch_matrices = jnp.ones((4, 3, 2))
    batch_vectors = jnp.ones((4, 2))
    vmap_matmul = vmap2(matrix_vector_product, in_axes=(0, 0))
    result = vmap_matmul(batch_matrices, batch_vectors)
    assert result.shape == (4, 3)
    assert_allclose(np.asarray(result), np.full((4, 3), 2.0))


# ---------------------------------------------------------------- §1.2 out_axes
def create_vector(scalar):
    return jnp.array([scalar, scalar * 2, scalar * 3])


def test_s1_2_out_axes_0():
    result_axis0 = vmap2(create_vector, in_axes=0, out_axes=0)(jnp.array([1.0, 2.0]))
    assert result_axis0.shape == (2, 3)
    assert_allclose(np.asarray(result_axis0), [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])


def test_s1_2_out_axes_1():
    result_axis1 = vmap2(create_vector, in_axes=0, out_axes=1)(jnp.array([1.0, 2.0]))
    assert result_axis1.shape == (3, 2)
    assert_allclose(np.asarray(result_axis1), [[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])


# ---------------------------------------------------------------- §1.3 axis_name
def test_s1_3_axis_name_pmean_normalize():
    def normalize_batch(x):
        batch_mean = jax.lax.pmean(x, axis_name="batch")
        return x - batch_mean

    vmap_normalize = vmap2(normalize_batch, in_axes=0, axis_name="batch")
    batch_data = jnp.array([1.0, 2.0, 3.0, 4.0])
    normalized = vmap_normalize(batch_data)
    assert_allclose(float(jnp.mean(batch_data)), 2.5)
    assert_allclose(np.asarray(normalized), [-1.5, -0.5, 0.5, 1.5])
    assert_allclose(float(jnp.mean(normalized)), 0.0, atol=1e-7)


# ---------------------------------------------------------------- §1.4 axis_size
def test_s1_4_axis_size_with_no_mapped_input():
    def generate_sequence(unused=None):
        return jnp.arange(3)

    vmap_generate = vmap2(generate_sequence, in_axes=None, axis_size=5)
    result = vmap_generate()
    assert result.shape == (5, 3)
    assert_allclose(np.asarray(result), np.tile(np.arange(3), (5, 1)))


# ---------------------------------------------------------------- §1.5 state_in/out_axes
class Counter:
    def __init__(self):
        self.count = state_core.ShortTermState(jnp.zeros(4))

    def __call__(self, delta):
        self.count.value = self.count.value + delta
        return self.count.value


def test_s1_5_counter_state_batched():
    counter = Counter()
    vmap_counter = vmap2(
        counter,
        in_axes=0,
        out_axes=0,
        state_in_axes={0: OfType(state_core.ShortTermState)},
        state_out_axes={0: OfType(state_core.ShortTermState)},
    )
    deltas = jnp.array([1.0, 2.0, 3.0, 4.0])
    counts = vmap_counter(deltas)
    assert_allclose(np.asarray(counts), [1.0, 2.0, 3.0, 4.0])
    assert_allclose(np.asarray(counter.count.value), [1.0, 2.0, 3.0, 4.0])


# ---------------------------------------------------------------- §1.6 module states broadcast
class LinearLayer:
    def __init__(self, in_features, out_features):
        self.weight = state_core.ParamState(jnp.ones((in_features, out_features)))
        self.bias = state_core.ParamState(jnp.zeros((out_features,)))

    def __call__(self, x):
        return x @ self.weight.value + self.bias.value


def test_s1_6_linear_layer_params_broadcast():
    layer = LinearLayer(3, 2)
    vmap_layer = vmap2(layer, in_axes=0, out_axes=0)
    batch_inputs = jnp.ones((4, 3))
    out = vmap_layer(batch_inputs)
    assert out.shape == (4, 2)
    assert_allclose(np.asarray(out), np.full((4, 2), 3.0))
    # parameters untouched
    assert layer.weight.value.shape == (3, 2)
    assert layer.bias.value.shape == (2,)


# ---------------------------------------------------------------- §1.7 unexpected_out_state_mapping
def test_s1_7_example1_declared_state_plus_undeclared_write_is_stacked():
    temp_state = state_core.ShortTermState(jnp.zeros(3))
    write_state = state_core.LongTermState(jnp.asarray(0.0))

    def update_temp(x):
        temp_state.value = temp_state.value + x
        write_state.value = temp_state.value
        return temp_state.value

    vmap_proper = vmap2(
        update_temp,
        in_axes=0,
        state_in_axes={0: OfType(state_core.ShortTermState)},
        state_out_axes={0: OfType(state_core.ShortTermState)},
        unexpected_out_state_mapping="ignore",
    )
    # The seed prints nothing here: the call must not raise.
    result = vmap_proper(jnp.array([1.0, 2.0, 3.0]))
    assert_allclose(np.asarray(result), [1.0, 2.0, 3.0])
    assert_allclose(np.asarray(temp_state.value), [1.0, 2.0, 3.0])
    assert_allclose(np.asarray(write_state.value), [1.0, 2.0, 3.0])


def test_s1_7_example2_ignore_policy_stacks_undeclared_writes():
    temp_state2 = state_core.ShortTermState(jnp.array(0.0))
    write_state2 = state_core.LongTermState(jnp.asarray(0.0))

    def update_temp2(x):
        temp_state2.value = temp_state2.value + x
        write_state2.value = temp_state2.value
        return temp_state2.value

    # Before vmapping, original write state value: 0.0
    assert float(write_state2.value) == 0.0
    vmap_ignore = vmap2(update_temp2, in_axes=0, unexpected_out_state_mapping="ignore")
    result2 = vmap_ignore(jnp.array([1.0, 2.0, 3.0]))
    assert_allclose(np.asarray(result2), [1.0, 2.0, 3.0])
    assert_allclose(np.asarray(write_state2.value), [1.0, 2.0, 3.0])
    assert_allclose(np.asarray(temp_state2.value), [1.0, 2.0, 3.0])


# ---------------------------------------------------------------- §2.2 jax.random keys (no RandomState)
def sample_with_jax_key(key, scale):
    return jax.random.normal(key, ()) * scale


def test_s2_2_shared_key_broadcast():
    vmap_shared_key = vmap2(sample_with_jax_key, in_axes=(None, 0))
    scales = jnp.array([1.0, 2.0, 3.0, 4.0])
    samples_shared = vmap_shared_key(jax.random.PRNGKey(0), scales)
    assert_allclose(np.asarray(samples_shared), [1.6226422, 3.2452843, 4.8679266, 6.4905686], rtol=1e-6)


def test_s2_2_unique_keys_batched():
    vmap_unique_keys = vmap2(sample_with_jax_key, in_axes=(0, 0))
    scales = jnp.array([1.0, 2.0, 3.0, 4.0])
    keys = jax.random.split(jax.random.PRNGKey(0), len(scales))
    samples_unique = vmap_unique_keys(keys, scales)
    assert_allclose(np.asarray(samples_unique), [1.0040143, -4.8849115, 3.8869078, -2.4877744], rtol=1e-6)


# ---------------------------------------------------------------- §3.1 StatefulMapping attributes
def test_s3_1_inspecting_stateful_mapping():
    accumulator = state_core.ShortTermState(jnp.zeros(4))

    def accumulate(x):
        accumulator.value = accumulator.value + x
        return accumulator.value

    m = vmap2(
        accumulate,
        in_axes=0,
        out_axes=0,
        axis_size=4,
        state_in_axes={0: OfType(state_core.ShortTermState)},
    )
    assert type(m).__module__ + "." + type(m).__name__ == "state_transform.StatefulMapping"
    assert isinstance(m, StatefulMapping)
    assert m.origin_fun is accumulate
    assert m.in_axes == 0
    assert m.out_axes == 0
    assert m.state_in_axes == {0: OfType(state_core.ShortTermState)}
    assert repr(m.state_in_axes) == "{0: OfType(<class 'state_core.ShortTermState'>)}"
    assert m.state_out_axes == {}
    assert m.axis_name is None
    assert m.axis_size == 4


# ---------------------------------------------------------------- §3.2 compilation and caching
def test_s3_2_function_traced_once_per_signature():
    call_count = [0]

    def counting_function(x):
        call_count[0] += 1
        return x * 2

    vmap_counting = vmap2(counting_function, in_axes=0)
    assert call_count[0] == 0
    result1 = vmap_counting(jnp.array([1.0, 2.0, 3.0]))
    assert call_count[0] == 1
    call_count[0] = 0
    result2 = vmap_counting(jnp.array([4.0, 5.0, 6.0]))
    assert call_count[0] == 0
    assert_allclose(np.asarray(result1), [2.0, 4.0, 6.0])
    assert_allclose(np.asarray(result2), [8.0, 10.0, 12.0])
    # a new shape: exactly one new trace, then cached again
    result3 = vmap_counting(jnp.array([1.0, 2.0, 3.0, 4.0]))
    assert call_count[0] == 1
    vmap_counting(jnp.array([0.0, 0.0, 0.0, 0.0]))
    assert call_count[0] == 1
    assert_allclose(np.asarray(result3), [2.0, 4.0, 6.0, 8.0])


# ---------------------------------------------------------------- §3.3 state axis inference
class StatefulComputation:
    def __init__(self):
        self.temp = state_core.ShortTermState(jnp.zeros(3))
        self.param = state_core.ParamState(jnp.array(1.0))

    def __call__(self, x):
        self.temp.value = self.temp.value + x
        return self.temp.value * self.param.value


def test_s3_3_short_term_batched_param_shared():
    model = StatefulComputation()
    vmap_model = vmap2(
        model,
        in_axes=0,
        out_axes=0,
        state_in_axes={0: OfType(state_core.ShortTermState)},
        state_out_axes={0: OfType(state_core.ShortTermState)},
    )
    outputs = vmap_model(jnp.array([1.0, 2.0, 3.0]))
    assert_allclose(np.asarray(outputs), [1.0, 2.0, 3.0])
    assert_allclose(np.asarray(model.temp.value), [1.0, 2.0, 3.0])
    assert model.param.value.shape == ()
    assert float(model.param.value) == 1.0


# ---------------------------------------------------------------- §3.4 direct StatefulMapping
def test_s3_4_direct_stateful_mapping_custom_mapping_fn():
    counter_state = state_core.ShortTermState(jnp.zeros(3))

    def increment(delta):
        counter_state.value = counter_state.value + delta
        return counter_state.value

    custom_mapping = StatefulMapping(
        increment,
        in_axes=0,
        out_axes=0,
        state_in_axes={0: OfType(state_core.ShortTermState)},
        state_out_axes={0: OfType(state_core.ShortTermState)},
        name="custom_increment",
        mapping_fn=functools.partial(jax.vmap, spmd_axis_name=None),
    )
    results = custom_mapping(jnp.array([1.0, 2.0, 3.0]))
    assert_allclose(np.asarray(results), [1.0, 2.0, 3.0])
    assert_allclose(np.asarray(counter_state.value), [1.0, 2.0, 3.0])
    assert custom_mapping.name == "custom_increment"
    # a second call accumulates
    custom_mapping(jnp.array([1.0, 1.0, 1.0]))
    assert_allclose(np.asarray(counter_state.value), [2.0, 3.0, 4.0])


# ---------------------------------------------------------------- §3.5 the IR
def test_s3_5_cache_key_gives_closed_jaxpr():
    simple_state = state_core.State(jnp.array(1.0))

    def simple_op(x):
        result = x + simple_state.value
        simple_state.value = result
        return result * 2

    simple_vmap = vmap2(simple_op, in_axes=0, state_out_axes={0: OfType(state_core.State)})
    test_input = jnp.array([1.0, 2.0])
    out = simple_vmap(test_input)  # the seed's `simple_vmap2(...)` is a typo
    assert_allclose(np.asarray(out), [4.0, 6.0])
    assert_allclose(np.asarray(simple_state.value), [2.0, 3.0])
    cache_key = simple_vmap.get_arg_cache_key(test_input)
    jaxpr = simple_vmap.get_jaxpr_by_cache(cache_key)
    assert is_jaxpr(jaxpr)  # a ClosedJaxpr on JAX 0.10, a Jaxpr carrying its constants from 0.11
    # one state value in (simple_state) + one argument
    assert len(open_jaxpr(jaxpr).invars) == 2
    # outputs: the result and the written state
    assert len(open_jaxpr(jaxpr).outvars) == 2


def test_s3_5_unknown_cache_key_is_a_clear_error():
    f = vmap2(lambda x: x + 1)
    f(jnp.ones(2))
    key = f.get_arg_cache_key(jnp.ones(5))
    with pytest.raises(ValueError, match="no traced program"):
        f.get_jaxpr_by_cache(key)


# ---------------------------------------------------------------- §4.1 nested vmap2
def test_s4_1_nested_vmap2():
    def matrix_elem_product(x, y):
        return x * y

    vmap_rows = vmap2(matrix_elem_product, in_axes=(0, 0))
    vmap_matrix = vmap2(vmap_rows, in_axes=(0, 0))
    matrix_a = jnp.ones((3, 4))
    matrix_b = jnp.arange(12).reshape(3, 4)
    result = vmap_matrix(matrix_a, matrix_b)
    assert result.shape == (3, 4)
    assert_allclose(np.asarray(result), np.arange(12.0).reshape(3, 4))


# ---------------------------------------------------------------- §4.2 with jit and grad
def test_s4_2_vmap2_of_grad_under_jit():
    def loss_fn(x, target):
        pred = x**2
        return jnp.sum((pred - target) ** 2)

    batched_grad = vmap2(grad(loss_fn, argnums=0), in_axes=(0, 0))
    batched_grad_jit = jit(batched_grad)
    batch_x = jnp.array([1.0, 2.0, 3.0])
    batch_targets = jnp.array([2.0, 4.0, 6.0])
    gradients = batched_grad_jit(batch_x, batch_targets)
    assert_allclose(np.asarray(gradients), [-4.0, 0.0, 36.0])
