"""brainstate.nn's functions: activations, clip_grad_norm, init_all_states / reset_all_states."""

import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
import state_nn
import state_random
from state_core.filter import PathContains

X = jnp.array([[-3.0, -1.0, -0.5, -0.25, 0.0], [0.25, 0.5, 1.0, 3.0, 7.0]])

# name -> (our call, reference call); the reference is jax.nn / jax.numpy where the maths is the same.
JAX_REFERENCES = {
    "tanh": (lambda f: f(X), lambda: jnp.tanh(X)),
    "relu": (lambda f: f(X), lambda: jax.nn.relu(X)),
    "squareplus": (lambda f: f(X, 2.0), lambda: jax.nn.squareplus(X, 2.0)),
    "softplus": (lambda f: f(X), lambda: jax.nn.softplus(X)),
    "soft_sign": (lambda f: f(X), lambda: jax.nn.soft_sign(X)),
    "sigmoid": (lambda f: f(X), lambda: jax.nn.sigmoid(X)),
    "silu": (lambda f: f(X), lambda: jax.nn.silu(X)),
    "swish": (lambda f: f(X), lambda: jax.nn.swish(X)),
    "log_sigmoid": (lambda f: f(X), lambda: jax.nn.log_sigmoid(X)),
    "elu": (lambda f: f(X, 0.5), lambda: jax.nn.elu(X, 0.5)),
    "leaky_relu": (lambda f: f(X, 0.2), lambda: jax.nn.leaky_relu(X, 0.2)),
    "hard_tanh": (lambda f: f(X), lambda: jax.nn.hard_tanh(X)),
    "celu": (lambda f: f(X, 2.0), lambda: jax.nn.celu(X, 2.0)),
    "selu": (lambda f: f(X), lambda: jax.nn.selu(X)),
    "gelu": (lambda f: f(X), lambda: jax.nn.gelu(X, approximate=True)),
    "relu6": (lambda f: f(X), lambda: jax.nn.relu6(X)),
    "hard_sigmoid": (lambda f: f(X), lambda: jax.nn.hard_sigmoid(X)),
    "hard_silu": (lambda f: f(X), lambda: jax.nn.hard_silu(X)),
    "hard_swish": (lambda f: f(X), lambda: jax.nn.hard_swish(X)),
    "mish": (lambda f: f(X), lambda: jax.nn.mish(X)),
    "sparse_plus": (lambda f: f(X), lambda: jax.nn.sparse_plus(X)),
    "sparse_sigmoid": (lambda f: f(X), lambda: jax.nn.sparse_sigmoid(X)),
    "glu": (lambda f: f(X[:, :4], axis=1), lambda: jax.nn.glu(X[:, :4], axis=1)),
    "logsumexp": (lambda f: f(X, axis=0, keepdims=True), lambda: jax.nn.logsumexp(X, axis=0, keepdims=True)),
    "log_softmax": (lambda f: f(X, axis=0), lambda: jax.nn.log_softmax(X, axis=0)),
    "softmax": (lambda f: f(X), lambda: jax.nn.softmax(X)),
    "standardize": (lambda f: f(X, -1, None, 1e-3), lambda: jax.nn.standardize(X, axis=-1, epsilon=1e-3)),
    "one_hot": (lambda f: f(jnp.array([0, 2, 5]), 3), lambda: jax.nn.one_hot(jnp.array([0, 2, 5]), 3)),
}

XN = np.asarray(X)
# Functions with no jax.nn twin: checked against NumPy formulas.
NUMPY_REFERENCES = {
    "hard_tanh": (lambda f: f(X, -0.5, 2.0), lambda: np.clip(XN, -0.5, 2.0)),
    "gelu": (lambda f: f(X, False), lambda: np.asarray(jax.nn.gelu(X, approximate=False))),
    "hard_shrink": (lambda f: f(X), lambda: np.where(np.abs(XN) > 0.5, XN, 0.0)),
    "soft_shrink": (lambda f: f(X, 0.25), lambda: np.sign(XN) * np.maximum(np.abs(XN) - 0.25, 0.0)),
    "tanh_shrink": (lambda f: f(X), lambda: XN - np.tanh(XN)),
    "prelu": (lambda f: f(X), lambda: np.where(XN >= 0, XN, 0.25 * XN)),
    "softmin": (lambda f: f(X, 0), lambda: np.exp(-XN) / np.exp(-XN).sum(axis=0)),
    "softmax_where": (
        lambda f: f(X, where=X > -0.6),
        lambda: np.exp(XN) * (XN > -0.6) / (np.exp(XN) * (XN > -0.6)).sum(-1, keepdims=True),
    ),
}

# brainstate 0.5.4's signatures: (parameter names and defaults), in order.
BRAINSTATE_SIGNATURES = {
    "tanh": "(x)",
    "relu": "(x)",
    "squareplus": "(x, b=4)",
    "softplus": "(x)",
    "soft_sign": "(x)",
    "sigmoid": "(x)",
    "silu": "(x)",
    "swish": "(x)",
    "log_sigmoid": "(x)",
    "elu": "(x, alpha=1.0)",
    "leaky_relu": "(x, negative_slope=0.01)",
    "hard_tanh": "(x, min_val=-1.0, max_val=1.0)",
    "celu": "(x, alpha=1.0)",
    "selu": "(x)",
    "gelu": "(x, approximate=True)",
    "glu": "(x, axis=-1)",
    "logsumexp": "(a, axis=None, b=None, keepdims=False, return_sign=False, where=None)",
    "log_softmax": "(x, axis=-1, where=None)",
    "softmax": "(x, axis=-1, where=None)",
    "standardize": "(x, axis=-1, variance=None, epsilon=1e-05, where=None)",
    "one_hot": "(x, num_classes, *, dtype=None, axis=-1)",
    "relu6": "(x)",
    "hard_sigmoid": "(x)",
    "hard_silu": "(x)",
    "hard_swish": "(x)",
    "hard_shrink": "(x, lambd=0.5)",
    "rrelu": "(x, lower=0.125, upper=0.3333333333333333)",
    "mish": "(x)",
    "soft_shrink": "(x, lambd=0.5)",
    "prelu": "(x, a=0.25)",
    "tanh_shrink": "(x)",
    "softmin": "(x, axis=-1)",
    "sparse_plus": "(x)",
    "sparse_sigmoid": "(x)",
}


def _plain_signature(fun):
    params = []
    star = False
    for p in inspect.signature(fun).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        params.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return "(" + ", ".join(params) + ")"


@pytest.mark.parametrize("name", sorted(BRAINSTATE_SIGNATURES))
def test_signature_matches_brainstate(name):
    assert _plain_signature(getattr(state_nn, name)) == BRAINSTATE_SIGNATURES[name]


def test_every_brainstate_activation_is_exported():
    assert set(BRAINSTATE_SIGNATURES) <= set(state_nn.__all__)


@pytest.mark.parametrize("name", sorted(JAX_REFERENCES))
def test_against_jax(name):
    ours, reference = JAX_REFERENCES[name]
    out, expected = ours(getattr(state_nn, name)), reference()
    assert out.shape == expected.shape and out.dtype == expected.dtype
    assert_allclose(out, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(NUMPY_REFERENCES))
def test_against_numpy(name):
    ours, reference = NUMPY_REFERENCES[name]
    assert_allclose(ours(getattr(state_nn, name.split("_where")[0])), reference(), rtol=1e-6, atol=1e-7)


def test_aliases_are_the_same_functions():
    assert state_nn.swish is state_nn.silu
    assert state_nn.hard_swish is state_nn.hard_silu


def test_shrinks_keep_integer_dtypes():
    ints = jnp.array([-2, 0, 1, 3])
    assert state_nn.hard_shrink(ints, 1).dtype == ints.dtype
    assert_allclose(state_nn.hard_shrink(ints, 1), [-2, 0, 0, 3])
    assert state_nn.soft_shrink(ints, 1).dtype == ints.dtype
    assert_allclose(state_nn.soft_shrink(ints, 1), [-1, 0, 0, 2])


def test_prelu_with_a_learnable_slope_array():
    a = jnp.array([0.1, 0.2])
    assert_allclose(state_nn.prelu(jnp.array([[-1.0, -1.0], [2.0, -3.0]]), a), [[-0.1, -0.2], [2.0, -0.6]])


def test_rrelu_draws_its_slopes_from_the_default_stream():
    x = jnp.array([-1.0, -2.0, 3.0, -4.0])
    state_random.seed(11)
    out = state_nn.rrelu(x, 0.1, 0.3)
    state_random.seed(11)
    slopes = state_random.uniform(0.1, 0.3, size=(4,), dtype=jnp.float32)
    assert_allclose(out, np.where(np.asarray(x) >= 0, x, np.asarray(slopes) * np.asarray(x)))
    assert bool(((slopes >= 0.1) & (slopes <= 0.3)).all())
    assert state_nn.rrelu(jnp.array([-1, 2])).dtype == jnp.float32  # integer input: float slopes


def test_activations_work_in_sequential_and_under_grad():
    net = state_nn.Sequential(state_nn.Linear(2, 2, w_init=jnp.eye(2)), state_nn.relu, state_nn.softmax)
    assert_allclose(net(jnp.array([0.0, -1.0])), [0.5, 0.5])
    assert_allclose(jax.grad(lambda v: state_nn.leaky_relu(v, 0.1))(-2.0), 0.1)


# ---------------------------------------------------------------- clip_grad_norm
GRADS = {"w": jnp.array([[3.0, -4.0], [0.0, 12.0]]), "b": jnp.array([-84.0])}
FLAT = np.array([3.0, -4.0, 0.0, 12.0, -84.0])


@pytest.mark.parametrize(
    ("norm_type", "expected"),
    [
        (2.0, 85.0),  # sqrt(9 + 16 + 144 + 7056)
        (None, 85.0),
        (1, 103.0),
        (3, float(np.sum(np.abs(FLAT) ** 3) ** (1 / 3))),
        ("inf", 84.0),
        (math.inf, 84.0),
        ("-inf", 0.0),
        (-jnp.inf, 0.0),
    ],
)
def test_clip_grad_norm_by_hand(norm_type, expected):
    clipped, norm = state_nn.clip_grad_norm(GRADS, 17.0, norm_type, return_norm=True)
    assert_allclose(norm, expected, rtol=1e-6)
    factor = min(1.0, 17.0 / (expected + 1e-6))
    assert set(clipped) == {"w", "b"}
    assert_allclose(clipped["w"], np.asarray(GRADS["w"]) * factor, rtol=1e-6)
    assert_allclose(clipped["b"], np.asarray(GRADS["b"]) * factor, rtol=1e-6)


def test_clip_grad_norm_leaves_small_gradients_alone():
    out = state_nn.clip_grad_norm(GRADS, 1000.0)
    assert_allclose(out["w"], GRADS["w"])
    assert_allclose(out["b"], GRADS["b"])


def test_clip_grad_norm_keeps_dtypes_structure_and_works_under_jit():
    grads = {"a": jnp.full(4, 2.0, jnp.bfloat16), "b": [jnp.full(2, 2.0)]}
    clipped = jax.jit(state_nn.clip_grad_norm)(grads, jnp.float32(2.0))
    assert clipped["a"].dtype == jnp.bfloat16 and clipped["b"][0].dtype == jnp.float32
    # norm sqrt(6 * 4) ~ 4.899, factor 2 / 4.899
    assert_allclose(clipped["b"][0], np.full(2, 2.0 * 2.0 / np.sqrt(24.0)), rtol=1e-5)


def test_clip_grad_norm_of_an_empty_tree_and_zero_gradients():
    assert state_nn.clip_grad_norm({}, 1.0) == {}
    out, norm = state_nn.clip_grad_norm([], 1.0, return_norm=True)
    assert out == [] and float(norm) == 0.0
    zeros = state_nn.clip_grad_norm({"w": jnp.zeros(3)}, 1.0)
    assert_allclose(zeros["w"], np.zeros(3))


def test_clip_grad_norm_rejects_bad_norm_types():
    with pytest.raises(ValueError, match="norm_type must be a number, 'inf' or '-inf', got 'fro'"):
        state_nn.clip_grad_norm(GRADS, 1.0, "fro")
    with pytest.raises(ValueError, match=r"norm_type must be positive \(or \+-inf\), got 0"):
        state_nn.clip_grad_norm(GRADS, 1.0, 0)
    with pytest.raises(TypeError, match="norm_type must be a number, got bool"):
        state_nn.clip_grad_norm(GRADS, 1.0, True)


# ---------------------------------------------------------------- init_all_states / reset_all_states
class Recorder(state_nn.Module):
    def __init__(self, log, label, *children):
        self.log, self.label = log, label
        self.kids = list(children)

    def init_state(self, *args, **kwargs):
        self.log.append(("init", self.label, args, kwargs))

    def reset_state(self, *args, **kwargs):
        self.log.append(("reset", self.label, args, kwargs))


def _tree(log):
    return Recorder(log, "root", Recorder(log, "a", Recorder(log, "a1")), Recorder(log, "b"))


def test_function_forms_return_the_module_and_pass_arguments():
    log = []
    root = _tree(log)
    assert state_nn.init_all_states(root, 3, batch_size=2) is root
    assert [entry[1] for entry in log] == ["a1", "a", "b", "root"]
    assert all(entry[0] == "init" and entry[2:] == ((3,), {"batch_size": 2}) for entry in log)
    log.clear()
    assert state_nn.reset_all_states(root, 7) is root
    assert [(kind, label, args) for kind, label, args, _ in log] == [
        ("reset", "a1", (7,)),
        ("reset", "a", (7,)),
        ("reset", "b", (7,)),
        ("reset", "root", (7,)),
    ]


@pytest.mark.parametrize(
    ("exclude", "ran"),
    [
        (lambda root: root.kids[0], ["a1", "b", "root"]),  # a module object
        (lambda root: (root.kids[0], root.kids[1]), ["a1", "root"]),  # several
        (lambda root: PathContains(0), ["b", "root"]),  # a path filter: ('kids', 0) and ('kids', 0, 'kids', 0)
        (lambda root: lambda path, m: m.label.startswith("a"), ["b", "root"]),  # a predicate
        (lambda root: Recorder, []),  # a class
    ],
)
def test_node_to_exclude(exclude, ran):
    log = []
    root = _tree(log)
    state_nn.init_all_states(root, node_to_exclude=exclude(root))
    assert [entry[1] for entry in log] == ran
    log.clear()
    root.reset_all_states(node_to_exclude=exclude(root))
    assert [entry[1] for entry in log] == ran
    assert all(entry[3] == {} for entry in log)  # node_to_exclude is not passed to the hooks


def test_node_to_exclude_reaches_inside_a_map():
    class Member(state_nn.Module):
        def __init__(self):
            self.skip = Leaf(1.0)
            self.keep = Leaf(2.0)

    class Leaf(state_nn.Module):
        def __init__(self, start):
            self.start = start

        def init_state(self):
            self.v = state_core.ShortTermState(jnp.full((), self.start))

    ensemble = state_nn.Map(Member(), init_map_size=3)
    holder = state_nn.Sequential(ensemble)
    state_nn.init_all_states(holder, node_to_exclude=PathContains("skip"))
    assert not hasattr(ensemble.module.skip, "v")
    assert_allclose(ensemble.module.keep.v.value, [2.0, 2.0, 2.0])


def test_function_forms_need_a_module():
    with pytest.raises(TypeError, match=r"init_all_states expects a state_nn\.Module as its first argument, got dict"):
        state_nn.init_all_states({})
    with pytest.raises(TypeError, match=r"reset_all_states expects a state_nn\.Module .* got int"):
        state_nn.reset_all_states(3)
