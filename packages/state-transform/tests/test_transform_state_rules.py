"""One rules type, one parser: every transformation reads state rules the same way and says the same about a bad one."""

import copy
import re

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

import state_core
import state_nn
from state_core import ParamState, ShortTermState, State
from state_core.engine import StateRules
from state_transform import StatefulMapping, pmap2, shard_map, vmap, vmap2, vmap2_new_states
from state_transform.engine import parse_state_rules


class Member(state_nn.Module):
    def init_state(self):
        self.w = ParamState(jnp.zeros(2))

    def update(self, x):
        return x


def _message(make):
    with pytest.raises((TypeError, ValueError)) as info:
        make()
    return str(info.value)


def _axis_rule_makers(rule):
    """``(who, argument, make)``: every transformation that takes ``{axis: filter}`` rules, given ``rule``."""
    mesh_free = [
        ("vmap2", "state_in_axes", lambda: vmap2(lambda x: x, state_in_axes=rule)),
        ("vmap2", "state_out_axes", lambda: vmap2(lambda x: x, state_out_axes=rule)),
        ("pmap2", "state_in_axes", lambda: pmap2(lambda x: x, state_in_axes=rule)),
        ("StatefulMapping", "state_in_axes", lambda: StatefulMapping(lambda x: x, state_in_axes=rule)),
        ("vmap2_new_states", "state_out_axes", lambda: vmap2_new_states(Member(), axis_size=2, state_out_axes=rule)),
        ("Map", "init_state_axes", lambda: state_nn.Map(Member(), 2, init_state_axes=rule)),
        ("Map", "call_state_axes", lambda: state_nn.Map(Member(), 2, call_state_axes=rule)),
    ]

    def mapped_method():
        ens = state_nn.Map(Member(), 2)
        ens.init_all_states()
        ens.map("update", state_axes=rule)

    return [*mesh_free, ("Map.map", "state_axes", mapped_method)]


def test_a_bad_filter_gets_the_same_message_from_every_transformation():
    bodies = set()
    for who, what, make in _axis_rule_makers({0: 3.5}):
        message = _message(make)
        prefix = f"{who}: {what}, the entry for axis 0: "
        assert message.startswith(prefix), message
        bodies.add(message[len(prefix) :])
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    message = _message(lambda: shard_map(lambda x: x, mesh, P("x"), P("x"), state_in_specs={3.5: P()}))
    prefix = "shard_map: state_in_specs, the entry for P(): "
    assert message.startswith(prefix), message
    bodies.add(message[len(prefix) :])
    assert len(bodies) == 1, bodies
    assert re.match(r"Cannot use 3\.5 \(of type float\) as a state filter\. Use a State class, a tag", bodies.pop())
    # brainstate's vmap declares States only: its message says so, for the same entry.
    message = _message(lambda: vmap(lambda x: x, in_states={0: {"a": 3.5}}))
    assert message == (
        "vmap: in_states must hold States ({axis: {name: State}}, a State, or a list/dict of States), but the "
        "entry for axis 0 holds a float. Declare each State under the axis it is mapped on."
    )


@pytest.mark.parametrize("key", [True, "zero", 1.5])
def test_a_bad_axis_gets_the_same_message_from_every_transformation(key):
    # A bool is not an axis anywhere (vmap2 used to read True as axis 1).
    bodies = set()
    for who, what, make in _axis_rule_makers({key: ShortTermState}):
        with pytest.raises(ValueError) as info:
            make()
        message = str(info.value)
        assert message.startswith(f"{who}: {what} keys must be ints"), message
        bodies.add(message[len(f"{who}: {what}") :])
    assert bodies == {
        f" keys must be ints (the mapped axis) or None (not mapped), got {key!r}. Write {{0: filter}} to map "
        "the states a filter selects on axis 0, or {None: filter} to keep them whole."
    }


def test_every_transformation_keeps_only_the_parsed_rules():
    s = State(jnp.zeros(3))
    legacy = vmap(lambda x: x, in_states={0: {"s": s}})
    mapped = vmap2(lambda x: x, state_in_axes={0: s}, state_out_axes={0: s})
    for f in (legacy, mapped):
        assert "state_in_axes" not in vars(f) and "state_out_axes" not in vars(f)
        assert f.state_in_axes == f.state_out_axes == {0: state_core.filter.to_predicate(s)}
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    sharded = shard_map(lambda x: x, mesh, P("x"), P("x"), state_in_specs={s: P("x")})
    assert "state_in_specs" not in vars(sharded)
    assert sharded.state_in_specs == {state_core.filter.to_predicate(s): P("x")}


def test_state_rules_are_frozen_values():
    rules = parse_state_rules({0: ParamState, None: ...}, "state_in_axes", "vmap2")
    with pytest.raises(AttributeError, match="frozen"):
        rules.rules = ()
    assert copy.deepcopy(rules) == rules and hash(copy.copy(rules)) == hash(rules)
    assert parse_state_rules(rules, "state_in_axes", "vmap2") is rules
    # then(): the later rules decide only what the earlier ones leave (first match wins).
    later = rules.then(StateRules([(1, ShortTermState)]))
    assert later.value_for((), ShortTermState(0.0)) is None
    assert StateRules([(0, ParamState)]).then(later).value_for((), ShortTermState(0.0)) is None
    assert StateRules([(0, ParamState)]).then([(1, ShortTermState)]).value_for((), ShortTermState(0.0)) == 1
