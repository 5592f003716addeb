"""Progress bars on compiled loops: output, throttling, vmap2, missing tqdm."""

import io
import sys

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

import state_transform._progress as progress_mod
from state_core import State
from state_core.filter import OfType
from state_transform import ProgressBar, for_loop, fori_loop, jit, scan, vmap2
from state_transform._progress import as_progress_bar


@pytest.fixture
def reports(monkeypatch):
    seen = []
    original = progress_mod._HostBar.report

    def spy(self, done):
        seen.append(int(done))
        original(self, done)

    monkeypatch.setattr(progress_mod._HostBar, "report", spy)
    return seen


def test_bar_reaches_total_and_is_throttled(reports):
    v = State(jnp.zeros(()), name="v")
    out = io.StringIO()

    def step(t):
        v.value = v.value + 1
        return v.value

    for_loop(step, jnp.arange(1000), progress_bar=ProgressBar(freq=100, file=out, desc="sim"))
    jax.effects_barrier()
    assert reports == list(range(100, 1001, 100))
    assert "sim" in out.getvalue() and "1000/1000" in out.getvalue()
    assert_allclose(v.value, 1000.0)


def test_int_refresh_interval_and_default_count(reports):
    for_loop(lambda t: t, jnp.arange(10), progress_bar=ProgressBar(freq=4, file=io.StringIO()))
    jax.effects_barrier()
    assert reports == [4, 8, 10]  # the last step always reports
    reports.clear()
    bar = ProgressBar(file=io.StringIO())
    assert bar.interval(10_000) == 500
    scan(lambda c, x: (c + x, None), 0.0, jnp.ones(40), progress_bar=bar)
    jax.effects_barrier()
    assert reports == list(range(2, 41, 2))


def test_progress_on_fori_loop_and_inside_jit(reports):
    s = State(jnp.zeros(()), name="s")

    def body(i, c):
        s.value = s.value + i
        return c

    @jit
    def run():
        return fori_loop(0, 6, body, 0.0, progress_bar=ProgressBar(freq=3, file=io.StringIO()))

    run()
    run()
    jax.effects_barrier()
    assert reports == [3, 6, 3, 6]
    assert_allclose(s.value, 30.0)


def test_progress_inside_vmap2_reports_once_per_step(reports):
    h = State(jnp.zeros(3), name="h")

    def step(t):
        h.value = h.value + t
        return h.value

    f = vmap2(
        lambda ts: for_loop(step, ts, progress_bar=ProgressBar(freq=2, file=io.StringIO())),
        in_axes=None,
        axis_size=3,
        state_in_axes={0: OfType(State)},
        state_out_axes={0: OfType(State)},
    )
    h.value = jnp.zeros((3, 3))
    f(jnp.arange(4.0))
    jax.effects_barrier()
    assert reports == [2, 4]
    assert_allclose(h.value, 6.0 * jnp.ones((3, 3)))


def test_missing_tqdm_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    v = State(jnp.zeros(()), name="v")

    def step(t):
        v.value = v.value + t
        return t

    with pytest.raises(ImportError, match=r"state-transform\[progress\]"):
        for_loop(step, jnp.arange(3.0), progress_bar=True)
    assert_allclose(v.value, 0.0)


def test_bad_progress_arguments():
    with pytest.raises(TypeError, match="progress_bar must be"):
        for_loop(lambda t: t, jnp.arange(3), progress_bar="yes")
    with pytest.raises(ValueError, match="freq must be a positive int"):
        ProgressBar(freq=0)
    with pytest.raises(ValueError, match="progress_bar needs bounds known at trace time"):
        jit(lambda n: fori_loop(0, n, lambda i, c: c, 0.0, progress_bar=True))(3)


def test_progress_bar_true_reuses_the_compiled_loop(reports, monkeypatch):
    import state_transform._progress as progress

    built = []
    original = progress.progress_reporter
    monkeypatch.setattr(
        "state_transform._loops.progress_reporter", lambda spec, length: built.append(spec) or original(spec, length)
    )
    out = io.StringIO()
    v = State(jnp.zeros(()), name="v")

    def step(t):
        v.value = v.value + t
        return t

    for _ in range(3):  # a new, equal ProgressBar in every call
        for_loop(step, jnp.arange(4.0), progress_bar=ProgressBar(file=out))
    jax.effects_barrier()
    assert len(built) == 1  # one program for three calls
    assert reports == [1, 2, 3, 4] * 3  # 4 steps: the default interval is max(1, 4 // 20) = 1
    assert ProgressBar(freq=2) == ProgressBar(freq=2) != ProgressBar(freq=3)
    assert as_progress_bar(True, "for_loop") == as_progress_bar(True, "for_loop")
