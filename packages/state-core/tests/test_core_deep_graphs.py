"""Object graphs are walked iteratively: depth is not limited by Python's recursion limit."""

import sys

import jax.numpy as jnp

from state_core import ParamState, State, collect_states, states_of_callable


class Node:
    def __init__(self, child, i):
        self.w = ParamState(jnp.full((1,), float(i)))
        self.child = child


def _chain(depth):
    node = None
    for i in range(depth):
        node = Node(node, i)
    return node


def test_collect_states_on_a_5000_deep_chain_keeps_order_and_paths(default_recursion_limit):
    depth = 5000
    assert depth > sys.getrecursionlimit() // 2
    root = _chain(depth)
    states = collect_states(root)
    assert len(states) == depth
    paths = list(states)
    assert paths[0] == ("w",)
    assert paths[1] == ("child", "w")
    assert paths[-1] == ("child",) * (depth - 1) + ("w",)
    # Definition order: root first, deepest last.
    assert float(states[paths[0]].value[0]) == depth - 1
    assert float(states[paths[-1]].value[0]) == 0


def test_collect_states_pre_order_and_dedup_match_the_definition_order():
    shared = State(jnp.zeros(1))
    a, b, c = State(jnp.ones(1)), State(jnp.ones(2)), State(jnp.ones(3))

    class Obj:
        pass

    inner = Obj()
    inner.x = b
    inner.again = shared
    root = Obj()
    root.first = shared
    root.inner = inner
    root.items = [a, {"k": c, "s": shared}, (inner,)]
    root.self_ref = root  # cycles are followed once
    got = list(collect_states(root).items())
    assert [p for p, _ in got] == [("first",), ("inner", "x"), ("items", 0), ("items", 1, "k")]
    assert [s for _, s in got] == [shared, b, a, c]


def test_states_of_a_bound_method_on_a_deep_chain():
    root = _chain(3000)
    assert len(states_of_callable(root.__init__)) == 3000
