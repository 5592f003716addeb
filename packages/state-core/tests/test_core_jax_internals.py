"""Pins the JAX internals state-core relies on (state_core._jax_internals).

If a JAX upgrade breaks adding inputs to a running trace, these tests fail here first.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import State, StatefulFunction
from state_core._jax_internals import (
    current_trace,
    debug_flags,
    debugging_nans_or_infs,
    each_on_one_device,
    eager_and_not_debugging,
    in_compile_time_eval,
    is_tracer,
    new_trace_input,
)
from state_core.engine import open_jaxpr


def test_new_trace_input_adds_a_jaxpr_input_mid_trace():
    seen = {}

    def fn(x):
        trace = current_trace()
        extra = new_trace_input(trace, jax.core.ShapedArray((3,), jnp.float32))
        seen["is_tracer"] = is_tracer(extra)
        seen["aval"] = (extra.aval.shape, extra.aval.dtype)
        return x * 2 + extra

    closed = jax.make_jaxpr(fn)(jnp.ones(3))
    assert seen == {"is_tracer": True, "aval": ((3,), jnp.float32)}
    assert len(open_jaxpr(closed).invars) == 2
    assert [v.aval.shape for v in open_jaxpr(closed).invars] == [(3,), (3,)]
    # the new input is a real input of the program, appended after the declared one
    run = jax.extend.core.jaxpr_as_fun(closed)
    (out,) = run(jnp.ones(3), jnp.arange(3.0))
    assert_allclose(out, [2.0, 3.0, 4.0])


def test_new_trace_input_with_several_inputs_and_dtypes():
    def fn(x):
        trace = current_trace()
        a = new_trace_input(trace, jax.core.ShapedArray((), jnp.int32))
        b = new_trace_input(trace, jax.core.ShapedArray((2, 2), jnp.float32, weak_type=True))
        return x + a, b.sum()

    closed = jax.make_jaxpr(fn)(jnp.zeros((), jnp.int32))
    avals = [v.aval for v in open_jaxpr(closed).invars]
    assert [(a.shape, a.dtype) for a in avals] == [((), jnp.int32), ((), jnp.int32), ((2, 2), jnp.float32)]
    assert avals[2].weak_type is True
    assert len(open_jaxpr(closed).outvars) == 2


def test_current_trace_eagerly_cannot_take_new_inputs():
    trace = current_trace()
    assert not hasattr(trace, "new_arg")
    with pytest.raises(RuntimeError, match=r"does not let state-core add inputs to a running trace \(JAX "):
        new_trace_input(trace, jax.core.ShapedArray((), jnp.float32))


def test_current_trace_inside_jaxpr_trace_is_jaxpr_builder():
    kinds = []

    def fn(x):
        kinds.append(hasattr(current_trace(), "new_arg"))
        return x

    jax.make_jaxpr(fn)(1.0)
    jax.jit(lambda x: fn(x))(1.0)  # a distinct callable: jit must trace it afresh
    assert kinds == [True, True]


def test_is_tracer():
    assert is_tracer(jnp.ones(2)) is False
    assert is_tracer(np.ones(2)) is False
    assert is_tracer(1.0) is False
    assert is_tracer(State(1.0)) is False
    flags = []

    @jax.jit
    def f(x):
        flags.append(is_tracer(x))
        return x

    f(jnp.ones(2))
    jax.grad(lambda x: flags.append(is_tracer(x)) or x)(1.0)
    jax.vmap(lambda x: flags.append(is_tracer(x)) or x)(jnp.ones(2))
    assert flags == [True, True, True]


def test_tracing_a_stateful_function_emits_no_jax_deprecation_warning():
    """Upgrade guard: warnings about internals we use become errors in later JAX versions."""
    s = State(jnp.ones(2), name="s")

    def fn(x):
        s.value = s.value + x
        return s.value

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        out = StatefulFunction(fn)(jnp.ones(2))
    assert_allclose(out, [2.0, 2.0])


def test_array_impl_is_the_class_of_concrete_arrays():
    # The hot paths compare `type(x) is ArrayImpl`; if JAX moved the class, they would
    # silently take the slow path, so pin it here.
    import jax.numpy as jnp

    from state_core._jax_internals import ArrayImpl

    assert type(jnp.zeros(())) is ArrayImpl
    assert type(jnp.arange(3) + 1) is ArrayImpl


def test_is_batched_tells_lane_varying_values_inside_vmap():
    from state_core._jax_internals import is_batched

    seen = []

    def f(x, c):
        seen.append((is_batched(x), is_batched(c), is_batched(x * 0 + 1), is_batched(jnp.zeros(2))))
        return x

    jax.vmap(f, in_axes=(0, None))(jnp.arange(3.0), 1.0)
    assert seen == [(True, False, True, False)]
    assert not is_batched(jnp.ones(2))


def test_every_jax_internal_the_module_reads_resolves_on_this_jax():
    """Each internal below has a slower (or blind) public fallback; on a supported JAX none may be used.

    The suite runs at both ends of the supported range, so this pins every
    ``jax._src`` lookup of ``_jax_internals`` at JAX 0.10.0 and at the newest JAX.
    """
    from state_core import _jax_internals as ji

    assert ji._source_info_util is not None
    assert ji._EvalTrace is not None and isinstance(ji.EVAL_TRACE, ji._EvalTrace)
    assert type(ji.TRACE_STATE).__module__.startswith("jax")  # JAX's own record, not the public stand-in
    assert ji._eager_constant_folding is not None
    assert ji._BatchTracer is not None
    assert ji._traceback_util is not None
    assert ji.ArrayImpl.__module__.startswith("jax")
    assert type(ji._debug_nans).__module__.startswith("jax")  # JAX's own flags, not the public stand-ins
    assert type(ji._debug_infs).__module__.startswith("jax")
    assert ji._get_concrete_mesh is not None
    assert ji.PRNGKeyArray is type(jax.random.key(0))
    assert ji.KEY_TOKEN is not None
    assert ji.missing_jax_features() == []


def test_jaxpr_helpers_unpack_and_rebuild_a_closed_jaxpr():
    from jax.extend.core import jaxpr_as_fun

    from state_core.engine import close_jaxpr, is_jaxpr, jaxpr_consts

    c = jnp.arange(3.0)
    closed = jax.make_jaxpr(lambda x: jnp.sin(x) + c)(c)
    body = open_jaxpr(closed)
    assert is_jaxpr(closed) and is_jaxpr(body) and not is_jaxpr(c)
    assert [eqn.primitive.name for eqn in body.eqns] == ["sin", "add"]
    assert len(body.invars) == 1  # the constant is not an input
    (const,) = jaxpr_consts(closed)
    assert_allclose(const, [0.0, 1.0, 2.0])
    assert len(body.constvars) == 1
    (out,) = jaxpr_as_fun(close_jaxpr(body, [c + 10]))(c)
    assert_allclose(out, np.sin(np.arange(3.0)) + np.arange(3.0) + 10, rtol=1e-6)
    # An open jaxpr has no constants; opening it again changes nothing.
    assert open_jaxpr(body) is body
    assert jaxpr_consts(jax.make_jaxpr(lambda x: x * 2)(1.0)) == []


def test_jaxpr_helpers_reorder_inputs_as_tracing_does():
    from jax.extend.core import jaxpr_as_fun

    from state_core.engine import close_jaxpr, jaxpr_consts

    c = jnp.float32(5.0)
    closed = jax.make_jaxpr(lambda a, b: a - b + c)(1.0, 2.0)
    body = open_jaxpr(closed)
    debug_info = body.debug_info._replace(arg_names=None)  # as tracing does: the names no longer line up
    swapped = body.replace(invars=[body.invars[1], body.invars[0]], debug_info=debug_info)
    (out,) = jaxpr_as_fun(close_jaxpr(swapped, jaxpr_consts(closed)))(1.0, 2.0)  # now b=1, a=2
    assert_allclose(out, 2.0 - 1.0 + 5.0)


def test_each_on_one_device_refuses_an_array_spread_over_devices():
    assert each_on_one_device([jnp.zeros(2)], [1.0, {"a": jnp.ones(3)}]) is True
    mesh = jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    spread = jax.device_put(jnp.zeros(4), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x")))
    assert each_on_one_device([jnp.zeros(2)], [{"a": spread}]) is False


def test_debug_flags_reads_both_flags_now():
    assert debug_flags() == (False, False)
    with jax.debug_infs(True):
        assert debug_flags() == (False, True)
    with jax.debug_nans(True):
        assert debug_flags() == (True, False)


def test_debugging_nans_or_infs_is_on_with_either_flag():
    assert debugging_nans_or_infs() is False
    with jax.debug_nans(True):
        assert debugging_nans_or_infs() is True
    with jax.debug_infs(True):
        assert debugging_nans_or_infs() is True


def test_eager_and_not_debugging_is_off_under_a_flag_or_a_trace():
    assert eager_and_not_debugging() is True
    with jax.debug_infs(True):
        assert eager_and_not_debugging() is False
    seen = []
    jax.make_jaxpr(lambda x: seen.append(eager_and_not_debugging()) or x)(1.0)
    assert seen == [False]


def test_in_compile_time_eval_is_on_inside_ensure_compile_time_eval():
    assert in_compile_time_eval() is False
    with jax.ensure_compile_time_eval():
        assert in_compile_time_eval() is True
    assert in_compile_time_eval() is False
