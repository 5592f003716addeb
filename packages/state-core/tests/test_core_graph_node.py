"""graph.Node: the optional base class, its graph_invisible_attrs and repr; the functional style."""

import jax
import jax.numpy as jnp
import numpy as np
from numpy.testing import assert_allclose

from state_core import ParamState, ShortTermState, State, collect_states
from state_core._graph import walk_graph
from state_core.engine import graph_children
from state_core.graph import Node, states, treefy_merge, treefy_split, treefy_states


class Count(State):
    pass


class Linear(Node):
    def __init__(self, din, dout):
        self.w = ParamState(jnp.full((din, dout), 0.5))
        self.b = ParamState(jnp.zeros((dout,)))

    def __call__(self, x):
        return x @ self.w.value + self.b.value


class MLP(Node):
    def __init__(self):
        self.count = Count(jnp.asarray(0))
        self.linear1 = Linear(1, 4)
        self.linear2 = Linear(4, 1)

    def __call__(self, x):
        self.count.value += 1
        return self.linear2(jax.nn.relu(self.linear1(x)))


def test_a_node_subclass_needs_no_super_init_and_round_trips_through_jit_and_grad():
    graphdef, params, counts = treefy_split(MLP(), ParamState, Count)
    x = jnp.ones((3, 1))

    @jax.jit
    def train_step(params, counts):
        def loss_fn(params):
            model = treefy_merge(graphdef, params, counts)
            loss = jnp.mean(model(x) ** 2)
            return loss, treefy_states(model, Count)

        grads, counts = jax.grad(loss_fn, has_aux=True)(params)
        return jax.tree.map(lambda w, g: w - 0.1 * g, params, grads), counts

    for _ in range(3):
        params, counts = train_step(params, counts)
    model = treefy_merge(graphdef, params, counts)
    assert int(model.count.value) == 3
    # loss = mean((4 * 0.5 * 0.5 * 1)^2) = 1 at the start: the weights moved down.
    assert float(jnp.mean(model(x) ** 2)) < 1.0
    assert isinstance(model, MLP) and isinstance(model.linear1, Linear)


class Cached(Node):
    graph_invisible_attrs = ("cache", "parent")

    def __init__(self, parent=None):
        self.weight = ParamState(jnp.ones(2))
        self.cache = ShortTermState(jnp.zeros(5))
        self.parent = parent


def test_graph_invisible_attrs_are_not_walked_or_collected():
    outer = Cached()
    inner = Cached(parent=outer)
    outer.child = inner
    assert list(states(outer)) == [("weight",), ("child", "weight")]
    assert list(collect_states(outer)) == [("weight",), ("child", "weight")]
    paths = [p for p, _ in walk_graph(outer)]
    assert ("cache",) not in paths and ("child", "parent") not in paths
    _, values = treefy_split(outer)
    assert set(values) == {"weight", "child"}
    assert set(values["child"]) == {"weight"}


def test_graph_children_lists_containers_and_visible_attributes():
    c = Cached()
    assert [p for p, _ in graph_children(c, ("m",))] == [("m", "weight")]
    assert list(graph_children([1, 2], ())) == [((0,), 1), ((1,), 2)]
    assert list(graph_children(3, ())) == []


def test_repr_lists_public_visible_attributes_and_survives_cycles():
    class Pair(Node):
        def __init__(self):
            self.a = 1
            self._private = 2
            self.me = self

    text = repr(Pair())
    assert text.startswith("Pair(\n  a=1,\n  me=Pair(...)")
    assert "_private" not in text
    assert repr(Cached()).count("ParamState") == 1 and "cache" not in repr(Cached())


def test_node_values_stay_concrete_after_use_in_a_traced_function():
    m = MLP()
    graphdef, params, counts = treefy_split(m, ParamState, Count)
    out = jax.jit(lambda p, c: treefy_merge(graphdef, p, c)(jnp.ones((1, 1))))(params, counts)
    assert_allclose(out, np.full((1, 1), 1.0))  # 4 hidden units of 0.5, times 0.5
    assert not isinstance(m.linear1.w.value, jax.core.Tracer)
    assert int(m.count.value) == 0
