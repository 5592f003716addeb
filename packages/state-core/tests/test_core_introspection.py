"""StatefulFunction introspection under brainstate's names, and make_jaxpr."""

import re

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import ParamState, State, StatefulFunction, StateTraceStack, make_jaxpr
from state_core.engine import open_jaxpr


def _model():
    w = ParamState(jnp.array([1.0, 2.0]), name="w")
    h = State(jnp.zeros(2), name="h")
    calls = []

    def step(x):
        calls.append(1)
        h.value = h.value * 0.5 + w.value * x
        return {"sum": h.value.sum(), "x": x}

    return w, h, step, calls


def test_get_jaxpr_accepts_call_arguments_and_traces_once():
    _w, h, step, calls = _model()
    f = StatefulFunction(step)
    x = jnp.ones(2)
    jaxpr = f.get_jaxpr(x)
    assert len(calls) == 1
    assert [str(v.aval) for v in open_jaxpr(jaxpr).invars] == ["float32[2]"] * 3
    assert len(open_jaxpr(jaxpr).outvars) == 3  # sum, x, new h
    assert f.get_jaxpr(x) is jaxpr and len(calls) == 1
    assert_allclose(h.value, [0.0, 0.0])  # inspection does not run the program
    f(x)
    assert len(calls) == 1
    assert_allclose(h.value, [1.0, 2.0])


def test_compile_if_miss_false_raises_for_a_new_signature():
    _w, _h, step, calls = _model()
    f = StatefulFunction(step, name="step")
    with pytest.raises(ValueError, match="step has no traced program for this cache key"):
        f.get_jaxpr(jnp.ones(2), compile_if_miss=False)
    assert calls == []
    f(jnp.ones(2))
    assert f.get_jaxpr(jnp.zeros(2), compile_if_miss=False) is not None
    assert len(calls) == 1


def test_no_arguments_means_latest_trace():
    _w, _h, step, _calls = _model()
    f = StatefulFunction(step, name="step")
    with pytest.raises(ValueError, match="step has not been traced yet"):
        f.get_jaxpr()
    f(jnp.ones(2))
    assert f.get_jaxpr() is f.get_jaxpr(jnp.ones(2))


def test_out_treedef_and_shapes_by_args_and_by_cache():
    _w, _h, step, _calls = _model()
    f = StatefulFunction(step)
    x = jnp.ones(2)
    treedef = f.get_out_treedef(x)
    assert treedef == jax.tree.structure({"sum": 0, "x": 0})
    key = f.get_arg_cache_key(x)
    assert f.get_out_treedef_by_cache(key) == treedef
    shapes = f.get_out_shapes_by_cache(key)
    assert shapes["sum"].shape == () and shapes["x"].shape == (2,)
    assert shapes["x"].dtype == jnp.float32


def test_states_by_cache():
    w, h, step, _calls = _model()
    f = StatefulFunction(step)
    key = f.get_arg_cache_key(jnp.ones(2))
    f(jnp.ones(2))
    assert f.get_states_by_cache(key) == (h, w)
    assert f.get_read_states_by_cache(key) == (w,)
    assert f.get_write_states_by_cache(key) == (h,)
    assert f.get_jaxpr_by_cache(key) is f.get_jaxpr(jnp.ones(2))


def test_state_trace_flags_and_recovery():
    w, h, step, _calls = _model()
    f = StatefulFunction(step)
    trace = f.get_state_trace(jnp.ones(2))
    assert isinstance(trace, StateTraceStack)
    assert trace.states == [h, w] and trace.been_writen == [True, False]
    f(jnp.ones(2))
    assert_allclose(h.value, [1.0, 2.0])
    trace.recovery_original_values()  # original = values when the trace record was made
    assert_allclose(h.value, [0.0, 0.0])
    key = f.get_arg_cache_key(jnp.ones(2))
    assert f.get_state_trace_by_cache(key).get_write_states() == [h]


def test_cache_stats_count_signatures_and_states():
    _w, _h, step, _calls = _model()
    f = StatefulFunction(step)
    assert f.get_cache_stats()["size"] == 0
    f(jnp.ones(2))
    f(jnp.ones(2, jnp.int32))
    stats = f.get_cache_stats()
    assert stats["size"] == 2 and stats["states"] == 2
    f.clear_cache()
    assert f.get_cache_stats()["size"] == 0


def test_validate_states_reports_changed_state():
    w, _h, step, _calls = _model()
    f = StatefulFunction(step, name="step")
    x = jnp.ones(2)
    f(x)
    key = f.get_arg_cache_key(x)
    assert f.validate_states(key) is True
    assert f.validate_all_states() == {key: True}
    w.value = jnp.ones(3)  # the read state changed shape
    message = "step: the states read by this traced signature changed since it was traced: ParamState 'w'"
    with pytest.raises(ValueError, match=re.escape(message)):
        f.validate_states(key)
    assert f.validate_all_states() == {key: False}


def test_jaxpr_call_auto_matches_compiled_call():
    _w, h, step, _calls = _model()
    f = StatefulFunction(step)
    out_auto = f.jaxpr_call_auto(jnp.array([2.0, 3.0]))
    h_auto = h.value
    h.value = jnp.zeros(2)
    out = f(jnp.array([2.0, 3.0]))
    assert_allclose(out_auto["sum"], out["sum"])
    assert_allclose(h_auto, h.value)
    assert_allclose(h.value, [2.0, 6.0])


def test_debug_call_runs_python_eagerly_and_restores_on_error():
    seen = []
    s = State(jnp.zeros(2), name="s")

    def f(x, fail=False):
        s.value = s.value + x
        seen.append(type(s.value))  # a concrete array, not a tracer
        if fail:
            raise RuntimeError("boom")
        return s.value.sum()

    sf = StatefulFunction(f, static_argnames="fail")
    assert float(sf.debug_call(jnp.ones(2))) == 2.0
    assert not isinstance(seen[0], jax.core.Tracer) and seen[0] is type(jnp.ones(1))
    assert_allclose(s.value, [1.0, 1.0])
    with pytest.raises(RuntimeError, match="boom"):
        sf.debug_call(jnp.ones(2), fail=True)
    assert_allclose(s.value, [1.0, 1.0])


def test_make_jaxpr_returns_jaxpr_and_states_and_retraces():
    s = State(jnp.zeros(3), name="s")
    r = ParamState(jnp.ones(3), name="r")

    def f(x):
        s.value = s.value + r.value * x
        return x * 2

    maker = make_jaxpr(f)
    jaxpr, states = maker(1.0)
    assert states == (s, r)
    assert [str(v.aval) for v in open_jaxpr(jaxpr).invars] == ["float32[3]", "float32[3]", "~float32[]"]
    r.value = jnp.ones(5)
    s.value = jnp.zeros(5)
    jaxpr2, _ = maker(1.0)  # traced afresh: sees the new shapes
    assert [str(v.aval) for v in open_jaxpr(jaxpr2).invars] == ["float32[5]", "float32[5]", "~float32[]"]
    _jaxpr3, states3, shapes = make_jaxpr(f, return_shape=True)(jnp.ones(5, jnp.int32))
    assert shapes.shape == (5,) and shapes.dtype == jnp.int32 and states3 == (s, r)
    assert_allclose(s.value, jnp.zeros(5))  # nothing ran


def test_make_jaxpr_names_the_traced_function():
    def my_step(x):
        return x * 2

    maker = make_jaxpr(my_step)
    assert maker.__name__ == "make_jaxpr(my_step)"
    assert maker.__qualname__ == "make_jaxpr(test_make_jaxpr_names_the_traced_function.<locals>.my_step)"


def test_make_jaxpr_static_arguments():
    s = State(jnp.zeros(2))

    def f(x, n):
        for _ in range(n):
            s.value = s.value + x

    jaxpr, _states = make_jaxpr(f, static_argnums=1)(1.0, 3)
    assert [e.primitive.name for e in open_jaxpr(jaxpr).eqns].count("add") == 3


def test_get_arg_cache_key_traces_on_a_miss_only_when_asked():
    w = State(jnp.array([2.0]), name="w")
    calls = []

    def f(x):
        calls.append(1)
        return jnp.log(w.value) + x

    sf = StatefulFunction(f)
    key = sf.get_arg_cache_key(jnp.array([1.0]))
    with pytest.raises(ValueError, match="no traced program for this cache key"):
        sf.get_jaxpr_by_cache(key)
    assert calls == []
    assert sf.get_arg_cache_key(jnp.array([1.0]), compile_if_miss=True) == key
    assert str(open_jaxpr(sf.get_jaxpr_by_cache(key)).eqns[0].primitive) == "log"
    assert sf.get_arg_cache_key(jnp.array([3.0]), compile_if_miss=True) == key
    assert calls == [1]  # traced once; the second call found the program
    assert_allclose(w.value, [2.0])
