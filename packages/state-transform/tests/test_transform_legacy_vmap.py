"""brainstate's declaration-based vmap(in_states=..., out_states=...) on vmap2."""

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import BatchAxisError, ParamState, ShortTermState, State
from state_transform import StatefulMapping, vmap


def test_in_states_are_mapped_and_written_back():
    counter = ShortTermState(jnp.zeros(3), name="counter")
    shared = ParamState(jnp.array(2.0), name="shared")

    @vmap(in_states=counter)
    def accumulate(x):
        counter.value = counter.value + x * shared.value
        return counter.value

    assert isinstance(accumulate, StatefulMapping)
    assert_allclose(accumulate(jnp.array([1.0, 2.0, 3.0])), [2.0, 4.0, 6.0])
    assert_allclose(counter.value, [2.0, 4.0, 6.0])
    assert_allclose(shared.value, 2.0)


def test_axis_dict_form_and_out_states():
    w = ParamState(jnp.arange(6.0).reshape(2, 3), name="w")  # mapped along axis 1
    out = State(jnp.zeros(3), name="out")

    def f(x):
        out.value = w.value.sum() * x
        return w.value * x

    mapped = vmap(f, in_axes=0, out_axes=1, in_states={1: {"w": w}}, out_states={0: {"out": out}})
    ys = mapped(jnp.array([1.0, 2.0, 3.0]))
    ref = jax.vmap(lambda wv, x: wv * x, in_axes=(1, 0), out_axes=1)(w.value, jnp.array([1.0, 2.0, 3.0]))
    assert_allclose(ys, ref)
    assert_allclose(out.value, w.value.sum(0) * jnp.array([1.0, 2.0, 3.0]))


def test_undeclared_batched_write_raises_and_keeps_state():
    h = State(jnp.zeros(()), name="h")

    def f(x):
        h.value = x  # differs per lane, but h is not declared
        return x

    with pytest.raises(ValueError, match="h"):
        vmap(f)(jnp.arange(3.0))
    assert_allclose(h.value, 0.0)


def test_conflicting_axes_and_bad_declarations():
    s = State(jnp.zeros((3, 3)), name="s")
    with pytest.raises(BatchAxisError, match="axis 0 in in_states but on axis 1"):
        vmap(lambda x: x, in_states=s, out_states={1: {"s": s}})
    with pytest.raises(TypeError, match="in_states must hold States"):
        vmap(lambda x: x, in_states=[jnp.ones(3)])


def test_decorator_with_list_in_axes_and_axis_name():
    @vmap(in_axes=[0, None], axis_name="i")
    def f(x, y):
        return jax.lax.psum(x, "i") + y

    assert_allclose(f(jnp.arange(3.0), 1.0), jnp.full(3, 4.0))
