"""The engine-author submodule, the public surface and the core replay path."""

import traceback

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core import ParamState, State, StatefulFunction, engine


def test_user_facing_all_has_no_engine_internals():
    internals = {
        "ArrayImpl",
        "Trace",
        "Program",
        "trace_function",
        "jaxpr_evaluator",
        "read_state_values",
        "write_state_values",
        "leaf_signature",
        "canonical_signature",
        "StateRules",
        "walk_graph",
        "format_fields",
    }
    assert not internals & set(state_core.__all__)
    assert internals <= set(engine.__all__)
    for name in engine.__all__:
        assert getattr(engine, name) is not None
    # Nothing the engine module holds is re-exported at the top for older engines.
    assert not hasattr(state_core, "ArrayImpl") and not hasattr(state_core, "TracedCall")


def test_make_jaxpr_retraces_when_a_read_state_changes_shape():
    s = State(jnp.zeros(2))
    f = StatefulFunction(lambda: s.value * 2)
    assert "f32[2]" in str(f.make_jaxpr())
    s.value = jnp.zeros(5)
    assert "f32[5]" in str(f.make_jaxpr())


def test_replay_splits_written_and_read_only_states():
    w, h = ParamState(jnp.full(2, 3.0)), State(jnp.zeros(2))

    def step(x):
        h.value = h.value + w.value * x

    f = StatefulFunction(step)
    call = f.trace(1.0)
    assert [call.in_states[i] for i in call.rw_index] == [h]
    assert [call.in_states[i] for i in call.ro_index] == [w]
    entry, _ = f._lookup((1.0,), {})
    assert entry.trace is call
    engine.replay(entry, [2.0], "step")
    assert_allclose(np.asarray(h.value), [6.0, 6.0])


def test_core_clear_caches_and_cache_size():
    traced = []
    f = StatefulFunction(lambda x: traced.append(1) or x + 1, cache_size=1)
    f(jnp.zeros(1))
    f(jnp.zeros(1))
    state_core.clear_caches()
    f(jnp.zeros(1))
    assert len(traced) == 2


def test_library_frames_are_hidden_from_user_errors():
    def buggy(x):
        raise ValueError("user bug")

    with pytest.raises(ValueError, match="user bug") as info:
        StatefulFunction(buggy)(1.0)
    files = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
    assert any(name.endswith("test_core_engine.py") for name in files)
    assert not [name for name in files if "/state_core/" in name], files


def test_states_match_compares_shape_dtype_and_weak_type():
    sigs = [engine.state_signature(jnp.zeros(2)), engine.state_signature({"a": jnp.ones(()), "b": 1.0})]
    assert engine.states_match([jnp.ones(2), {"a": jnp.zeros(()), "b": 2.0}], sigs)
    assert not engine.states_match([jnp.ones(3), {"a": jnp.zeros(()), "b": 2.0}], sigs)
    assert not engine.states_match([jnp.ones(2, jnp.int32), {"a": jnp.zeros(()), "b": 2.0}], sigs)
