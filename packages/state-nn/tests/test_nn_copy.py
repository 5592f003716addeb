"""copy.copy / copy.deepcopy of Modules: independent states, sharing preserved, pickling refused."""

import copy
import pickle

import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

import state_core
import state_nn
import state_transform


class Tied(state_nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = state_nn.Linear(2, 3, w_init=jnp.ones((2, 3)))
        self.tied = self.enc.weight  # the same state reachable by two paths
        self.count = state_core.LongTermState(jnp.zeros((), jnp.int32))

    def update(self, x):
        self.count.value = self.count.value + 1
        return self.enc(x)


def test_deepcopy_gives_independent_states_and_keeps_sharing():
    model = Tied()
    clone = copy.deepcopy(model)
    assert type(clone) is Tied and clone is not model
    assert clone.tied is clone.enc.weight  # shared inside the copy
    assert clone.enc.weight is not model.enc.weight
    original = set(map(id, state_core.collect_states(model).values()))
    copied = set(map(id, state_core.collect_states(clone).values()))
    assert original.isdisjoint(copied) and len(copied) == 3
    clone.enc.weight.value = jnp.full((2, 3), 2.0)
    clone(jnp.ones(2))
    assert_allclose(model.enc.weight.value, jnp.ones((2, 3)))
    assert int(model.count.value) == 0 and int(clone.count.value) == 1
    assert_allclose(clone(jnp.ones(2)), [4.0, 4.0, 4.0])
    assert_allclose(model(jnp.ones(2)), [2.0, 2.0, 2.0])


def test_deepcopied_module_trains_independently_under_jit():
    model = Tied()
    clone = copy.deepcopy(model)

    @state_transform.jit
    def step(x):
        return clone(x).sum()

    assert float(step(jnp.ones(2))) == pytest.approx(6.0)
    assert int(clone.count.value) == 1 and int(model.count.value) == 0


def test_shallow_copy_shares_states_like_any_python_object():
    model = Tied()
    shallow = copy.copy(model)
    assert shallow is not model and shallow.enc is model.enc and shallow.count is model.count


def test_deepcopy_of_a_module_with_random_state():
    import state_random

    rng = state_random.RandomState(3)

    class Noisy(state_nn.Module):
        def __init__(self):
            super().__init__()
            self.rng = rng

        def update(self):
            return self.rng.uniform(size=3)

    model = Noisy()
    clone = copy.deepcopy(model)
    assert clone.rng is not rng and type(clone.rng) is state_random.RandomState
    assert_allclose(clone(), model())  # the copy continues the same stream independently
    assert_allclose(clone(), model())


def test_module_pickling_is_refused():
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(Tied())
