"""``Param`` with transforms (``ClipT``, ``SoftplusT``) and regularisers (``L1Reg``, ``L2Reg``)."""

import jax
import jax.numpy as jnp
import numpy as np
import numpy.testing as npt
import pytest

import state_core
import state_nn
import state_transform
from state_core import ParamState


def np_softplus(x):
    return np.log1p(np.exp(x))


# ---------------------------------------------------------------- transforms
def test_softplus_forward_and_inverse_values():
    t = state_nn.SoftplusT(0.5)
    x = np.array([-4.0, -0.3, 0.0, 2.0, 15.0], np.float32)
    npt.assert_allclose(t.forward(x), np_softplus(x) + 0.5, rtol=1e-6)
    npt.assert_allclose(t(x), t.forward(x))
    y = np.array([0.5001, 0.6, 1.5, 40.0, 200.0], np.float32)
    npt.assert_allclose(t.forward(t.inverse(y)), y, rtol=1e-5)
    # The inverse of the default (lower=0) at y=1 is log(e - 1).
    npt.assert_allclose(state_nn.SoftplusT().inverse(1.0), np.log(np.e - 1), rtol=1e-6)
    assert repr(t) == "SoftplusT(lower=0.5)"


def test_clip_forward_and_inverse_values():
    t = state_nn.ClipT(-1.0, 2.0)
    npt.assert_allclose(t.forward(jnp.array([-3.0, 0.5, 9.0])), [-1.0, 0.5, 2.0])
    npt.assert_allclose(t.inverse(jnp.array([-3.0, 1.5])), [-1.0, 1.5])
    assert repr(t) == "ClipT(lower=-1.0, upper=2.0)"
    with pytest.raises(ValueError, match=r"ClipT: lower must be below upper, got lower=1.0, upper=0.0"):
        state_nn.ClipT(1.0, 0.0)


def test_identity_and_custom_transform():
    npt.assert_allclose(state_nn.IdentityT()(jnp.array([1.0, -2.0])), [1.0, -2.0])
    with pytest.raises(NotImplementedError, match="Transform does not implement forward"):
        state_nn.Transform().forward(1.0)


# ---------------------------------------------------------------- regularisers
def test_l1_and_l2_losses():
    v = jnp.array([1.0, -2.0, 0.5])
    npt.assert_allclose(state_nn.L1Reg(0.01).loss(v), 0.035, rtol=1e-6)
    npt.assert_allclose(state_nn.L2Reg(0.01).loss(v), 0.0525, rtol=1e-6)
    npt.assert_allclose(state_nn.L1Reg()(v), 3.5)
    assert state_nn.L1Reg(0.5).reset_value() == 0.0
    assert repr(state_nn.L2Reg(0.1)) == "L2Reg(weight=0.1)"
    assert state_nn.L1Reg(fit_hyper=True).fit_hyper is True


def test_bad_regulariser_weights():
    with pytest.raises(ValueError, match=r"L1Reg: weight must be a finite number >= 0, got -1.0"):
        state_nn.L1Reg(-1.0)
    with pytest.raises(ValueError, match=r"L2Reg: weight must be a finite number >= 0, got nan"):
        state_nn.L2Reg(float("nan"))
    with pytest.raises(TypeError, match=r"L2Reg: weight must be a real number, got str 'big'"):
        state_nn.L2Reg("big")


# ---------------------------------------------------------------- Param
def test_param_stores_the_inverse_and_returns_the_forward():
    p = state_nn.Param(jnp.array([1.0, 2.0]), t=state_nn.SoftplusT(0.0), reg=state_nn.L2Reg(0.1))
    assert isinstance(p.val, ParamState)
    npt.assert_allclose(p.val.value, np.log(np.expm1([1.0, 2.0])), rtol=1e-6)
    npt.assert_allclose(p.value(), [1.0, 2.0], rtol=1e-6)
    npt.assert_allclose(p(), [1.0, 2.0], rtol=1e-6)
    npt.assert_allclose(p.reg_loss(), 0.5, rtol=1e-6)
    assert list(p.states()) == [("val",)]


def test_param_value_of_int_input_is_float():
    p = state_nn.Param(jnp.array([1, 2]))
    assert p.value().dtype == jnp.float32 and p.val.value.dtype == jnp.float32
    assert not p.val.value.weak_type
    npt.assert_allclose(p.value(), [1.0, 2.0])


def test_param_rejects_bad_arguments():
    with pytest.raises(TypeError, match=r"Param: t must be a state_nn Transform .*got function"):
        state_nn.Param(1.0, t=lambda x: x)
    with pytest.raises(TypeError, match=r"Param: reg must be a state_nn Regularization .*got float"):
        state_nn.Param(1.0, reg=0.1)
    with pytest.raises(TypeError, match="Param: precompute must be callable or None, got int"):
        state_nn.Param(1.0, precompute=3)


def test_param_value_outside_the_transform_range_is_rejected():
    with pytest.raises(
        ValueError,
        match=r"Param: 1 of 3 element\(s\) of value \(shape \(3,\)\) are outside the range of SoftplusT\(lower=0.0\)",
    ):
        state_nn.Param(jnp.array([1.0, 0.0, 2.0]), t=state_nn.SoftplusT())


def test_set_value_outside_the_transform_range_is_rejected_and_keeps_the_value():
    # Before, set_value stored the NaN / -inf inverse silently, unlike the constructor.
    p = state_nn.Param(jnp.array([1.0, 2.0]), t=state_nn.SoftplusT(), name="tau")
    with pytest.raises(
        ValueError,
        match=r"Param 'tau'.set_value: 1 of 2 element\(s\) of value \(shape \(2,\)\) are outside the range of "
        r"SoftplusT\(lower=0.0\)",
    ):
        p.set_value(jnp.array([3.0, -1.0]))
    npt.assert_allclose(p.value(), [1.0, 2.0], rtol=1e-6)
    assert bool(jnp.isfinite(p.val.value).all())
    fixed = state_nn.Param(jnp.array([2.0]), t=state_nn.SoftplusT(1.0), fit=False)
    with pytest.raises(ValueError, match=r"Param.set_value: 1 of 1 element\(s\)"):
        fixed.set_value(jnp.array([1.0]))  # on the bound: the inverse is -inf
    npt.assert_allclose(fixed.value(), [2.0], rtol=1e-6)


def test_reset_to_prior_outside_the_range_names_reset_to_prior():
    p = state_nn.Param(jnp.array([1.0]), t=state_nn.SoftplusT(), reg=state_nn.L2Reg())
    with pytest.raises(ValueError, match=r"Param.reset_to_prior: 1 of 1 element\(s\)"):
        p.reset_to_prior()  # the L2 prior's 0.0 is the softplus bound
    npt.assert_allclose(p.value(), [1.0], rtol=1e-6)


def test_set_value_of_a_traced_value_is_not_checked():
    p = state_nn.Param(jnp.array([1.0, 2.0]), t=state_nn.SoftplusT())

    @state_transform.jit
    def assign(v):
        p.set_value(v)

    assign(jnp.array([4.0, 5.0]))
    npt.assert_allclose(p.value(), [4.0, 5.0], rtol=1e-5)


def test_fixed_param_and_const_are_not_states():
    p = state_nn.Param(jnp.array([1.0, -1.0]), reg=state_nn.L1Reg(), fit=False)
    assert list(p.states()) == [] and p.reg_loss() == 0.0
    p.set_value(jnp.array([3.0, 4.0]))
    npt.assert_allclose(p.value(), [3.0, 4.0])
    c = state_nn.Const(jnp.array([2.0]))
    assert c.fit is False and list(c.states()) == []
    npt.assert_allclose(c.value(), [2.0])
    with pytest.raises(ValueError, match="Const is a fixed parameter: fit=True is not allowed"):
        state_nn.Const(1.0, fit=True)


def test_set_value_reset_to_prior_and_clip():
    p = state_nn.Param(jnp.array([1.0, 3.0]), t=state_nn.SoftplusT(), reg=state_nn.L2Reg(1.0))
    p.set_value(jnp.array([0.25, 8.0]))
    npt.assert_allclose(p.value(), [0.25, 8.0], rtol=1e-5)
    p.clip(0.5, 4.0)
    npt.assert_allclose(p.value(), [0.5, 4.0], rtol=1e-5)
    q = state_nn.Param(jnp.array([[1.0, -2.0]]), reg=state_nn.L1Reg())
    q.reset_to_prior()
    npt.assert_allclose(q.value(), [[0.0, 0.0]])
    assert q.val.value.shape == (1, 2)
    r = state_nn.Param(jnp.array([1.0]))
    r.reset_to_prior()  # no regulariser: unchanged
    npt.assert_allclose(r.value(), [1.0])


def test_set_value_with_the_wrong_shape_is_rejected_and_keeps_the_value():
    p = state_nn.Param(jnp.array([1.0, 2.0]), name="tau")
    with pytest.raises(
        ValueError, match=r"Param 'tau'.set_value: the new value has shape \(3,\) but the parameter has shape \(2,\)"
    ):
        p.set_value(jnp.ones(3))
    npt.assert_allclose(p.value(), [1.0, 2.0])
    fixed = state_nn.Const(jnp.zeros((2, 2)))
    with pytest.raises(
        ValueError, match=r"Param.set_value: the new value has shape \(\) but the parameter has shape \(2, 2\)"
    ):
        fixed.set_value(1.0)


def test_set_value_checks_the_shape_before_the_transform_range():
    # Out-of-range values of the wrong shape: the message is about the shapes, not the range.
    p = state_nn.Param(jnp.ones(2), t=state_nn.SoftplusT(), name="tau")
    with pytest.raises(
        ValueError,
        match=r"Param 'tau'.set_value: the new value has shape \(3,\) but the parameter has shape \(2,\) "
        r"\(dtype float32\); give a value of shape \(2,\) \(broadcast it first if needed, "
        r"e.g. jnp.broadcast_to\(value, \(2,\)\)\)",
    ):
        p.set_value(jnp.array([1.0, -1.0, 2.0]))
    npt.assert_array_equal(p.val.value, state_nn.SoftplusT().inverse(jnp.ones(2)))
    # also for a traced value, whose range cannot be checked
    with pytest.raises(ValueError, match=r"Param 'tau'.set_value: the new value has shape \(2, 2\)"):
        state_transform.jit(p.set_value)(jnp.ones((2, 2)))
    npt.assert_allclose(p.value(), [1.0, 1.0], rtol=1e-6)


def test_set_value_checks_the_dtype_and_converts_only_without_loss():
    p = state_nn.Param(jnp.array([1.0, 2.0]), name="w")
    with pytest.raises(
        ValueError,
        match=r"Param 'w'.set_value: the new value has dtype complex64 but the parameter has dtype float32 "
        r"\(shape \(2,\)\), and complex64 does not convert to float32 without loss; cast it first "
        r"\(value.astype\(jnp.float32\)\)",
    ):
        p.set_value(jnp.array([1.0, 2.0], jnp.complex64))
    npt.assert_array_equal(p.val.value, [1.0, 2.0])
    assert p.val.value.dtype == jnp.float32
    # narrower floats, integers and Python numbers take the parameter's dtype
    p.set_value(jnp.array([3.0, 4.0], jnp.float16))
    assert p.val.value.dtype == jnp.float32
    npt.assert_array_equal(p.val.value, [3.0, 4.0])
    p.set_value(np.array([5, 6]))
    assert p.val.value.dtype == jnp.float32
    npt.assert_array_equal(p.val.value, [5.0, 6.0])
    scalar = state_nn.Param(1.0)
    scalar.set_value(2)
    assert scalar.val.value.dtype == jnp.float32 and float(scalar.value()) == 2.0


def test_precompute_is_applied_after_the_transform():
    p = state_nn.Param(jnp.array([1.0, 2.0]), t=state_nn.ClipT(0.0, 1.5), precompute=lambda v: v * 10)
    npt.assert_allclose(p.value(), [10.0, 15.0])


def test_gradient_flows_through_the_transform_and_keeps_the_value_positive():
    class Net(state_nn.Module):
        def __init__(self):
            self.tau = state_nn.Param(jnp.array([1.0, 2.0]), t=state_nn.SoftplusT(), reg=state_nn.L2Reg(0.5))
            self.alpha = state_nn.Param(jnp.array([3.0]), t=state_nn.ClipT(0.0, 5.0), reg=state_nn.L1Reg(2.0))

    net = Net()
    params = net.states(ParamState)
    assert list(params) == [("tau", "val"), ("alpha", "val")]
    grads = state_transform.grad(net.reg_loss, grad_states=params)()
    v = np.log(np.expm1([1.0, 2.0]))
    sig = 1.0 / (1.0 + np.exp(-v))
    npt.assert_allclose(grads[("tau", "val")], 2 * 0.5 * np_softplus(v) * sig, rtol=1e-5)
    npt.assert_allclose(grads[("alpha", "val")], [2.0])
    # A large gradient step leaves the stored value negative but the value positive.
    net.tau.val.value = net.tau.val.value - 5.0 * grads[("tau", "val")]
    assert bool((net.tau.val.value < 0).all())
    assert bool((net.tau.value() > 0).all())
    npt.assert_allclose(net.reg_loss(), 0.5 * float(jnp.sum(net.tau.value() ** 2)) + 6.0, rtol=1e-5)


def test_module_reg_loss_is_zero_without_params():
    assert state_nn.Linear(2, 2).reg_loss() == 0.0


def test_param_created_inside_jit_uses_traced_values():
    out = jax.jit(lambda x: state_nn.Param(x, t=state_nn.SoftplusT()).value())(jnp.array([1.0, 3.0]))
    npt.assert_allclose(out, [1.0, 3.0], rtol=1e-5)


def test_params_under_map_are_per_member():
    class Cell(state_nn.Module):
        def init_state(self):
            self.tau = state_nn.Param(jnp.array([2.0]), t=state_nn.SoftplusT(1.0))

        def update(self, x):
            return x / self.tau.value()

    ens = state_nn.Map(Cell(), init_map_size=3)
    ens.init_all_states()
    assert ens.module.tau.val.value.shape == (3, 1)
    ens.module.tau.val.value = ens.module.tau.val.value.at[1].set(0.0)  # member 1: tau = 1 + log 2
    out = ens(jnp.ones((3, 1)))
    npt.assert_allclose(out[:, 0], [0.5, 1.0 / (1.0 + np.log(2.0)), 0.5], rtol=1e-5)


def test_param_repr():
    p = state_nn.Param(jnp.ones(3), t=state_nn.SoftplusT(), reg=state_nn.L2Reg(0.1), name="tau")
    # The state's own repr (state_core's) is nested, indented, under ``val=``.
    state_text = repr(p.val).replace("\n", "\n  ")
    assert repr(p) == (
        f"Param(\n  name='tau',\n  val={state_text},\n  t=SoftplusT(lower=0.0),\n  reg=L2Reg(weight=0.1)\n)"
    )


def test_parameters_and_param_modules():
    class Net(state_nn.Module):
        def __init__(self):
            self.scale = ParamState(jnp.full((), 2.0))
            self.h = state_core.HiddenState(jnp.zeros(1))
            self.tau = state_nn.Param(jnp.array([1.0]), t=state_nn.SoftplusT(), reg=state_nn.L1Reg(3.0))
            self.fixed = state_nn.Const(jnp.array([5.0]))
            self.fc = state_nn.Linear(1, 1, w_init=jnp.ones((1, 1)))

    net = Net()
    assert list(net.named_parameters()) == [("scale",), ("tau", "val"), ("fc", "weight"), ("fc", "bias")]
    # a Param held directly is one of the module's own parameters; Linear's are not
    assert list(net.named_parameters(recurse=False)) == [("scale",), ("tau", "val")]
    assert net.parameters(recurse=False) == [net.scale, net.tau.val]
    assert net.parameters()[0] is net.scale
    npt.assert_allclose(
        [float(jnp.sum(p.value)) for p in net.parameters()], [2.0, float(np.log(np.expm1(1.0))), 1.0, 0.0], rtol=1e-6
    )
    assert list(net.named_param_modules()) == [("tau",), ("fixed",)]
    assert net.param_modules() == [net.tau, net.fixed]
    npt.assert_allclose(net.reg_loss(), 3.0, rtol=1e-6)  # Const (fit=False) adds nothing
