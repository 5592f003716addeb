"""Under jax.disable_jit() branches and loop bodies run as plain Python, as JAX's own do."""

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import State
from state_transform import bounded_while_loop, cond, for_loop, ifelse, scan, switch, while_loop


def test_only_the_chosen_branch_runs_and_writes():
    ran = []
    s = State(jnp.zeros(()), name="s")

    def yes(x):
        ran.append("yes")
        s.value = s.value + x
        return x * 2.0

    def no(x):
        ran.append("no")
        return x - 1.0

    with jax.disable_jit():
        assert_allclose(cond(True, yes, no, 3.0), 6.0)
        assert_allclose(switch(1, [yes, no], 3.0), 2.0)
        assert_allclose(ifelse([False, True], [yes, no], 3.0), 2.0)
    assert ran == ["yes", "no", "no"]
    assert_allclose(s.value, 3.0)


def test_loop_bodies_run_once_per_step_in_python():
    calls = []
    total = State(jnp.zeros(()), name="total")

    def step(x):
        calls.append(x)
        total.value = total.value + x
        return total.value

    with jax.disable_jit():
        ys = for_loop(step, jnp.arange(4.0))
        carry, _ = scan(lambda c, x: (c + x, c), 0.0, jnp.arange(3.0))
        n = while_loop(lambda i: i < 5, lambda i: i + 1, 0)
    assert len(calls) == 4
    assert_allclose(ys, [0.0, 1.0, 3.0, 6.0])
    assert_allclose(carry, 3.0)
    assert n == 5


@pytest.mark.parametrize("disabled", [False, True])
def test_a_traced_predicate_under_vmap_takes_the_compiled_branches(disabled):
    xs = jnp.array([1.0, -1.0, 3.0])

    def by_cond(x):
        return cond(x > 0, lambda y: y * 2.0, lambda y: y - 1.0, x)

    def by_switch(x):
        return switch(jnp.int32(x > 0), [lambda y: y * 2.0, lambda y: y - 1.0], x)

    def by_ifelse(x):
        return ifelse([x > 0, x <= 0], [lambda y: y * 2.0, lambda y: y - 1.0], x)

    def count_up(x):
        return while_loop(lambda c: c < x, lambda c: c + 1.0, 0.0)

    def count_up_bounded(x):
        return bounded_while_loop(lambda c: c < x, lambda c: c + 1.0, 0.0, max_steps=2)

    with jax.disable_jit(disabled):
        assert_allclose(jax.vmap(by_cond)(xs), [2.0, -2.0, 6.0])
        assert_allclose(jax.vmap(by_switch)(xs), [0.0, -2.0, 2.0])
        assert_allclose(jax.vmap(by_ifelse)(xs), [2.0, -2.0, 6.0])
        assert_allclose(jax.vmap(count_up)(xs), [1.0, 0.0, 3.0])
        assert_allclose(jax.vmap(count_up_bounded)(xs), [1.0, 0.0, 2.0])


def test_a_while_loop_whose_condition_becomes_traced_goes_on_compiled():
    # The first test is concrete (0 < 1 for every lane); later ones depend on the lane.
    def count_up(x):
        return while_loop(lambda c: c[0] < c[1], lambda c: (c[0] + 1.0, c[1] + 0.0 * x), (0.0, 1.0 + x))

    with jax.disable_jit():
        out, _ = jax.vmap(count_up)(jnp.array([0.0, 2.0]))
    assert_allclose(out, [1.0, 3.0])
