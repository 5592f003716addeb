"""Unit tests of state collections (state_core._collection)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import (
    HiddenState,
    LongTermState,
    ParamState,
    ShortTermState,
    State,
    StateDict,
    StateTraceStack,
    collect_states,
    states_of_callable,
)
from state_core.filter import PathContains, WithTag


class Linear:
    def __init__(self, n, tag=None):
        self.weight = ParamState(jnp.ones((n, n)), tag=tag)
        self.bias = ParamState(jnp.zeros(n))
        self.n = n  # plain attributes are ignored

    def __call__(self, x):
        return x @ self.weight.value + self.bias.value


class Net:
    def __init__(self):
        self.encoder = Linear(2)
        self.hidden = HiddenState(jnp.zeros(2))
        self.blocks = [Linear(3, tag="frozen"), (ShortTermState(jnp.zeros(1)),)]
        self.extras = {"count": LongTermState(jnp.asarray(0)), "note": "text", "arr": np.ones(2)}

    def step(self, x):
        return self.encoder(x)


def test_collect_states_paths_in_definition_order():
    net = Net()
    states = collect_states(net)
    assert isinstance(states, StateDict)
    assert list(states) == [
        ("encoder", "weight"),
        ("encoder", "bias"),
        ("hidden",),
        ("blocks", 0, "weight"),
        ("blocks", 0, "bias"),
        ("blocks", 1, 0),
        ("extras", "count"),
    ]
    assert states["encoder", "weight"] is net.encoder.weight
    assert states["blocks", 1, 0] is net.blocks[1][0]
    assert states["extras", "count"] is net.extras["count"]


def test_collect_states_from_plain_containers_and_root_state():
    a, b = State(1.0), State(2.0)
    assert list(collect_states([a, {"k": b}])) == [(0,), (1, "k")]
    assert list(collect_states((a,))) == [(0,)]
    assert dict(collect_states(a)) == {(): a}
    assert collect_states(jnp.ones(3)) == {}
    assert collect_states("just text") == {}


def test_collect_states_dedups_by_identity_first_path_wins():
    shared = ParamState(jnp.zeros(2))
    twin = ParamState(jnp.zeros(2))  # equal value, different object

    class Holder:
        def __init__(self):
            self.first = shared
            self.again = [shared, twin]
            self.alias = {"x": shared, "y": twin}

    states = collect_states(Holder())
    assert list(states) == [("first",), ("again", 1)]
    assert states["first",] is shared and states["again", 1] is twin


def test_collect_states_survives_cycles():
    class Node:
        def __init__(self, name):
            self.state = State(jnp.zeros(1), name=name)
            self.next = None

    a, b = Node("a"), Node("b")
    a.next, b.next = b, a
    loop = [a]
    loop.append(loop)
    states = collect_states({"root": a, "loop": loop})
    assert list(states) == [("root", "state"), ("root", "next", "state")]
    assert [s.name for s in states.values()] == ["a", "b"]


def test_collect_states_with_filters():
    net = Net()
    params = collect_states(net, ParamState)
    assert list(params) == [
        ("encoder", "weight"),
        ("encoder", "bias"),
        ("blocks", 0, "weight"),
        ("blocks", 0, "bias"),
    ]
    assert list(collect_states(net, HiddenState, "frozen")) == [("hidden",), ("blocks", 0, "weight")]
    assert list(collect_states(net, PathContains("extras"))) == [("extras", "count")]


def test_filter_and_split():
    states = collect_states(Net())
    assert list(states.filter()) == list(states)
    assert isinstance(states.filter(ParamState), StateDict)
    assert list(states.filter(WithTag("frozen"))) == [("blocks", 0, "weight")]

    frozen, params, rest = states.split("frozen", ParamState, ...)
    assert list(frozen) == [("blocks", 0, "weight")]  # first match wins over ParamState
    assert list(params) == [("encoder", "weight"), ("encoder", "bias"), ("blocks", 0, "bias")]
    assert list(rest) == [("hidden",), ("blocks", 1, 0), ("extras", "count")]
    assert all(isinstance(part, StateDict) for part in (frozen, params, rest))

    (only_hidden,) = states.split(HiddenState)  # unmatched states are dropped
    assert list(only_hidden) == [("hidden",)]

    with pytest.raises(ValueError, match=r"StateDict.split needs at least one filter; use `...` for the rest\."):
        states.split()


def test_to_values_and_assign_values():
    net = Net()
    states = collect_states(net, ParamState).filter(PathContains("encoder"))
    values = states.to_values()
    assert list(values) == [("encoder", "weight"), ("encoder", "bias")]
    assert_allclose(values["encoder", "weight"], np.ones((2, 2)))
    assert_allclose(values["encoder", "bias"], np.zeros(2))

    with StateTraceStack() as trace:
        states.assign_values({("encoder", "bias"): jnp.full(2, 5.0)})
    assert trace.get_write_states() == [net.encoder.bias]  # assignment is a recorded write
    assert_allclose(net.encoder.bias.value, [5.0, 5.0])
    assert_allclose(net.encoder.weight.value, np.ones((2, 2)))

    with pytest.raises(KeyError, match=r"No state at path \('nope',\)"):
        states.assign_values({("nope",): jnp.zeros(2)})
    with pytest.raises(ValueError, match="pytree structure"):
        states.assign_values({("encoder", "bias"): (jnp.zeros(2),)})


def test_paths_by_state_and_repr():
    net = Net()
    states = collect_states(net, LongTermState)
    assert states.paths_by_state()[id(net.encoder.bias)] == ("encoder", "bias")
    assert (
        repr(states.filter(PathContains("encoder")))
        == "StateDict({encoder.weight: ParamState, encoder.bias: ParamState})"
    )
    assert repr(StateDict()) == "StateDict({})"


def test_states_of_callable():
    net = Net()
    bound = states_of_callable(net.step)
    assert list(bound) == list(collect_states(net))
    assert bound["hidden",] is net.hidden

    layer = Linear(2)
    assert list(states_of_callable(layer)) == [("weight",), ("bias",)]

    def plain(x):
        return x

    assert states_of_callable(plain) == {}
    assert states_of_callable(lambda x: x) == {}
    assert states_of_callable(len) == {}
    assert states_of_callable(Linear) == {}  # a class, not an instance


# ---------------------------------------------------------------- values in and out
def _two_states():
    w = ParamState(jnp.ones(2), name="w")
    h = HiddenState(jnp.zeros(3), name="h")
    return w, h, collect_states({"w": w, "h": h})


def test_assign_values_checks_every_entry_before_writing():
    w, _, states = _two_states()
    # The first entry is fine, the second has the wrong structure: nothing is written.
    with pytest.raises(ValueError, match="pytree structure"):
        states.assign_values({("w",): jnp.full(2, 7.0), ("h",): (jnp.zeros(3),)})
    assert_allclose(w.value, [1.0, 1.0])
    with pytest.raises(KeyError, match=r"No state at path \('x',\) \(and 1 more\); the paths of this StateDict"):
        states.assign_values({("w",): jnp.full(2, 7.0), ("x",): 1.0, ("y",): 2.0})
    assert_allclose(w.value, [1.0, 1.0])


def test_to_dict_values_is_to_values():
    _, _, states = _two_states()
    assert StateDict.to_dict_values is StateDict.to_values
    values = states.to_dict_values()
    assert type(values) is dict and list(values) == [("w",), ("h",)]
    assert_allclose(values["w",], [1.0, 1.0])
    assert_allclose(values["h",], [0.0, 0.0, 0.0])


def test_assign_dict_values_needs_every_path_and_ignores_others():
    w, h, states = _two_states()
    params = states.filter(ParamState)
    # Values of the whole collection assign the filtered one (brainstate's behaviour).
    assert params.assign_dict_values({("w",): jnp.full(2, 3.0), ("h",): jnp.ones(3)}) is None
    assert_allclose(w.value, [3.0, 3.0])
    assert_allclose(h.value, [0.0, 0.0, 0.0])
    with pytest.raises(KeyError, match=r"needs a value for every path of the StateDict; missing \[\('h',\)\]"):
        states.assign_dict_values({("w",): jnp.zeros(2)})
    assert_allclose(w.value, [3.0, 3.0])  # nothing written


def test_a_state_given_to_jax_as_an_array_names_the_fix():
    w, _, states = _two_states()
    for call in (
        lambda: jnp.zeros_like(w),
        lambda: jnp.asarray(w),
        lambda: jax.device_put(w),
        lambda: jax.tree.map(jnp.zeros_like, states),
    ):
        with pytest.raises(TypeError, match=r"ParamState 'w' was given where JAX expects an array.*to_values\(\)"):
            call()
    unnamed = ParamState(jnp.ones(1))
    with pytest.raises(TypeError, match=r"^ParamState was given where JAX expects an array"):
        jnp.zeros_like(unnamed)
    # Values pass as before.
    assert_allclose(jax.tree.map(jnp.zeros_like, states.to_values())["w",], [0.0, 0.0])
