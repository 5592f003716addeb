"""An eager ``*_new_states`` call runs the init once, under an eager ``jax.vmap``: no trace, the same numbers.

The traced mapping (used inside a state-aware trace, and forced here with
``eager_run_possible`` patched off) is the reference: the eager run must give the same
values, groups, warnings, errors and random keys.
"""

import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_random
import state_transform._new_states as new_states_module
from state_core import BatchAxisError, HiddenTreeState, NonBatchState, ParamState, ShortTermState, State
from state_transform import jit, pmap2_new_states, vmap2_new_states, vmap_new_states


def _key_data(x):
    return np.asarray(jax.random.key_data(x)) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else np.asarray(x)


def _snapshot(states):
    return {name: [_key_data(leaf) for leaf in jax.tree.leaves(s.value)] for name, s in states.items()}


def _run(build, *, eager, monkeypatch):
    """``build()`` -> (result, {name: State}) from a fresh seed; eager or through the traced mapping."""
    if not eager:
        monkeypatch.setattr(new_states_module, "eager_run_possible", lambda *args: False)
    state_random.seed(7)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result, states = build()
    finally:
        monkeypatch.undo()
    messages = [(str(w.message), w.filename, w.lineno) for w in caught]
    return result, _snapshot(states), messages, _key_data(state_random.DEFAULT.value)


def _assert_same(a, b):
    result_a, states_a, warned_a, key_a = a
    result_b, states_b, warned_b, key_b = b
    for x, y in zip(jax.tree.leaves(result_a), jax.tree.leaves(result_b), strict=True):
        assert_array_equal(np.asarray(x), np.asarray(y))
    assert states_a.keys() == states_b.keys()
    for name in states_a:
        for x, y in zip(states_a[name], states_b[name], strict=True):
            assert x.shape == y.shape and x.dtype == y.dtype, name
            assert_array_equal(x, y, err_msg=name)
    assert warned_a == warned_b
    assert_array_equal(key_a, key_b)


class _Net:
    def init_all_states(self):
        pass


def _module_init():
    counter = State(jnp.zeros(()), name="counter")
    seen = State(jnp.zeros(()), name="seen")
    net = _Net()

    def init_all_states():
        counter.value = counter.value + 1  # the same on every member: stays one value
        net.noise = ShortTermState(state_random.uniform(size=(2,)))
        seen.value = seen.value + net.noise.value.sum()  # read whole, written per member: warns
        net.table = ParamState(jnp.arange(3.0))
        net.wide = ShortTermState(jnp.ones((2,)) * state_random.normal())
        net.tree = HiddenTreeState({"a": jnp.zeros(2), "b": state_random.normal(size=(2,))})
        net.last = ShortTermState(state_random.normal(size=(2, 3)))
        net.w = ParamState(state_random.normal(size=(3,)))
        net.w.value = net.w.value * 2
        net.shared = NonBatchState(jnp.ones(2))
        net.fixed = ParamState(np.ones(3))
        net.rng = state_random.RandomState(3)

    net.init_all_states = init_all_states
    groups = vmap2_new_states(
        net,
        axis_size=4,
        state_out_axes={
            None: lambda path, s: path == ("table",),
            1: lambda path, s: path == ("wide",),
            -1: lambda path, s: path == ("last",),
        },
    )
    names = ["noise", "table", "wide", "tree", "last", "w", "shared", "fixed", "rng"]
    layout = sorted(
        (str(axis), sorted(names[[getattr(net, n) for n in names].index(s)] for s in ss)) for axis, ss in groups.items()
    )
    return layout, {"counter": counter, "seen": seen, **{n: getattr(net, n) for n in names}}


def _own_stream_init():
    rng = state_random.RandomState(11)
    net = _Net()

    def init_all_states():
        net.a = ParamState(rng.normal(size=(2,)))  # a stream other than DEFAULT
        net.b = ParamState(state_random.normal(size=(2,)))

    net.init_all_states = init_all_states
    vmap2_new_states(net, axis_size=5)
    return 0, {"rng": rng, "a": net.a, "b": net.b}


def _seeded_inside():
    net = _Net()

    def init_all_states():
        state_random.seed(5)  # written before it is read: every member draws the same
        net.w = ParamState(state_random.normal(size=(2,)))

    net.init_all_states = init_all_states
    vmap2_new_states(net, axis_size=3)
    return 0, {"w": net.w}


def _nested_jit():
    net = _Net()

    def init_all_states():
        net.w = ParamState(jit(lambda: state_random.normal(size=(2,)))())
        net.v = ShortTermState(net.w.value * 3 + 1)

    net.init_all_states = init_all_states
    vmap2_new_states(net, axis_size=3)
    return 0, {"w": net.w, "v": net.v}


def _function_form():
    made = {}

    @vmap_new_states(in_axes=0, out_axes=1, axis_name="i")
    def build(x, *, scale):
        made["a"] = ShortTermState(x * scale + state_random.normal())
        made["total"] = NonBatchState(jax.lax.psum(x, "i"))
        made["index"] = ShortTermState(jax.lax.axis_index("i"))
        return jnp.stack([made["a"].value, made["a"].value * 2.0])

    out = build(jnp.arange(3.0), scale=jnp.array([1.0, 2.0, 3.0]))
    return out, made


def _per_lane_buffer():
    buf = State(jnp.zeros((3, 2)), name="buf")
    net = _Net()

    def init_all_states():
        net.w = ParamState(state_random.normal(size=(2,)))
        buf.value = buf.value + net.w.value  # one row per member, read and written per member

    net.init_all_states = init_all_states
    vmap2_new_states(net, axis_size=3)
    return 0, {"buf": buf, "w": net.w}


def _spread_over_devices():
    net = _Net()

    def init_all_states():
        net.w = ParamState(state_random.normal(size=(2,)))
        net.k = state_random.RandomState(jax.random.key(4))

    net.init_all_states = init_all_states
    pmap2_new_states(net, axis_size=4)
    return str(net.w.value.sharding.device_set), {"w": net.w, "k": net.k}


@pytest.mark.parametrize(
    "build",
    [
        _module_init,
        _own_stream_init,
        _seeded_inside,
        _nested_jit,
        _function_form,
        _per_lane_buffer,
        _spread_over_devices,
    ],
)
def test_the_eager_run_gives_what_the_traced_mapping_gives(build, monkeypatch):
    eager = _run(build, eager=True, monkeypatch=monkeypatch)
    traced = _run(build, eager=False, monkeypatch=monkeypatch)
    _assert_same(eager, traced)


def test_the_module_init_groups_and_values():
    with pytest.warns(UserWarning, match=r"'seen' is written with a value that differs across the mapped axis"):
        layout, states = _module_init()
    assert layout == [
        ("-1", ["last"]),
        ("0", ["fixed", "noise", "rng", "tree", "w"]),
        ("1", ["wide"]),
        ("None", ["shared", "table"]),
    ]
    assert states["wide"].value.shape == (2, 4) and states["last"].value.shape == (2, 3, 4)
    assert_allclose(states["counter"].value, 1.0)
    assert states["seen"].value.shape == (4,)
    assert_allclose(states["seen"].value, np.asarray(states["noise"].value).sum(axis=1), rtol=1e-6)
    assert_array_equal(
        jax.random.key_data(states["rng"].value), np.tile(jax.random.key_data(jax.random.key(3)), (4, 1))
    )


def _count_traces(monkeypatch):
    traces = []
    make_jaxpr = jax.make_jaxpr

    def counting(*args, **kwargs):
        traces.append(1)
        return make_jaxpr(*args, **kwargs)

    monkeypatch.setattr(jax, "make_jaxpr", counting)
    return traces


def test_an_eager_initialisation_is_not_traced(monkeypatch):
    class Layer:
        def __init__(self):
            self.calls = 0

        def init_all_states(self):
            self.calls += 1
            self.w = ParamState(state_random.normal(size=(3,)))

    traces = _count_traces(monkeypatch)
    state_random.seed(1)
    layer = Layer()
    vmap2_new_states(layer, axis_size=4)
    assert traces == [] and layer.calls == 1
    parts = jax.random.split(jax.random.key(1), 5)
    expected = [jax.random.normal(jax.random.split(parts[1 + i], 2)[1], (3,)) for i in range(4)]
    assert_allclose(layer.w.value, np.stack(expected), rtol=1e-6)  # (batched erf_inv: last-bit rounding)
    assert_array_equal(
        jax.random.key_data(state_random.DEFAULT.value), jax.random.key_data(jax.random.split(parts[0], 2)[1])
    )


def test_inside_a_state_aware_trace_the_mapping_is_traced(monkeypatch):
    traces = _count_traces(monkeypatch)
    made = {}

    @jit
    def build():
        made["w"] = ShortTermState(jnp.ones(2))
        vmap_new_states(
            lambda: made.setdefault("v", ShortTermState(state_random.normal(size=(2,)))).value, axis_size=3
        )()
        return 0.0

    build()
    assert len(traces) >= 2  # the jit, and the mapping inside it


def test_a_draw_from_another_thread_during_the_init_hands_out_no_key_twice():
    drawn = []

    class Net:
        def __init__(self):
            self.runs = 0

        def init_all_states(self):
            self.runs += 1
            self.w = ParamState(state_random.normal(size=(2,)))
            if self.runs == 1:  # meanwhile, another thread draws from the stream the lanes split
                worker = threading.Thread(target=lambda: drawn.append(state_random.normal(size=(2,))))
                worker.start()
                worker.join()

    state_random.seed(0)
    net = Net()
    vmap2_new_states(net, axis_size=3)
    assert net.runs == 2  # run again (traced, locked) from the key the other thread left
    first, after_draw = jax.random.split(jax.random.key(0), 2)[1], jax.random.split(jax.random.key(0), 2)[0]
    assert_array_equal(np.asarray(drawn[0]), np.asarray(jax.random.normal(first, (2,))))
    parts = jax.random.split(after_draw, 4)
    expected = [jax.random.normal(jax.random.split(parts[1 + i], 2)[1], (2,)) for i in range(3)]
    assert_allclose(net.w.value, np.stack(expected), rtol=1e-6)
    assert_array_equal(
        jax.random.key_data(state_random.DEFAULT.value), jax.random.key_data(jax.random.split(parts[0], 2)[1])
    )


def test_two_threads_initialising_at_once_draw_different_numbers():
    class Net:
        def init_all_states(self):
            self.w = ParamState(state_random.normal(size=(2,)))

    state_random.seed(0)
    nets = [Net() for _ in range(4)]
    barrier = threading.Barrier(len(nets))

    def init(net):
        barrier.wait()
        vmap2_new_states(net, axis_size=3)

    workers = [threading.Thread(target=init, args=(net,)) for net in nets]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    rows = np.concatenate([np.asarray(net.w.value) for net in nets])
    assert len({tuple(r) for r in rows.tolist()}) == len(rows)


def test_a_failing_eager_init_changes_no_state_and_moves_no_key():
    kept = State(jnp.ones(2), name="kept")

    class Bad:
        def init_all_states(self):
            self.w = ParamState(state_random.normal(size=(2,)))
            kept.value = kept.value + self.w.value
            raise RuntimeError("init failed")

    state_random.seed(2)
    before = np.asarray(jax.random.key_data(state_random.DEFAULT.value))
    bad = Bad()
    with pytest.raises(RuntimeError, match="init failed"):
        vmap2_new_states(bad, axis_size=3)
    assert_allclose(kept.value, [1.0, 1.0])
    assert_array_equal(np.asarray(jax.random.key_data(state_random.DEFAULT.value)), before)


def test_a_shared_state_that_differs_is_refused_before_anything_is_stored():
    kept = State(jnp.zeros(()), name="kept")

    def build():
        kept.value = kept.value + 1.0
        return NonBatchState(state_random.normal()).value

    state_random.seed(3)
    with pytest.raises(BatchAxisError, match=r"NonBatchState .* kept as one shared copy .* differs between copies"):
        vmap_new_states(build, axis_size=4)()
    assert_allclose(kept.value, 0.0)
    assert_array_equal(jax.random.key_data(state_random.DEFAULT.value), jax.random.key_data(jax.random.key(3)))
