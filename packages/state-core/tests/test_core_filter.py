"""Unit tests of state filters (state_core.filter)."""

import jax.numpy as jnp
import pytest

from state_core import HiddenState, LongTermState, ParamState, ShortTermState, State
from state_core import filter as F
from state_core.filter import (
    All,
    Any,
    Everything,
    Filter,
    Not,
    Nothing,
    OfType,
    PathContains,
    WithTag,
    to_predicate,
)

P = ParamState(jnp.zeros(1), name="p")
H = HiddenState(jnp.zeros(1), name="h", tag="fast")
L = LongTermState(jnp.zeros(1), name="l", tag=("fast", "slow"))
S = State(jnp.zeros(1), name="s")


def _select(pred, items):
    return [s.name for path, s in items if pred(path, s)]


ITEMS = [(("enc", "w"), P), (("enc", "h"), H), (("dec", 0), L), (("dec", 1), S)]


def test_public_names():
    assert set(F.__all__) >= {
        "Filter",
        "OfType",
        "WithTag",
        "PathContains",
        "Any",
        "All",
        "Not",
        "Everything",
        "Nothing",
        "to_predicate",
    }


def test_of_type_includes_subclasses():
    assert _select(OfType(ParamState), ITEMS) == ["p"]
    assert _select(OfType(LongTermState), ITEMS) == ["p", "l"]
    assert _select(OfType(ShortTermState), ITEMS) == ["h"]
    assert _select(OfType(State), ITEMS) == ["p", "h", "l", "s"]
    assert OfType(ParamState)((), 1.0) is False


def test_of_type_rejects_non_class():
    with pytest.raises(TypeError, match=r"OfType expects a class, got 'x' of type str\."):
        OfType("x")


def test_with_tag():
    assert _select(WithTag("fast"), ITEMS) == ["h", "l"]
    assert _select(WithTag("slow"), ITEMS) == ["l"]
    assert _select(WithTag("none"), ITEMS) == []
    assert WithTag("fast")((), object()) is False  # objects without tags are not selected
    with pytest.raises(TypeError, match=r"WithTag expects a str tag, got int\."):
        WithTag(1)


def test_path_contains():
    assert _select(PathContains("enc"), ITEMS) == ["p", "h"]
    assert _select(PathContains(1), ITEMS) == ["s"]
    assert _select(PathContains("e"), ITEMS) == []  # whole path entries, not substrings


def test_any_all_not_everything_nothing():
    assert _select(Any(ParamState, "slow"), ITEMS) == ["p", "l"]
    assert _select(All(LongTermState, WithTag("fast")), ITEMS) == ["l"]
    assert _select(Not(LongTermState), ITEMS) == ["h", "s"]
    assert _select(Everything(), ITEMS) == ["p", "h", "l", "s"]
    assert _select(Nothing(), ITEMS) == []
    assert _select(Any(), ITEMS) == []
    assert _select(All(), ITEMS) == ["p", "h", "l", "s"]


def test_operators():
    either = OfType(ParamState) | WithTag("slow")
    both = OfType(LongTermState) & "fast"
    neither = ~OfType(LongTermState)
    assert isinstance(either, Any) and isinstance(both, All) and isinstance(neither, Not)
    assert _select(either, ITEMS) == ["p", "l"]
    assert _select(both, ITEMS) == ["l"]
    assert _select(neither, ITEMS) == ["h", "s"]
    assert _select(~(PathContains("enc") | PathContains(1)), ITEMS) == ["l"]
    assert both == All(OfType(LongTermState), WithTag("fast"))


def test_equality_and_hash():
    assert OfType(ParamState) == OfType(ParamState)
    assert hash(OfType(ParamState)) == hash(OfType(ParamState))
    assert OfType(ParamState) != OfType(State)
    assert WithTag("a") == WithTag("a") and WithTag("a") != WithTag("b")
    assert PathContains("x") == PathContains("x")
    assert Everything() == Everything() and Nothing() == Nothing()
    assert Everything() != Nothing()  # same (empty) key, different type
    assert Any(ParamState, "x") == Any(OfType(ParamState), WithTag("x"))
    assert Any(ParamState, "x") != All(ParamState, "x")
    assert Not(ParamState) == Not(OfType(ParamState))
    assert OfType(ParamState) != "OfType(ParamState)"
    table = {OfType(ParamState): "params", WithTag("fast"): "fast", Not(ParamState): "rest"}
    assert table[OfType(ParamState)] == "params"
    assert table[WithTag("fast")] == "fast"
    assert table[Not(OfType(ParamState))] == "rest"
    assert len({OfType(ParamState), OfType(ParamState), Everything(), Everything()}) == 2


def test_reprs():
    assert repr(OfType(ParamState)) == "OfType(<class 'state_core.ParamState'>)"
    assert repr(WithTag("x")) == "WithTag('x')"
    assert repr(PathContains("enc")) == "PathContains('enc')"
    assert repr(Not(OfType(ParamState))) == "Not(OfType(<class 'state_core.ParamState'>))"
    assert repr(Any(ParamState, "x")) == "Any(OfType(<class 'state_core.ParamState'>), WithTag('x'))"
    assert repr(All(HiddenState, Everything())) == "All(OfType(<class 'state_core.HiddenState'>), Everything())"
    assert repr(Everything()) == "Everything()" and repr(Nothing()) == "Nothing()"
    assert repr(~WithTag("x") | Nothing()) == "Any(Not(WithTag('x')), Nothing())"


def test_to_predicate_mapping():
    assert to_predicate(ParamState) == OfType(ParamState)
    assert isinstance(to_predicate(ParamState), OfType)
    assert to_predicate("x") == WithTag("x")
    assert to_predicate(True) == Everything()
    assert to_predicate(...) == Everything()
    assert to_predicate(False) == Nothing()
    assert to_predicate(None) == Nothing()
    assert to_predicate((ParamState, "x")) == Any(OfType(ParamState), WithTag("x"))
    assert to_predicate([HiddenState]) == Any(OfType(HiddenState))
    f = WithTag("q")
    assert to_predicate(f) is f


def test_to_predicate_with_state_object_selects_only_that_state():
    pred = to_predicate(P)
    assert isinstance(pred, Filter)
    assert _select(pred, ITEMS) == ["p"]
    assert pred((), ParamState(jnp.zeros(1), name="p")) is False  # equal-looking twin is not selected
    assert to_predicate(P) == to_predicate(P)
    assert to_predicate(P) != to_predicate(S)
    assert repr(pred) == "SameState(ParamState 'p')"
    assert _select(to_predicate([P, S]), ITEMS) == ["p", "s"]


def test_to_predicate_callable_is_used_as_is():
    calls = []

    def starts_with_dec(path, state):
        calls.append((path, state))
        return path[0] == "dec"

    pred = to_predicate(starts_with_dec)
    assert _select(pred, ITEMS) == ["l", "s"]
    assert calls == ITEMS  # called with exactly (path, state)
    assert pred == to_predicate(starts_with_dec)
    assert hash(pred) == hash(to_predicate(starts_with_dec))
    assert pred != to_predicate(lambda p, s: p[0] == "dec")
    assert repr(pred) == repr(starts_with_dec)
    # a callable can be combined like any filter
    assert _select(to_predicate(starts_with_dec) & WithTag("fast"), ITEMS) == ["l"]
    # truthy non-bool results are coerced to bool
    assert to_predicate(lambda p, s: 1)((), S) is True


@pytest.mark.parametrize("bad", [1, 0, 2.5, object(), b"bytes"])
def test_to_predicate_rejects_bad_input(bad):
    with pytest.raises(TypeError, match=r"as a state filter\. Use a State class, a tag string"):
        to_predicate(bad)


def test_bad_input_inside_combinator_is_rejected():
    with pytest.raises(TypeError, match=r"Cannot use 3 \(of type int\) as a state filter"):
        Any(ParamState, 3)
    with pytest.raises(TypeError, match="as a state filter"):
        OfType(ParamState) & 3.0


@pytest.mark.parametrize(
    "flt, field",
    [
        (OfType(ParamState), "type"),
        (WithTag("fast"), "tag"),
        (PathContains("dec"), "key"),
        (Any(ParamState, "fast"), "filters"),
        (All(ParamState, "fast"), "filters"),
        (Not(ParamState), "filter"),
    ],
)
def test_filters_are_immutable(flt, field):
    before, key = getattr(flt, field), hash(flt)
    with pytest.raises(AttributeError, match=f"immutable; build a new filter instead of changing `{field}`"):
        setattr(flt, field, "other")
    with pytest.raises(AttributeError, match="immutable; cannot delete"):
        delattr(flt, field)
    assert getattr(flt, field) == before
    assert hash(flt) == key
