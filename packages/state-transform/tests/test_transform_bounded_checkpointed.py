"""bounded_while_loop, checkpointed_scan and checkpointed_for_loop: values, state carries, reverse-mode grads."""

import io

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import ParamState, State
from state_transform import (
    ProgressBar,
    bounded_while_loop,
    checkpointed_for_loop,
    checkpointed_scan,
    grad,
    scan,
    vmap2,
)


def _newton_sqrt(a):
    """Newton's iteration for sqrt(a) from 1, stopped at |x^2 - a| < 1e-6 or 50 steps (pure JAX)."""

    def cond(c):
        x, n = c
        return jnp.logical_and(n < 50, jnp.abs(x * x - a) > 1e-6)

    return jax.lax.while_loop(cond, lambda c: (0.5 * (c[0] + a / c[0]), c[1] + 1), (jnp.float32(1.0), 0))


@pytest.mark.parametrize("base", [2, 3, 16])
def test_bounded_while_matches_while_loop(base):
    a = jnp.float32(7.0)
    x, n = bounded_while_loop(
        lambda c: jnp.abs(c[0] * c[0] - a) > 1e-6,
        lambda c: (0.5 * (c[0] + a / c[0]), c[1] + 1),
        (1.0, 0),
        max_steps=50,
        base=base,
    )
    ref_x, ref_n = _newton_sqrt(a)
    assert_allclose(x, ref_x)
    assert int(n) == int(ref_n)


def test_bounded_while_stops_at_max_steps_and_zero_steps():
    assert int(bounded_while_loop(lambda v: v < 1000, lambda v: v + 1, 0, max_steps=37)) == 37
    assert int(bounded_while_loop(lambda v: v < 1000, lambda v: v + 1, 0, max_steps=37, base=4)) == 37
    out = bounded_while_loop(lambda v: v < 1000, lambda v: v + 1, 5, max_steps=0)
    assert isinstance(out, jax.Array) and int(out) == 5


def test_bounded_while_reverse_mode_matches_unrolled_reference():
    def run(a):
        x, _ = bounded_while_loop(
            lambda c: jnp.abs(c[0] * c[0] - a) > 1e-6,
            lambda c: (0.5 * (c[0] + a / c[0]), c[1] + 1),
            (jnp.float32(1.0), 0),
            max_steps=64,
            base=4,
        )
        return x

    n_steps = int(_newton_sqrt(jnp.float32(7.0))[1])

    def unrolled(a):  # the same number of Newton steps, as straight-line code
        x = jnp.float32(1.0)
        for _ in range(n_steps):
            x = 0.5 * (x + a / x)
        return x

    assert_allclose(jax.grad(run)(7.0), jax.grad(unrolled)(7.0), rtol=1e-5)
    assert_allclose(jax.grad(run)(7.0), 0.5 / jnp.sqrt(7.0), rtol=1e-4)  # d sqrt(a) / da


def test_bounded_while_carries_states_and_grad_states():
    w = ParamState(jnp.array(1.5), name="w")
    x = State(jnp.array(1.0), name="x")

    def body(n):
        x.value = x.value * w.value
        return n + 1

    def loss():
        bounded_while_loop(lambda n: x.value < 10.0, body, 0, max_steps=20)
        return x.value

    g = grad(loss, grad_states=w, return_value=True)
    dw, value = g()
    # 1.5 ** 6 = 11.39 is the first power above 10
    assert_allclose(value, 1.5**6, rtol=1e-6)
    assert_allclose(x.value, 1.5**6, rtol=1e-6)
    assert_allclose(dw, 6 * 1.5**5, rtol=1e-5)


def test_bounded_while_cond_reads_states_and_checks():
    limit = State(jnp.array(3), name="limit")
    assert int(bounded_while_loop(lambda v: v < limit.value, lambda v: v + 1, 0, max_steps=10)) == 3
    s = State(jnp.array(0), name="s")

    def bad_cond(v):
        s.value = s.value + 1
        return v < 3

    with pytest.raises(ValueError, match="cond_fun writes"):
        bounded_while_loop(bad_cond, lambda v: v + 1, 0, max_steps=5)
    assert int(s.value) == 0
    with pytest.raises(ValueError, match="max_steps must be >= 0"):
        bounded_while_loop(lambda v: v < 3, lambda v: v + 1, 0, max_steps=-1)
    with pytest.raises(TypeError, match="max_steps must be an int"):
        bounded_while_loop(lambda v: v < 3, lambda v: v + 1, 0, max_steps=2.5)
    with pytest.raises(ValueError, match="base must be an int >= 2"):
        bounded_while_loop(lambda v: v < 3, lambda v: v + 1, 0, max_steps=5, base=1)


def test_bounded_while_under_vmap_keeps_each_lane():
    out = vmap2(lambda lim: bounded_while_loop(lambda v: v < lim, lambda v: v + 1, 0, max_steps=16))(
        jnp.array([2, 5, 9])
    )
    assert_allclose(out, [2, 5, 9])


def test_bounded_while_under_disable_jit():
    with jax.disable_jit():
        assert int(bounded_while_loop(lambda v: v < 100, lambda v: v * 2, 1, max_steps=4)) == 16


def test_checkpointed_scan_matches_scan_and_writes_states():
    total = State(jnp.zeros(()), name="total")

    def step(c, x):
        total.value = total.value + x
        return c * 0.9 + x, (c, total.value)

    xs = jnp.linspace(0.0, 1.0, 37)
    carry, ys = checkpointed_scan(step, 1.0, xs, base=4)
    total_after = total.value
    total.value = jnp.zeros(())
    ref_carry, ref_ys = scan(step, 1.0, xs)
    assert_allclose(carry, ref_carry, rtol=1e-6)
    assert_allclose(ys[0], ref_ys[0], rtol=1e-6)
    assert_allclose(ys[1], ref_ys[1], rtol=1e-6)
    assert_allclose(total_after, xs.sum(), rtol=1e-6)


def test_checkpointed_scan_gradient_matches_hand_written_and_remats():
    def simulate(w, xs, loop):
        def step(c, x):
            c = jnp.tanh(c * w + x)
            return c, c**2

        c, ys = loop(step, jnp.float32(0.1), xs)
        return c + ys.sum()

    xs = jnp.sin(jnp.arange(50.0))

    def hand_written(w):
        c, total = jnp.float32(0.1), 0.0
        for x in xs:
            c = jnp.tanh(c * w + x)
            total = total + c**2
        return c + total

    ckpt = lambda f, init, xs: checkpointed_scan(f, init, xs, base=4)
    assert_allclose(jax.grad(lambda w: simulate(w, xs, ckpt))(0.7), jax.grad(hand_written)(0.7), rtol=1e-5)
    jaxpr = str(jax.make_jaxpr(jax.grad(lambda w: simulate(w, xs, ckpt)))(0.7))
    assert "checkpoint" in jaxpr or "remat" in jaxpr


def test_checkpointed_for_loop_grad_states():
    w = ParamState(jnp.array(0.9), name="w")
    v = State(jnp.array(0.0), name="v")

    def simulate():
        def step(drive):
            v.value = v.value * w.value + drive
            return v.value

        return checkpointed_for_loop(step, jnp.arange(1.0, 20.0), base=3).sum()

    def hand_written(wv):
        vv, total = 0.0, 0.0
        for d in jnp.arange(1.0, 20.0):
            vv = vv * wv + d
            total = total + vv
        return total

    g, value = grad(simulate, grad_states=w, return_value=True)()
    assert_allclose(value, hand_written(0.9), rtol=1e-5)
    assert_allclose(g, jax.grad(hand_written)(0.9), rtol=1e-5)
    assert_allclose(v.value, sum(0.9 ** (18 - k) * (k + 1.0) for k in range(19)), rtol=1e-5)


def test_checkpointed_loops_length_and_errors():
    ys = checkpointed_for_loop(lambda: jnp.float32(2.0), length=5)
    assert_allclose(ys, jnp.full(5, 2.0))
    with pytest.raises(ValueError, match="at least one step"):
        checkpointed_scan(lambda c, x: (c, x), 0.0, jnp.zeros(0))
    with pytest.raises(ValueError, match="base must be an int >= 2"):
        checkpointed_for_loop(lambda x: x, jnp.ones(3), base=1)
    with pytest.raises(TypeError, match=r"pair \(carry, y\)"):
        checkpointed_scan(lambda c, x: c, 0.0, jnp.ones(3))
    with pytest.raises(ValueError, match="leading axis sizes disagree"):
        checkpointed_for_loop(lambda a, b: a + b, jnp.ones(3), jnp.ones(4))


def test_checkpointed_for_loop_progress_bar():
    out = io.StringIO()
    ys = checkpointed_for_loop(lambda x: x * 2, jnp.arange(40.0), pbar=ProgressBar(freq=10, file=out, desc="ckpt"))
    jax.effects_barrier()
    assert_allclose(ys, jnp.arange(40.0) * 2)
    assert "ckpt" in out.getvalue() and "40/40" in out.getvalue()


def test_checkpointed_loops_under_disable_jit():
    with jax.disable_jit():
        carry, ys = checkpointed_scan(lambda c, x: (c + x, c), 0.0, jnp.arange(4.0))
        assert_allclose(carry, 6.0)
        assert_allclose(ys, [0.0, 0.0, 1.0, 3.0])
