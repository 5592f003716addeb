"""Shared programs never keep a user's objects alive: a dropped model is collected."""

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_random
from state_core import ParamState, State
from state_transform import grad, jit, vmap2


class Model:
    def __init__(self, n: int = 3) -> None:
        self.w = ParamState(jnp.arange(float(n)))

    def loss(self, x):
        return (self.w.value * x).sum()


def _collected(*refs: weakref.ref) -> list[bool]:
    gc.collect()
    return [r() is None for r in refs]


def _dropped_closure_jit():
    m = Model()
    f = jit(lambda x: (m.w.value * x).sum())
    assert_allclose(np.asarray(f(2.0)), 6.0)
    return weakref.ref(m), weakref.ref(m.w)


def _dropped_state_jit():
    w = State(jnp.ones(3))
    f = jit(lambda x: (w.value * x).sum())
    assert_allclose(np.asarray(f(2.0)), 6.0)
    return (weakref.ref(w),)


def _dropped_grad():
    m = Model()
    g = grad(m.loss, grad_states=m.w)(2.0)
    assert_allclose(np.asarray(g), [2.0, 2.0, 2.0])
    return weakref.ref(m), weakref.ref(m.w)


def _dropped_vmap2():
    w = State(jnp.zeros((4, 3)))

    def step(x):
        w.value = w.value + x

    vmap2(step, state_in_axes={0: w}, state_out_axes={0: w})(jnp.ones((4, 3)))
    assert_allclose(np.asarray(w.value), np.ones((4, 3)))
    return (weakref.ref(w),)


def _dropped_random_state():
    rng = state_random.RandomState(0)
    draw = jit(lambda: rng.normal(size=(2,)))
    assert draw().shape == (2,)
    return (weakref.ref(rng),)


def _dropped_bound_method_jit():
    m = Model()
    assert_allclose(np.asarray(jit(m.loss)(1.0)), 3.0)
    return weakref.ref(m), weakref.ref(m.w)


@pytest.mark.parametrize(
    "build",
    [
        _dropped_closure_jit,
        _dropped_state_jit,
        _dropped_grad,
        _dropped_vmap2,
        _dropped_random_state,
        _dropped_bound_method_jit,
    ],
    ids=lambda b: b.__name__.removeprefix("_dropped_"),
)
def test_a_dropped_model_and_its_states_are_collected(build):
    refs = build()
    assert _collected(*refs) == [True] * len(refs)


def test_a_replaced_state_is_collected_while_the_model_lives():
    m = Model()
    f = jit(lambda x: (m.w.value * x).sum())
    f(1.0)
    old = weakref.ref(m.w)
    m.w = ParamState(jnp.ones(3))
    assert_allclose(np.asarray(f(1.0)), 3.0)  # the new State is used ...
    assert _collected(old) == [True]  # ... and the old one is not kept by the cache
    assert_allclose(np.asarray(f(2.0)), 6.0)


def test_inline_transforms_share_programs_while_the_model_lives():
    m, traced = Model(), []

    def loss(x):
        traced.append(1)
        return (m.w.value * x).sum()

    for _ in range(3):
        grad(loss, grad_states=m.w)(1.0)  # a new object every step
        gc.collect()  # nothing but the model keeps the shared programs
    assert len(traced) == 1


def test_a_new_model_after_a_dropped_one_traces_again_and_is_right():
    def make():
        m = Model()
        return m, jit(lambda x: (m.w.value * x).sum())

    m, f = make()
    assert_allclose(np.asarray(f(1.0)), 3.0)
    del m, f
    gc.collect()
    m, f = make()
    m.w.value = jnp.full(3, 2.0)
    assert_allclose(np.asarray(f(1.0)), 6.0)


def _live_bytes() -> int:
    return sum(a.nbytes for a in jax.live_arrays() if not a.is_deleted())


def test_the_memory_of_a_dropped_100mb_state_comes_back():
    gc.collect()
    before = _live_bytes()

    def run():
        big = State(jnp.zeros((25, 1024, 1024), jnp.float32))  # 100 MiB

        def step(x):
            big.value = big.value + x
            return big.value[0, 0, 0]

        f = jit(step)
        assert_allclose(np.asarray(f(1.0)), 1.0)
        assert_allclose(np.asarray(f(1.0)), 2.0)
        return weakref.ref(big)

    ref = run()
    assert _collected(ref) == [True]
    assert _live_bytes() - before < 1 << 20  # under 1 MiB left of 100 MiB
