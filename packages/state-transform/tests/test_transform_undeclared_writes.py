"""Undeclared state writes (``unexpected_out_state_mapping``) and state_out_axes routing."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core.filter import OfType
from state_transform import StatefulMapping, pmap2, vmap2

SHORT = OfType(state_core.ShortTermState)


def _writer(state):
    def f(x):
        state.value = state.value + x
        return x * 2

    return f


def test_raise_policy_names_the_state():
    s = state_core.State(jnp.zeros(()), name="running_total")
    f = vmap2(_writer(s), unexpected_out_state_mapping="raise")
    with pytest.raises(ValueError, match="running_total"):
        f(jnp.arange(3.0))
    assert s.value.shape == ()
    assert float(s.value) == 0.0


def test_raise_policy_names_the_state_path_on_objects():
    class Net:
        def __init__(self):
            self.stats = state_core.LongTermState(jnp.zeros(()))

        def __call__(self, x):
            self.stats.value = self.stats.value + x
            return x

    net = Net()
    with pytest.raises(ValueError, match=r"LongTermState at path 'stats'"):
        vmap2(net, unexpected_out_state_mapping="raise")(jnp.arange(3.0))
    assert float(net.stats.value) == 0.0


def test_raise_policy_message_says_how_to_fix():
    s = state_core.State(jnp.zeros(()), name="acc")
    with pytest.raises(ValueError, match="state_out_axes"):
        vmap2(_writer(s), unexpected_out_state_mapping="raise")(jnp.arange(3.0))


def test_warn_policy_warns_and_stacks_on_axis_0():
    s = state_core.State(jnp.zeros(()), name="warned_state")
    f = vmap2(_writer(s), unexpected_out_state_mapping="warn")
    with pytest.warns(UserWarning, match="warned_state"):
        out = f(jnp.arange(3.0))
    assert_allclose(np.asarray(out), [0.0, 2.0, 4.0])
    assert s.value.shape == (3,)
    assert_allclose(np.asarray(s.value), [0.0, 1.0, 2.0])


def test_warn_policy_warns_once_per_trace_not_per_call():
    s = state_core.State(jnp.zeros(()), name="w1")
    f = vmap2(lambda x: _set(s, x), unexpected_out_state_mapping="warn")
    with pytest.warns(UserWarning):
        f(jnp.arange(3.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        f(jnp.arange(3.0) + 1)  # cached: no new warning
    assert_allclose(np.asarray(s.value), [1.0, 2.0, 3.0])


def _set(state, x):
    state.value = x
    return x


def test_ignore_policy_stacks_on_axis_0():
    s = state_core.State(jnp.zeros(2), name="ign")

    def f(x):
        s.value = s.value + x
        return x.sum()

    out = vmap2(f, unexpected_out_state_mapping="ignore")(jnp.arange(6.0).reshape(3, 2))
    assert_allclose(np.asarray(out), [1.0, 5.0, 9.0])
    assert s.value.shape == (3, 2)
    assert_allclose(np.asarray(s.value), np.arange(6.0).reshape(3, 2))


def test_auto_is_the_default():
    s = state_core.State(jnp.zeros(()), name="default_policy")
    f = vmap2(_writer(s))
    assert f.unexpected_out_state_mapping == "auto"
    with pytest.warns(UserWarning, match="gains an axis of size 4"):  # read whole, written per lane
        f(jnp.arange(4.0))
    assert_allclose(np.asarray(s.value), [0.0, 1.0, 2.0, 3.0])


@pytest.mark.parametrize("policy", ["raise", "warn", "ignore"])
def test_constant_write_is_written_back_unbatched(policy):
    s = state_core.State(jnp.zeros(3), name="const")

    def f(x):
        s.value = jnp.ones(3) * 7.0
        return x

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        vmap2(f, unexpected_out_state_mapping=policy)(jnp.arange(4.0))
    assert s.value.shape == (3,)
    assert_allclose(np.asarray(s.value), np.full(3, 7.0))


@pytest.mark.parametrize("policy", ["raise", "warn", "ignore"])
def test_write_of_broadcast_state_only_is_unbatched(policy):
    # new value depends only on an unmapped state and an unmapped argument
    s = state_core.State(jnp.array([1.0, 2.0]), name="double_me")

    def f(x, k):
        s.value = s.value * k
        return x

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        vmap2(f, in_axes=(0, None), unexpected_out_state_mapping=policy)(jnp.arange(5.0), 2.0)
    assert s.value.shape == (2,)
    assert_allclose(np.asarray(s.value), [2.0, 4.0])


@pytest.mark.parametrize("reducer", [jax.lax.psum, jax.lax.pmean, jax.lax.pmax])
def test_collective_reduced_write_is_unbatched(reducer):
    s = state_core.State(jnp.zeros(()), name="reduced")

    def f(x):
        s.value = reducer(x, "batch")
        return x

    vmap2(f, axis_name="batch", unexpected_out_state_mapping="raise")(jnp.array([1.0, 2.0, 3.0]))
    assert s.value.shape == ()
    expected = {jax.lax.psum: 6.0, jax.lax.pmean: 2.0, jax.lax.pmax: 3.0}[reducer]
    assert_allclose(float(s.value), expected)


def test_axis_index_write_counts_as_lane_dependent():
    s = state_core.State(jnp.zeros((), jnp.int32), name="lane_id")

    def f(x):
        s.value = jax.lax.axis_index("b")
        return x

    with pytest.raises(ValueError, match="lane_id"):
        vmap2(f, axis_name="b", unexpected_out_state_mapping="raise")(jnp.arange(3.0))
    vmap2(f, axis_name="b")(jnp.arange(3.0))
    assert_allclose(np.asarray(s.value), [0, 1, 2])


def test_pmap2_psum_write_is_unbatched_with_raise_policy():
    s = state_core.State(jnp.zeros(()), name="pm_total")

    def f(x):
        s.value = jax.lax.psum(x, "d")
        return x

    pmap2(f, axis_name="d", unexpected_out_state_mapping="raise")(jnp.arange(8.0))
    assert s.value.shape == ()
    assert_allclose(float(s.value), 28.0)


def test_pmap2_undeclared_lane_write_is_stacked():
    s = state_core.State(jnp.zeros(()), name="pm_stack")
    with pytest.warns(UserWarning, match="pm_stack.*gains an axis of size 4"):
        pmap2(_writer(s), axis_name="d")(jnp.arange(4.0))
    assert_allclose(np.asarray(s.value), [0.0, 1.0, 2.0, 3.0])


def test_pmap2_raise_policy():
    s = state_core.State(jnp.zeros(()), name="pm_raise")
    with pytest.raises(ValueError, match="pm_raise"):
        pmap2(_writer(s), axis_name="d", unexpected_out_state_mapping="raise")(jnp.arange(4.0))
    assert float(s.value) == 0.0


@pytest.mark.parametrize("bad", ["error", "IGNORE", "", None, 0])
def test_invalid_policy_rejected_at_construction(bad):
    with pytest.raises(ValueError, match="unexpected_out_state_mapping"):
        vmap2(lambda x: x, unexpected_out_state_mapping=bad)
    with pytest.raises(ValueError, match="unexpected_out_state_mapping"):
        pmap2(lambda x: x, unexpected_out_state_mapping=bad)
    with pytest.raises(ValueError, match="unexpected_out_state_mapping"):
        StatefulMapping(lambda x: x, unexpected_out_state_mapping=bad)


# ---------------------------------------------------------------- state_out_axes routing
def test_state_out_axes_none_for_lane_dependent_value_is_an_error():
    s = state_core.ShortTermState(jnp.zeros(()), name="must_vary")
    f = vmap2(_writer(s), state_out_axes={None: SHORT})
    with pytest.raises(ValueError, match="must_vary"):
        f(jnp.arange(3.0))
    assert float(s.value) == 0.0


def test_state_out_axes_none_for_reduced_value_is_fine():
    s = state_core.ShortTermState(jnp.zeros(()), name="mean_state")

    def f(x):
        s.value = jax.lax.pmean(x, "b")
        return x

    vmap2(f, axis_name="b", state_out_axes={None: SHORT})(jnp.array([2.0, 4.0]))
    assert s.value.shape == ()
    assert_allclose(float(s.value), 3.0)


def test_state_out_axes_nonzero_axis():
    s = state_core.ShortTermState(jnp.zeros(2), name="cols")

    def f(x):
        s.value = s.value + x
        return x

    vmap2(f, state_out_axes={1: SHORT})(jnp.arange(6.0).reshape(3, 2))
    assert s.value.shape == (2, 3)
    assert_allclose(np.asarray(s.value), np.arange(6.0).reshape(3, 2).T)


def test_state_in_axes_nonzero_axis_and_out_axis_roundtrip():
    s = state_core.ShortTermState(jnp.arange(6.0).reshape(2, 3), name="by_col")

    def f(x):
        s.value = s.value * x
        return s.value.sum()

    out = vmap2(f, state_in_axes={1: SHORT}, state_out_axes={1: SHORT})(jnp.array([1.0, 10.0, 100.0]))
    assert_allclose(np.asarray(out), [3.0, 50.0, 700.0])
    assert_allclose(np.asarray(s.value), [[0.0, 10.0, 200.0], [3.0, 40.0, 500.0]])


def test_first_matching_out_filter_wins():
    a = state_core.ParamState(jnp.zeros(()), name="a")
    b = state_core.ShortTermState(jnp.zeros(()), name="b")

    def f(x):
        a.value = jax.lax.psum(x, "b")
        b.value = b.value + x
        return x

    vmap2(f, axis_name="b", state_out_axes={None: OfType(state_core.ParamState), 0: OfType(state_core.State)})(
        jnp.array([1.0, 2.0])
    )
    assert a.value.shape == ()
    assert_allclose(float(a.value), 3.0)
    assert_allclose(np.asarray(b.value), [1.0, 2.0])


def test_psum_inside_nested_jax_jit_is_recognised_as_unbatched():
    s = state_core.State(jnp.zeros(()), name="jit_psum")

    def f(x):
        s.value = jax.jit(lambda v: jax.lax.psum(v, "b"))(x)
        return x

    vmap2(f, axis_name="b", unexpected_out_state_mapping="raise")(jnp.ones(3))
    assert s.value.shape == ()
    assert_allclose(float(s.value), 3.0)


def test_psum_over_another_axis_stays_lane_dependent():
    s = state_core.State(jnp.zeros(()), name="other_axis")

    def inner(x):
        s.value = jax.lax.psum(x, "outer")  # uniform over 'outer', varies over 'inner'
        return x

    f = vmap2(vmap2(inner, axis_name="inner", unexpected_out_state_mapping="raise"), axis_name="outer")
    with pytest.raises(ValueError, match="other_axis"):
        f(jnp.ones((2, 3)))


@pytest.mark.parametrize("policy", ["auto", "ignore", "warn"])
def test_stacked_read_modify_write_state_keeps_its_shape_on_later_calls(policy):
    s = state_core.ShortTermState(jnp.zeros(()), name="acc")
    f = vmap2(_writer(s), unexpected_out_state_mapping=policy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(4):
            f(jnp.arange(3.0))
    assert s.value.shape == (3,)  # not (3, 3, 3, 3)
    assert_allclose(np.asarray(s.value), [0.0, 4.0, 8.0])


def test_warn_message_names_the_state_and_the_state_out_axes_entry():
    s = state_core.ShortTermState(jnp.zeros(()), name="running")
    f = vmap2(_writer(s), unexpected_out_state_mapping="warn")
    with pytest.warns(UserWarning, match=r"running.*\{0: OfType\(ShortTermState\)\}.*state_out_axes"):
        f(jnp.arange(3.0))


def test_auto_policy_stacks_a_written_only_state_silently():
    s = state_core.State(jnp.zeros(()), name="quiet")
    f = StatefulMapping(lambda x: _set(s, x + 1.0), unexpected_out_state_mapping="auto")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(jnp.arange(2.0))
    assert_allclose(np.asarray(s.value), [1.0, 2.0])


def test_auto_policy_warns_once_when_a_read_modify_write_state_gains_an_axis():
    # brainstate warns here too: a state every lane reads whole and writes per lane is
    # stacked, so (3,) becomes (5, 3), which is rarely what the update meant.
    s = state_core.ShortTermState(jnp.zeros(3), name="trace_buffer")
    f = vmap2(_writer(s))
    with pytest.warns(UserWarning, match=r"trace_buffer.*whole value of shape \(3,\).*gains an axis of size 5") as rec:
        f(jnp.arange(5.0))
    assert rec[0].filename == __file__, "the warning points at the call in user code"
    assert s.value.shape == (5, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(jnp.arange(5.0))  # the stacked value is now fed one row per lane: no new axis, no warning
    assert_allclose(np.asarray(s.value), np.repeat(2.0 * np.arange(5.0)[:, None], 3, axis=1))


def test_auto_policy_is_silent_for_a_per_lane_buffer_of_the_mapped_size():
    s = state_core.ShortTermState(jnp.zeros(4), name="per_lane")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vmap2(_writer(s))(jnp.ones(4))
    assert_allclose(np.asarray(s.value), np.ones(4))


def test_mapping_jaxpr_by_cache_is_the_mapped_program():
    s = state_core.State(jnp.array(1.0))

    def simple_op(x):
        result = x + s.value
        s.value = result
        return result * 2

    f = vmap2(simple_op, in_axes=0, state_out_axes={0: OfType(state_core.State)})
    x = jnp.array([1.0, 2.0])
    f(x)
    text = str(f.get_jaxpr_by_cache(f.get_arg_cache_key(x)))
    assert text.startswith("{ lambda ; a:f32[2] b:f32[]. let")
    assert text.rstrip().endswith("}")
    assert s.value.shape == (2,)
