"""brainstate-compatible StateTraceStack methods and catch_new_states options."""

import re

import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import HiddenState, ParamState, State, StateTraceStack, catch_new_states
from state_core.filter import OfType


def _traced():
    a = ParamState(jnp.array([1.0, 2.0]), name="a")
    b = State(jnp.array([10.0]), name="b")
    c = HiddenState(jnp.zeros(1), name="c")
    with StateTraceStack() as trace:
        b.value = b.value + a.value.sum()
        _ = c.value
    return trace, a, b, c


def test_been_writen_and_original_values():
    trace, a, b, c = _traced()
    assert trace.states == [b, a, c]
    assert trace.been_writen == [True, False, False]
    assert_allclose(trace.original_state_values[0], [10.0])
    assert_allclose(b.value, [13.0])


def test_get_state_values_forms():
    trace, _a, _b, _c = _traced()
    all_values = trace.get_state_values()
    assert len(all_values) == 3
    assert_allclose(all_values[0], [13.0])
    writes, reads = trace.get_state_values(separate=True)
    assert len(writes) == 1 and len(reads) == 2
    assert_allclose(writes[0], [13.0])
    assert_allclose(reads[0], [1.0, 2.0])
    writes, reads = trace.get_state_values(separate=True, replace=True)
    assert writes[1] is None and writes[2] is None and reads[0] is None
    assert_allclose(reads[2], [0.0])


def test_recovery_original_values():
    trace, a, b, _c = _traced()
    trace.recovery_original_values()
    assert_allclose(b.value, [10.0])
    assert_allclose(a.value, [1.0, 2.0])


def test_state_subset_by_type_and_filter():
    trace, a, b, c = _traced()
    assert trace.state_subset(ParamState) == [a]
    assert trace.state_subset(State) == [b, a, c]
    assert trace.state_subset(OfType(HiddenState)) == [c]
    assert trace.state_subset("nothing-tagged") == []


def test_assign_state_vals_writes_written_and_restores_read():
    trace, a, b, c = _traced()
    with StateTraceStack() as outer:
        trace.assign_state_vals([jnp.array([0.5]), jnp.array([7.0, 8.0]), jnp.array([9.0])])
    assert_allclose(b.value, [0.5])
    assert_allclose(a.value, [7.0, 8.0])
    assert_allclose(c.value, [9.0])
    assert outer.get_write_states() == [b]  # only the written state is a recorded write
    with pytest.raises(ValueError, match=re.escape("the trace recorded 3 state(s) but 2 value(s) were given")):
        trace.assign_state_vals([1.0, 2.0])
    assert_allclose(b.value, [0.5])


def test_merge_and_add():
    x, y, z = State(1.0, name="x"), State(2.0, name="y"), State(3.0, name="z")
    with StateTraceStack() as t1:
        _ = x.value
        y.value = 20.0
    with StateTraceStack() as t2:
        x.value = 10.0
        _ = z.value
    merged = t1 + t2
    assert merged is not t1 and merged is not t2
    assert [s.name for s in merged.states] == ["x", "y", "z"]
    assert merged.been_writen == [True, True, False]
    assert merged.original_state_values == (1.0, 2.0, 3.0)  # from the trace that saw it first
    assert [s.name for s in t1.states] == ["x", "y"] and t1.been_writen == [False, True]
    assert t1.merge(t2) is t1 and t1.been_writen == [True, True, False]
    merged.recovery_original_values()
    assert (x.value, y.value, z.value) == (1.0, 2.0, 3.0)
    with pytest.raises(TypeError, match="merge expects StateTraceStack objects, got list"):
        t1.merge([])


def test_catch_new_states_state_tag_get_by_tag_and_indexing():
    with catch_new_states(state_tag="new") as caught:
        a = State(jnp.zeros(1), tag="fast")
        b = ParamState(jnp.ones(1))
    assert caught[0] is a and caught[1] is b and caught[-1] is b
    assert caught[0:2] == [a, b]
    assert caught.get_by_tag("new") == [a, b]
    assert caught.get_by_tag("fast") == [a]
    assert caught.get_by_tag("absent") == []
    assert b.tag == frozenset({"new"})


def test_catch_new_states_exclude():
    with catch_new_states(tag="init", state_to_exclude=ParamState) as caught:
        p = ParamState(0.0)
        h = HiddenState(0.0)
    assert caught.get_states() == [h]
    assert p.tag == frozenset() and h.tag == frozenset({"init"})


def test_catch_new_states_tag_and_state_tag_conflict():
    with pytest.raises(TypeError, match="give the tag as `tag` or as `state_tag`, not both"):
        catch_new_states(tag="a", state_tag="b")


def test_assign_state_vals_bad_structure_changes_nothing():
    trace, a, b, _c = _traced()
    with pytest.raises(ValueError, match=re.escape("the value for HiddenState 'c' has pytree structure")):
        trace.assign_state_vals([jnp.array([0.5]), jnp.array([7.0, 8.0]), (1.0, 2.0)])
    assert_allclose(b.value, [13.0])
    assert_allclose(a.value, [1.0, 2.0])


def test_read_and_write_states_with_replaced_slots():
    trace, a, b, c = _traced()
    assert trace.get_read_states(replace_writen=True) == [None, a, c]
    assert trace.get_write_states(replace_read=True) == [b, None, None]
    values = trace.get_read_state_values(replace_writen=True)
    assert values[0] is None
    assert_allclose(values[1], [1.0, 2.0])
    writes = trace.get_write_state_values(replace_read=True)
    assert_allclose(writes[0], [13.0])
    assert writes[1:] == [None, None]
