"""Shared programs never keep a dropped Module, Map or their States alive."""

import gc
import weakref

import jax.numpy as jnp
import numpy as np
from numpy.testing import assert_allclose

import state_core
import state_nn
from state_transform import jit


class Linear(state_nn.Module):
    def __init__(self, n: int = 3) -> None:
        super().__init__()
        self.w = state_core.ParamState(jnp.ones(n))

    def update(self, x):
        return (self.w.value * x).sum()


class Member(state_nn.Module):
    def init_state(self):
        self.w = state_core.ParamState(jnp.arange(3.0))

    def update(self, x):
        return (self.w.value * x).sum()


def _collected(*refs: weakref.ref) -> list[bool]:
    gc.collect()
    return [r() is None for r in refs]


def test_a_dropped_map_and_its_member_states_are_collected():
    def run():
        ens = state_nn.Map(Member(), init_map_size=4)
        ens.init_all_states()
        assert_allclose(np.asarray(ens(jnp.ones((4, 3)))), [3.0] * 4)
        assert_allclose(np.asarray(ens(jnp.ones((4, 3)))), [3.0] * 4)
        return weakref.ref(ens), weakref.ref(ens.module), weakref.ref(ens.module.w)

    refs = run()
    assert _collected(*refs) == [True, True, True]


def test_a_dropped_module_called_through_jit_is_collected():
    def run():
        net = Linear()
        assert_allclose(np.asarray(jit(net.update)(2.0)), 6.0)
        assert_allclose(np.asarray(jit(lambda x: net(x))(1.0)), 3.0)
        return weakref.ref(net), weakref.ref(net.w)

    refs = run()
    assert _collected(*refs) == [True, True]
