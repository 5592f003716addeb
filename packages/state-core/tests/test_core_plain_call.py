"""The steady call of a plain program (arrays in, no lock or placement) behaves as the general one.

Its shortcuts (a program found by its argument's aval object, states checked by
aval identity, results stored without the general write-back) must give the same
results, errors and state values as the general path, whatever happens between
calls.
"""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core._replay as replay_module
import state_core._signature as signature_module
import state_core._steady_call as steady_module
from state_core import State, StatefulFunction, StateLeakError, StateTraceStack
from state_core._context import OPEN_STACKS


def _accumulator(*states):
    traced = []

    def step(x):
        traced.append(1)
        total = x
        for s in states:
            s.value = s.value + x
            total = total + s.value
        return total

    return StatefulFunction(step), traced


def _steady(*states, x=None):
    """An accumulator over ``states`` called twice with ``x``: its next call with ``x`` is a steady one."""
    f, traced = _accumulator(*states)
    x = jnp.ones(2) if x is None else x
    f(x)
    f(x)
    return f, traced, x


def test_steady_calls_give_the_general_paths_results_without_its_checks(count_calls):
    a, b = State(jnp.zeros(3), name="a"), State(jnp.ones(3), name="b")
    f, traced, x = _steady(a, b, x=jnp.ones(3))
    writes = [count_calls(module, "write_state_values") for module in (replay_module, steady_module)]
    matches = count_calls(signature_module, "states_match")
    for _ in range(3):
        out = f(x)
    # a: 1..5, b: 2..6 after five calls; the output is x + a + b.
    assert_allclose(np.asarray(out), np.full(3, 1.0 + 5.0 + 6.0))
    assert_allclose(np.asarray(a.value), np.full(3, 5.0))
    assert_allclose(np.asarray(b.value), np.full(3, 6.0))
    assert traced == [1]
    assert matches == []
    assert writes == [[], []]  # two states, stored by the closure written out for them (all or nothing)
    (entry,) = f._cache.values()
    assert entry.runner.__name__ == "unrolled_steady_call"


def test_one_state_is_stored_directly_and_read_only_states_are_passed(count_calls):
    w = State(jnp.full(2, 3.0), name="w")  # read only
    acc = State(jnp.zeros(2), name="acc")

    def step(x):
        acc.value = acc.value + x * w.value
        return acc.value.sum()

    f = StatefulFunction(step)
    x = jnp.ones(2)
    f(x)
    writes = [count_calls(module, "write_state_values") for module in (replay_module, steady_module)]
    outs = [float(f(x)) for _ in range(3)]
    assert outs == [12.0, 18.0, 24.0]
    assert_allclose(np.asarray(acc.value), [12.0, 12.0])
    assert_allclose(np.asarray(w.value), [3.0, 3.0])
    assert writes == [[], []]


def test_a_program_that_writes_no_state_returns_its_output():
    w = State(jnp.arange(3.0), name="w")
    f = StatefulFunction(lambda x: (x * w.value).sum())
    x = jnp.ones(3)
    assert [float(f(x)) for _ in range(3)] == [3.0, 3.0, 3.0]
    assert_allclose(np.asarray(w.value), [0.0, 1.0, 2.0])


def test_a_program_that_only_reads_one_state_takes_the_short_path_and_hands_off_the_rest():
    w = State(jax.device_put(jnp.arange(3.0), jax.devices()[1]), name="w")
    traced = []

    def read(x):
        traced.append(1)
        return (x * w.value).sum()

    f = StatefulFunction(read)
    x = jax.device_put(jnp.ones(3), jax.devices()[1])
    assert [float(f(x)) for _ in range(3)] == [3.0, 3.0, 3.0]
    (entry,) = f._cache.values()
    assert entry.runner.__name__ == "unrolled_steady_call" and traced == [1]
    with pytest.raises(ValueError, match=r"State 'w' lies on device 1 but argument args\[0\] lies on device 2"):
        f(jax.device_put(jnp.ones(3), jax.devices()[2]))
    w.value = jax.device_put(jnp.full(1, 2.0), jax.devices()[1])  # resized: the general path traces again
    assert float(f(x)) == 6.0
    assert len(traced) == 2
    assert_allclose(np.asarray(w.value), [2.0])


def test_a_state_resized_between_steady_calls_is_traced_again():
    s = State(jnp.zeros(2), name="s")
    f, traced, _ = _steady(s)
    s.value = jnp.zeros(3)  # another shape: the cached program no longer fits
    assert_allclose(np.asarray(f(jnp.ones(3))), np.full(3, 2.0))
    assert_allclose(np.asarray(s.value), np.ones(3))
    assert len(traced) == 2


def test_a_plain_jax_jit_around_a_steady_call_refuses_to_leak_and_keeps_the_state():
    s = State(jnp.zeros(2), name="kept")
    f, _, x = _steady(s)
    with pytest.raises(StateLeakError, match="kept"):
        jax.jit(f)(x)  # the tracer has x's very aval object
    assert not isinstance(s.value, jax.core.Tracer)
    assert_allclose(np.asarray(s.value), [2.0, 2.0])
    f(x)
    assert_allclose(np.asarray(s.value), [3.0, 3.0])


def test_jax_debug_nans_applies_to_steady_calls_and_keeps_the_state():
    s = State(jnp.zeros(2), name="s")

    def step(x):
        s.value = s.value + jnp.log(x)
        return s.value

    f = StatefulFunction(step)
    good, bad = jnp.ones(2), -jnp.ones(2)
    f(good)
    f(good)
    assert_allclose(np.asarray(f(bad)), [np.nan, np.nan])  # the flag off: NaN comes out
    s.value = jnp.zeros(2)
    with jax.debug_nans(True), pytest.raises(FloatingPointError):
        f(bad)
    assert_allclose(np.asarray(s.value), [0.0, 0.0])


def test_an_argument_on_another_device_names_the_state_and_the_argument():
    v = State(jax.device_put(jnp.ones(3), jax.devices()[1]), name="v")
    f, _, _ = _steady(v, x=jax.device_put(jnp.ones(3), jax.devices()[1]))
    with pytest.raises(ValueError, match=r"State 'v' lies on device 1 but argument args\[0\] lies on device 2"):
        f(jax.device_put(jnp.ones(3), jax.devices()[2]))
    assert_allclose(np.asarray(v.value), [3.0, 3.0, 3.0])
    assert v.value.devices() == {jax.devices()[1]}


def test_a_cleared_cache_forgets_the_programs_found_by_aval_identity():
    s = State(jnp.zeros(2), name="s")
    f, traced, x = _steady(s)
    f.clear_cache()
    f(x)
    f(x)
    assert len(traced) == 2
    assert_allclose(np.asarray(s.value), np.full(2, 4.0))


def test_the_open_trace_count_follows_every_thread_and_failure():
    assert OPEN_STACKS.value == 0
    with StateTraceStack():
        with StateTraceStack():
            assert OPEN_STACKS.value == 2
        assert OPEN_STACKS.value == 1
    assert OPEN_STACKS.value == 0

    def bad(x):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        StatefulFunction(bad)(jnp.ones(2))
    assert OPEN_STACKS.value == 0

    # An exception unwinding blocks out of order closes the abandoned one too.
    outer, inner = StateTraceStack(), StateTraceStack()
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(RuntimeError, RuntimeError("unwinding"), None)
    assert OPEN_STACKS.value == 0


def test_steady_calls_run_while_another_thread_traces():
    s = State(jnp.zeros(2), name="s")
    f, _, x = _steady(s)
    inside, release = threading.Event(), threading.Event()

    def slow(y):
        inside.set()
        release.wait(30)
        return y * 2

    worker = threading.Thread(target=lambda: StatefulFunction(slow)(jnp.ones(2)))
    worker.start()
    try:
        assert inside.wait(30)
        assert OPEN_STACKS.value >= 1  # the other thread's trace is open
        outs = [f(x) for _ in range(3)]
    finally:
        release.set()
        worker.join(30)
    assert_allclose(np.asarray(outs[-1]), np.full(2, 6.0))
    assert_allclose(np.asarray(s.value), np.full(2, 5.0))
    assert OPEN_STACKS.value == 0


def test_more_states_than_the_written_out_closures_take_go_through_the_general_one(count_calls):
    states = [State(jnp.full(2, float(i)), name=f"s{i}") for i in range(steady_module.UNROLLED_UP_TO + 1)]
    f, traced, x = _steady(*states)
    writes = count_calls(steady_module, "write_state_values")
    traces_before = len(traced)
    out = f(x)
    (entry,) = f._cache.values()
    assert entry.runner.__name__ == "plain_run" and len(traced) == traces_before
    assert len(writes) == 1  # many states: the one all-or-nothing write-back
    # After three calls state i holds i + 3; the output is x + the sum of the states.
    assert_allclose(np.asarray(out), np.full(2, 1.0 + sum(i + 3.0 for i in range(len(states)))))
    assert_allclose(np.asarray(states[-1].value), np.full(2, len(states) + 2.0))


def test_written_but_unread_states_and_several_stores_give_the_general_paths_values():
    read, only_written, other = State(jnp.ones(2), name="read"), State(jnp.zeros(2)), State(jnp.zeros(2))

    def step(x):
        only_written.value = x * 2.0  # written, never read: a result without an input
        read.value = read.value + x
        other.value = read.value * 3.0
        return read.value.sum()

    f = StatefulFunction(step)
    x = jnp.ones(2)
    outs = [float(f(x)) for _ in range(3)]
    assert outs == [4.0, 6.0, 8.0]
    (entry,) = f._cache.values()
    assert entry.runner.__name__ == "unrolled_steady_call"
    assert_allclose(np.asarray(only_written.value), [2.0, 2.0])
    assert_allclose(np.asarray(read.value), [4.0, 4.0])
    assert_allclose(np.asarray(other.value), [12.0, 12.0])


def test_an_interrupt_between_two_stores_of_a_steady_call_still_stores_every_state(interrupted_state):
    a, b, c = State(jnp.zeros(2)), interrupted_state(jnp.zeros(2)), State(jnp.zeros(2))
    f, _, x = _steady(a, b, c)
    (entry,) = f._cache.values()
    assert entry.runner.__name__ == "unrolled_steady_call"
    b.armed = True
    with pytest.raises(KeyboardInterrupt):
        f(x)
    assert [float(s.value[0]) for s in (a, b, c)] == [3.0, 3.0, 3.0]


def test_errors_raised_in_a_steady_call_hide_its_frames_and_show_its_source_when_unfiltered():
    import traceback

    w = State(jax.device_put(jnp.ones(2), jax.devices()[1]), name="w")
    f = StatefulFunction(lambda x: (x * w.value).sum())
    x = jax.device_put(jnp.ones(2), jax.devices()[1])
    f(x)
    f(x)
    elsewhere = jax.device_put(jnp.ones(2), jax.devices()[2])
    with pytest.raises(ValueError, match="State 'w' lies on device 1") as filtered:
        f(elsewhere)
    assert "<steady call" not in "".join(traceback.format_tb(filtered.value.__traceback__))
    mode = jax.config.jax_traceback_filtering
    jax.config.update("jax_traceback_filtering", "off")
    try:
        with pytest.raises(ValueError, match="State 'w'") as unfiltered:
            f(elsewhere)
    finally:
        jax.config.update("jax_traceback_filtering", mode)
    shown = "".join(traceback.format_tb(unfiltered.value.__traceback__))
    # (The call's direct form served it: its argument has the aval object of the calls before.)
    assert "<steady call: direct, 1 args, 0 written, 1 read, 0 stored>" in shown
    assert "refused(err, [v0], leaves, who)" in shown  # the generated line that raised


def test_alternating_arguments_find_their_own_programs_through_the_latest_aval_pair():
    from state_core._cache import _NO_AVAL

    s = State(jnp.zeros(()), name="s")
    traced = []

    def step(x):
        traced.append(x.shape)
        s.value = s.value + x.sum()
        return x + 0.0  # made by the program: the next call's argument has the program's own aval object

    f = StatefulFunction(step)
    a, b = f(jnp.ones(2)), f(jnp.ones(3))
    for _ in range(3):
        a, b = f(a), f(b)
        assert f._cache._aval_hit[0] is b.aval
    assert traced == [(2,), (3,)]
    assert float(s.value) == 4 * 2.0 + 4 * 3.0
    f(jnp.ones(4))  # a new signature is stored: the remembered avals are forgotten
    assert f._cache._aval_hit is _NO_AVAL and not f._cache._by_aval
    assert_allclose(np.asarray(f(a)), [1.0, 1.0])
    assert traced == [(2,), (3,), (4,)]
    assert float(s.value) == 4 * 2.0 + 4 * 3.0 + 4.0 + 2.0


def test_the_sources_registered_for_tracebacks_stay_bounded():
    import linecache

    from state_core import _steady_call

    kept = {name: linecache.cache[name] for name in _steady_call._SHOWN if name in linecache.cache}
    names = [f"<steady call test {i}>" for i in range(_steady_call._SHOWN_AT_MOST + 50)]
    try:
        for name in names:
            _steady_call._show_source(name, "x = 1\n")
        assert names[0] not in linecache.cache and names[49] not in linecache.cache
        assert linecache.cache[names[-1]][2] == ["x = 1\n"]
        assert len(_steady_call._SHOWN) == _steady_call._SHOWN_AT_MOST
    finally:  # (the generated closures made before keep their sources)
        for name in names:
            linecache.cache.pop(name, None)
            _steady_call._SHOWN.pop(name, None)
        for name, entry in kept.items():
            linecache.cache[name] = entry
            _steady_call._SHOWN[name] = None
