"""Module: traversal, states, hooks (order), repr."""

import pathlib
import re

import jax
import jax.numpy as jnp
import pytest

import state_core
import state_nn
from state_core.filter import OfType, PathContains
from state_transform import pmap2


class Leaf(state_nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.w = state_core.ParamState(jnp.ones(n))

    def update(self, x):
        return x * self.w.value


class Tree(state_nn.Module):
    def __init__(self):
        super().__init__()
        self.left = Leaf()
        self.h = state_core.HiddenState(jnp.zeros(3))
        self.blocks = [Leaf(3), {"deep": Leaf(4)}]
        self.config = {"lr": 0.1}


def test_named_modules_paths_and_order():
    tree = Tree()
    named = tree.named_modules()
    assert list(named) == [(), ("left",), ("blocks", 0), ("blocks", 1, "deep")]
    assert named[()] is tree
    assert named[("blocks", 1, "deep")] is tree.blocks[1]["deep"]
    assert tree.modules() == list(named.values())


def test_named_modules_deduplicates_shared_submodules():
    class Twice(state_nn.Module):
        def __init__(self):
            self.a = Leaf()
            self.b = self.a
            self.more = (self.a, Leaf())

    t = Twice()
    assert list(t.named_modules()) == [(), ("a",), ("more", 1)]
    assert list(t.states()) == [("a", "w"), ("more", 1, "w")]


def test_states_collects_through_attributes_lists_and_dicts():
    tree = Tree()
    states = tree.states()
    assert isinstance(states, state_core.StateDict)
    assert list(states) == [
        ("left", "w"),
        ("h",),
        ("blocks", 0, "w"),
        ("blocks", 1, "deep", "w"),
    ]
    assert states[("blocks", 0, "w")] is tree.blocks[0].w


def test_states_single_filter():
    tree = Tree()
    params = tree.states(state_core.ParamState)
    assert isinstance(params, state_core.StateDict)
    assert list(params) == [("left", "w"), ("blocks", 0, "w"), ("blocks", 1, "deep", "w")]
    assert list(tree.states(PathContains("blocks"))) == [("blocks", 0, "w"), ("blocks", 1, "deep", "w")]


def test_states_several_filters_first_match_wins():
    tree = Tree()
    deep, params, rest = tree.states(PathContains("deep"), OfType(state_core.ParamState), ...)
    assert list(deep) == [("blocks", 1, "deep", "w")]
    assert list(params) == [("left", "w"), ("blocks", 0, "w")]
    assert list(rest) == [("h",)]
    # unmatched states are dropped when there is no catch-all
    (hidden,) = tree.states(state_core.HiddenState, state_core.HiddenState)[:1]
    assert list(hidden) == [("h",)]


def test_call_runs_update_and_missing_update_raises():
    leaf = Leaf()
    assert jnp.array_equal(leaf(jnp.array([2.0, 3.0])), jnp.array([2.0, 3.0]))

    class NoUpdate(state_nn.Module):
        pass

    with pytest.raises(NotImplementedError, match="does not implement update"):
        NoUpdate()(1.0)


def test_module_without_super_init_works():
    class Bare(state_nn.Module):
        def __init__(self):
            self.p = state_core.ParamState(jnp.zeros(1))

    bare = Bare()
    assert list(bare.states()) == [("p",)]
    assert list(bare.named_modules()) == [()]
    bare.init_all_states()


def test_seed000_repr_exact():
    class Affine(state_nn.Module):
        def __init__(self, size):
            super().__init__()
            self.weight = state_core.ParamState(jnp.ones((size, 4)))

    assert repr(Affine(2)) == ("Affine(\n  weight=ParamState(\n    value=ShapedArray(float32[2,4])\n  )\n)")


def test_seed000_pmap2_origin_fun_repr():
    class Affine(state_nn.Module):
        def __init__(self, size):
            super().__init__()
            self.weight = state_core.ParamState(jnp.ones((size,)))

        def __call__(self, delta):
            self.weight.value = self.weight.value + delta
            return self.weight.value

    devices = jax.devices()[:2]
    model = Affine(size=len(devices))
    f = pmap2(
        model,
        axis_name="pair",
        in_axes=0,
        out_axes=0,
        devices=devices,
        state_in_axes={0: OfType(state_core.ParamState)},
        state_out_axes={0: OfType(state_core.ParamState)},
    )
    f(jnp.stack([jnp.ones((4,)), -jnp.ones((4,))], axis=0))
    assert jnp.array_equal(model.weight.value, jnp.array([[2.0] * 4, [0.0] * 4]))
    assert repr(f.origin_fun) == ("Affine(\n  weight=ParamState(\n    value=ShapedArray(float32[2,4])\n  )\n)")


def test_nested_repr_shows_only_states_and_modules():
    tree = Tree()
    text = repr(tree)
    assert text.startswith("Tree(\n  left=Leaf(\n    w=ParamState(\n      value=ShapedArray(float32[2])")
    assert "h=HiddenState(" in text
    assert "blocks=[\n    Leaf(" in text
    assert "'deep': Leaf(" in text
    assert "config" not in text and "lr" not in text
    assert repr(state_nn.Module()) == "Module()"


def test_repr_survives_cycles():
    class Node(state_nn.Module):
        def __init__(self):
            self.w = state_core.ParamState(jnp.zeros(1))
            self.me = self

    text = repr(Node())
    assert "me=Node(...)" in text
    assert list(Node().named_modules()) == [()]


class Recorder(state_nn.Module):
    def __init__(self, log, name, *children):
        self.log, self.name = log, name
        self.children = list(children)

    def init_state(self, *args, **kwargs):
        self.log.append(("init", self.name, args, kwargs))

    def reset_state(self, *args, **kwargs):
        self.log.append(("reset", self.name, args, kwargs))


def test_init_all_states_children_before_parents_once_each():
    log = []
    shared = Recorder(log, "shared")
    root = Recorder(
        log,
        "root",
        Recorder(log, "a", Recorder(log, "a1"), shared),
        Recorder(log, "b", shared),
    )
    root.init_all_states(3, batch=2)
    assert [entry[1] for entry in log] == ["a1", "shared", "a", "b", "root"]
    assert all(entry[2:] == ((3,), {"batch": 2}) for entry in log)


def test_reset_all_states_post_order_and_hook_defaults():
    log = []
    root = Recorder(log, "root", Recorder(log, "x", Recorder(log, "x1")), Recorder(log, "y"))
    root.reset_all_states(batch_size=5)
    assert [(kind, name) for kind, name, *_ in log] == [
        ("reset", "x1"),
        ("reset", "x"),
        ("reset", "y"),
        ("reset", "root"),
    ]
    # default hooks accept anything and do nothing
    Leaf().init_all_states(1, 2, k=3)
    Leaf().reset_all_states(batch_size=4)


def test_init_state_creates_states_and_reset_assigns():
    class Cell(state_nn.Module):
        def init_state(self, batch_size=1, **kwargs):
            self.h = state_core.HiddenState(jnp.zeros((batch_size, 3)))

        def reset_state(self, batch_size=1, **kwargs):
            self.h.value = jnp.ones((batch_size, 3))

    class Net(state_nn.Module):
        def __init__(self):
            self.cells = [Cell(), Cell()]

    net = Net()
    net.init_all_states(batch_size=2)
    assert [s.value.shape for s in net.states().values()] == [(2, 3), (2, 3)]
    net.reset_all_states(batch_size=4)
    assert all(jnp.array_equal(s.value, jnp.ones((4, 3))) for s in net.states().values())


def test_public_classes_live_in_state_nn():
    names = {
        "Module",
        "Map",
        "Linear",
        "Dropout",
        *("Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "DropoutFixed"),
        "Sequential",
        "ElementWiseBlock",
        "Param",
        "Const",
        "Transform",
        "IdentityT",
        "ClipT",
        "SoftplusT",
        "Regularization",
        "L1Reg",
        "L2Reg",
        "Dynamics",
        "Prefetch",
        "EnvironContext",
    }
    for name in names:
        assert getattr(state_nn, name).__module__ == "state_nn"
    functions = {
        "init_all_states",
        "reset_all_states",
        "clip_grad_norm",
        *("tanh", "relu", "squareplus", "softplus", "soft_sign", "sigmoid", "silu", "swish", "log_sigmoid"),
        *("elu", "leaky_relu", "hard_tanh", "celu", "selu", "gelu", "glu", "logsumexp", "log_softmax"),
        *("softmax", "standardize", "one_hot", "relu6", "hard_sigmoid", "hard_silu", "hard_swish"),
        *("hard_shrink", "rrelu", "mish", "soft_shrink", "prelu", "tanh_shrink", "softmin"),
        *("sparse_plus", "sparse_sigmoid"),
        "exp_euler_step",
        "receive_update_output",
        "not_receive_update_output",
        "receive_update_input",
        "not_receive_update_input",
    }
    assert all(callable(getattr(state_nn, name)) for name in functions)
    assert set(state_nn.__all__) == names | functions | {"__version__", "checkpoint"}


def test_lower_layers_never_import_state_nn():
    packages = pathlib.Path(__file__).resolve().parents[2]
    pattern = re.compile(r"^\s*(from|import)\s+state_nn\b", re.MULTILINE)
    for dist in ("state-core", "state-random", "state-transform"):
        for path in (packages / dist / "src").rglob("*.py"):
            assert not pattern.search(path.read_text()), f"{path} imports state_nn"
