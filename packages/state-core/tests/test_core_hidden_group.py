"""HiddenGroupState / HiddenTreeState: several same-shaped variables kept in one array."""

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import HiddenGroupState, HiddenState, HiddenTreeState, StatefulFunction


def test_group_shape_names_and_reads():
    value = jnp.arange(12.0).reshape(2, 2, 3)
    h = HiddenGroupState(value, name='h')
    assert isinstance(h, HiddenState)
    assert (h.varshape, h.num_state) == ((2, 2), 3)
    assert h.name2index == {'0': 0, '1': 1, '2': 2}
    assert_allclose(h.get_value(1), value[..., 1])
    assert_allclose(h.get_value('2'), value[..., 2])
    assert_allclose(h.get_value(-1), value[..., 2])


def test_group_set_value_writes_only_the_named_columns():
    h = HiddenGroupState(jnp.zeros((4, 3)))
    h.set_value({2: jnp.full(4, 7.0), '0': jnp.ones(4)})
    assert_allclose(h.value, np.stack([np.ones(4), np.zeros(4), np.full(4, 7.0)], axis=-1))
    h.set_value([jnp.full(4, 5.0)])
    assert_allclose(h.get_value(0), np.full(4, 5.0))
    assert_allclose(h.get_value(2), np.full(4, 7.0))


@pytest.mark.parametrize(
    'value, error, match',
    [
        (np.zeros(5), ValueError, 'at least 2 dimensions'),
        ([[1.0, 2.0], [3.0, 4.0]], TypeError, 'list'),
        (3.0, TypeError, 'float'),
    ],
)
def test_group_rejects_bad_values(value, error, match):
    with pytest.raises(error, match=match):
        HiddenGroupState(value)


def test_group_bad_keys_and_shapes_leave_the_value_unchanged():
    h = HiddenGroupState(jnp.zeros((4, 3)))
    with pytest.raises(IndexError, match='out of range'):
        h.get_value(3)
    with pytest.raises(KeyError, match="'x' not found"):
        h.get_value('x')
    with pytest.raises(TypeError, match='should be int or str'):
        h.get_value(1.5)
    with pytest.raises(ValueError, match='out of range'):
        h.set_value({3: jnp.ones(4)})
    with pytest.raises(ValueError, match='out of range'):
        h.set_value({-1: jnp.ones(4)})
    with pytest.raises(ValueError, match=r'should be \(4,\)'):
        h.set_value({0: jnp.ones(4), 1: jnp.ones(5)})
    with pytest.raises(TypeError, match='dictionary of hidden states'):
        h.set_value(1)
    with pytest.raises(ValueError, match='no variables'):
        h.set_value({})
    assert_allclose(h.value, np.zeros((4, 3)))


def test_group_set_value_inside_a_traced_function():
    h = HiddenGroupState(jnp.zeros((2, 2)))

    def step(x):
        h.set_value({1: h.get_value(1) + x})
        return h.get_value(0)

    f = StatefulFunction(step)
    f(jnp.ones(2))
    f(jnp.full(2, 2.0))
    assert_allclose(h.value, np.array([[0.0, 3.0], [0.0, 3.0]]))


def test_tree_from_dict_and_sequence():
    h = HiddenTreeState({'v': jnp.zeros(3), 'w': jnp.ones(3)})
    assert (h.varshape, h.num_state) == ((3,), 2)
    assert h.name2index == {'v': 0, 'w': 1}
    assert h.index2name == {0: 'v', 1: 'w'}
    assert h.name2unit == {'v': None, 'w': None}
    assert_allclose(h.value, np.stack([np.zeros(3), np.ones(3)], axis=-1))
    h.set_value({'w': jnp.full(3, 4.0)})
    assert_allclose(h.get_value('w'), np.full(3, 4.0))
    s = HiddenTreeState([jnp.zeros(2), jnp.ones(2), jnp.full(2, 2.0)])
    assert s.name2index == {'0': 0, '1': 1, '2': 2}
    assert_allclose(s.get_value(-1), np.full(2, 2.0))


def test_tree_rejects_bad_values():
    with pytest.raises(TypeError, match='dictionary/sequence'):
        HiddenTreeState(123)
    with pytest.raises(TypeError, match="variable 'v' is a list"):
        HiddenTreeState({'v': [1, 2], 'w': np.zeros(2)})
    with pytest.raises(ValueError, match='one shape'):
        HiddenTreeState([np.zeros(2), np.zeros(3)])
    with pytest.raises(ValueError, match='at least one variable'):
        HiddenTreeState({})


def test_tree_num_state_checks_the_names():
    h = HiddenTreeState({'v': jnp.ones((4, 3)), 'i': jnp.ones((4, 3))})
    h.name2index.pop('i')
    with pytest.raises(ValueError, match='holds 2 variables but 1 are named'):
        _ = h.num_state


def test_tree_keeps_one_unit_per_variable():
    u = pytest.importorskip('brainunit')
    h = HiddenTreeState({'v': jnp.full(3, -65.0) * u.mV, 'i': jnp.ones(3) * u.nA, 'n': jnp.zeros(3)})
    assert h.name2unit['v'] == u.mV and h.index2unit[1] == u.nA and h.name2unit['n'] is None
    v = h.get_value('v')
    assert v.unit == u.mV
    assert_allclose(v.mantissa, np.full(3, -65.0))
    assert isinstance(h.get_value('n'), type(jnp.zeros(1)))
    # a value in another unit of the same dimension is converted
    h.set_value({'v': jnp.full(3, -0.07) * u.volt})
    assert_allclose(h.get_value('v').mantissa, np.full(3, -70.0), rtol=1e-5)
    with pytest.raises(ValueError, match='has no unit but the variable is in'):
        h.set_value({'i': jnp.ones(3)})
    with pytest.raises(ValueError, match='but the variable has no unit'):
        h.set_value({'n': jnp.ones(3) * u.mV})
    assert_allclose(h.get_value('i').mantissa, np.ones(3))


def test_group_with_a_unit():
    u = pytest.importorskip('brainunit')
    h = HiddenGroupState(jnp.ones((4, 3)) * u.mV)
    assert (h.varshape, h.num_state) == ((4,), 3)
    h.set_value({0: jnp.full(4, 5.0) * u.mV})
    got = h.get_value(0)
    assert got.unit == u.mV
    assert_allclose(got.mantissa, np.full(4, 5.0))
    assert_allclose(h.get_value(1).mantissa, np.ones(4))
