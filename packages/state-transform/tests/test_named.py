"""``named_call`` and ``named_scope``: names in the jaxpr, states, static arguments, the ``ir_compilation`` path."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import ParamState, State, environ
from state_core.engine import open_jaxpr
from state_transform import grad, jit, named_call, named_scope, scan


def name_stacks(jaxpr):
    """The name stacks of every equation of ``jaxpr`` and of the jaxprs nested in its equations."""
    found = []
    for eqn in jaxpr.eqns:
        found.append(str(eqn.source_info.name_stack))
        for param in eqn.params.values():
            inner = open_jaxpr(param)
            if isinstance(inner, jax.extend.core.Jaxpr):
                found.extend(name_stacks(inner))
    return found


def stacks_of(fun, *args, **kwargs):
    return name_stacks(jax.make_jaxpr(fun)(*args, **kwargs).jaxpr)


@pytest.fixture
def compiling():
    """Run the test body with ``ir_compilation`` set (as brainstate programs do)."""
    with environ.context(ir_compilation=True):
        yield


# ---------------------------------------------------------------------------------- named_call
def test_named_call_three_spellings_put_the_name_in_the_name_stack():
    @named_call(name="block")
    def with_name(x):
        return jnp.sin(x) * 2.0

    @named_call
    def my_layer(x):
        return jnp.cos(x)

    def inc(x):
        return x + 1.0

    direct = named_call(inc, name="increment")
    x = jnp.array([0.5, 1.0])
    assert_allclose(with_name(x), np.sin([0.5, 1.0]) * 2.0, rtol=1e-6)
    assert_allclose(my_layer(x), np.cos([0.5, 1.0]), rtol=1e-6)
    assert_allclose(direct(x), [1.5, 2.0])
    assert stacks_of(with_name, x) == ["block", "block"]
    assert stacks_of(my_layer, x) == ["my_layer"]
    assert stacks_of(direct, x) == ["increment"]


def test_named_call_keeps_the_function_metadata_and_binds_as_a_method():
    class Model:
        scale = 3.0

        @named_call
        def forward(self, x):
            """Scale x."""
            return x * self.scale

    assert Model.forward.__name__ == "forward"
    assert Model.forward.__doc__ == "Scale x."
    assert Model.forward.__wrapped__ is not None
    assert float(Model().forward(2.0)) == 6.0
    assert stacks_of(Model().forward, 1.0) == ["forward"]


def test_named_call_nests_names():
    @named_call(name="inner")
    def inner(x):
        return x * 2.0

    @named_call(name="outer")
    def outer(x):
        return inner(x) + 1.0

    assert stacks_of(outer, 1.0) == ["outer/inner", "outer"]


def test_named_call_reads_and_writes_states_eagerly_and_under_jit():
    counter = State(jnp.zeros(()))
    weight = ParamState(jnp.full((2,), 3.0))

    @named_call(name="step")
    def step(x):
        counter.value = counter.value + 1.0
        return x * weight.value

    assert_allclose(step(jnp.array([1.0, 2.0])), [3.0, 6.0])
    assert float(counter.value) == 1.0
    compiled = jit(step)
    assert_allclose(compiled(jnp.array([1.0, 1.0])), [3.0, 3.0])
    assert_allclose(compiled(jnp.array([2.0, 2.0])), [6.0, 6.0])
    assert float(counter.value) == 3.0
    program = compiled.lower(jnp.array([1.0, 1.0])).as_text(debug_info=True)
    assert "step" in program


def test_named_call_composes_with_grad_scan_and_vmap():
    weight = ParamState(jnp.array([1.0, 2.0]))

    @named_call(name="loss")
    def loss(x):
        return jnp.sum((weight.value * x) ** 2)

    grads = grad(loss, grad_states=[weight])(jnp.array([1.0, 1.0]))
    assert_allclose(grads[0], [2.0, 4.0])
    assert_allclose(jax.grad(named_call(lambda x: jnp.sum(x**2), name="sq"))(jnp.array([1.0, 3.0])), [2.0, 6.0])
    assert_allclose(jax.vmap(named_call(jnp.sin, name="sine"))(jnp.zeros(3)), np.zeros(3))

    total = State(jnp.zeros(()))

    @named_call(name="body")
    def body(carry, x):
        total.value = total.value + x
        return carry + x, total.value

    carry, ys = scan(body, 0.0, jnp.arange(4.0))
    assert float(carry) == 6.0
    assert_allclose(ys, [0.0, 1.0, 3.0, 6.0])
    assert float(total.value) == 6.0


def test_named_call_bad_arguments():
    with pytest.raises(TypeError, match=r"named_call: `fun` must be callable, got int"):
        named_call(3)
    with pytest.raises(TypeError, match=r"pass it by keyword: named_call\(name='block'\)"):
        named_call("block")
    with pytest.raises(TypeError, match=r"named_call: `name` must be a str or None, got int 3"):
        named_call(jnp.sin, name=3)
    with pytest.raises(TypeError, match=r"`name` must be a str or None"):
        named_call(name=("a",))


# ---------------------------------------------------------------------------------- named_scope
def test_named_scope_calls_directly_by_default_and_names_the_operations():
    traced = []

    @named_scope("layer")
    def layer(x, w):
        traced.append(1)
        return x @ w

    x, w = jnp.ones((2, 3)), jnp.ones((3, 4))
    assert_allclose(layer(x, w), np.full((2, 4), 3.0))
    assert_allclose(layer(x, w), np.full((2, 4), 3.0))
    assert len(traced) == 2, "without ir_compilation the function runs on every call"
    assert stacks_of(layer, x, w) == ["layer"]


def test_named_scope_under_ir_compilation_is_jitted_and_named(compiling):
    @named_scope("layer")
    def layer(x):
        return jnp.tanh(x) * 2.0

    jaxpr = jax.make_jaxpr(layer)(jnp.ones(3)).jaxpr
    assert [eqn.primitive.name for eqn in jaxpr.eqns] == ["jit"]
    assert jaxpr.eqns[0].params["name"] == "layer"
    assert set(name_stacks(jaxpr)) == {"", "layer"}
    assert_allclose(layer(jnp.zeros(3)), np.zeros(3))


def test_named_scope_keeps_metadata_and_exposes_fn():
    def original(x):
        """Double x."""
        return x * 2

    wrapped = named_scope("double")(original)
    assert wrapped.fn is original
    assert wrapped.__name__ == "original"
    assert wrapped.__doc__ == "Double x."
    assert wrapped.__wrapped__ is original


@pytest.mark.parametrize("flag", [False, True])
def test_named_scope_reads_and_writes_states(flag):
    total = State(jnp.zeros(2))
    scale = ParamState(jnp.array([1.0, 10.0]))

    @named_scope("accumulate")
    def accumulate(x):
        total.value = total.value + x * scale.value
        return total.value.sum()

    with environ.context(ir_compilation=flag):
        first = accumulate(jnp.ones(2))
        second = accumulate(jnp.full(2, 2.0))
    assert float(first) == 11.0
    assert float(second) == 33.0
    assert_allclose(total.value, [3.0, 30.0])
    assert_allclose(scale.value, [1.0, 10.0])


def test_named_scope_inside_a_jit_with_states(compiling):
    total = State(jnp.array([1.0, 2.0]))

    @named_scope("inner")
    def update(x):
        total.value = total.value + x
        return total.value

    @jit
    def outer(x):
        return update(x) * 2.0

    assert_allclose(outer(jnp.ones(2)), [4.0, 6.0])
    assert_allclose(outer(jnp.ones(2)), [6.0, 8.0])
    assert_allclose(total.value, [3.0, 4.0])


def test_the_global_setting_turns_compilation_on_too():
    traced = []

    @named_scope("f")
    def f(x):
        traced.append(1)
        return x + 1.0

    environ.set(ir_compilation=True)
    try:
        for _ in range(3):
            assert float(f(jnp.asarray(1.0))) == 2.0
    finally:
        environ.pop("ir_compilation")
    assert len(traced) == 1
    f(jnp.asarray(1.0))
    assert len(traced) == 2


def test_jit_is_reused_across_calls_with_the_same_static_configuration(compiling):
    traced = []

    @named_scope("power", static_argnums=1)
    def power(x, n):
        traced.append(n)
        return x**n

    for _ in range(3):
        assert_allclose(power(jnp.array([2.0, 3.0]), 2), [4.0, 9.0])
    assert traced == [2]
    assert_allclose(power(jnp.array([2.0, 3.0]), 3), [8.0, 27.0])
    assert_allclose(power(jnp.array([2.0, 3.0]), 2), [4.0, 9.0])
    assert traced == [2, 3], "a new static value traces once; an old one is still compiled"


@pytest.mark.parametrize(
    ("argnums", "argnames", "call"),
    [
        (1, None, lambda f, x: f(x, 2, 10)),
        ((1, 2), None, lambda f, x: f(x, 2, 10)),
        ([1, 2], None, lambda f, x: f(x, 2, 10)),
        ((-1, -2), None, lambda f, x: f(x, 2, 10)),
        (None, "n", lambda f, x: f(x, n=2, scale=10)),
        (None, ("n", "scale"), lambda f, x: f(x, n=2, scale=10)),
        (1, "scale", lambda f, x: f(x, 2, scale=10)),
    ],
)
def test_static_arguments_are_python_values_inside(compiling, argnums, argnames, call):
    seen = []

    @named_scope("scaled_power", static_argnums=argnums, static_argnames=argnames)
    def scaled_power(x, n=1, scale=1):
        seen.append((type(n), type(scale)))
        return (x**n) * scale

    assert_allclose(call(scaled_power, jnp.array([2.0, 3.0])), [40.0, 90.0])
    assert_allclose(call(scaled_power, jnp.array([1.0, 2.0])), [10.0, 40.0])
    assert len(seen) == 1, "traced once"
    assert seen[0][0] is int, "a static value reaches the body as the Python value"


def test_a_static_mode_string_selects_the_branch(compiling):
    @named_scope("pick", static_argnums=-1)
    def pick(x, y, mode):
        return x + y if mode == "add" else x - y

    x, y = jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0])
    assert_allclose(pick(x, y, "add"), [4.0, 6.0])
    assert_allclose(pick(x, y, "sub"), [-2.0, -2.0])


def test_callable_static_configuration_is_computed_per_call(compiling):
    traced = []
    asked = []

    def which(*args, **kwargs):
        asked.append(len(args))
        return (1,) if isinstance(args[1], float) else ()

    @named_scope("times", static_argnums=which, static_argnames=lambda *a, **k: "unit" if "unit" in k else None)
    def times(x, n, unit=1.0):
        traced.append(type(n))
        return x * n * unit

    assert float(times(jnp.asarray(2.0), 3.0)) == 6.0  # n static
    assert float(times(jnp.asarray(2.0), jnp.asarray(3.0))) == 6.0  # n traced
    assert float(times(jnp.asarray(4.0), 3.0)) == 12.0  # n static again: compiled
    assert float(times(jnp.asarray(1.0), 3.0, unit=2.0)) == 6.0  # n and unit static
    assert asked == [2, 2, 2, 2]
    assert traced[0] is float and traced[2] is float
    assert len(traced) == 3


def test_many_static_configurations_stay_correct_and_compiled():
    # More configurations than the decorator keeps jit objects for (16): each is still
    # right, and one whose jit object was dropped finds its program again (no new trace).
    traced = []

    @named_scope("total", static_argnums=lambda *args: tuple(range(1, len(args))))
    def total(x, *rest):
        traced.append(len(rest))
        return x + sum(rest)

    with environ.context(ir_compilation=True):
        for n in range(20):
            assert float(total(jnp.asarray(1.0), *range(n))) == 1.0 + sum(range(n))
        assert float(total(jnp.asarray(1.0))) == 1.0
    assert traced == list(range(20))


def test_named_scope_as_a_method():
    class Module:
        def __init__(self, scale):
            self.scale = scale

        @named_scope("compute", static_argnums=0)
        def compute(self, x):
            return x * self.scale

        @named_scope("power", static_argnums=2)
        def power(self, x, n):
            return x**n * self.scale

        @named_scope("process", static_argnames="mode")
        def process(self, x, mode="add"):
            return x + 1 if mode == "add" else x - 1

    module = Module(3.0)
    x = jnp.array([1.0, 2.0])
    assert_allclose(module.compute(x), [3.0, 6.0])
    assert_allclose(module.power(x, 2), [3.0, 12.0])
    assert_allclose(module.process(x, mode="sub"), [0.0, 1.0])
    assert Module.compute.fn.__name__ == "compute"
    with environ.context(ir_compilation=True):
        assert_allclose(module.compute(x), [3.0, 6.0])
        assert_allclose(Module(2.0).compute(x), [2.0, 4.0])


def test_method_without_a_static_instance_fails_under_ir_compilation(compiling):
    class Module:
        scale = 3.0

        @named_scope("compute")
        def compute(self, x):
            return x * self.scale

    with pytest.raises(TypeError, match=r"jit\(compute\): positional argument 0 is a Module, which JAX cannot trace"):
        Module().compute(jnp.ones(2))


def test_an_outer_jit_follows_the_setting_it_read():
    traced = []

    @named_scope("inner")
    def inner(x):
        traced.append(1)
        return x * 2.0

    outer = jit(lambda x: inner(x) + 1.0)
    assert_allclose(outer(jnp.ones(2)), [3.0, 3.0])
    assert_allclose(outer(jnp.ones(2)), [3.0, 3.0])
    assert len(traced) == 1
    with environ.context(ir_compilation=True):
        assert_allclose(outer(jnp.ones(2)), [3.0, 3.0])
        nested = [eqn for eqn in open_jaxpr(jax.make_jaxpr(outer)(jnp.ones(2))).eqns if eqn.primitive.name == "jit"]
    assert len(traced) == 2, "the outer jit read ir_compilation: a new value traces it again"
    assert len(nested) == 1
    inner_jits = [eqn.params["name"] for eqn in nested[0].params["jaxpr"].eqns if eqn.primitive.name == "jit"]
    assert inner_jits == ["inner"]


# ---------------------------------------------------------------------------------- errors
def test_named_scope_bad_name():
    def f(x):
        return x

    with pytest.raises(TypeError, match=r"named_scope: `name` must be a str, got function.*@named_call"):
        named_scope(f)
    with pytest.raises(TypeError, match=r"`name` must be a str, got NoneType"):
        named_scope(None)


def test_named_scope_bad_decorated_object():
    with pytest.raises(TypeError, match=r"named_scope\('x'\): the decorated object must be callable, got int"):
        named_scope("x")(3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"static_argnums": "1"}, r"`static_argnums` must be None, an int or a sequence of ints.*got str '1'"),
        ({"static_argnums": (1, 2.0)}, r"`static_argnums` must be None, an int or a sequence of ints"),
        ({"static_argnums": True}, r"`static_argnums` must be None.*got bool True"),
        ({"static_argnames": 3}, r"`static_argnames` must be None, a str or a sequence of strs.*got int 3"),
        ({"static_argnames": ("n", 1)}, r"`static_argnames` must be None, a str or a sequence of strs"),
    ],
)
def test_named_scope_bad_static_configuration(kwargs, message):
    with pytest.raises(TypeError, match=message):
        named_scope("x", **kwargs)


def test_bad_computed_configuration_fails_before_the_body_and_changes_no_state(compiling):
    total = State(jnp.zeros(()))

    def body(x, n):
        total.value = total.value + x * n
        return total.value

    returns_float = named_scope("f", static_argnums=lambda *a: 1.5)(body)
    with pytest.raises(TypeError, match=r"`static_argnums` must be None.*its function returned float 1.5"):
        returns_float(jnp.asarray(1.0), 2)
    returns_int = named_scope("f", static_argnames=lambda *a: 1)(body)
    with pytest.raises(TypeError, match=r"`static_argnames` must be None.*its function returned int 1"):
        returns_int(jnp.asarray(1.0), 2)
    too_far = named_scope("f", static_argnums=-3)(body)
    with pytest.raises(ValueError, match=r"`static_argnums` \(-3,\) counts back past the first of the 2"):
        too_far(jnp.asarray(1.0), 2)
    assert float(total.value) == 0.0


def test_a_failing_compiled_call_leaves_states_untouched(compiling):
    total = State(jnp.array([1.0, 2.0]))

    @named_scope("fails", static_argnums=1)
    def fails(x, limit):
        total.value = total.value + x
        if limit < 0:
            raise ValueError("limit must be >= 0")
        return total.value

    with pytest.raises(ValueError, match="limit must be >= 0"):
        fails(jnp.ones(2), -1)
    assert_allclose(total.value, [1.0, 2.0])
    assert_allclose(fails(jnp.ones(2), 1), [2.0, 3.0])
    assert_allclose(total.value, [2.0, 3.0])
