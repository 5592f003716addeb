"""Unit tests of the ``State`` family (state_core._state)."""

import inspect
import pickle
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core import (
    HiddenState,
    LongTermState,
    ParamState,
    ShortTermState,
    State,
    StatefulFunction,
    StateLeakError,
    StateTraceStack,
    check_not_state,
    strict_state_checks,
)
from state_core._context import CTX
from state_core._pretty import format_fields


# ----------------------------------------------------------------------------- family
def test_subclass_hierarchy():
    assert issubclass(ShortTermState, State)
    assert issubclass(LongTermState, State)
    assert issubclass(ParamState, LongTermState)
    assert issubclass(HiddenState, ShortTermState)
    assert not issubclass(ParamState, ShortTermState)
    assert not issubclass(HiddenState, LongTermState)
    for cls in (State, ShortTermState, LongTermState, ParamState, HiddenState):
        assert cls.__module__ == "state_core"
        assert getattr(state_core, cls.__name__) is cls


def test_name_tags_and_metadata():
    s = ParamState(jnp.zeros(2), name="w", tag="trainable", unit="mV", scale=2)
    assert s.name == "w"
    assert s.tags == frozenset({"trainable"})
    assert s.tag == frozenset({"trainable"})  # brainstate's `tag`: the set of tags
    assert s.metadata == {"unit": "mV", "scale": 2}
    assert s.strict is False

    multi = State(jnp.zeros(2), tag=["b", "a", "b"])
    assert multi.tags == frozenset({"a", "b"})
    assert multi.tag == frozenset({"a", "b"})
    assert multi.name is None and multi.metadata == {}

    plain = State(1.0)
    assert plain.tags == frozenset() and plain.tag == frozenset()

    plain.add_tag("x", "y")
    assert plain.tags == frozenset({"x", "y"})
    plain.name = "renamed"
    assert plain.name == "renamed"


def test_tag_accepts_generator_iterable():
    s = State(0.0, tag=(t for t in ("p", "q")))
    assert s.tags == frozenset({"p", "q"})


def test_name_must_be_str():
    with pytest.raises(TypeError, match=r"State name must be a str or None, got int\."):
        State(1.0, name=3)


def test_identity_equality_and_hash():
    a = State(jnp.ones(3))
    b = State(jnp.ones(3))
    assert a == a
    assert a != b
    assert a != b
    assert hash(a) == object.__hash__(a)
    d = {a: "a", b: "b"}
    assert len(d) == 2
    assert d[a] == "a" and d[b] == "b"
    assert len({a, b, a}) == 2


def test_value_read_and_write():
    s = ShortTermState(jnp.zeros(3), name="v")
    assert_allclose(s.value, np.zeros(3))
    s.value = s.value + 2.0
    assert_allclose(s.value, np.full(3, 2.0))
    assert s.value.dtype == jnp.float32


def test_state_holding_dict_pytree():
    s = State({"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}, name="layer")
    s.value = {"w": s.value["w"] * 3, "b": s.value["b"] + 1}
    assert_allclose(s.value["w"], np.full((2, 3), 3.0))
    assert_allclose(s.value["b"], np.ones(3))
    assert repr(s) == (
        "State(\n  name='layer',\n  value={'b': ShapedArray(float32[3]), 'w': ShapedArray(float32[2,3])}\n)"
    )


def test_structure_change_raises_value_error_naming_both_structures():
    s = State(jnp.zeros(2), name="u")
    with pytest.raises(ValueError) as info:
        s.value = {"a": jnp.ones(2)}
    msg = str(info.value)
    assert "State 'u'" in msg
    assert "({'a': *})" in msg
    assert "holds (*)" in msg
    assert_allclose(s.value, np.zeros(2))  # unchanged


def test_structure_change_tuple_vs_list_is_rejected():
    s = HiddenState((jnp.zeros(1), jnp.zeros(1)), name="pair")
    with pytest.raises(
        ValueError,
        match=re.escape("HiddenState 'pair': the new value has pytree structure ([*, *]) but the state holds ((*, *))"),
    ):
        s.value = [jnp.ones(1), jnp.ones(1)]


def test_structure_error_for_unnamed_state_describes_its_aval():
    s = ParamState(jnp.zeros((2, 4)))
    with pytest.raises(ValueError, match=re.escape("Cannot assign to ParamState holding ShapedArray(float32[2,4])")):
        s.value = (jnp.zeros((2, 4)),)


def test_shape_and_dtype_changes_allowed_by_default():
    s = State(jnp.zeros(3), name="buf")
    s.value = jnp.ones((2, 5), dtype=jnp.int32)
    assert s.value.shape == (2, 5)
    assert s.value.dtype == jnp.int32
    assert_allclose(s.value, np.ones((2, 5)))


def test_strict_context_manager_rejects_shape_change():
    s = State(jnp.zeros(2), name="u")
    with strict_state_checks():
        s.value = jnp.ones(2)  # same aval: fine
        with pytest.raises(
            ValueError,
            match=re.escape(
                "Strict state check failed for State 'u': the state holds ShapedArray(float32[2]) "
                "but the new value is ShapedArray(float32[3])."
            ),
        ):
            s.value = jnp.ones(3)
    assert_allclose(s.value, np.ones(2))
    assert CTX.strict == 0
    s.value = jnp.ones(3)  # outside strict mode again: allowed
    assert s.value.shape == (3,)


def test_strict_context_manager_rejects_dtype_change():
    s = State(jnp.zeros(2), name="u")
    with strict_state_checks(), pytest.raises(ValueError, match=r"float32\[2\].*int32\[2\]"):
        s.value = jnp.zeros(2, dtype=jnp.int32)


def test_strict_mode_is_reset_after_an_exception():
    with pytest.raises(KeyError), strict_state_checks():
        assert CTX.strict == 1
        raise KeyError("x")
    assert CTX.strict == 0


def test_strict_per_state_flag_shows_leaf_path_and_both_avals():
    s = State({"a": jnp.ones(2), "b": jnp.zeros((), jnp.int32)}, name="d", strict=True)
    assert s.strict is True
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Strict state check failed for State 'd'['b']: the state holds ShapedArray(int32[]) "
            "but the new value is ShapedArray(float32[])."
        ),
    ):
        s.value = {"a": jnp.ones(2), "b": jnp.zeros(())}
    s.value = {"a": jnp.full(2, 3.0), "b": jnp.ones((), jnp.int32)}
    assert_allclose(s.value["a"], [3.0, 3.0])
    # a non-strict state is unaffected by another state's flag
    other = State(jnp.zeros(2))
    other.value = jnp.zeros(5)
    assert other.value.shape == (5,)


def test_restore_value_does_not_record_and_skips_checks():
    s = State(jnp.zeros(2), name="s", strict=True)
    with StateTraceStack() as trace:
        s.restore_value(jnp.ones(4))
    assert len(trace) == 0
    assert trace.get_write_states() == []
    assert_allclose(s.value, np.ones(4))


def test_repr_exact():
    w = ParamState(jnp.ones((2, 4)))
    w.value = w.value * 2
    assert repr(w) == "ParamState(\n  value=ShapedArray(float32[2,4])\n)"


def test_repr_with_name_and_tags():
    assert repr(ParamState(jnp.ones((2, 4)), name="w", tag="x")) == (
        "ParamState(\n  name='w',\n  tag='x',\n  value=ShapedArray(float32[2,4])\n)"
    )
    assert repr(HiddenState(jnp.zeros(3, jnp.int32), tag=["b", "a"])) == (
        "HiddenState(\n  tag=['a', 'b'],\n  value=ShapedArray(int32[3])\n)"
    )


def test_format_fields_nested_indentation():
    assert format_fields("Empty", []) == "Empty()"
    inner = State(jnp.zeros(2))
    assert format_fields("Outer", [("inner", inner), ("k", "3")]) == (
        "Outer(\n  inner=State(\n    value=ShapedArray(float32[2])\n  ),\n  k=3\n)"
    )


def test_describe():
    assert ParamState(jnp.ones(2), name="weight").describe() == "ParamState 'weight'"
    assert State(jnp.ones(2)).describe() == "State holding ShapedArray(float32[2])"


def test_pickling_is_refused():
    s = ParamState(jnp.ones(2), name="w")
    expected = (
        "ParamState 'w' cannot be pickled; save `state.value` (or "
        "`collect_states(obj).to_values()`) instead, and use copy.deepcopy"
    )
    with pytest.raises(TypeError, match=re.escape(expected)):
        pickle.dumps(s)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps({"inside": [s]})


def test_assigning_a_state_as_value_is_type_error():
    a = State(jnp.ones(2), name="a")
    b = State(jnp.zeros(2), name="b")
    with pytest.raises(
        TypeError, match=re.escape("Cannot assign a State to State 'b'.value; assign `other.value` instead.")
    ):
        b.value = a
    assert_allclose(b.value, np.zeros(2))


def test_state_cannot_hold_a_state():
    a = State(jnp.ones(2), name="a")
    with pytest.raises(
        TypeError,
        match=r"(?s)A State cannot hold another State .*as the value of a new ParamState\); pass `other.value`",
    ):
        ParamState(a)


def test_check_not_state_reports_path():
    s = State(jnp.ones(2), name="x")
    check_not_state({"a": jnp.ones(2), "b": [1.0]}, "args")  # no State: no error
    with pytest.raises(TypeError, match=re.escape("args['b'][1] is a State (State 'x')")):
        check_not_state({"a": jnp.ones(2), "b": [1.0, s]}, "args")


# ----------------------------------------------------------------------------- leaks
def test_writing_tracer_into_top_level_state_inside_plain_jit_raises_leak_error():
    top = State(jnp.zeros(2), name="top")

    @jax.jit
    def f(x):
        top.value = x
        return x

    with pytest.raises(
        StateLeakError, match=r"State 'top' was assigned a JAX tracer outside any state-aware transformation"
    ):
        f(jnp.ones(2))
    assert_allclose(top.value, np.zeros(2))
    assert not isinstance(top.value, jax.core.Tracer)


def test_writing_tracer_inside_plain_vmap_raises_leak_error():
    top = State(jnp.zeros(()), name="top")

    def f(x):
        top.value = x
        return x

    with pytest.raises(StateLeakError, match=re.escape("plain jax.jit, jax.vmap or jax.grad")):
        jax.vmap(f)(jnp.ones(3))
    assert_allclose(top.value, 0.0)


def test_state_created_inside_plain_jit_may_hold_tracers():
    # A state born inside a (non state-aware) trace belongs to it: writes are allowed there.
    @jax.jit
    def f(x):
        local = State(x, name="local")
        local.value = local.value * 3
        return local.value

    assert_allclose(f(jnp.ones(2)), [3.0, 3.0])


def test_state_created_in_stateful_trace_comes_out_concrete():
    box = {}

    def make(x):
        box["state"] = State(x * 2, name="made")
        box["state"].value = box["state"].value + 1
        return x + 1

    out = StatefulFunction(make)(jnp.ones(2))
    assert_allclose(out, [2.0, 2.0])
    assert_allclose(box["state"].value, [3.0, 3.0])  # its final value, concrete


def test_state_created_in_plain_jit_and_used_after_reports_creation_site():
    box = {}

    def make(x):
        box["line"] = inspect.currentframe().f_lineno + 1  # the next line creates the state
        box["state"] = State(x * 2, name="leaky")
        return x + 1

    out = jax.jit(make)(jnp.ones(2))
    assert_allclose(out, [2.0, 2.0])
    leaked = box["state"]
    where = f"{__file__}:{box['line']}"
    with pytest.raises(StateLeakError) as info:
        _ = leaked.value
    msg = str(info.value)
    assert where in msg
    assert "State 'leaky' was created inside a traced function at" in msg
    assert "stale tracer" in msg
    with pytest.raises(StateLeakError, match=re.escape(where)):
        leaked.value = jnp.zeros(2)
    # restoring a concrete value makes the state usable again
    leaked.restore_value(jnp.full(2, 7.0))
    assert_allclose(leaked.value, [7.0, 7.0])
