"""EnvironContext: a module run with environment settings in force."""

import jax.numpy as jnp
import numpy.testing as npt
import pytest

import state_core
import state_nn
import state_transform
from state_core import environ


class ScaleByDt(state_nn.Module):
    def __init__(self):
        self.calls = state_core.LongTermState(jnp.zeros(()))

    def update(self, x, *, offset=0.0):
        self.calls.value = self.calls.value + 1
        return x * environ.get_dt() + offset


def test_settings_apply_during_the_call_only():
    inner = ScaleByDt()
    layer = state_nn.EnvironContext(inner, dt=0.5)
    assert layer.layer is inner and layer.context == {'dt': 0.5}
    npt.assert_allclose(layer(jnp.ones(2), offset=1.0), [1.5, 1.5])
    with pytest.raises(KeyError, match='dt'):
        environ.get('dt')
    # a per-call context adds to and overrides the stored one
    npt.assert_allclose(layer.update(jnp.ones(2), context={'dt': 2.0}), [2.0, 2.0])
    assert layer.context == {'dt': 0.5}
    layer.add_context(dt=4.0, fit=False)
    assert layer.context == {'dt': 4.0, 'fit': False}
    npt.assert_allclose(layer(jnp.ones(1)), [4.0])
    assert float(inner.calls.value) == 3.0


def test_the_wrapped_module_is_a_submodule_and_works_under_jit():
    layer = state_nn.EnvironContext(ScaleByDt(), dt=0.1)
    assert list(layer.states()) == [('layer', 'calls')]
    step = state_transform.jit(layer)
    npt.assert_allclose(step(jnp.full(2, 10.0)), [1.0, 1.0], rtol=1e-6)
    step(jnp.full(2, 10.0))
    assert float(layer.layer.calls.value) == 2.0


@pytest.mark.parametrize('bad', ['not a module', None, 42, jnp.tanh])
def test_only_modules_are_wrapped(bad):
    with pytest.raises(TypeError, match='EnvironContext wraps a Module, got'):
        state_nn.EnvironContext(bad, fit=True)
