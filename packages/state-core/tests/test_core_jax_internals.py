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
from state_core._jax_internals import current_trace, is_tracer, new_trace_input


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
    assert len(closed.jaxpr.invars) == 2
    assert [v.aval.shape for v in closed.jaxpr.invars] == [(3,), (3,)]
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
    avals = [v.aval for v in closed.jaxpr.invars]
    assert [(a.shape, a.dtype) for a in avals] == [((), jnp.int32), ((), jnp.int32), ((2, 2), jnp.float32)]
    assert avals[2].weak_type is True
    assert len(closed.jaxpr.outvars) == 2


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
