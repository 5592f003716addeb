"""Every example of seed 003 (nn.Map), with our names, asserting values."""

import jax
import jax.numpy as jnp
import pytest

import state_core
import state_nn
from state_core.filter import OfType
from state_nn import Map


class MyModule(state_nn.Module):
    def init_state(self, size):
        self.weight = state_core.ParamState(jnp.zeros(size))

    def update(self, x):
        return x @ self.weight.value


def test_basic_vectorized_mapping():
    module = MyModule()
    vmapper = Map(module, init_map_size=10, in_axes=0, axis_name="batch")
    vmapper.init_all_states(size=(5,))  # Creates 10 copies of the state
    assert module.weight.value.shape == (10, 5)
    assert list(vmapper.dict_vmap_states) == [0]
    assert vmapper.dict_vmap_states[0] == [module.weight]
    inputs = jnp.arange(50.0).reshape(10, 5)
    outputs = vmapper.update(inputs)  # inputs.shape = (10, 5)
    assert outputs.shape == (10,)
    assert jnp.array_equal(outputs, jnp.zeros(10))
    # each member's own weight is used
    module.weight.value = jnp.tile(jnp.arange(10.0)[:, None], (1, 5))
    assert jnp.allclose(vmapper.update(inputs), jnp.arange(10.0) * inputs.sum(axis=1))


def test_parallel_mapping_across_devices():
    assert jax.device_count() == 8
    module = MyModule()
    # the seed reuses the module of the vmap example: re-initialising re-creates its states
    Map(module, init_map_size=10).init_all_states(size=(5,))
    assert module.weight.value.shape == (10, 5)
    pmapper = Map(module, init_map_size=jax.device_count(), behavior="pmap", axis_name="devices")
    pmapper.init_all_states(size=(5,))
    assert module.weight.value.shape == (8, 5)
    assert len(module.weight.value.sharding.device_set) == 8
    inputs = jnp.ones((8, 5))
    outputs = pmapper.update(inputs)
    assert outputs.shape == (8,)
    assert jnp.array_equal(outputs, jnp.zeros(8))
    # inputs replicated across devices: broadcast them with in_axes=None
    replicated = Map(MyModule(), init_map_size=8, behavior="pmap", in_axes=None, axis_name="devices")
    replicated.init_all_states(size=(5,))
    replicated.module.weight.value = jnp.arange(40.0).reshape(8, 5)
    out = replicated.update(jnp.ones(5))
    assert jnp.array_equal(out, jnp.arange(40.0).reshape(8, 5).sum(axis=1))


class Predictor(state_nn.Module):
    def init_state(self, size=(5,)):
        self.weight = state_core.ParamState(jnp.ones(size))

    def update(self, x):
        return x @ self.weight.value

    def predict(self, x):
        return x @ self.weight.value


def test_mapping_custom_module_methods():
    vmapper = Map(Predictor(), init_map_size=10)
    vmapper.init_all_states(size=(5,))
    inputs = jnp.ones((10, 5))
    predictions = vmapper.map("predict", in_axes=0)(inputs)
    assert jnp.array_equal(predictions, jnp.full((10,), 5.0))
    # the seed's first MyModule has no `predict`: that is an AttributeError naming it
    plain = Map(MyModule(), init_map_size=10)
    plain.init_all_states(size=(5,))
    with pytest.raises(AttributeError, match="'predict'"):
        plain.map("predict", in_axes=0)


def test_map_basic_usage_with_method_name():
    module = Predictor()
    vmapper = Map(module, init_map_size=10)
    vmapper.init_all_states()
    inputs = jnp.ones((10, 5))  # batch of 10 inputs
    outputs = vmapper.map("predict")(inputs)  # shape: (10,)
    assert outputs.shape == (10,)
    assert jnp.array_equal(outputs, jnp.full((10,), 5.0))


def test_map_using_a_callable_function():
    def custom_fn(module, x, scale):
        return module.predict(x) * scale

    module = Predictor()
    vmapper = Map(module, init_map_size=10)
    vmapper.init_all_states()
    inputs = jnp.ones((10, 5))
    # The seed's lambda names its parameter `s` but is called with `scale=2.0`,
    # which Python rejects; with matching names the keyword is shared by all members.
    outputs = vmapper.map(lambda m, x, scale: custom_fn(m, x, scale))(inputs, scale=2.0)
    assert jnp.array_equal(outputs, jnp.full((10,), 10.0))
    with pytest.raises(TypeError, match="scale"):
        vmapper.map(lambda m, x, s: custom_fn(m, x, s))(inputs, scale=2.0)
    # positional, broadcast with in_axes
    outputs = vmapper.map(custom_fn, in_axes=(0, None))(inputs, 3.0)
    assert jnp.array_equal(outputs, jnp.full((10,), 15.0))


def test_map_custom_in_axes_and_out_axes():
    class MultiInputModule(state_nn.Module):
        def init_state(self, size):
            self.state = state_core.State(jnp.zeros(size))

        def process(self, x, y):
            return x + y, x * y

    module = MultiInputModule()
    vmapper = Map(module, init_map_size=10)
    vmapper.init_all_states(size=(5,))
    assert module.state.value.shape == (10, 5)
    x = jnp.ones((10, 5))  # mapped over axis 0
    y = jnp.ones(5)  # broadcasted (not mapped)
    result1, result2 = vmapper.map("process", in_axes=(0, None), out_axes=(0, 0))(x, y)
    assert result1.shape == result2.shape == (10, 5)
    assert jnp.array_equal(result1, jnp.full((10, 5), 2.0))
    assert jnp.array_equal(result2, jnp.ones((10, 5)))
    # out_axes=1 puts the member axis second
    r1, _ = vmapper.map("process", in_axes=(0, None), out_axes=1)(x, 2 * y)
    assert r1.shape == (5, 10)


def test_map_using_state_axes_for_fine_grained_control():
    class StatefulModule(state_nn.Module):
        def init_state(self, size):
            self.params = state_core.ParamState(jnp.ones(size))
            self.buffer = state_core.State(jnp.zeros(size))

        def update(self, x):
            self.buffer.value = x
            return x @ self.params.value

    module = StatefulModule()
    vmapper = Map(module, init_map_size=10)
    vmapper.init_all_states(size=(5,))
    inputs = jnp.arange(50.0).reshape(10, 5)
    # Map ParamState along axis 0 (the member states stay on their axis).
    outputs = vmapper.map("update", state_axes={0: OfType(state_core.ParamState)})(inputs)
    assert jnp.array_equal(outputs, inputs.sum(axis=1))
    assert module.buffer.value.shape == (10, 5)
    assert jnp.array_equal(module.buffer.value, inputs)
    assert module.params.value.shape == (10, 5)
