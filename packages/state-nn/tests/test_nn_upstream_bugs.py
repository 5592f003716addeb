"""Lower-layer behaviour state_nn relies on, kept as regression tests.

Each of these once failed in a lower layer (pmap2_new_states with nothing mapped,
grad rejecting a StateDict, grad sorting StateDict paths that mix ints and strings).
"""

import jax.numpy as jnp

import state_core
import state_nn
import state_transform


def test_pmap2_new_states_without_mapped_inputs():
    class Layer:
        def init_all_states(self):
            self.w = state_core.ParamState(jnp.ones(2))

    layer = Layer()
    state_transform.pmap2_new_states(layer, axis_size=2)
    assert layer.w.value.shape == (2, 2)
    assert len(layer.w.value.sharding.device_set) == 2


def test_grad_accepts_module_states_statedict():
    layer = state_nn.Linear(2, 1, w_init=jnp.ones((2, 1)))
    params = layer.states(state_core.ParamState)  # a state_core.StateDict (dict subclass)
    grads = state_transform.grad(lambda x: layer(x).sum(), grad_states=params)(jnp.array([3.0, 4.0]))
    assert jnp.array_equal(grads[("weight",)], jnp.array([[3.0], [4.0]]))
    assert jnp.array_equal(grads[("bias",)], jnp.array([1.0]))


def test_grad_statedict_with_mixed_int_and_str_path_keys():
    # A plain dict would be flattened with sorted keys, and paths ('parts', 0) and
    # ('parts', 'a') cannot be compared; StateDict keeps insertion order instead.
    class M(state_nn.Module):
        def __init__(self):
            self.parts = {0: state_core.ParamState(jnp.ones(2)), "a": state_core.ParamState(jnp.ones(2))}

        def update(self):
            return sum((s.value**2).sum() for s in self.parts.values())

    m = M()
    grads = state_transform.grad(m, grad_states=m.states())()
    assert jnp.array_equal(grads[("parts", 0)], jnp.full(2, 2.0))
