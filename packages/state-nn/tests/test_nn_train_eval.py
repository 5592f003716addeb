"""Module.train() / eval() / training: the whole tree switches, and compiled programs follow."""

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
import state_nn
import state_random
import state_transform


class Block(state_nn.Module):
    def __init__(self):
        self.fc = state_nn.Linear(4, 4, w_init=jnp.eye(4))
        self.drops = [state_nn.Dropout(0.5), {"inner": state_nn.Dropout(0.5)}]

    def update(self, x):
        x = self.fc(x)
        return self.drops[1]["inner"](self.drops[0](x))


class NoInit(state_nn.Module):
    """A subclass that never calls Module.__init__."""

    def __init__(self):
        self.child = state_nn.Dropout(0.5)


def test_new_modules_are_in_training_mode():
    assert Block().training is True
    assert NoInit().training is True
    assert state_nn.Dropout(0.1).deterministic is False
    assert state_nn.Dropout(0.1, deterministic=True).training is False


def test_eval_and_train_switch_every_module_and_return_self():
    model = Block()
    assert model.eval() is model
    assert [m.training for m in model.modules()] == [False, False, False, False]
    assert model.drops[0].deterministic and model.drops[1]["inner"].deterministic
    assert model.train() is model
    assert all(m.training for m in model.modules())
    assert model.train(False) is model
    assert not any(m.training for m in model.modules())


def test_eval_makes_dropout_the_identity_and_train_restores_it():
    state_random.seed(0)
    model = Block().eval()
    x = jnp.arange(1.0, 5.0)
    assert_allclose(model(x), x)
    model.train()
    y = np.asarray(model(jnp.ones((64, 4))))
    # Two dropouts of rate 0.5: every output is 0 or 4, and both occur.
    assert set(np.unique(y).tolist()) == {0.0, 4.0}


def test_training_attribute_sets_one_module_only():
    model = Block()
    model.drops[0].training = False
    assert model.drops[0].deterministic is True
    assert model.training is True and model.drops[1]["inner"].training is True


def test_train_reaches_the_member_module_of_a_map():
    class Member(state_nn.Module):
        def init_state(self):
            self.drop = state_nn.Dropout(0.5)

        def update(self, x):
            return self.drop(x)

    ensemble = state_nn.Map(Member(), init_map_size=3)
    ensemble.init_all_states()
    ensemble.eval()
    assert ensemble.module.drop.training is False
    assert_allclose(ensemble(jnp.ones((3, 5))), np.ones((3, 5)))


def test_a_compiled_function_follows_the_mode_switch():
    # The mode is a Python constant inside a compiled program: without the switch
    # forgetting compiled programs, the second call would still drop.
    state_random.seed(1)
    drop = state_nn.Dropout(0.5)
    step = state_transform.jit(lambda x: drop(x))
    x = jnp.ones(64)
    assert bool((step(x) == 0).any())
    drop.eval()
    assert_allclose(step(x), np.ones(64))
    drop.train()
    assert bool((step(x) == 0).any())


def test_a_compiled_map_follows_the_mode_switch():
    class Member(state_nn.Module):
        def init_state(self):
            self.drop = state_nn.Dropout(0.5)

        def update(self, x):
            return self.drop(x)

    state_random.seed(2)
    ensemble = state_nn.Map(Member(), init_map_size=2)
    ensemble.init_all_states()
    x = jnp.ones((2, 32))
    assert bool((ensemble(x) == 0).any())
    ensemble.eval()
    assert_allclose(ensemble(x), np.ones((2, 32)))


def test_setting_the_same_mode_keeps_compiled_programs():
    w = state_core.ParamState(jnp.ones(2))
    f = state_core.StatefulFunction(lambda: w.value * 2)
    f()
    assert len(f._cache) == 1
    Block().train()  # already training: nothing changes
    assert len(f._cache) == 1
    Block().eval()  # a real switch forgets every compiled program
    assert len(f._cache) == 0


def test_custom_modules_read_training():
    class Noise(state_nn.Module):
        def update(self, x):
            return x + 1.0 if self.training else x

    class Net(state_nn.Module):
        def __init__(self):
            self.noise = Noise()

        def update(self, x):
            return self.noise(x)

    net = Net()
    assert_allclose(net(jnp.zeros(2)), [1.0, 1.0])
    assert_allclose(net.eval()(jnp.zeros(2)), [0.0, 0.0])


def test_mode_must_be_a_bool():
    model = Block()
    with pytest.raises(TypeError, match=r"training mode must be a bool .* got int 1"):
        model.train(1)
    with pytest.raises(TypeError, match="training mode must be a bool"):
        model.training = "yes"
    with pytest.raises(TypeError, match="deterministic must be a bool, got int"):
        state_nn.Dropout(0.1).deterministic = 1
    with pytest.raises(TypeError, match="deterministic must be a bool"):
        state_nn.Dropout(0.1, deterministic=0)
    assert all(m.training for m in model.modules())  # a refused switch changes nothing


def test_repr_shows_the_dropout_mode():
    assert repr(state_nn.Dropout(0.25).eval()) == "Dropout(\n  rate=0.25,\n  deterministic=True\n)"
