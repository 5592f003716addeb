"""``eval_shape``: output and state shapes of a state-aware function, nothing run or written."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_random
from state_core import ParamState, ShortTermState, State, StateLeakError
from state_transform import eval_shape, jit


def test_plain_function_gives_jax_eval_shape():
    out = eval_shape(lambda x, y: {"sum": x + y, "n": x.shape[0]}, jnp.ones(3), y=2.0)
    assert out["sum"] == jax.ShapeDtypeStruct((3,), jnp.float32)
    # A Python number in the output is an (weakly typed) array output, as in jax.eval_shape.
    assert out["n"] == jax.eval_shape(lambda: jnp.asarray(3))


def test_states_are_read_and_written_abstractly_and_keep_their_values():
    w = ParamState(jnp.full((2, 3), 2.0))
    acc = ShortTermState(jnp.zeros((2, 3)))
    traced = []

    def step(x):
        traced.append(1)
        acc.value = acc.value + w.value * x
        return acc.value.sum(axis=1)

    out = eval_shape(step, jax.ShapeDtypeStruct((2, 3), jnp.float32))
    assert out == jax.ShapeDtypeStruct((2,), jnp.float32)
    assert_array_equal(np.asarray(acc.value), np.zeros((2, 3)))
    state_shapes, out2 = eval_shape(step, jax.ShapeDtypeStruct((2, 3), jnp.float32), return_state_shapes=True)
    assert out2 == out
    assert state_shapes == {
        w: jax.ShapeDtypeStruct((2, 3), jnp.float32),
        acc: jax.ShapeDtypeStruct((2, 3), jnp.float32),
    }
    assert len(traced) == 1, "the same signature is traced once"
    assert_array_equal(np.asarray(acc.value), np.zeros((2, 3)))


def test_pytree_state_values_give_trees_of_shapes():
    s = State({"a": jnp.zeros(2), "b": jnp.zeros((), jnp.int32)})
    shapes, _ = eval_shape(lambda: s.value["a"] + s.value["b"], return_state_shapes=True)
    assert shapes[s] == {"a": jax.ShapeDtypeStruct((2,), jnp.float32), "b": jax.ShapeDtypeStruct((), jnp.int32)}


def test_random_draws_do_not_advance_the_stream():
    state_random.seed(3)
    before = np.asarray(jax.random.key_data(state_random.DEFAULT.value))
    assert eval_shape(lambda: state_random.normal(size=(5, 2))) == jax.ShapeDtypeStruct((5, 2), jnp.float32)
    assert_array_equal(np.asarray(jax.random.key_data(state_random.DEFAULT.value)), before)


def test_inside_jit_it_writes_nothing_and_the_outer_call_runs():
    s = State(jnp.ones(3))

    def inner(x):
        s.value = s.value * x
        return s.value

    @jit
    def outer(x):
        shape = eval_shape(inner, x)
        return jnp.zeros(shape.shape) + x

    assert_allclose(np.asarray(outer(jnp.full(3, 2.0))), np.full(3, 2.0))
    assert_allclose(np.asarray(s.value), np.ones(3))


def test_an_error_in_fun_propagates_and_leaves_states_alone():
    s = State(jnp.ones(3))

    def broken(x):
        s.value = s.value + x
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        eval_shape(broken, jnp.ones(3))
    assert_allclose(np.asarray(s.value), np.ones(3))


def test_a_state_created_inside_fun_is_a_leak_afterwards():
    made = {}

    def build():
        made["st"] = ShortTermState(jnp.zeros(3))
        return made["st"].value

    assert eval_shape(build) == jax.ShapeDtypeStruct((3,), jnp.float32)
    with pytest.raises(StateLeakError, match=r"ShortTermState was created inside a traced function"):
        _ = made["st"].value


def test_fun_must_be_callable():
    with pytest.raises(TypeError, match=r"eval_shape: `fun` must be callable, got int"):
        eval_shape(3)
