"""vmap2_new_states runs the init once under an eager jax.vmap: no compile, same numbers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_random
from state_core import ParamState, ShortTermState, State, StateLeakError
from state_transform import vmap2_new_states


class Layer:
    def __init__(self):
        self.calls = 0

    def init_all_states(self, n=3):
        self.calls += 1
        self.w = ParamState(state_random.normal(0.0, 1.0, size=(n,)))
        self.b = ParamState(jnp.zeros(n))


def _expected_draws(seed, copies, n):
    key = jax.random.key(seed)
    parts = jax.random.split(key, copies + 1)
    lanes = [jax.random.normal(jax.random.split(parts[1 + i], 2)[1], (n,)) for i in range(copies)]
    return np.stack(lanes), jax.random.split(parts[0], 2)[1]


def test_random_init_follows_the_lane_key_rules_and_runs_once():
    state_random.seed(3)
    layer = Layer()
    groups = vmap2_new_states(layer, {"n": 4}, axis_size=5)
    assert layer.calls == 1
    assert list(groups) == [0] and groups[0] == [layer.w, layer.b]
    expected, next_key = _expected_draws(3, 5, 4)
    assert_allclose(layer.w.value, expected, rtol=1e-6)
    assert_allclose(layer.b.value, np.zeros((5, 4)))
    assert np.array_equal(jax.random.key_data(state_random.DEFAULT.value), jax.random.key_data(next_key))


def test_a_second_initialisation_compiles_nothing(count_compiles):
    vmap2_new_states(Layer(), {"n": 6}, axis_size=7)  # warm JAX's caches
    with count_compiles() as compiles:
        layer = Layer()
        vmap2_new_states(layer, {"n": 6}, axis_size=7)
    assert compiles == []
    assert layer.w.value.shape == (7, 6)


def test_shared_and_moved_axes_and_written_existing_states():
    counter = State(jnp.zeros(()), name="counter")
    seen = State(jnp.zeros(()), name="seen")

    class Net:
        def init_all_states(self):
            counter.value = counter.value + 1  # the same on every copy: written unbatched
            self.noise = ShortTermState(state_random.uniform(size=(2,)))
            seen.value = self.noise.value.sum()  # differs per copy: stacked on axis 0
            self.table = ParamState(jnp.arange(3.0))
            self.wide = ShortTermState(jnp.ones((2,)))

    state_random.seed(0)
    net = Net()
    groups = vmap2_new_states(
        net,
        axis_size=4,
        state_out_axes={None: lambda path, s: path == ("table",), 1: lambda path, s: path == ("wide",)},
    )
    assert groups == {0: [net.noise], None: [net.table], 1: [net.wide]}
    assert_allclose(net.table.value, [0.0, 1.0, 2.0])
    assert net.wide.value.shape == (2, 4)
    assert net.noise.value.shape == (4, 2)
    assert_allclose(counter.value, 1.0)
    assert seen.value.shape == (4,)
    assert_allclose(seen.value, np.asarray(net.noise.value).sum(axis=1), rtol=1e-6)


def test_shared_state_that_differs_between_copies_is_an_error_and_keys_stay():
    class Noisy:
        def init_all_states(self):
            self.w = ParamState(state_random.normal(size=(2,)))

    state_random.seed(1)
    before = np.asarray(jax.random.key_data(state_random.DEFAULT.value))
    with pytest.raises(
        ValueError, match=r"kept as one shared copy .*axis None in state_out_axes.*initial value differs between copies"
    ):
        vmap2_new_states(Noisy(), axis_size=3, state_out_axes={None: ParamState})
    after = np.asarray(jax.random.key_data(state_random.DEFAULT.value))
    assert_array_equal(after, before)  # the failed call moved no key


def test_failing_init_leaves_existing_states_unchanged():
    kept = State(jnp.ones(2), name="kept")

    class Bad:
        def init_all_states(self):
            kept.value = kept.value * 10
            raise RuntimeError("init failed")

    with pytest.raises(RuntimeError, match="init failed"):
        vmap2_new_states(Bad(), axis_size=2)
    assert_allclose(kept.value, [1.0, 1.0])


def test_inside_a_plain_jit_the_random_stream_never_holds_a_tracer():
    # The eager path is only for eager calls: under a plain jax.jit the compiled
    # mapping reports the leak and the stream keeps a concrete key.
    state_random.seed(0)
    layer = Layer()

    def init_inside_jit():
        vmap2_new_states(layer, {"n": 2}, axis_size=2)
        return 0.0

    with pytest.raises(StateLeakError, match=r"vmap2_new_states writes .* not state-aware"):
        jax.jit(init_inside_jit)()
    assert not isinstance(state_random.DEFAULT.value, jax.core.Tracer)
    assert state_random.normal(size=(2,)).shape == (2,)
