"""Map warns once when its update writes a state that is shared by every member."""

import warnings

import jax.numpy as jnp
import numpy.testing as npt
import pytest

import state_core
import state_nn
from state_core.filter import PathContains


class SharedCounter(state_nn.Module):
    """A counter created in ``__init__`` (shared) and a per-member total from ``init_state``."""

    def __init__(self):
        self.steps = state_core.ShortTermState(jnp.zeros(()))
        self.fc = state_nn.Linear(2, 2, w_init=jnp.eye(2))

    def init_state(self):
        self.total = state_core.ShortTermState(jnp.zeros(2))

    def update(self, x):
        self.steps.value = self.steps.value + 1.0  # the same on every member
        self.total.value = self.total.value + self.fc(x)
        return self.total.value


def _calls(ens, n, x):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [ens(x) for _ in range(n)]
    return outs, [w for w in caught if issubclass(w.category, UserWarning)]


def test_write_to_a_shared_state_warns_once_naming_its_path():
    ens = state_nn.Map(SharedCounter(), init_map_size=3)
    ens.init_all_states()
    outs, caught = _calls(ens, 3, jnp.ones((3, 2)))
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "Map(SharedCounter).update wrote ShortTermState 'steps'" in message
    assert "shared by all 3 members" in message
    assert "create it in SharedCounter.init_state" in message
    assert "call_state_axes" in message
    assert "total" not in message  # per-member states are fine
    assert caught[0].filename == __file__  # points at the caller, not at state_nn
    npt.assert_allclose(outs[-1], jnp.full((3, 2), 3.0))
    npt.assert_allclose(ens.module.steps.value, 3.0)


def test_member_specific_write_to_an_init_layer_is_named():
    class Drift(state_nn.Module):
        def __init__(self):
            self.fc = state_nn.Linear(2, 2, w_init=jnp.zeros((2, 2)))

        def update(self, x):
            self.fc.bias.value = self.fc.bias.value + x
            return self.fc(x)

    ens = state_nn.Map(Drift(), init_map_size=2)
    ens.init_all_states()
    with pytest.warns(UserWarning, match=r"wrote ParamState 'fc\.bias', which is shared by all 2 members"):
        ens(jnp.ones((2, 2)))


def test_no_warning_when_declared_in_call_state_axes():
    ens = state_nn.Map(SharedCounter(), init_map_size=2, call_state_axes={None: PathContains("steps")})
    ens.init_all_states()
    _outs, caught = _calls(ens, 2, jnp.ones((2, 2)))
    assert caught == []
    npt.assert_allclose(ens.module.steps.value, 2.0)


def test_no_warning_for_per_member_writes_and_random_draws():
    import state_random

    class Noisy(state_nn.Module):
        def init_state(self):
            self.h = state_core.HiddenState(jnp.zeros(2))

        def update(self, x):
            self.h.value = self.h.value + x + 0.0 * state_random.normal(size=2)
            return self.h.value

    ens = state_nn.Map(Noisy(), init_map_size=2)
    ens.init_all_states()
    outs, caught = _calls(ens, 2, jnp.ones((2, 2)))
    assert caught == []
    npt.assert_allclose(outs[-1], jnp.full((2, 2), 2.0))


def test_each_map_warns_for_itself_and_a_new_signature_does_not_repeat():
    first = state_nn.Map(SharedCounter(), init_map_size=2)
    second = state_nn.Map(SharedCounter(), init_map_size=2)
    first.init_all_states()
    second.init_all_states()
    _, caught_first = _calls(first, 1, jnp.ones((2, 2)))
    _, caught_second = _calls(second, 1, jnp.ones((2, 2)))
    assert len(caught_first) == 1 and len(caught_second) == 1
    # A new argument signature retraces; the state was already reported.
    _, again = _calls(first, 1, jnp.ones((2, 2), jnp.bfloat16))
    assert again == []


def test_several_shared_states_are_named_in_one_warning():
    class Two(state_nn.Module):
        def __init__(self):
            self.a = state_core.ShortTermState(jnp.zeros(()))
            self.b = state_core.ShortTermState(jnp.zeros(()))

        def update(self, x):
            self.a.value = self.a.value + 1.0
            self.b.value = self.b.value + 2.0
            return x

    ens = state_nn.Map(Two(), init_map_size=2)
    ens.init_all_states()
    with pytest.warns(
        UserWarning,
        match=(
            r"wrote ShortTermState 'a', ShortTermState 'b', which are shared by all 2 members, "
            r"not one copy per member: they existed"
        ),
    ):
        out = ens(jnp.array([1.0, 2.0]))
    npt.assert_allclose(out, [1.0, 2.0])
    npt.assert_allclose([ens.module.a.value, ens.module.b.value], [1.0, 2.0])
