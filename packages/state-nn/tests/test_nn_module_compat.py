"""Module names, sizes, children, ``states(include_self=)``, ``>>`` and Sequential editing (brainstate names)."""

import jax
import jax.numpy as jnp
import numpy as np
import numpy.testing as npt
import pytest

import state_core
import state_nn


class Leaf(state_nn.Module):
    def __init__(self, v=1.0):
        self.w = state_core.ParamState(jnp.full((2,), v))

    def update(self, x):
        return x * self.w.value


class Tree(state_nn.Module):
    def __init__(self):
        super().__init__(name="tree")
        self.bias = state_core.ParamState(jnp.zeros(2))
        self.left = Leaf(2.0)
        self.blocks = [Leaf(3.0), {"deep": Leaf(4.0)}]
        self.left.inner = Leaf(5.0)
        self.again = self.left  # the same child by a second path


# ---------------------------------------------------------------- name / sizes
def test_name_given_at_construction_and_default_none():
    assert state_nn.Module(name="enc").name == "enc"
    assert state_nn.Module().name is None
    assert Leaf().name is None  # subclass that never calls Module.__init__
    assert state_nn.Linear(2, 3, name="fc").name == "fc"
    assert state_nn.Sequential(name="net").name == "net"


def test_name_must_be_a_string():
    with pytest.raises(TypeError, match="Module name must be a str or None, got int 3"):
        state_nn.Module(name=3)


def test_in_and_out_size_are_tuples():
    m = state_nn.Module()
    assert m.in_size is None and m.out_size is None
    m.in_size = 4
    m.out_size = [2, np.int64(3)]
    assert m.in_size == (4,) and m.out_size == (2, 3)
    assert type(m.out_size[1]) is int
    layer = state_nn.Linear(3, 5)
    assert (layer.in_size, layer.out_size) == ((3,), (5,))
    assert layer.weight.value.shape == (3, 5)


def test_numpy_integer_sizes_become_int_tuples():
    m = state_nn.Module()
    m.in_size = np.array(4)  # e.g. np.prod(shape)
    m.out_size = np.int32(6)
    assert m.in_size == (4,) and m.out_size == (6,)
    assert type(m.in_size[0]) is int and type(m.out_size[0]) is int
    with pytest.raises(TypeError, match=r"Module.in_size must be an int or a tuple of ints, got ndarray array\(3\.\)"):
        m.in_size = np.array(3.0)
    with pytest.raises(TypeError, match=r"Module.out_size must be an int or a tuple of ints, got ndarray"):
        m.out_size = np.array([2, 3])
    assert m.in_size == (4,) and m.out_size == (6,)


def test_bad_sizes_are_rejected_by_name():
    m = state_nn.Module()
    with pytest.raises(TypeError, match=r"Module.in_size must be an int or a tuple of ints, got str 'x'"):
        m.in_size = "x"
    with pytest.raises(ValueError, match=r"Module.out_size must not contain negative sizes, got \(2, -1\)"):
        m.out_size = (2, -1)
    with pytest.raises(ValueError, match=r"Linear: in_size must be a positive int \(or a tuple of them\), got 0"):
        state_nn.Linear(0, 2)


def test_linear_accepts_tuple_sizes_using_the_last_entry():
    layer = state_nn.Linear((7, 3), (2,), w_init=jnp.ones((3, 2)))
    assert layer.in_size == (7, 3) and layer.out_size == (2,)
    npt.assert_allclose(layer(jnp.ones((4, 3))), jnp.full((4, 2), 3.0))


# ---------------------------------------------------------------- children / modules
def test_named_children_are_direct_submodules_only():
    tree = Tree()
    children = tree.named_children()
    assert list(children) == [("left",), ("blocks", 0), ("blocks", 1, "deep")]
    assert children[("left",)] is tree.left
    assert tree.children() == [tree.left, tree.blocks[0], tree.blocks[1]["deep"]]
    assert state_nn.Module().children() == []


def test_named_modules_and_modules_include_self():
    tree = Tree()
    everything = list(tree.named_modules())
    assert everything[0] == () and ("left", "inner") in everything
    without = tree.named_modules(include_self=False)
    assert () not in without and list(without) == everything[1:]
    assert tree.modules(include_self=False) == list(without.values())
    assert tree.modules()[0] is tree


def test_states_include_self_keeps_only_submodule_states():
    tree = Tree()
    assert list(tree.states()) == [
        ("bias",),
        ("left", "w"),
        ("left", "inner", "w"),
        ("blocks", 0, "w"),
        ("blocks", 1, "deep", "w"),
    ]
    sub = tree.states(include_self=False)
    assert list(sub) == [("left", "w"), ("left", "inner", "w"), ("blocks", 0, "w"), ("blocks", 1, "deep", "w")]
    npt.assert_allclose(sub[("blocks", 1, "deep", "w")].value, [4.0, 4.0])
    (params,) = (tree.states(state_core.ParamState, include_self=False),)
    assert len(params) == 4
    leaf_only = Leaf()
    assert list(leaf_only.states(include_self=False)) == []


def test_children_walk_is_iterative_for_wide_containers():
    class Wide(state_nn.Module):
        def __init__(self):
            self.items = [Leaf(float(i)) for i in range(3000)]

    wide = Wide()
    assert len(wide.children()) == 3000
    assert len(wide.states(include_self=False)) == 3000


# ---------------------------------------------------------------- >> composition
def test_rshift_composes_modules_and_functions():
    a = state_nn.Linear(2, 3, w_init=jnp.ones((2, 3)))
    b = state_nn.Linear(3, 1, w_init=jnp.ones((3, 1)))
    net = a >> jax.nn.relu >> b
    assert isinstance(net, state_nn.Sequential)
    assert net.layers == [a, jax.nn.relu, b]
    assert (net.in_size, net.out_size) == ((2,), (1,))
    npt.assert_allclose(net(jnp.array([1.0, 2.0])), [9.0])
    # A function on the left composes too.
    pre = (lambda x: 2 * x) >> a
    npt.assert_allclose(pre(jnp.array([1.0, 1.0])), [4.0, 4.0, 4.0])


def test_rshift_does_not_flatten_a_named_or_right_hand_sequential():
    a, b, c = Leaf(2.0), Leaf(3.0), Leaf(5.0)
    named = state_nn.Sequential(a, b, name="block")
    assert (named >> c).layers == [named, c]
    right = a >> (b >> c)
    assert len(right) == 2 and isinstance(right[1], state_nn.Sequential)
    npt.assert_allclose(right(jnp.ones(2)), [30.0, 30.0])


def test_data_rshift_module_calls_it():
    leaf = Leaf(3.0)
    npt.assert_allclose(jnp.ones(2) >> leaf, [3.0, 3.0])
    npt.assert_allclose(np.ones(2) >> leaf, [3.0, 3.0])
    npt.assert_allclose(2.0 >> leaf, [6.0, 6.0])


def test_rshift_with_a_non_callable_is_a_type_error():
    with pytest.raises(TypeError, match="unsupported operand"):
        Leaf() >> 3


# ---------------------------------------------------------------- Sequential editing
def test_append_extend_insert():
    first = state_nn.Linear(2, 3, w_init=jnp.ones((2, 3)))
    net = state_nn.Sequential(first)
    assert net.append(jax.nn.relu) is net
    net.extend([state_nn.Linear(3, 4, w_init=jnp.ones((3, 4)))])
    assert net.out_size == (4,)
    net.insert(0, lambda x: -x)
    net.insert(-1, state_nn.Dropout(0.5, deterministic=True))
    assert [type(layer).__name__ for layer in net][1::2] == ["Linear", "Dropout"]
    assert net[2] is jax.nn.relu and isinstance(net[4], state_nn.Linear)
    # -x then Linear(ones) then relu -> zeros for a positive input.
    npt.assert_allclose(net(jnp.array([1.0, 1.0])), jnp.zeros(4))
    npt.assert_allclose(net[1:](jnp.array([1.0, 1.0])), jnp.full(4, 6.0))
    assert net.in_size is None and net.out_size == (4,)


def test_size_mismatch_is_rejected_and_leaves_the_sequential_unchanged():
    net = state_nn.Sequential(state_nn.Linear(2, 3))
    with pytest.raises(
        ValueError, match=r"layer 1 \(Linear\) expects in_size \(5,\), but the layers before it produce out_size \(3,\)"
    ):
        net.append(state_nn.Linear(5, 1))
    assert len(net) == 1 and net.out_size == (3,)
    with pytest.raises(ValueError, match=r"layer 2 \(Linear\) expects in_size \(4,\)"):
        state_nn.Sequential(state_nn.Linear(2, 3), state_nn.Dropout(0.1), state_nn.Linear(4, 1))


def test_non_callable_layers_are_rejected():
    with pytest.raises(TypeError, match="Sequential: layer 1 is a int, which is not callable"):
        state_nn.Sequential(Leaf(), 3)
    net = state_nn.Sequential(Leaf())
    with pytest.raises(TypeError, match="the appended layer is a str"):
        net.append("relu")
    with pytest.raises(TypeError, match="layer 1 of the extension is a NoneType"):
        net.extend([Leaf(), None])
    assert len(net) == 1
    with pytest.raises(TypeError, match=r"Sequential\.insert: index must be an int, got str"):
        net.insert("0", Leaf())


def test_slicing_and_index_lists_return_sequentials_sharing_layers():
    layers = [Leaf(2.0), Leaf(3.0), Leaf(5.0)]
    net = state_nn.Sequential(*layers)
    head = net[:2]
    assert isinstance(head, state_nn.Sequential) and head.layers == layers[:2]
    assert head[0] is layers[0]
    npt.assert_allclose(head(jnp.ones(2)), [6.0, 6.0])
    picked = net[[0, 2]]
    npt.assert_allclose(picked(jnp.ones(2)), [10.0, 10.0])
    # Shared layers: a write through the slice is seen by the full model.
    head[0].w.value = jnp.ones(2)
    npt.assert_allclose(net(jnp.ones(2)), [15.0, 15.0])
    assert net[-1] is layers[2]
    with pytest.raises(IndexError, match=r"Sequential index 3 is out of range for 3 layer\(s\)"):
        net[3]
    with pytest.raises(TypeError, match="Sequential indices must be an int, a slice or a list of ints, got str"):
        net["a"]


def test_dropout_is_an_element_wise_block():
    assert isinstance(state_nn.Dropout(0.2), state_nn.ElementWiseBlock)
    net = state_nn.Sequential(state_nn.Linear(2, 6), state_nn.Dropout(0.2))
    assert net.out_size == (6,)


# ---------------------------------------------------------------- repr
def test_repr_shows_name_sizes_and_settings():
    layer = state_nn.Linear(3, 2, name="fc")
    assert repr(layer).startswith("Linear(\n  name='fc',\n  in_size=(3,),\n  out_size=(2,),\n  weight=ParamState(")
    assert repr(state_nn.Dropout(0.25)) == "Dropout(\n  rate=0.25,\n  deterministic=False\n)"
    text = repr(state_nn.Sequential(state_nn.Linear(2, 3), jax.nn.relu))
    assert text.startswith("Sequential(\n  in_size=(2,),\n  out_size=(3,),\n  layers=[\n    Linear(")
    assert "\n    relu\n  ]\n)" in text


def test_map_repr_shows_its_settings_after_the_module():
    ens = state_nn.Map(state_nn.Dropout(0.5), init_map_size=3)
    assert repr(ens) == (
        "Map(\n  module=Dropout(\n    rate=0.5,\n    deterministic=False\n  ),\n"
        "  init_map_size=3,\n  behavior='vmap'\n)"
    )


def test_seed_repr_unchanged_for_a_plain_module():
    class Affine(state_nn.Module):
        def __init__(self, size):
            super().__init__()
            self.weight = state_core.ParamState(jnp.ones((size, 4)))

    assert repr(Affine(2)) == "Affine(\n  weight=ParamState(\n    value=ShapedArray(float32[2,4])\n  )\n)"


def test_dropout_accepts_brainstates_keep_probability():
    assert state_nn.Dropout(prob=0.75).rate == 0.25
    assert state_nn.Dropout(prob=1.0).rate == 0.0
    with pytest.raises(ValueError, match=r"prob \(the keep probability\) must be in \(0, 1\], got 0.0"):
        state_nn.Dropout(prob=0.0)
    with pytest.raises(TypeError, match=r"give rate .* or prob .*, not both"):
        state_nn.Dropout(0.1, prob=0.9)
    with pytest.raises(TypeError, match=r"missing the drop probability rate"):
        state_nn.Dropout()


def test_composed_sequential_under_map_gives_each_member_its_own_layers():
    class Member(state_nn.Module):
        def init_state(self):
            self.net = state_nn.Linear(2, 3) >> jax.nn.relu >> state_nn.Linear(3, 1)

        def update(self, x):
            return self.net(x)

    ens = state_nn.Map(Member(), init_map_size=4)
    ens.init_all_states()
    w0 = ens.module.net[0].weight.value
    assert w0.shape == (4, 2, 3)
    assert not np.allclose(w0[0], w0[1])  # a different draw per member
    x = jnp.arange(8.0).reshape(4, 2)
    out = ens(x)
    first, last = ens.module.net[0], ens.module.net[2]
    expected = [
        np.maximum(np.asarray(x[i]) @ np.asarray(first.weight.value[i]) + np.asarray(first.bias.value[i]), 0.0)
        @ np.asarray(last.weight.value[i])
        + np.asarray(last.bias.value[i])
        for i in range(4)
    ]
    npt.assert_allclose(out, np.stack(expected), rtol=1e-5, atol=1e-6)


def test_sequential_with_params_under_jit_and_grad():
    import state_transform

    scale = state_nn.Param(jnp.array([2.0]), t=state_nn.SoftplusT(), reg=state_nn.L2Reg(0.5))
    net = state_nn.Sequential(lambda x: x * scale.value(), state_nn.Dropout(0.5, deterministic=True))
    net.scale = scale  # so net.states() and net.reg_loss() see it

    @state_transform.jit
    def loss(x):
        return jnp.sum(net(x)) + net.reg_loss()

    npt.assert_allclose(loss(jnp.ones(3)), 3 * 2.0 + 0.5 * 4.0, rtol=1e-5)
    grads = state_transform.grad(lambda: loss(jnp.ones(3)), grad_states=net.states(state_core.ParamState))()
    v = np.log(np.expm1(2.0))
    sig = 1.0 / (1.0 + np.exp(-v))
    # d/dv [3 softplus(v) + 0.5 softplus(v)^2] = (3 + softplus(v)) * sigmoid(v)
    npt.assert_allclose(grads[("scale", "val")], [(3.0 + 2.0) * sig], rtol=1e-5)
