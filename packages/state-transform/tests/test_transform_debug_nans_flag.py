"""JAX's jax_debug_nans / jax_debug_infs apply to every compiled call: a NaN is refused before any State changes."""

import concurrent.futures

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import State
from state_transform import for_loop, grad, jit, vmap2


@pytest.fixture
def global_flag():
    """``set(name)`` turns a JAX debug flag on with ``jax.config.update``; every flag is off again afterwards."""
    names = []

    def set_flag(name):
        names.append(name)
        jax.config.update(name, True)

    yield set_flag
    for name in names:
        jax.config.update(name, False)


def _in_fresh_thread(fn):
    """``fn()`` run in a new thread, whose JAX thread-local settings are untouched (its error is raised here)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn).result()


def _case(kind):
    """``(call, state)``: ``call(x)`` writes ``state`` under ``kind``; x = 1.0 is clean, x = -1.0 makes a NaN."""
    s = State(jnp.array([1.0, 2.0, 3.0]), name="acc")
    if kind == "jit":

        @jit
        def step(x):
            s.value = s.value + jnp.log(x)
            return s.value.sum()

        return step, s
    if kind == "vmap2":
        f = vmap2(lambda x: setattr(s, "value", s.value + jnp.log(x)), state_in_axes={0: s}, state_out_axes={0: s})
        return lambda x: f(jnp.full(3, x)), s
    if kind == "grad":
        w = State(jnp.array([1.0, 4.0, 9.0]), name="w")

        def loss(x):
            s.value = s.value + 1.0  # counts the calls
            return jnp.sum(jnp.sqrt(w.value * x))

        g = grad(loss, grad_states=[w])
        return lambda x: g(x), s
    if kind == "for_loop_in_jit":

        def body(i):
            s.value = s.value * 2.0 + jnp.log(i)

        f = jit(lambda x: for_loop(body, jnp.full(2, x)))
        return f, s
    raise AssertionError(kind)


KINDS = ["jit", "vmap2", "grad", "for_loop_in_jit"]


def _after_clean_call(kind, before, x):
    """The state value that ``_case(kind)``'s call with argument ``x`` writes."""
    if kind == "grad":
        return before + 1.0
    if kind == "for_loop_in_jit":
        return (before * 2.0 + np.log(x)) * 2.0 + np.log(x)
    return before + np.log(x)


@pytest.mark.parametrize("kind", KINDS)
def test_the_global_flag_refuses_a_nan_of_a_program_compiled_before_it(kind, global_flag):
    call, s = _case(kind)
    call(1.0)
    call(1.0)  # compiled and cached while the flag is off
    before = np.asarray(s.value).copy()
    global_flag("jax_debug_nans")
    with pytest.raises(FloatingPointError, match="nan"):
        call(-1.0)
    assert_allclose(np.asarray(s.value), before)


@pytest.mark.parametrize("kind", KINDS)
def test_the_global_flag_set_first_refuses_the_first_and_the_cached_calls(kind, global_flag):
    global_flag("jax_debug_nans")
    call, s = _case(kind)
    before = np.asarray(s.value).copy()
    for _ in range(2):
        with pytest.raises(FloatingPointError, match="nan"):
            call(-1.0)
        assert_allclose(np.asarray(s.value), before)


@pytest.mark.parametrize("kind", KINDS)
def test_the_context_manager_refuses_a_nan(kind):
    call, s = _case(kind)
    call(1.0)
    before = np.asarray(s.value).copy()
    with jax.debug_nans(True):
        with pytest.raises(FloatingPointError, match="nan"):
            call(-1.0)
        assert_allclose(np.asarray(s.value), before)
        call(2.0)  # a clean call still runs and writes
    assert_allclose(np.asarray(s.value), _after_clean_call(kind, before, 2.0), rtol=1e-6)


@pytest.mark.parametrize("kind", ["jit", "vmap2"])
def test_the_infs_flag_refuses_an_inf(kind, global_flag):
    s = State(jnp.array([1.0, 2.0]), name="acc")
    if kind == "jit":
        f = jit(lambda x: setattr(s, "value", s.value / x))
        call = f
    else:
        g = vmap2(lambda x: setattr(s, "value", s.value / x), state_in_axes={0: s}, state_out_axes={0: s})
        call = lambda x: g(jnp.full(2, x))
    call(1.0)
    call(1.0)
    global_flag("jax_debug_infs")
    with pytest.raises(FloatingPointError, match="inf"):
        call(0.0)
    assert_allclose(np.asarray(s.value), [1.0, 2.0])
    with jax.debug_infs(False):  # the flag is read at every call: off again, the inf is written
        call(0.0)
    assert np.isinf(np.asarray(s.value)).all()


def test_a_nan_is_written_as_before_while_the_flags_are_off():
    call, s = _case("jit")
    call(1.0)
    out = call(-1.0)
    assert np.isnan(np.asarray(out))
    assert np.isnan(np.asarray(s.value)).all()


def test_the_message_names_the_state_that_would_hold_the_nan(global_flag):
    def run():
        with jax.debug_nans(False):
            pass  # leaving such a block switches JAX's own check off for this thread's compiled calls
        call, s = _case("jit")
        call(1.0)
        global_flag("jax_debug_nans")
        with pytest.raises(
            FloatingPointError, match=r"jit\(step\): the new value of State 'acc' holds nan while jax_debug_nans"
        ):
            call(-1.0)
        assert_allclose(np.asarray(s.value), [1.0, 2.0, 3.0])

    _in_fresh_thread(run)


@pytest.mark.parametrize("flag_first", [False, True], ids=["flag_after", "flag_first"])
def test_our_calls_leave_jax_own_nan_check_of_plain_jit_working(global_flag, flag_first):
    def run():
        if flag_first:
            global_flag("jax_debug_nans")
        s = State(jnp.ones(3), name="s")
        step = jit(lambda: setattr(s, "value", s.value * 2.0))
        plain = jax.jit(lambda x: jnp.log(x) + 1.0)
        plain(1.0)
        step()  # traced (and run) here
        step()
        global_flag("jax_debug_nans")
        with pytest.raises(FloatingPointError):
            plain(-1.0)
        assert_allclose(np.asarray(s.value), [4.0, 4.0, 4.0])

    _in_fresh_thread(run)
