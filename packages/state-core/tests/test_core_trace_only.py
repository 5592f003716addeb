"""Looking at a trace compiles nothing: ``trace``, ``make_jaxpr`` and ``jaxpr_call`` stop at the trace step.

The program of a signature that was only traced is built at the first call
that runs it, and that call does not trace the function again.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from state_core import State, StatefulFunction
from state_core.engine import Program, Strategy


def _counted(state):
    calls = {"traces": 0}

    def step(x):
        calls["traces"] += 1
        state.value = state.value + x
        return state.value * 2

    return step, calls


def _compiles(monkeypatch):
    """Count the programs the strategy builds (``Strategy.compile`` calls)."""
    built = []
    original = Strategy.compile

    def compile_and_count(self, trace, info, name):
        built.append(trace)
        return original(self, trace, info, name)

    monkeypatch.setattr(Strategy, "compile", compile_and_count)
    return built


@pytest.mark.parametrize("look", ["trace", "make_jaxpr", "get_states", "jaxpr_call"])
def test_looking_at_a_trace_builds_no_program(monkeypatch, look):
    built = _compiles(monkeypatch)
    s = State(jnp.zeros(3), name="s")
    step, calls = _counted(s)
    f = StatefulFunction(step, cache_size=4)
    x = jnp.ones(3)
    if look == "jaxpr_call":
        written, out = f.jaxpr_call([jnp.full(3, 5.0)], x)
        np.testing.assert_allclose(written[0], np.full(3, 6.0))
        np.testing.assert_allclose(out, np.full(3, 12.0))
    else:
        getattr(f, look)(x)
    assert calls["traces"] == 1
    assert built == []
    np.testing.assert_allclose(s.value, np.zeros(3))  # nothing ran


def test_the_first_run_after_a_trace_compiles_without_tracing_again(monkeypatch):
    built = _compiles(monkeypatch)
    s = State(jnp.zeros(3), name="s")
    step, calls = _counted(s)
    f = StatefulFunction(step, cache_size=4)
    x = jnp.ones(3)
    trace = f.trace(x)
    out = f(x)
    np.testing.assert_allclose(out, np.full(3, 2.0))
    np.testing.assert_allclose(s.value, np.ones(3))
    out = f(x)
    np.testing.assert_allclose(out, np.full(3, 4.0))
    np.testing.assert_allclose(s.value, np.full(3, 2.0))
    assert calls["traces"] == 1
    assert built == [trace]  # one program, for the trace made by `trace`


def test_a_traced_signature_whose_state_changed_shape_is_traced_again_when_called():
    s = State(jnp.zeros(3), name="s")
    step, calls = _counted(s)
    f = StatefulFunction(step, cache_size=4)
    f.trace(1.0)
    s.value = jnp.zeros(2)
    np.testing.assert_allclose(f(1.0), np.full(2, 2.0))
    np.testing.assert_allclose(s.value, np.ones(2))
    assert calls["traces"] == 2


def test_a_strategy_names_the_order_of_its_donating_form_in_the_program_fields():
    s = State(jnp.zeros(3), name="s")

    def step(x):
        s.value = s.value + x

    f = StatefulFunction(step, cache_size=4)
    trace = f.trace(jnp.ones(3))
    from state_core._donation import set_donation_min_bytes

    previous = set_donation_min_bytes(0)
    try:
        fields = f.strategy.donating(jax.jit, lambda rw, ro, x: (None, [rw[0] + x]), trace)
    finally:
        set_donation_min_bytes(previous)
    assert sorted(fields) == ["donating", "donating_new_values_first"]
    assert fields["donating_new_values_first"] is True
    program = Program(run=jax.jit(lambda rw, ro, x: (None, [rw[0] + x])), write_back=trace.write_states, **fields)
    new_values, out = program.donating([jnp.zeros(3)], [], jnp.ones(3))
    np.testing.assert_allclose(new_values[0], np.ones(3))
    assert out is None
