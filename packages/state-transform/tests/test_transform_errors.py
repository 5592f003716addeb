"""Error reporting (axis sizes, in_axes, States as arguments) and transactional semantics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core.filter import OfType
from state_transform import StatefulMapping, grad, jit, pmap2, vmap2

SHORT = OfType(state_core.ShortTermState)


# ---------------------------------------------------------------- axis sizes
def test_mismatched_sizes_between_two_arguments():
    f = vmap2(lambda x, y: x + y)
    with pytest.raises(ValueError, match="inconsistent sizes") as info:
        f(jnp.ones(3), jnp.ones(4))
    msg = str(info.value)
    assert "argument 0: 3" in msg
    assert "argument 1: 4" in msg


def test_mismatched_sizes_inside_pytree_argument():
    f = vmap2(lambda d: d["a"] + d["b"])
    with pytest.raises(ValueError, match="inconsistent sizes") as info:
        f({"a": jnp.ones(2), "b": jnp.ones(5)})
    msg = str(info.value)
    assert "argument 0['a']: 2" in msg
    assert "argument 0['b']: 5" in msg


def test_mismatched_sizes_between_argument_and_mapped_state():
    w = state_core.ShortTermState(jnp.zeros(5), name="lanes_w")

    def f(x):
        return x + w.value

    g = vmap2(f, state_in_axes={0: SHORT})
    with pytest.raises(ValueError, match="inconsistent sizes") as info:
        g(jnp.ones(3))
    msg = str(info.value)
    assert "argument 0: 3" in msg
    assert "lanes_w" in msg and ": 5" in msg


def test_mismatched_sizes_state_named_by_path_on_objects():
    class Model:
        def __init__(self):
            self.h = state_core.ShortTermState(jnp.zeros(5))

        def __call__(self, x):
            return x + self.h.value

    with pytest.raises(ValueError, match=r"argument 0: 3.*ShortTermState at path 'h': 5"):
        vmap2(Model(), state_in_axes={0: SHORT})(jnp.ones(3))


def test_mismatched_axis_size_and_argument():
    with pytest.raises(ValueError, match=r"argument 0: 3.*axis_size: 4"):
        vmap2(lambda x: x, axis_size=4)(jnp.ones(3))


def test_keyword_argument_size_is_labelled():
    f = vmap2(lambda x, y: x + y)
    with pytest.raises(ValueError, match=r"argument 0: 2.*keyword argument 'y': 3"):
        f(jnp.ones(2), y=jnp.ones(3))


def test_keyword_arguments_are_mapped_over_axis_0():
    out = vmap2(lambda x, y: x * y, in_axes=0)(jnp.arange(3.0), y=jnp.array([2.0, 3.0, 4.0]))
    assert_allclose(np.asarray(out), [0.0, 3.0, 8.0])


def test_keyword_axis_none_shares_keyword_arguments():
    f = StatefulMapping(lambda x, y: x * y, keyword_axis=None)
    out = f(jnp.arange(3.0), y=jnp.array([2.0, 3.0]))
    # y is not mapped: every lane multiplies by the whole vector.
    assert_allclose(np.asarray(out), [[0.0, 0.0], [2.0, 3.0], [4.0, 6.0]])


def test_keyword_axis_must_be_an_int_or_none():
    with pytest.raises(TypeError, match="keyword_axis must be an int or None, got '0'"):
        StatefulMapping(lambda x: x, keyword_axis="0")


def test_nothing_mapped_and_no_axis_size():
    f = vmap2(lambda x: x * 2, in_axes=None)
    with pytest.raises(ValueError, match="axis_size"):
        f(jnp.ones(3))
    with pytest.raises(ValueError, match="axis_size"):
        vmap2(lambda: jnp.ones(2))()


def test_invalid_in_axes_for_rank():
    f = vmap2(lambda x: x, in_axes=3)
    with pytest.raises(ValueError, match="argument 0") as info:
        f(jnp.ones(4))
    assert "axis 3" in str(info.value)


def test_negative_in_axes_is_supported():
    out = vmap2(lambda x: x.sum(), in_axes=-1)(jnp.arange(6.0).reshape(2, 3))
    assert_allclose(np.asarray(out), [3.0, 5.0, 7.0])


def test_in_axes_tuple_of_wrong_length():
    f = vmap2(lambda x, y: x + y, in_axes=(0, None, 0))
    with pytest.raises(ValueError, match="in_axes has 3 entries"):
        f(jnp.ones(2), jnp.ones(2))


def test_in_axes_pytree_mismatch_names_argument():
    f = vmap2(lambda d: d["a"], in_axes=({"a": 0, "b": None, "c": 0},))
    with pytest.raises(ValueError, match="argument 0"):
        f({"a": jnp.ones(2), "b": jnp.ones(2)})


def test_in_axes_nested_dict_spec():
    f = vmap2(lambda d: d["a"] * d["b"], in_axes=({"a": 0, "b": None},))
    out = f({"a": jnp.arange(3.0), "b": jnp.array(2.0)})
    assert_allclose(np.asarray(out), [0.0, 2.0, 4.0])


def test_state_in_axes_axis_out_of_range_names_state():
    s = state_core.ShortTermState(jnp.zeros(3), name="flat")
    f = vmap2(lambda x: x + s.value, state_in_axes={2: SHORT})
    with pytest.raises(ValueError, match="flat"):
        f(jnp.ones(3))


@pytest.mark.parametrize("n", [9, 16])
def test_pmap2_more_lanes_than_devices(n):
    f = pmap2(lambda x: x * 2, axis_name="i")
    with pytest.raises(ValueError) as info:
        f(jnp.arange(float(n)))
    msg = str(info.value)
    assert str(n) in msg
    assert "8" in msg


def test_pmap2_under_set_mesh_is_refused_with_the_fix_and_changes_nothing():
    s = state_core.ShortTermState(jnp.zeros((8, 2)), name="lanes")

    def step(x):
        s.value = s.value + x
        return x * 2

    f = pmap2(step, axis_name="i", state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    x = jnp.ones((8, 2))
    mesh = jax.make_mesh((8,), ("d",))
    refused = r"pmap2\(step\): cannot run under jax\.set_mesh \(the mesh \{'d': 8\} is in effect\).*shard_map"
    with jax.set_mesh(mesh), pytest.raises(ValueError, match=refused):
        f(x)  # a new signature: refused before tracing
    assert_allclose(s.value, np.zeros((8, 2)))
    assert_allclose(f(x), np.full((8, 2), 2.0))  # outside the mesh it runs
    with jax.set_mesh(mesh), pytest.raises(ValueError, match=refused):
        f(x)  # the compiled program too
    with jax.set_mesh(mesh), pytest.raises(ValueError, match=refused):
        jit(lambda v: f(v))(x)  # and inside a computation traced under the mesh
    assert_allclose(s.value, np.ones((8, 2)))  # only the call outside the mesh wrote


def _placed(where):
    mesh = jax.make_mesh((8,), ("d",))
    value = jnp.ones(8)
    if where == "device 3":
        return jax.device_put(value, jax.devices()[3])
    if where == "sharded":
        return jax.device_put(value, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d")))
    return jax.device_put(value, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))


@pytest.mark.parametrize(
    ("where", "shown"),
    [
        ("device 3", r"device 3"),
        ("sharded", r"sharding P\('d',?\) on a mesh \{'d': 8\}"),
        ("replicated", r"sharding P\(\) on a mesh \{'d': 8\}"),
    ],
)
def test_pmap2_names_an_input_committed_elsewhere_and_the_fix(where, shown):
    s = state_core.ShortTermState(jnp.zeros(8), name="lanes")

    def step(x):
        s.value = s.value + x
        return x * 2

    f = pmap2(step, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    assert_allclose(f(jnp.ones(8)), np.full(8, 2.0))  # compiled with uncommitted inputs
    x = _placed(where)
    message = rf"pmap2\(step\): argument args\[0\] \({shown}\) is committed .*like jax\.pmap.*jax\.device_get"
    with pytest.raises(ValueError, match=message) as info:
        f(x)
    assert "_state_lane" not in str(info.value)
    assert_allclose(s.value, np.ones(8))  # nothing written
    assert_allclose(f(jax.device_get(x)), np.full(8, 2.0))  # the fix the message names
    assert_allclose(s.value, np.full(8, 2.0))


def test_pmap2_names_a_state_committed_to_one_device():
    s = state_core.ShortTermState(jax.device_put(jnp.zeros(8), jax.devices()[2]), name="lanes")
    f = pmap2(lambda x: s.value + x, state_in_axes={0: SHORT})
    with pytest.raises(ValueError, match=r"pmap2\(<lambda>\): ShortTermState 'lanes' \(device 2\) is committed"):
        f(jnp.ones(8))
    assert s.value.devices() == {jax.devices()[2]}
    s.value = jax.device_get(s.value)
    assert_allclose(f(jnp.ones(8)), np.ones(8))


def test_pmap2_more_lanes_than_devices_via_mapped_state():
    s = state_core.ShortTermState(jnp.zeros(10), name="too_many")
    f = pmap2(lambda: s.value * 2, axis_name="i", in_axes=(), state_in_axes={0: SHORT})
    with pytest.raises(ValueError, match=r"(?s)10.*8"):
        f()


@pytest.mark.parametrize("bad", [{"zero": SHORT}, {1.5: SHORT}, {(0,): SHORT}])
def test_state_in_axes_non_int_key(bad):
    with pytest.raises(ValueError, match="keys must be ints"):
        vmap2(lambda x: x, state_in_axes=bad)
    with pytest.raises(ValueError, match="keys must be ints"):
        vmap2(lambda x: x, state_out_axes=bad)


def test_state_axes_of_wrong_type():
    with pytest.raises(TypeError, match="state_in_axes"):
        vmap2(lambda x: x, state_in_axes=3.5)


@pytest.mark.parametrize("bad", [0, -2, 2.0, "4"])
def test_invalid_axis_size(bad):
    with pytest.raises(ValueError, match="axis_size"):
        vmap2(lambda x: x, axis_size=bad)


def test_mapping_a_state_object_is_a_type_error():
    with pytest.raises(TypeError, match="not a State"):
        StatefulMapping(state_core.State(jnp.zeros(2)))


# ---------------------------------------------------------------- States as arguments / results
@pytest.mark.parametrize("transform", [vmap2, lambda f: pmap2(f, axis_name="i"), jit, grad])
def test_state_passed_as_argument_is_type_error(transform):
    s = state_core.State(jnp.ones(3), name="arg_state")
    f = transform(lambda x: jnp.sum(x))
    with pytest.raises(TypeError, match=r"state\.value"):
        f(s)


def test_state_inside_pytree_argument_is_type_error():
    s = state_core.State(jnp.ones(3), name="nested_arg")
    with pytest.raises(TypeError, match=r"state\.value") as info:
        vmap2(lambda d: d["x"])({"x": s})
    assert "nested_arg" in str(info.value)


@pytest.mark.parametrize("transform", [vmap2, lambda f: pmap2(f, axis_name="i"), jit])
def test_returning_a_state_is_type_error(transform):
    s = state_core.State(jnp.ones(3), name="returned")

    def f(x):
        return s

    with pytest.raises(TypeError, match="returned"):
        transform(f)(jnp.ones(3))
    assert_allclose(np.asarray(s.value), np.ones(3))


def test_returning_state_in_tuple_is_type_error():
    s = state_core.State(jnp.ones(2), name="in_tuple")
    with pytest.raises(TypeError, match=r"State"):
        vmap2(lambda x: (x, s))(jnp.ones(2))


# ---------------------------------------------------------------- transactional behaviour
class Boom(RuntimeError):
    pass


def _make_states():
    a = state_core.ShortTermState(jnp.array([1.0, 2.0, 3.0]), name="a")
    b = state_core.LongTermState(jnp.array(5.0), name="b")
    return a, b


@pytest.mark.parametrize(
    "transform",
    [
        lambda f: vmap2(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT}),
        lambda f: pmap2(f, axis_name="i", state_in_axes={0: SHORT}, state_out_axes={0: SHORT}),
    ],
    ids=["vmap2", "pmap2"],
)
def test_exception_during_tracing_keeps_states(transform):
    a, b = _make_states()

    def f(x):
        a.value = a.value + x
        b.value = b.value * 2
        raise Boom("user code failed at step 7")

    g = transform(f)
    with pytest.raises(Boom, match="user code failed at step 7"):
        g(jnp.ones(3))
    assert_allclose(np.asarray(a.value), [1.0, 2.0, 3.0])
    assert float(b.value) == 5.0
    assert not isinstance(a.value, jax.core.Tracer)
    assert not isinstance(b.value, jax.core.Tracer)


@pytest.mark.parametrize("transform", [jit, lambda f: grad(lambda x: jnp.sum(f(x)))], ids=["jit", "grad"])
def test_exception_during_tracing_keeps_states_jit_grad(transform):
    a, b = _make_states()

    def f(x):
        a.value = a.value + x
        b.value = b.value * 2
        raise Boom("nope")

    with pytest.raises(Boom, match="nope"):
        transform(f)(jnp.ones(3))
    assert_allclose(np.asarray(a.value), [1.0, 2.0, 3.0])
    assert float(b.value) == 5.0


def test_shape_error_during_tracing_propagates_original_type():
    a, b = _make_states()

    def f(x):
        a.value = a.value + x  # lane shapes () and (2,) broadcast fine
        b.value = b.value + jnp.ones(3) @ jnp.ones(4)  # shape error
        return x

    g = vmap2(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    with pytest.raises(TypeError, match=r"dot_general|shape|incompatible"):
        g(jnp.ones((3, 2)))
    assert_allclose(np.asarray(a.value), [1.0, 2.0, 3.0])
    assert float(b.value) == 5.0


def _resize_setup():
    a = state_core.ShortTermState(jnp.zeros(3), name="resized")
    other = state_core.State(jnp.array(1.0), name="other")

    def f(x):
        a.value = a.value + x
        other.value = other.value + 1.0
        return a.value

    g = vmap2(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    g(jnp.ones(3))
    assert float(other.value) == 2.0
    a.value = jnp.zeros(4)  # now disagrees with the argument's size
    return a, other, g


def test_failure_after_cache_hit_when_state_shape_breaks_program_keeps_states():
    a, other, g = _resize_setup()
    with pytest.raises(ValueError):
        g(jnp.ones(3))
    assert a.value.shape == (4,)
    assert_allclose(np.asarray(a.value), np.zeros(4))
    assert float(other.value) == 2.0
    # fixing the state makes the mapping usable again
    a.value = jnp.zeros(3)
    g(jnp.ones(3))
    assert_allclose(np.asarray(a.value), np.ones(3))
    assert float(other.value) == 3.0


def test_failure_after_cache_hit_reports_sizes_with_their_sources():
    # On a cache hit the entry must be revalidated against the states' current avals,
    # so the size conflict is reported like on a first call (naming the state), not
    # as JAX's internal "state_values[0] / dyn_leaves" message.
    _a, _other, g = _resize_setup()
    with pytest.raises(ValueError, match=r"(?s)argument 0: 3.*resized.*4"):
        g(jnp.ones(3))


def _fail_at_runtime(x):
    raise Boom("runtime failure in callback")


def test_execution_failure_keeps_states_and_message():
    a, b = _make_states()

    def f(x):
        a.value = a.value + x
        b.value = b.value + 1.0
        y = jax.pure_callback(_fail_at_runtime, jax.ShapeDtypeStruct((), jnp.float32), x, vmap_method="sequential")
        return y

    g = vmap2(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    with pytest.raises(Exception, match="runtime failure in callback"):
        g(jnp.ones(3))
    assert_allclose(np.asarray(a.value), [1.0, 2.0, 3.0])
    assert float(b.value) == 5.0
    # the cached program is still there and the failure repeats with the same message
    with pytest.raises(Exception, match="runtime failure in callback"):
        g(jnp.ones(3))
    assert_allclose(np.asarray(a.value), [1.0, 2.0, 3.0])


def test_error_in_trace_does_not_poison_the_cache():
    calls = []
    s = state_core.State(jnp.zeros(()), name="after_error")

    def f(x, fail):
        calls.append(fail)
        if fail:
            raise Boom("first")
        s.value = jax.lax.psum(x, "b")
        return x

    g = StatefulMapping(f, in_axes=(0, None), axis_name="b", static_argnums=(1,))
    with pytest.raises(Boom):
        g(jnp.ones(3), True)
    g(jnp.ones(3), False)
    assert float(s.value) == 3.0
    g(jnp.ones(3), False)
    assert calls == [True, False]
