"""brainstate-compatible State helpers, tags, filters and error classes."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core import (
    BatchAxisError,
    HiddenState,
    ParamState,
    ShortTermState,
    State,
    StateError,
    StateLeakError,
    StateTraceStack,
    check_state_value_tree,
    collect_states,
    maybe_state,
)
from state_core.compat import StatefulFunction
from state_core.filter import Any, Not, OfType, PathContains, WithTag, to_predicate


# ---------------------------------------------------------------- State helpers
def test_numel_counts_every_leaf():
    assert State({"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}).numel() == 9
    assert State(1.0).numel() == 1
    assert State((np.zeros((4, 5)), jnp.zeros(()))).numel() == 21


def test_value_call_maps_leaves_and_records_a_read():
    s = State({"a": jnp.arange(3.0), "b": jnp.ones(2)}, name="s")
    with StateTraceStack() as trace:
        out = s.value_call(lambda x: x * 2)
    assert_allclose(out["a"], [0.0, 2.0, 4.0])
    assert_allclose(out["b"], [2.0, 2.0])
    assert trace.get_read_states() == [s]


def test_copy_is_a_new_state_with_same_metadata():
    w = ParamState(jnp.arange(2.0), name="w", tag=("a", "b"), unit="mV")
    c = w.copy()
    assert type(c) is ParamState and c is not w and c != w
    assert c.name == "w" and c.tag == frozenset({"a", "b"}) and c.metadata == {"unit": "mV"}
    c.metadata["unit"] = "V"
    assert w.metadata == {"unit": "mV"}  # metadata dicts are not shared
    c.value = c.value + 10
    assert_allclose(w.value, [0.0, 1.0])
    assert_allclose(c.value, [10.0, 11.0])


def test_copy_inside_a_trace_is_local_to_it():
    w = ParamState(jnp.ones(2), name="w")
    with StateTraceStack() as trace:
        c = w.copy()
        c.value = c.value * 3  # a state created inside the block is not recorded there
    assert len(trace) == 0
    assert_allclose(c.value, [3.0, 3.0])


def test_replace_builds_a_new_state_and_may_change_structure():
    h = HiddenState(jnp.zeros(2), name="h", tag="fast")
    r = h.replace({"x": jnp.ones(3)})
    assert type(r) is HiddenState and r.name == "h" and r.tag == frozenset({"fast"})
    assert_allclose(r.value["x"], [1.0, 1.0, 1.0])
    assert_allclose(h.value, [0.0, 0.0])
    with pytest.raises(TypeError, match=re.escape("HiddenState 'h'.replace() expects a value, got State")):
        h.replace(State(1.0))


def test_copy_from_writes_the_other_value():
    a, b = State(jnp.zeros(2), name="a"), State(jnp.array([3.0, 4.0]), name="b")
    with StateTraceStack() as trace:
        a.copy_from(b)
    assert_allclose(a.value, [3.0, 4.0])
    assert trace.get_write_states() == [a] and trace.get_read_states() == [b]
    with pytest.raises(TypeError, match=re.escape("State 'a'.copy_from() expects a State, got float")):
        a.copy_from(1.0)
    with pytest.raises(ValueError, match="pytree structure"):
        a.copy_from(State((jnp.zeros(2), jnp.zeros(2))))
    assert_allclose(a.value, [3.0, 4.0])


def test_source_info_points_at_the_creating_line():
    s = State(0.0)
    line = s.source_info
    assert line.endswith(
        f"test_core_compat_state.py:{test_source_info_points_at_the_creating_line.__code__.co_firstlineno + 1}"
    )


def test_stack_level_reads_and_sets_the_level():
    outer = State(0.0)
    assert outer.stack_level == 0
    with StateTraceStack():
        with StateTraceStack():
            inner = State(0.0)
            assert inner.stack_level == 2
        assert inner.stack_level == 1  # released to the enclosing block
    inner.stack_level = 0
    assert inner.stack_level == 0


def test_hidden_state_varshape_and_num_state():
    h = HiddenState(jnp.zeros((4, 3)))
    assert h.varshape == (4, 3) and h.num_state == 1
    pair = HiddenState({"v": jnp.zeros(5), "u": jnp.ones(5)})
    assert pair.varshape == (5,) and pair.num_state == 2
    bad = HiddenState((jnp.zeros(2), jnp.zeros(3)), name="bad")
    with pytest.raises(
        ValueError, match=re.escape("HiddenState 'bad' has no single varshape: its leaves have shapes [(2,), (3,)]")
    ):
        _ = bad.varshape


def test_maybe_state():
    s = State(jnp.arange(2.0))
    assert_allclose(maybe_state(s), [0.0, 1.0])
    x = object()
    assert maybe_state(x) is x


def test_check_state_value_tree_rejects_structure_change():
    s = State(jnp.zeros(2), name="s")
    with check_state_value_tree():
        s.value = jnp.ones(2)
        with pytest.raises(ValueError, match="Cannot assign to State 's'"):
            s.value = {"a": jnp.ones(2)}
    assert_allclose(s.value, [1.0, 1.0])


# ---------------------------------------------------------------- tags
def test_tag_is_the_set_of_tags_and_can_be_assigned():
    s = State(0.0, tag="a")
    assert s.tag == frozenset({"a"}) == s.tags
    s.add_tag("b")
    assert s.tag == frozenset({"a", "b"})
    s.tag = "z"
    assert s.tags == frozenset({"z"})
    s.tag = None
    assert s.tag == frozenset()
    with pytest.raises(TypeError, match="State tags must be strings, got 3 of type int"):
        s.tag = ["ok", 3]
    assert s.tag == frozenset()


def test_with_tag_matches_any_of_a_states_tags():
    s = State(0.0, tag=("fast", "noisy"))
    assert WithTag("fast")((), s) and WithTag("noisy")((), s)
    assert not WithTag("slow")((), s)


def test_with_tag_on_brainstate_style_objects():
    class Single:
        tag = "fast"

    class Untagged:
        tag = None

    assert WithTag("fast")((), Single())
    assert not WithTag("fast")((), Untagged())


# ---------------------------------------------------------------- filters
class _EqNoHash:
    """A callable that defines __eq__ and so is unhashable."""

    def __init__(self, kind):
        self.kind = kind

    def __eq__(self, other):
        return isinstance(other, _EqNoHash) and other.kind == self.kind

    __hash__ = None

    def __call__(self, path, state):
        return isinstance(state, self.kind)


def test_unhashable_callables_hash_by_identity():
    pred = _EqNoHash(ParamState)
    for f in (to_predicate(pred), Any(pred, ShortTermState), Not(pred)):
        hash(f)
        assert f == f
    assert Any(pred) == Any(pred)
    assert Any(pred) != Any(_EqNoHash(ParamState))  # equal by __eq__ but a different object
    assert len({Not(pred), Not(pred)}) == 1
    assert Any(pred, ShortTermState)((), ParamState(0.0))
    assert Not(pred)((), State(0.0))


def test_of_type_matches_declared_type():
    class Ref:  # a state-like record naming the class it stands for
        type = ParamState

    class Other:
        type = "ParamState"  # not a class: ignored

    assert OfType(ParamState)((), Ref())
    assert OfType(State)((), Ref())  # subclass of the declared type
    assert not OfType(ShortTermState)((), Ref())
    assert not OfType(ParamState)((), Other())


def test_path_contains_with_jax_key_paths():
    DictKey, GetAttrKey, SequenceKey = (
        jax.tree_util.DictKey,
        jax.tree_util.GetAttrKey,
        jax.tree_util.SequenceKey,
    )
    path = (GetAttrKey("encoder"), DictKey("layers"), SequenceKey(2))
    s = State(0.0)
    assert PathContains("encoder")(path, s)
    assert PathContains("layers")(path, s)
    assert PathContains(2)(path, s)
    assert PathContains(DictKey("layers"))(("layers",), s)
    assert PathContains(GetAttrKey("encoder"))(path, s)
    assert not PathContains("decoder")(path, s)
    assert PathContains("encoder") == PathContains(GetAttrKey("encoder"))


def test_path_contains_on_tree_flatten_with_path():
    tree = {"enc": [State(1.0), State(2.0)], "dec": State(3.0)}
    leaves = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: isinstance(x, State))[0]
    picked = [leaf.value for path, leaf in leaves if PathContains("enc")(path, leaf)]
    assert picked == [1.0, 2.0]


# ---------------------------------------------------------------- errors
def test_error_hierarchy():
    assert issubclass(StateLeakError, StateError) and issubclass(StateLeakError, RuntimeError)
    assert issubclass(BatchAxisError, StateError) and issubclass(BatchAxisError, ValueError)
    for cls in (StateError, StateLeakError, BatchAxisError):
        assert cls.__module__ == "state_core" and getattr(state_core, cls.__name__) is cls


def test_state_leak_error_is_caught_as_state_error():
    s = State(jnp.zeros(2), name="leaky")

    @jax.jit
    def f(x):
        s.value = x  # a tracer written outside any state-aware transformation
        return x

    with pytest.raises(StateError, match="State 'leaky' was assigned a JAX tracer"):
        f(jnp.ones(2))
    assert_allclose(s.value, [0.0, 0.0])


def test_batch_axis_error_is_a_value_error():
    with pytest.raises(ValueError, match="axis 0 and 1"):
        raise BatchAxisError("state 'w' is mapped on axis 0 and 1")


def test_collect_states_filters_with_key_path_filters():
    class Net:
        def __init__(self):
            self.enc = ParamState(jnp.ones(1))
            self.dec = ParamState(jnp.zeros(1))

    assert list(collect_states(Net(), PathContains("enc"))) == [("enc",)]


def test_stateful_function_accepts_brainstate_options_from_compat():
    s = State(jnp.zeros(2))

    def f(x):
        s.value = s.value + x

    sf = StatefulFunction(f, return_only_write=True, ir_optimizations=("dce", "constant_fold"))
    sf(jnp.ones(2))
    assert_allclose(s.value, [1.0, 1.0])
    assert sf.return_only_write is True and sf.ir_optimizations == ("dce", "constant_fold")
    with pytest.raises(ValueError, match=re.escape("unknown ir_optimizations ['fuse']")):
        StatefulFunction(f, ir_optimizations=["fuse"])
    with pytest.raises(TypeError, match="return_only_write must be a bool, got str"):
        StatefulFunction(f, return_only_write="yes")
    with pytest.raises(TypeError, match="return_only_write"):  # the main class does not take it
        state_core.StatefulFunction(f, return_only_write=True)
