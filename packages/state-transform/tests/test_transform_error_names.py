"""Errors that JAX would report with our internal argument names name the State and the fix."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from state_core import ParamState, State, StateDict
from state_transform import grad, jit, shard_map


def _mesh(n=8):
    return Mesh(np.array(jax.devices()[:n]), ("x",))


def test_state_and_argument_on_different_devices_names_both():
    v = State(jax.device_put(jnp.ones(3), jax.devices()[1]), name="v")

    def step(x):
        v.value = v.value + x
        return v.value

    with pytest.raises(
        ValueError, match=r"jit\(step\): State 'v' lies on device 1 but argument args\[0\] lies on device 2"
    ) as info:
        jit(step)(jax.device_put(jnp.ones(3), jax.devices()[2]))
    assert "rw[0]" not in str(info.value) and "dyn_leaves" not in str(info.value)
    np.testing.assert_allclose(v.value, [1.0, 1.0, 1.0])
    assert v.value.devices() == {jax.devices()[1]}


def test_smaller_mesh_after_compiling_on_eight_devices_names_the_state():
    mesh8, mesh4 = _mesh(8), _mesh(4)
    acc = State(jax.device_put(jnp.zeros(8), NamedSharding(mesh8, P("x"))), name="acc")

    def step(x):
        acc.value = acc.value + x
        return x

    f = jit(step)
    f(jax.device_put(jnp.ones(8), NamedSharding(mesh8, P("x"))))
    with pytest.raises(
        ValueError, match=r"State 'acc' lies on devices 0\.\.7 but argument args\[0\] lies on devices 0, 1, 2, 3"
    ):
        f(jax.device_put(jnp.ones(8), NamedSharding(mesh4, P("x"))))
    np.testing.assert_allclose(acc.value, np.ones(8))


def _program_on_four_devices(where):
    """``(call, acc)``: ``call()`` writes ``acc`` (on all 8 devices) with a program ``where`` puts on devices 0-3."""
    mesh8, mesh4 = _mesh(8), _mesh(4)
    acc = State(jax.device_put(jnp.arange(8.0), NamedSharding(mesh8, P("x"))), name="acc")
    on4 = NamedSharding(mesh4, P())

    def step(x):
        acc.value = acc.value + x
        if where == "constraint":
            return jax.lax.with_sharding_constraint(x * 2.0, on4)
        if where == "device_put":
            return jax.device_put(x * 2.0, on4)
        return x * 2.0

    if where == "out_shardings":
        f = jit(step, out_shardings=on4)
    elif where == "in_shardings":
        f = jit(step, in_shardings=on4)
    else:
        f = jit(step)
    if where == "set_mesh":

        def call():
            with jax.set_mesh(mesh4):
                return f(1.0)

        return call, acc
    return lambda: f(jnp.ones(8)), acc


@pytest.mark.parametrize(
    ("where", "what"),
    [
        ("out_shardings", "its out_shardings"),
        ("in_shardings", "its in_shardings"),
        ("constraint", r"a sharding constraint \(jax\.lax\.with_sharding_constraint\) in jit\(step\)"),
        ("device_put", r"a jax\.device_put in jit\(step\)"),
        ("set_mesh", r"the mesh set with jax\.set_mesh"),
    ],
    ids=["out_shardings", "in_shardings", "constraint", "device_put", "set_mesh"],
)
def test_a_state_on_eight_devices_and_a_program_on_four_names_the_state_both_sets_and_the_fix(where, what):
    call, acc = _program_on_four_devices(where)
    with pytest.raises(
        ValueError,
        match=rf"jit\(step\): State 'acc' lies on devices 0\.\.7 but {what} places the program on devices 0, 1, 2, 3; "
        r"a program runs on one set of devices\. Move State 'acc' there with jax\.device_put .*, or place the "
        r"program on devices 0\.\.7\.",
    ) as info:
        call()
    assert "rw[" not in str(info.value) and "Received incompatible devices" not in str(info.value)
    np.testing.assert_allclose(acc.value, np.arange(8.0))
    assert acc.value.sharding.device_set == set(jax.devices())
    acc.value = jax.device_put(acc.value, NamedSharding(_mesh(4), P("x")))  # the fix the message names
    call()
    np.testing.assert_allclose(acc.value, np.arange(8.0) + 1.0)


def test_written_value_that_does_not_fit_its_sharding_names_the_state():
    buf = State(jnp.ones(8), sharding=NamedSharding(_mesh(), P("x")), name="buf")

    def shrink(x):
        buf.value = jnp.concatenate([buf.value, x])[:6]
        return x

    with pytest.raises(
        ValueError,
        match=r"jit\(shrink\): State 'buf' \(the new value it writes\).*size 6, which is not divisible by the 8",
    ):
        jit(shrink)(jnp.ones(2))
    assert buf.value.shape == (8,)


def test_grad_with_respect_to_an_integer_state_names_it():
    count = ParamState(jnp.arange(3), name="count")

    def loss():
        return jnp.sum(count.value * 2.0)

    with pytest.raises(
        TypeError, match=r"grad\(loss\): grad_states includes ParamState 'count', whose value has dtype int32"
    ):
        grad(loss, grad_states=count)()


def test_grad_warns_once_about_states_the_loss_never_reads():
    w = ParamState(jnp.ones(2), name="w")
    stale = ParamState(jnp.ones(2), name="stale")

    def loss():
        return jnp.sum(w.value**2)

    g = grad(loss, grad_states=[w, stale])
    with pytest.warns(
        UserWarning, match=r"ParamState 'stale' in grad_states is never read by loss, so its gradient is zero"
    ):
        grads = g()
    np.testing.assert_allclose(grads[0], [2.0, 2.0])
    np.testing.assert_allclose(grads[1], [0.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g()  # once per traced signature, not per call


def test_grad_does_not_warn_when_every_state_is_read():
    w = ParamState(jnp.ones(2), name="w")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grads = grad(lambda: jnp.sum(w.value * 3.0), grad_states=[w])()
    np.testing.assert_allclose(grads[0], [3.0, 3.0])


def test_grad_names_unread_unnamed_states_by_their_entry_in_grad_states():
    # As module.states(ParamState) collects them: keys are paths in the module.
    old = StateDict({("weight",): ParamState(jnp.ones(3)), ("bias",): ParamState(jnp.ones(1))})
    a, b = ParamState(jnp.ones(2)), ParamState(jnp.ones(2))

    def loss():
        return jnp.sum(a.value)

    with pytest.warns(UserWarning, match=r"ParamState at path 'weight', ParamState at path 'bias' in grad_states are"):
        grad(loss, grad_states=old)()
    with pytest.warns(UserWarning, match=r"grad\(loss\): ParamState \['b'\] in grad_states is never read"):
        grad(loss, grad_states={"a": a, "b": b})()
    with pytest.warns(UserWarning, match=r"ParamState \[1\] in grad_states is never read"):
        grad(loss, grad_states=[a, b])()


@pytest.mark.parametrize(
    "collective",
    [
        lambda x: jax.lax.psum(x, "y"),
        lambda x: jax.lax.pmean(x, "y"),
        lambda x: jax.lax.ppermute(x, "y", [(0, 1)]),
        lambda x: jax.lax.all_gather(x, "y"),
        lambda x: x + jax.lax.axis_index("y"),
    ],
    ids=["psum", "pmean", "ppermute", "all_gather", "axis_index"],
)
@pytest.mark.parametrize("check_vma", [True, False])
def test_shard_map_collective_with_unknown_axis_name_says_which(collective, check_vma):
    total = State(jnp.zeros(()), name="total")

    def body(x):
        total.value = total.value + 1.0
        return collective(x)

    with pytest.raises(
        NameError, match=r"uses axis name 'y', which the mesh does not have; the mesh's axes are \('x',\)"
    ):
        shard_map(body, mesh=_mesh(), in_specs=P("x"), out_specs=P(), check_vma=check_vma)(jnp.ones(8))
    np.testing.assert_allclose(total.value, 0.0)


def test_shard_map_keeps_the_users_own_assertion():
    def body(x):
        assert x.shape == (3,), "per-shard shape"
        return x

    with pytest.raises(AssertionError, match="per-shard shape"):
        shard_map(body, mesh=_mesh(), in_specs=P("x"), out_specs=P("x"))(jnp.ones(8))


@pytest.mark.parametrize("bad", [0.5, "0", [0, 1.5], True])
def test_grad_argnums_that_are_not_ints_are_refused_by_name(bad):
    def loss(x):
        return jnp.sum(x**2)

    with pytest.raises(TypeError, match=r"grad\(loss\): argnums must be an int or a sequence of ints"):
        grad(loss, argnums=bad)
