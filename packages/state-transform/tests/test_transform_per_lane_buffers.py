"""Undeclared read-modify-write states whose leading size is the mapped size are per-lane buffers."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core.filter import OfType
from state_transform import vmap2


def _accumulate(state, traces):
    def f(x):
        traces.append(1)
        state.value = state.value + x
        return state.value.sum()

    return f


@pytest.mark.parametrize("explicit", [True, False])
def test_buffer_with_the_mapped_size_keeps_its_shape_from_the_first_call(explicit):
    buf = state_core.State(jnp.zeros((4, 3)), name="buf")
    traces: list[int] = []
    options = {"unexpected_out_state_mapping": "auto"} if explicit else {}  # 'auto' is the default
    f = vmap2(_accumulate(buf, traces), **options)
    x = jnp.arange(4.0)[:, None] * jnp.ones((4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for step in range(1, 4):
            out = f(x)
            assert buf.value.shape == (4, 3)  # not (4, 4, 3)
            assert_allclose(np.asarray(buf.value), step * np.asarray(x))
            assert_allclose(np.asarray(out), 3 * step * np.arange(4.0))
    # One trace whole, one with a slice per lane; later calls replay.
    assert len(traces) == 2


@pytest.mark.parametrize("policy", ["ignore", "warn"])
def test_ignore_and_warn_stack_the_buffer_as_brainstate_does(policy):
    # brainstate's own policy tests: only 'auto' feeds it per lane.
    w = state_core.ShortTermState(jnp.zeros(3), name="w")

    def f(x):
        w.value = w.value + x
        return w.value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = vmap2(f, unexpected_out_state_mapping=policy)(jnp.asarray([1.0, 2.0, 3.0]))
    assert out.shape == (3, 3)
    assert w.value.shape == (3, 3)
    assert_allclose(np.asarray(w.value), np.asarray([1.0, 2.0, 3.0])[:, None] + np.zeros((3, 3)))


def test_buffer_rule_does_not_apply_under_raise():
    buf = state_core.State(jnp.zeros((4, 3)), name="buf")
    f = vmap2(_accumulate(buf, []), unexpected_out_state_mapping="raise")
    with pytest.raises(ValueError, match=r"buf.*differs across the mapped axis"):
        f(jnp.ones((4, 3)))
    assert_allclose(np.asarray(buf.value), np.zeros((4, 3)))


def test_state_with_another_leading_size_is_stacked_as_before():
    c = state_core.State(jnp.zeros(3), name="c")

    def h(x):
        c.value = c.value + x
        return x

    f = vmap2(h)
    with pytest.warns(UserWarning, match=r"'c'.*gains an axis of size 5"):
        f(jnp.ones((5, 3)))
    assert c.value.shape == (5, 3)
    f(jnp.ones((5, 3)))
    assert c.value.shape == (5, 3)
    assert_allclose(np.asarray(c.value), np.full((5, 3), 2.0))


def test_declared_state_is_not_treated_as_a_buffer():
    # An explicit rule wins: broadcast in, stacked out on axis 1.
    buf = state_core.ShortTermState(jnp.zeros((4,)), name="declared")

    def f(x):
        buf.value = buf.value + x
        return x

    g = vmap2(f, state_out_axes={1: OfType(state_core.ShortTermState)})
    g(jnp.arange(4.0))
    assert buf.value.shape == (4, 4)
    assert_allclose(np.asarray(buf.value), np.broadcast_to(np.arange(4.0), (4, 4)))


def test_buffer_that_is_only_read_stays_broadcast():
    table = state_core.State(jnp.arange(12.0).reshape(4, 3), name="table")

    def f(x):
        return (table.value * x).sum()

    out = vmap2(f)(jnp.arange(4.0))
    assert table.value.shape == (4, 3)
    assert_allclose(np.asarray(out), np.arange(4.0) * np.arange(12.0).sum())
