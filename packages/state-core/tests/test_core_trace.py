"""Unit tests of StateTraceStack and catch_new_states (state_core._trace)."""

import threading

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import (
    NewStateCatcher,
    ParamState,
    State,
    StateTraceStack,
    catch_new_states,
)
from state_core._context import CTX


def _names(states):
    return [s.name for s in states]


def test_first_access_order_and_read_write_split():
    a = State(jnp.zeros(2), name="a")
    b = State(jnp.ones(2), name="b")
    c = State(jnp.full(2, 2.0), name="c")
    d = State(jnp.full(2, 3.0), name="d")
    with StateTraceStack("t") as trace:
        _ = c.value  # read-only
        b.value = b.value + a.value  # b read first, then a read, then b written
        d.value = jnp.zeros(2)  # write-only
        _ = a.value  # second access: order unchanged
    assert _names(trace.states) == ["c", "b", "a", "d"]
    assert _names(trace.get_read_states()) == ["c", "a"]
    assert _names(trace.get_write_states()) == ["b", "d"]
    assert trace.was_read(b) and trace.was_written(b)
    assert trace.was_read(a) and not trace.was_written(a)
    assert trace.was_written(d) and not trace.was_read(d)
    assert a in trace and d in trace
    assert State(0.0) not in trace
    assert len(trace) == 4
    assert repr(trace) == "<StateTraceStack 't': 4 states, 2 written>"
    assert repr(StateTraceStack()) == "<StateTraceStack: 0 states, 0 written>"
    assert_allclose(trace.get_write_state_values()[0], [1.0, 1.0])
    assert_allclose(trace.get_write_state_values()[1], [0.0, 0.0])
    assert [float(v[0]) for v in trace.get_read_state_values()] == [2.0, 0.0]


def test_original_values_and_restore():
    a = State(jnp.zeros(2), name="a")
    b = State(jnp.ones(2), name="b")
    with StateTraceStack() as trace:
        b.value = b.value * 5
        b.value = b.value + 1
        a.value = jnp.full(2, 9.0)
    assert_allclose(b.value, [6.0, 6.0])
    assert_allclose(trace.original_values[0], [1.0, 1.0])  # value at first access
    assert_allclose(trace.original_values[1], [0.0, 0.0])
    with StateTraceStack() as watcher:
        trace.restore_original_values()
    assert len(watcher) == 0  # restoring records nothing
    assert_allclose(b.value, [1.0, 1.0])
    assert_allclose(a.value, [0.0, 0.0])


class _LazyFailing(State):
    """A state whose value is made on first read, and cannot be (like a lazy key in a bad context)."""

    def __getattr__(self, name):
        if name == "_value":
            raise RuntimeError("the value cannot be made here")
        raise AttributeError(name)


def test_a_first_read_that_raises_leaves_the_record_consistent():
    a = State(jnp.zeros(2), name="a")
    lazy = _LazyFailing(0.0, name="lazy")
    del lazy.__dict__["_value"]
    with pytest.raises(RuntimeError, match="cannot be made here"), StateTraceStack() as trace:
        a.value = jnp.ones(2)
        lazy.value  # noqa: B018  (the read is the point)
    # The failed read recorded nothing, so restoring works and shows the real error above.
    assert trace.states == [a] and len(trace.original_values) == 1
    trace.restore_original_values()
    assert_allclose(a.value, [0.0, 0.0])


def test_stack_outside_context_records_nothing():
    a = State(jnp.zeros(2), name="a")
    trace = StateTraceStack()
    with trace:
        pass
    a.value = a.value + 1
    assert len(trace) == 0
    assert CTX.stacks == []


def test_nested_stacks_both_record():
    a = State(jnp.zeros(2), name="a")
    b = State(jnp.zeros(2), name="b")
    with StateTraceStack() as outer:
        _ = a.value
        with StateTraceStack() as inner:
            b.value = a.value + 1
        assert _names(inner.states) == ["a", "b"]  # right-hand side is evaluated first
    assert _names(outer.states) == ["a", "b"]
    assert _names(outer.get_write_states()) == ["b"]
    assert _names(inner.get_read_states()) == ["a"]


def test_state_created_inside_inner_stack_is_local_to_it():
    with StateTraceStack() as outer:
        with StateTraceStack() as inner:
            s = State(jnp.zeros(2), name="local")
            s.value = s.value + 1
            _ = s.value
        assert s not in inner
        _ = s.value  # now owned by `outer`'s level: still local, not recorded
        assert s not in outer
        with StateTraceStack() as later:
            s.value = s.value + 1
        assert s in later
        assert _names(later.get_write_states()) == ["local"]
        assert s not in outer
    assert len(outer) == 0 and len(inner) == 0
    # once every stack is closed, new stacks record it normally
    with StateTraceStack() as fresh:
        _ = s.value
    assert _names(fresh.get_read_states()) == ["local"]
    assert_allclose(s.value, [2.0, 2.0])


def test_state_created_before_stacks_is_recorded_on_all():
    s = State(jnp.zeros(()), name="s")
    with StateTraceStack() as s1, StateTraceStack() as s2, StateTraceStack() as s3:
        s.value = s.value + 1
    assert all(st.was_written(s) and st.was_read(s) for st in (s1, s2, s3))


def test_wrong_exit_order_raises():
    first, second = StateTraceStack(), StateTraceStack()
    first.__enter__()
    second.__enter__()
    with pytest.raises(RuntimeError, match="StateTraceStack blocks must be exited in the reverse order of entry"):
        first.__exit__(None, None, None)
    second.__exit__(None, None, None)
    first.__exit__(None, None, None)
    assert CTX.stacks == []
    with pytest.raises(RuntimeError, match="reverse order"):
        first.__exit__(None, None, None)  # not active any more


def test_exiting_out_of_order_while_an_error_unwinds_keeps_that_error_and_closes_both():
    first, second = StateTraceStack(), StateTraceStack()
    first.__enter__()
    second.__enter__()
    error = ValueError("the user's error")
    # The outer block is exited first while the error propagates: the error is not masked ...
    assert first.__exit__(ValueError, error, None) is None
    # ... and the block the error abandoned is closed with it, so the thread's context is clean.
    assert CTX.stacks == []
    assert second.__exit__(ValueError, error, None) is None  # its own exit, later, changes nothing
    assert CTX.stacks == []
    with StateTraceStack():
        assert len(CTX.stacks) == 1
    assert CTX.stacks == []


def test_entering_twice_raises():
    trace = StateTraceStack()
    with trace, pytest.raises(RuntimeError, match="cannot be entered twice"):
        trace.__enter__()
    assert CTX.stacks == []


def test_stack_pops_on_exception():
    s = State(jnp.zeros(()), name="s")
    with pytest.raises(ZeroDivisionError), StateTraceStack() as trace:
        s.value = s.value + 1
        _ = 1 / 0
    assert CTX.stacks == []
    assert trace.was_written(s)
    trace.restore_original_values()
    assert_allclose(s.value, 0.0)


def test_trace_stacks_are_thread_local():
    s = State(jnp.zeros(()), name="s")
    seen = {}

    def worker():
        seen["stacks"] = list(CTX.stacks)
        s.value = s.value + 1

    with StateTraceStack() as trace:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert seen["stacks"] == []
    assert len(trace) == 0
    assert_allclose(s.value, 1.0)


# ------------------------------------------------------------------- catch_new_states
def test_catch_new_states_without_tag():
    before = State(jnp.zeros(1))
    with catch_new_states() as caught:
        a = State(jnp.zeros(3), name="a")
        b = ParamState(jnp.ones(2), name="b", tag="keep")
    after = State(jnp.zeros(1))
    assert isinstance(caught, NewStateCatcher)
    assert caught.get_states() == [a, b]
    assert list(caught) == [a, b] and len(caught) == 2
    assert before not in caught.states and after not in caught.states
    assert a.tags == frozenset() and b.tags == frozenset({"keep"})
    values = caught.get_state_values()
    assert_allclose(values[0], np.zeros(3))
    assert_allclose(values[1], np.ones(2))
    assert CTX.catchers == []


def test_catch_new_states_with_tag_and_iterable_tags():
    with catch_new_states(tag="init") as caught:
        a = State(jnp.zeros(3))
    with catch_new_states(tag=("x", "y")) as caught2:
        b = State(jnp.zeros(3), tag="z")
    assert caught.states == [a] and a.tags == frozenset({"init"})
    assert caught2.states == [b] and b.tags == frozenset({"x", "y", "z"})


def test_nested_catchers():
    with catch_new_states(tag="outer") as outer:
        a = State(0.0, name="a")
        with catch_new_states(tag="inner") as inner:
            b = State(0.0, name="b")
        c = State(0.0, name="c")
    assert _names(outer.states) == ["a", "b", "c"]
    assert _names(inner.states) == ["b"]
    assert b.tags == frozenset({"outer", "inner"})
    assert a.tags == frozenset({"outer"}) and c.tags == frozenset({"outer"})


def test_catcher_is_removed_on_exception():
    with pytest.raises(ValueError, match="inside"), catch_new_states() as caught:
        State(0.0)
        raise ValueError("inside")
    assert CTX.catchers == []
    assert len(caught) == 1
    State(0.0)
    assert len(caught) == 1


def test_forget_created_states_takes_local_states_out_of_enclosing_traces():
    from state_core import StatefulFunction, StateLeakError
    from state_core.engine import forget_created_states

    made = {}

    def f(x):
        made["kept"] = State(x * 2, name="kept")
        made["local"] = State(x * 3, name="local")
        forget_created_states([made["local"]], "a test body")
        return x

    with catch_new_states() as caught:
        trace = StatefulFunction(f).trace(jnp.float32(1.0))
    # Only the state the function kept to itself is gone: no output of the program, not caught.
    assert [s.name for s in trace.created_states] == ["kept"]
    assert [s.name for s in caught] == ["kept"]
    with pytest.raises(StateLeakError, match=r"State 'local' was created .*\(local to a test body\)"):
        _ = made["local"].value
