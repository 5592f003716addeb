"""Bad input is reported by us, naming the argument or state, and leaves every State unchanged."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

import state_transform as st
from state_core import ParamState, State


def test_pmap2_with_no_mapped_argument_is_rejected_like_jax_pmap():
    with pytest.raises(ValueError, match=r"pmap2: needs at least one argument with a mapped axis: in_axes=None"):
        st.pmap2(lambda x: x * 2, in_axes=None, axis_size=4)
    with pytest.raises(ValueError, match=r"in_axes=\(None, None\) maps no argument"):
        st.pmap2(lambda x, y: x * y, in_axes=(None, None), axis_size=4)
    # A mapped state is a mapped input: allowed.
    s = State(jnp.arange(4.0), name="s")
    f = st.pmap2(lambda: s.value * 2, in_axes=None, state_in_axes={0: s}, state_out_axes={0: s})
    assert_allclose(f(), [0.0, 2.0, 4.0, 6.0])


def test_state_mapped_on_different_in_and_out_axes_is_rejected():
    buf = State(jnp.zeros((2, 3)), name="buf")

    def f(x):
        buf.value = buf.value + x
        return x

    g = st.vmap2(f, in_axes=None, state_in_axes={1: buf}, state_out_axes={0: buf})
    with pytest.raises(ValueError, match=r"'buf' is mapped on axis 1 by state_in_axes but on axis 0 by state_out_axes"):
        g(1.0)
    assert_allclose(buf.value, jnp.zeros((2, 3)))
    # Same axis on both sides is fine (negative axes are normalised).
    ok = st.vmap2(f, in_axes=None, state_in_axes={1: buf}, state_out_axes={-1: buf})
    ok(1.0)
    assert_allclose(buf.value, jnp.ones((2, 3)))


def test_vmap2_out_axes_out_of_range_names_out_axes():
    with pytest.raises(
        ValueError, match=r"out_axes=5 places the output \(per-lane shape \(\)\) on axis 5.*\[-1, 0\] in out_axes"
    ):
        st.vmap2(lambda x: x * 2, out_axes=5)(jnp.ones(3))
    with pytest.raises(ValueError, match=r"out_axes=\(0, 2\) places output\[1\]"):
        st.vmap2(lambda x: (x, x), out_axes=(0, 2))(jnp.ones(3))
    assert_allclose(st.vmap2(lambda x: jnp.stack([x, x]), out_axes=1)(jnp.arange(3.0)).shape, (2, 3))


def test_grad_has_aux_with_a_scalar_return_says_it_needs_a_pair():
    w = ParamState(jnp.ones(3), name="w")

    def loss():
        w.value = w.value * 5  # a write that must not survive the failed call
        return (w.value**2).sum()

    with pytest.raises(
        TypeError,
        match=(
            r"grad\(loss\): has_aux=True needs the function to return a \(value, aux\) pair, "
            r"but it returned a single array of shape \(\)"
        ),
    ):
        st.grad(loss, grad_states=w, has_aux=True)()
    assert_allclose(w.value, [1.0, 1.0, 1.0])


def test_shard_map_undeclared_replicated_state_clash_names_the_state_and_state_in_specs():
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    rep = State(jnp.ones(16), name="rep16")
    f = st.shard_map(lambda d: d + rep.value, mesh, in_specs=(P("x"),), out_specs=P("x"))
    with pytest.raises(TypeError, match="incompatible shapes") as info:
        f(jnp.arange(16.0))
    # JAX's error, followed by the replicated state and the fix.
    message = str(info.value)
    assert "State 'rep16' ((16,))" in message and "state_in_specs={state: P('x')}" in message
    assert_allclose(rep.value, jnp.ones(16))
    # Declaring it sharded like the data fixes it.
    g = st.shard_map(lambda d: d + rep.value, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={rep: P("x")})
    assert_allclose(g(jnp.arange(16.0)), jnp.arange(16.0) + 1)


@pytest.mark.parametrize("transform", [st.vmap2, st.jit], ids=["vmap2", "jit"])
def test_python_branch_on_a_boolean_state_names_the_state_and_suggests_cond(transform):
    flag = State(jnp.array(True), name="flag")
    count = State(jnp.zeros(()), name="count")

    def f(x):
        count.value = count.value + 1
        if flag.value:
            return x * 2
        return x

    with pytest.raises(
        TypeError,
        match=r"on the boolean value of State 'flag' inside a traced function.*jax\.lax\.cond / state_transform\.cond",
    ):
        transform(f)(jnp.ones(3))
    assert float(count.value) == 0.0

    # The documented alternative: branch inside the program.
    def g(x):
        return jax.lax.cond(flag.value, lambda: x * 2, lambda: x)

    assert_allclose(transform(g)(jnp.ones(3)), [2.0, 2.0, 2.0])
    flag.value = jnp.array(False)
    assert_allclose(transform(g)(jnp.ones(3)), [1.0, 1.0, 1.0])


def test_axis_conflicts_raise_batch_axis_error_which_is_a_value_error():
    import jax.numpy as jnp
    import pytest

    from state_core import BatchAxisError, ShortTermState
    from state_transform import vmap2

    s = ShortTermState(jnp.zeros(3), name="s")

    def bump(x):
        s.value = s.value + x

    f = vmap2(bump, unexpected_out_state_mapping="raise")
    with pytest.raises(BatchAxisError, match="'s' is written with a value that differs"):
        f(jnp.arange(3.0))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        vmap2(lambda a, b: a + b)(jnp.ones(2), jnp.ones(3))
    assert issubclass(BatchAxisError, ValueError)
