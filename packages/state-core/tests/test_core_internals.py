"""Pins state-core's engine-internal helpers (the private modules' building blocks).

These were the examples of the helpers' docstrings; the helpers are not public, so
what they do is pinned here instead of in their documentation.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

from state_core import State, StatefulFunction, clear_caches, donation
from state_core._cache import FunctionRecord, register_cache_owner
from state_core._call_signature import normalize_argnames, normalize_argnums
from state_core._device_mismatch import device_mismatch_message, labelled_inputs, placements_in
from state_core._donation import donation_allowed, donation_switched_on, exclusive_array_counts
from state_core._graph import snapshot_graph, walk_graph
from state_core._invalid_values import refuse_invalid_values
from state_core._program import CacheEntry
from state_core._registry import shared_record
from state_core._replay import (
    STATES_CHANGED,
    may_fail_at_run_time,
    program_runner,
    replay,
    runs_cheaply_op_by_op,
    spans_devices,
)
from state_core._sharding import sharding_annotation
from state_core._signature import positional_key, reference_avals, state_signature, trace_context, values_unchanged
from state_core._switch import Switch
from state_core._tracing import abstract_value, trace_function
from state_core.engine import Program, graph_states, pure_program

# ---- _call_signature ----


def test_normalize_argnums_gives_a_tuple_of_ints_and_names_the_option_when_refused():
    assert normalize_argnums(1, "static_argnums") == (1,)
    assert normalize_argnums([0, 2], "static_argnums") == (0, 2)
    assert normalize_argnums(None, "static_argnums") == ()
    with pytest.raises(TypeError, match=r"^donate_argnums must be an int or a sequence of ints, got 'x'\.$"):
        normalize_argnums("x", "donate_argnums")


def test_normalize_argnames_gives_a_tuple_of_str():
    assert normalize_argnames("k") == ("k",)
    assert normalize_argnames(None) == ()
    assert normalize_argnames(["a", "b"]) == ("a", "b")


# ---- _cache and _registry ----


def test_function_record_starts_empty_with_the_given_cache_size():
    record = FunctionRecord(8)
    assert record.cache.maxsize == 8
    assert record.learned == {}
    assert len(record.cache) == 0


def test_function_record_clear_cache_forgets_what_the_strategy_learned():
    record = FunctionRecord()
    record.learned["axis"] = 0
    record.cache.put("k", CacheEntry(StatefulFunction(lambda x: x).trace(1.0), None, None, None, 0))
    record.clear_cache()
    assert record.learned == {}
    assert len(record.cache) == 0


def test_register_cache_owner_lets_clear_caches_reach_the_owner():
    record = FunctionRecord()
    record.learned["axis"] = 0
    register_cache_owner(record)
    clear_caches()
    assert record.learned == {}


def test_shared_record_gives_one_record_per_identity():
    first = shared_record(("test_core_internals", 1))
    assert shared_record(("test_core_internals", 1)) is first
    assert shared_record(("test_core_internals", 2)) is not first
    assert isinstance(first, FunctionRecord)


# ---- _device_mismatch ----


def test_placements_in_finds_a_device_put_of_the_program():
    device = jax.devices()[0]
    jaxpr = jax.make_jaxpr(lambda x: jax.device_put(x * 2, device))(jnp.ones(2))
    assert placements_in(jaxpr, "step") == [("a jax.device_put in step", device)]
    assert placements_in(jax.make_jaxpr(lambda x: x * 2)(jnp.ones(2)), "step") == []


def test_device_mismatch_message_is_none_when_the_inputs_agree():
    s = State(jnp.zeros(2), name="v")
    inputs = labelled_inputs([s], [s.value], [jnp.ones(2)], ["args[0]"])
    assert inputs == [("State 'v'", s.value), ("argument args[0]", inputs[1][1])]
    assert device_mismatch_message("jit(f)", inputs) is None


# ---- _donation ----


def test_exclusive_array_counts_are_the_counts_of_arrays_held_by_their_states_only():
    s = State(jnp.zeros(3))
    rw = [s._value]
    counts = list(map(sys.getrefcount, rw))
    assert counts == exclusive_array_counts(1)
    extra = s._value  # one more reference: the array is no longer held by its State alone
    counts = list(map(sys.getrefcount, rw))
    assert counts != exclusive_array_counts(1)
    del extra
    assert exclusive_array_counts(3) == exclusive_array_counts(1) * 3


def test_donation_switched_on_follows_the_donation_block():
    assert donation_switched_on() is True
    with donation(False):
        assert donation_switched_on() is False
    assert donation_switched_on() is True


def test_donation_allowed_needs_donation_on_no_transformation_and_no_debug_flags():
    assert donation_allowed() is True
    with donation(False):
        assert donation_allowed() is False
    with jax.debug_nans(True):
        assert donation_allowed() is False
    seen = []
    jax.make_jaxpr(lambda x: seen.append(donation_allowed()) or x)(1.0)
    assert seen == [False]


# ---- _graph ----


def test_walk_graph_yields_paths_depth_first_and_post_order_on_request():
    tree = {"a": [1, 2], "b": {"c": 3}}
    assert [p for p, _ in walk_graph(tree) if p] == [("a",), ("a", 0), ("a", 1), ("b",), ("b", "c")]
    assert [p for p, _ in walk_graph(tree, post_order=True) if p][:3] == [("a", 0), ("a", 1), ("a",)]


def test_snapshot_graph_sees_a_used_state_replaced():
    net = {"w": State(jnp.ones(2))}
    snap = snapshot_graph(graph_states(net), [net["w"]])
    assert snap.unchanged(graph_states(net)) is True
    net["w"] = State(jnp.ones(2))  # re-created: the trace used the old one
    assert snap.unchanged(graph_states(net)) is False


def test_graph_snapshot_unchanged_sees_a_state_at_a_new_path():
    net = {"w": State(1.0)}
    snap = snapshot_graph(graph_states(net), [net["w"]])
    assert snap.unchanged(graph_states(net)) is True
    net["b"] = State(0.0)  # a State at a new path
    assert snap.unchanged(graph_states(net)) is False


# ---- _invalid_values ----


def test_refuse_invalid_values_names_the_state_holding_a_nan_while_debug_nans_is_on():
    s = State(jnp.ones(2), name="s")
    new = jnp.array([0.0, jnp.nan])
    assert refuse_invalid_values("step", jnp.ones(()), [s], [jnp.zeros(2)]) is None
    assert refuse_invalid_values("step", jnp.ones(()), [s], [new]) is None  # the flag is off
    with jax.debug_nans(True):
        refuse_invalid_values("step", jnp.ones(()), [s], [jnp.zeros(2)])
        with pytest.raises(
            FloatingPointError, match=r"^step: the new value of State 's' holds nan while jax_debug_nans is on; "
        ):
            refuse_invalid_values("step", jnp.ones(()), [s], [new])


# ---- _program and _replay ----


def _adder():
    total = State(jnp.zeros(()))

    def add(x):
        total.value = total.value + x
        return total.value * 2

    trace = StatefulFunction(add).trace(jnp.ones(()))
    program = Program(run=jax.jit(pure_program(trace)), write_back=trace.write_states)
    return total, trace, program


def test_cache_entry_keeps_its_trace_and_starts_without_env_reads():
    total, trace, program = _adder()
    entry = CacheEntry(trace, None, program, None, 0)
    assert entry.trace is trace and entry.program is program
    assert entry.trace.write_states[0] is total
    assert entry.env_reads is None and entry.runner is None and entry.graph_generation == 0


def test_cache_entry_block_follows_its_program():
    _, trace, program = _adder()
    assert CacheEntry(trace, None, program, None, 0).block is False
    blocking = Program(run=program.run, write_back=program.write_back, block=True)
    assert CacheEntry(trace, None, blocking, None, 0).block is True
    assert CacheEntry(trace, None, None, None, 0).block is False  # only traced so far


def test_program_runner_runs_the_program_and_writes_the_states_back():
    total, trace, program = _adder()
    run = program_runner(CacheEntry(trace, None, program, None, 0))
    out = run([jnp.array(3.0)], "add")
    assert_allclose(np.asarray(out), 6.0)
    assert_allclose(np.asarray(total.value), 3.0)


def test_replay_runs_nothing_once_a_state_no_longer_matches_the_trace():
    total, trace, program = _adder()
    entry = CacheEntry(trace, None, program, None, 0)
    assert_allclose(np.asarray(replay(entry, [jnp.array(3.0)], "add")), 6.0)
    assert_allclose(np.asarray(total.value), 3.0)
    total.value = jnp.zeros(3)  # no longer the traced shape
    assert replay(entry, [jnp.array(1.0)], "add") is STATES_CHANGED
    assert_allclose(np.asarray(total.value), np.zeros(3))
    assert repr(STATES_CHANGED) == "<states changed>"


def test_may_fail_at_run_time_sees_callbacks_into_python():
    assert may_fail_at_run_time(jax.make_jaxpr(lambda x: x + 1)(1.0).jaxpr) is False

    def noisy(x):
        jax.debug.callback(lambda v: None, x)
        return x + 1

    assert may_fail_at_run_time(jax.make_jaxpr(noisy)(1.0).jaxpr) is True


def test_runs_cheaply_op_by_op_refuses_branches_and_loops():
    assert runs_cheaply_op_by_op(jax.make_jaxpr(lambda x: x * 2 + 1)(1.0).jaxpr) is True
    branch = jax.make_jaxpr(lambda x: jax.lax.cond(x > 0, lambda: x, lambda: -x))(1.0)
    assert runs_cheaply_op_by_op(branch.jaxpr) is False


def test_spans_devices_sees_a_placement_in_a_sub_jaxpr():
    assert spans_devices(jax.make_jaxpr(lambda x: x + 1)(1.0).jaxpr) is False
    device = jax.devices()[-1]
    branch = jax.make_jaxpr(lambda x: jax.lax.cond(x > 0, lambda: jax.device_put(x, device), lambda: -x))(1.0)
    assert spans_devices(branch.jaxpr) is True


# ---- _sharding ----


def test_sharding_annotation_reads_the_sharding_metadata():
    assert sharding_annotation(State(0.0, sharding=P("x"))) == P("x")
    assert sharding_annotation(State(0.0)) is None


# ---- _signature ----


def test_state_signature_of_an_array_is_shape_dtype_and_weak_type():
    assert state_signature(jnp.zeros(2)) == ((2,), jnp.dtype("float32"), False)
    assert state_signature({"a": jnp.zeros(2)}) == (((2,), jnp.dtype("float32"), False),)


def test_values_unchanged_compares_avals_by_identity_first():
    v = [jnp.zeros(2)]
    sigs = [state_signature(v[0])]
    ref = reference_avals(v)
    assert values_unchanged(v, sigs, ref) is True
    assert values_unchanged([jnp.ones(2)], sigs, ref) is True
    assert values_unchanged([jnp.ones(3)], sigs, ref) is False
    assert values_unchanged([jnp.ones(3)], sigs, None) is False


def test_reference_avals_is_none_for_pytree_values():
    ref = reference_avals([jnp.zeros(2)])
    assert ref is not None and len(ref) == 1
    assert reference_avals([{"a": jnp.zeros(2)}]) is None


def test_positional_key_is_the_avals_triples():
    assert positional_key((jnp.zeros(2),)) == (((2,), jnp.dtype("float32"), False),)
    assert positional_key((jnp.zeros(2), jnp.zeros((), jnp.int32))) == (
        ((2,), jnp.dtype("float32"), False),
        ((), jnp.dtype("int32"), False),
    )


def test_trace_context_is_none_at_the_top_level_only():
    assert trace_context() is None
    seen = []
    StatefulFunction(lambda x: StatefulFunction(lambda y: seen.append(trace_context()) or y)(x)).trace(1.0)
    assert len(seen) == 1 and seen[0] is not None


# ---- _switch ----


def test_switch_block_overrides_the_default_and_restores_it():
    verbose = Switch(False, "verbose")
    assert verbose.on() is False
    with verbose.block(True):
        assert verbose.on() is True
    assert verbose.on() is False
    verbose.set(True)
    assert verbose.on() is True
    with pytest.raises(TypeError, match=r"^set_verbose: enabled must be a bool, got int\.$"):
        verbose.set(1)


# ---- _tracing ----


def test_abstract_value_is_shape_and_dtype():
    assert abstract_value(jnp.zeros(2)) == jax.core.ShapedArray((2,), jnp.float32)
    assert abstract_value(1.0) == jax.core.ShapedArray((), jnp.float32, weak_type=True)


def test_trace_function_records_the_states_read_and_written():
    s = State(jnp.zeros(2), name="s")
    r = State(jnp.ones(2), name="r")

    def f(x):
        s.value = s.value + x * r.value

    _, treedef = jax.tree.flatten(((1.0,), {}))
    t = trace_function(f, "f", None, [abstract_value(1.0)], lambda flat: jax.tree.unflatten(treedef, flat), treedef, 1)
    assert [st.name for st in t.in_states] == ["s", "r"]
    assert [st.name for st in t.out_states] == ["s"]
