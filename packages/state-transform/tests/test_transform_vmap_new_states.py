"""vmap_new_states (the function form) and NonBatchState in the *_new_states transforms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_core
import state_random
from state_core import BatchAxisError, NonBatchState, ParamState, ShortTermState
from state_core.filter import OfType, WithTag
from state_transform import vmap2_new_states, vmap_new_states


def test_new_states_get_one_copy_per_lane_and_the_result_is_mapped():
    made = {}

    @vmap_new_states(in_axes=0)
    def build(x):
        made["a"] = ShortTermState(x)
        made["b"] = ParamState(made["a"].value * 2.0 + 1.0)
        made["zeros"] = ShortTermState(jnp.zeros(2))  # the same on every lane
        return made["b"].value - made["a"].value

    out = build(jnp.arange(5.0))
    assert_allclose(out, np.arange(5.0) + 1.0)
    assert_allclose(made["a"].value, np.arange(5.0))
    assert_allclose(made["b"].value, np.arange(5.0) * 2.0 + 1.0)
    assert_allclose(made["zeros"].value, np.zeros((5, 2)))
    for s in made.values():
        assert not isinstance(s.value, jax.core.Tracer)


def test_each_call_makes_new_states_and_direct_form_works():
    made = []

    def build(x):
        made.append(ShortTermState(x + 1.0))
        return made[-1].value

    mapped = vmap_new_states(build, in_axes=[0], out_axes=0)
    assert_allclose(mapped(jnp.arange(3.0)), [1.0, 2.0, 3.0])
    assert_allclose(mapped(jnp.arange(3.0) * 2), [1.0, 3.0, 5.0])
    assert len(made) == 2 and made[0] is not made[1]
    assert_allclose(made[0].value, [1.0, 2.0, 3.0])
    assert mapped.__name__ == "build"


def test_random_draws_differ_between_lanes_and_are_reproducible():
    def draw():
        return ParamState(state_random.normal(size=(3,))).value

    state_random.seed(0)
    first = vmap_new_states(draw, axis_size=4)()
    state_random.seed(0)
    second = vmap_new_states(draw, axis_size=4)()
    assert first.shape == (4, 3)
    assert not np.allclose(first[0], first[1])
    assert_allclose(first, second)


def test_nonbatch_and_excluded_states_keep_one_shared_copy():
    made = {}

    @vmap_new_states(axis_size=3, state_to_exclude=WithTag("fixed"))
    def build(x):
        made["table"] = NonBatchState(jnp.array([1.0, 2.0]))
        made["fixed"] = ShortTermState(jnp.ones(2), tag="fixed")
        made["per_lane"] = ShortTermState(made["table"].value.sum() + x)
        return made["per_lane"].value

    assert_allclose(build(jnp.arange(3.0)), [3.0, 4.0, 5.0])
    assert_allclose(made["table"].value, [1.0, 2.0])
    assert_allclose(made["fixed"].value, [1.0, 1.0])
    assert made["per_lane"].value.shape == (3,)


def test_state_tag_is_added_to_new_states_only():
    existing = ShortTermState(jnp.asarray(10.0))
    made = {}

    @vmap_new_states(state_tag="lane")
    def build(x):
        made["s"] = ShortTermState(x + existing.value)
        return made["s"].value

    assert_allclose(build(jnp.arange(2.0)), [10.0, 11.0])
    assert "lane" in made["s"].tag
    assert "lane" not in existing.tag
    assert_allclose(existing.value, 10.0)


def test_out_axes_places_the_mapped_axis():
    @vmap_new_states(in_axes=0, out_axes=1, axis_size=3)
    def build(x):
        a = ShortTermState(x)
        return jnp.stack([a.value, a.value * 2.0])

    out = build(jnp.arange(3.0))
    assert out.shape == (2, 3)
    assert_allclose(out[1], [0.0, 2.0, 4.0])


def test_keyword_arguments_are_mapped_on_axis_0():
    @vmap_new_states
    def build(x, *, scale):
        return ShortTermState(x * scale).value

    assert_allclose(build(jnp.arange(3.0), scale=jnp.array([1.0, 2.0, 3.0])), [0.0, 2.0, 6.0])


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_axis_size_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match=r"vmap_new_states: axis_size must be a positive int, got"):
        vmap_new_states(lambda x: x, axis_size=bad)


@pytest.mark.parametrize("what", ["in_states", "out_states"])
def test_state_declarations_are_refused_with_the_way_out(what):
    s = ShortTermState(jnp.zeros(3))
    with pytest.raises(ValueError, match=rf"{what}= is not accepted.*vmap2\(fun, state_in_axes="):
        vmap_new_states(lambda x: x, axis_size=3, **{what: s})


def test_fun_must_be_callable():
    with pytest.raises(TypeError, match=r"vmap_new_states: fun must be callable, got int"):
        vmap_new_states(3)


def test_axis_size_that_disagrees_with_an_argument_names_both_sizes():
    f = vmap_new_states(lambda x: ShortTermState(x).value, axis_size=5)
    with pytest.raises(ValueError, match=r"inconsistent sizes: argument 0: 3; axis_size: 5"):
        f(jnp.arange(3.0))


def test_a_shared_state_that_differs_between_lanes_fails_and_changes_nothing():
    state_random.seed(3)
    counter = ShortTermState(jnp.asarray(0.0))

    def build(x):
        counter.value = counter.value + 1.0
        return NonBatchState(x + state_random.normal()).value

    with pytest.raises(BatchAxisError, match=r"NonBatchState .* kept as one shared copy .* differs between copies"):
        vmap_new_states(build, axis_size=4)(jnp.arange(4.0))
    assert_allclose(counter.value, 0.0)
    # As in vmap2_new_states, the failed call moved no key.
    assert not isinstance(state_random.DEFAULT.value, jax.core.Tracer)
    assert_array_equal(jax.random.key_data(state_random.DEFAULT.value), jax.random.key_data(jax.random.key(3)))


def test_vmap2_new_states_keeps_a_nonbatch_state_shared():
    class Net:
        def init_all_states(self):
            self.table = NonBatchState(jnp.arange(3.0))
            self.scale = NonBatchState(jnp.array(1.0))
            self.w = ParamState(jnp.ones(2))

    net = Net()
    groups = vmap2_new_states(net, axis_size=4)
    assert groups == {None: [net.table, net.scale], 0: [net.w]}
    assert_allclose(net.table.value, [0.0, 1.0, 2.0])
    assert isinstance(net.scale.value, jax.Array) and net.scale.value.shape == ()
    assert net.w.value.shape == (4, 2)


def test_vmap2_new_states_rules_cannot_batch_a_nonbatch_state():
    class Net:
        def init_all_states(self):
            self.table = NonBatchState(jnp.arange(3.0))

    net = Net()
    groups = vmap2_new_states(net, axis_size=2, state_out_axes={0: OfType(state_core.State)})
    assert groups == {None: [net.table]}
    assert net.table.value.shape == (3,)
