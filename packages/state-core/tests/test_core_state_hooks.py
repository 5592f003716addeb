"""State hooks: per-state and every-state callbacks on init, read, write and restore."""

import copy
import gc
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core import (
    HookCancellationError,
    ParamState,
    State,
    StatefulFunction,
    clear_state_hooks,
    has_state_hooks,
    list_state_hooks,
    register_state_hook,
    unregister_state_hook,
)
from state_core.graph import treefy_merge, treefy_split


@pytest.fixture(autouse=True)
def _no_global_hooks():
    clear_state_hooks()
    yield
    clear_state_hooks()


def test_hooks_run_every_state_first_then_by_priority_then_in_registration_order():
    s = State(jnp.zeros(2))
    log = []
    s.register_hook("read", lambda ctx: log.append("own-0a"))
    s.register_hook("read", lambda ctx: log.append("own-9"), priority=9)
    s.register_hook("read", lambda ctx: log.append("own-0b"))
    register_state_hook("read", lambda ctx: log.append("global-0"))
    register_state_hook("read", lambda ctx: log.append("global-5"), priority=5)
    _ = s.value
    assert log == ["global-5", "global-0", "own-9", "own-0a", "own-0b"]
    assert [h.priority for h in s.list_hooks("read")] == [9, 0, 0]


def test_write_before_chains_replacements_and_write_after_sees_the_written_value():
    s = State(jnp.zeros(2), name="v")
    seen = []

    def double(ctx):
        base = ctx.value if ctx.transformed_value is None else ctx.transformed_value
        ctx.transformed_value = base * 2

    def plus_ten(ctx):
        ctx.transformed_value = ctx.transformed_value + 10

    s.register_hook("write_before", plus_ten, priority=1)
    s.register_hook("write_before", double, priority=2)
    s.register_hook("write_after", lambda ctx: seen.append((ctx.old_value.tolist(), ctx.value.tolist())))
    s.value = jnp.array([1.0, 2.0])
    assert_allclose(s.value, [12.0, 14.0])
    assert seen == [([0.0, 0.0], [12.0, 14.0])]


def test_a_cancelled_write_raises_and_changes_nothing():
    s = State(jnp.ones(2), name="rate")
    after = []

    def non_negative(ctx):
        if (ctx.value < 0).any():
            ctx.cancel = True
            ctx.cancel_reason = "rates are non-negative"

    s.register_hook("write_before", non_negative)
    s.register_hook("write_after", lambda ctx: after.append(1))
    with pytest.raises(HookCancellationError, match=r"State 'rate': a write_before hook cancelled the write: rates"):
        s.value = jnp.array([1.0, -1.0])
    assert issubclass(HookCancellationError, ValueError)
    assert_allclose(s.value, [1.0, 1.0])
    assert after == []


def test_an_error_in_a_hook_propagates_and_a_refused_write_changes_nothing():
    s = State(jnp.ones(2))

    def broken(ctx):
        raise RuntimeError("hook bug")

    s.register_hook("write_before", broken)
    with pytest.raises(RuntimeError, match="hook bug"):
        s.value = jnp.zeros(2)
    assert_allclose(s.value, [1.0, 1.0])


def test_restore_and_init_hooks():
    log = []
    handle = register_state_hook("init", lambda ctx: log.append(("init", ctx.init_metadata, hasattr(ctx, "old_value"))))
    s = State(jnp.zeros(2), name="w", tag="net", unit_hint="mV")
    handle.remove()
    metadata = {"name": "w", "_name": "w", "tag": frozenset({"net"}), "strict": False, "unit_hint": "mV"}
    assert log == [("init", metadata, False)]
    s.register_hook("restore", lambda ctx: log.append((ctx.operation, ctx.old_value.tolist(), ctx.value.tolist())))
    s.restore_value(jnp.ones(2))
    assert log[-1] == ("restore", [0.0, 0.0], [1.0, 1.0])
    contexts = []
    s.register_hook("read", contexts.append)
    _ = s.value
    (ctx,) = contexts
    assert ctx.operation == "read" and ctx.state is s and ctx.state_name == "w" and ctx.metadata == {}
    assert ctx.timestamp > 0 and not hasattr(ctx, "transformed_value") and not hasattr(ctx, "old_value")


def test_handles_disable_enable_remove_and_temporary_hooks():
    s = State(jnp.zeros(1))
    reads = []
    h = s.register_hook("read", lambda ctx: reads.append(1), name="count")
    _ = s.value
    h.disable()
    _ = s.value
    h.enable()
    _ = s.value
    assert len(reads) == 2
    assert repr(h) == "HookHandle('read', name='count', priority=0, enabled)"
    assert s.unregister_hook(h) and not s.unregister_hook(h)
    assert h.is_removed() and not h.is_enabled()
    with pytest.raises(KeyError), s.temporary_hook("read", lambda ctx: reads.append("t")):
        _ = s.value
        raise KeyError("body failed")
    _ = s.value
    assert reads == [1, 1, "t"]
    assert not s.has_hooks()


def test_listing_and_clearing_by_type():
    s = State(jnp.zeros(1))
    s.register_hook("read", print, name="r")
    s.register_hook("write_after", print, name="w")
    g = register_state_hook("restore", print, name="g")
    assert [h.name for h in s.list_hooks()] == ["r", "w"]
    assert s.has_hooks("read") and not s.has_hooks("restore")
    s.clear_hooks("read")
    assert [h.name for h in s.list_hooks()] == ["w"]
    assert list_state_hooks() == [g] and has_state_hooks("restore") and not has_state_hooks("read")
    assert unregister_state_hook(g) and not has_state_hooks()


def test_bad_registrations_name_the_argument():
    s = State(jnp.zeros(1))
    with pytest.raises(ValueError, match=r"register_hook: hook_type must be one of .* got 'reed'"):
        s.register_hook("reed", print)
    with pytest.raises(ValueError, match=r"could never run .*register_state_hook\('init'"):
        s.register_hook("init", print)
    with pytest.raises(TypeError, match=r"register_state_hook: callback must be callable"):
        register_state_hook("read", 3)
    with pytest.raises(TypeError, match=r"priority must be an int"):
        s.register_hook("read", print, priority=True)
    with pytest.raises(TypeError, match=r"unregister_state_hook: expected a HookHandle, got str"):
        unregister_state_hook("h")
    assert not s.has_hooks() and not has_state_hooks()


def test_hooks_run_while_tracing_and_a_write_before_clip_is_part_of_the_program():
    s = State(jnp.zeros(2))
    calls = []
    s.register_hook("write_before", lambda ctx: setattr(ctx, "transformed_value", jnp.clip(ctx.value, -1.0, 1.0)))
    s.register_hook("write_after", lambda ctx: calls.append(isinstance(ctx.value, jax.core.Tracer)))

    def step(x):
        s.value = s.value + x
        return s.value

    f = StatefulFunction(step)
    f(jnp.full(2, 5.0))
    f(jnp.full(2, -0.5))
    assert calls == [True]  # traced once; the replay runs no hook
    assert_allclose(s.value, [0.5, 0.5])  # clip(0 + 5) = 1, then 1 - 0.5


def test_copies_and_templates_start_without_hooks():
    s = ParamState(jnp.zeros(2))
    s.register_hook("read", print)
    assert not s.copy().has_hooks() and not copy.deepcopy(s).has_hooks()
    assert s.has_hooks()

    class Net:
        def __init__(self):
            self.w = s

    graphdef, values = treefy_split(Net())
    assert not treefy_merge(graphdef, values).w.has_hooks()


def test_hooks_of_a_collected_state_stop_counting_and_the_switch_turns_off():
    from state_core import _state_hooks

    gc.collect()
    before = _state_hooks._COUNT[0]
    s = State(jnp.zeros(1))
    s.register_hook("read", print)
    s.register_hook("write_after", print)
    h = register_state_hook("read", print)
    assert _state_hooks._COUNT[0] == before + 3 and state_core._state._HOOKS_ON
    h.remove()
    del s
    gc.collect()
    assert _state_hooks._COUNT[0] == before
    assert (before > 0) == state_core._state._HOOKS_ON


def test_concurrent_reads_and_registrations_count_exactly():
    s = State(jnp.zeros(1))
    lock = threading.Lock()
    count = [0]

    def counted(ctx):
        with lock:
            count[0] += 1

    s.register_hook("read", counted)

    def reader():
        for _ in range(200):
            _ = s.value

    def churn():
        for _ in range(100):
            register_state_hook("write_after", print).remove()

    threads = [threading.Thread(target=reader) for _ in range(4)] + [threading.Thread(target=churn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count[0] == 800
    assert s.has_hooks("read") and not has_state_hooks()
    np.testing.assert_array_equal(s.value, [0.0])


def test_a_hook_error_while_tracing_leaves_every_state_as_it_was():
    a, b = State(jnp.ones(2), name="a"), State(jnp.zeros(2), name="b")

    def refuse(ctx):
        raise ValueError("no writes to b while tracing")

    b.register_hook("write_before", refuse)

    def step(x):
        a.value = a.value + x
        b.value = a.value * 2
        return b.value

    with pytest.raises(ValueError, match="no writes to b"):
        StatefulFunction(step)(jnp.ones(2))
    assert_allclose(a.value, [1.0, 1.0])
    assert_allclose(b.value, [0.0, 0.0])
    assert not isinstance(a.value, jax.core.Tracer)
