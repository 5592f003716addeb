"""A 3,000-deep chain of Modules: every traversal is iterative (no RecursionError)."""

import sys

import jax.numpy as jnp
from numpy.testing import assert_allclose

import state_nn as nn
from state_core import ParamState, ShortTermState


class Link(nn.Module):
    def __init__(self, child, i):
        super().__init__()
        self.i = i
        self.w = ParamState(jnp.full((1,), float(i)))
        self.child = child

    def init_state(self, **kwargs):
        self.h = ShortTermState(jnp.zeros(1) + self.i)

    def update(self, x):
        return x + self.w.value


DEPTH = 3000  # three times Python's default recursion limit


def _chain():
    node = None
    for i in range(DEPTH):
        node = Link(node, i)
    return node


def test_states_modules_and_hooks_on_a_3000_deep_chain(default_recursion_limit):
    assert sys.getrecursionlimit() < DEPTH, "the chain must be deeper than recursion could go"
    root = _chain()
    states = root.states()
    assert len(states) == DEPTH
    assert list(states)[1] == ("child", "w")
    modules = root.named_modules()
    assert len(modules) == DEPTH
    assert list(modules)[:2] == [(), ("child",)]
    assert root.modules()[-1].i == 0
    root.init_all_states()
    # Children before parents: the deepest link ran its hook first; every link got its state.
    assert len(root.states(ShortTermState)) == DEPTH
    assert_allclose(root.h.value, [DEPTH - 1])
    assert_allclose(root.child.h.value, [DEPTH - 2])
    root.reset_all_states()


def test_hook_order_is_post_order_on_a_small_tree():
    order = []

    class Leaf(nn.Module):
        def __init__(self, name):
            super().__init__()
            self.label = name

        def init_state(self, **kwargs):
            order.append(self.label)

    class Pair(Leaf):
        def __init__(self, name, left, right):
            super().__init__(name)
            self.children_ = [left, right]

    tree = Pair("root", Pair("a", Leaf("a1"), Leaf("a2")), Leaf("b"))
    tree.init_all_states()
    assert order == ["a1", "a2", "a", "b", "root"]
