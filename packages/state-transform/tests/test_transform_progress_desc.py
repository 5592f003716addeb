"""ProgressBar(desc=(format, fn)): a label computed from the loop at every refresh."""

import io

import jax
import jax.numpy as jnp
import pytest

from state_core import State
from state_transform import ProgressBar, for_loop, fori_loop, scan


def test_desc_function_sees_step_carry_and_output():
    seen = []

    def describe(data):
        seen.append(sorted(data))
        return {"i": data["i"], "c": data["carry"], "y": data["y"]}

    out = io.StringIO()
    bar = ProgressBar(freq=5, file=out, mininterval=0, desc=("step {i} carry {c:.1f} y {y:.0f}", describe))
    scan(lambda c, x: (c + 0.5, x * 10), 0.0, jnp.arange(10.0), progress_bar=bar)
    jax.effects_barrier()
    text = out.getvalue()
    assert seen == [["carry", "i", "y"]]  # called once, while the body is traced
    assert "step 4 carry 2.5 y 40" in text
    assert "step 9 carry 5.0 y 90" in text and "10/10" in text


def test_desc_in_for_loop_has_no_carry_and_fori_has_no_output():
    v = State(jnp.zeros(()), name="v")

    def step(t):
        v.value = v.value + t
        return v.value

    out = io.StringIO()
    bar = ProgressBar(freq=4, file=out, desc=("v={v:.0f} {none}", lambda d: {"v": d["y"], "none": d["carry"] is None}))
    for_loop(step, jnp.arange(8.0), progress_bar=bar)
    jax.effects_barrier()
    assert "v=28 True" in out.getvalue()
    out = io.StringIO()
    bar = ProgressBar(freq=3, file=out, desc=("c={c}", lambda d: {"c": d["carry"]}))
    fori_loop(0, 6, lambda i, c: c + i, jnp.int32(0), progress_bar=bar)
    jax.effects_barrier()
    assert "c=15" in out.getvalue()


def test_plain_desc_and_equal_bars_unchanged():
    fmt = ("{i}", lambda d: {"i": d["i"]})
    assert ProgressBar(desc=fmt) == ProgressBar(desc=list(fmt))
    assert ProgressBar(desc="a") != ProgressBar(desc="b")


def test_bad_desc():
    with pytest.raises(TypeError, match="desc must be a string or a"):
        ProgressBar(desc=3)
    with pytest.raises(ValueError, match="got 3 item"):
        ProgressBar(desc=("{i}", len, 1))
    with pytest.raises(TypeError, match="first item of desc must be a format string"):
        ProgressBar(desc=(1, len))
    with pytest.raises(TypeError, match="second item of desc must be a function"):
        ProgressBar(desc=("{i}", 3))
    with pytest.raises(TypeError, match="must return a dict"):
        for_loop(lambda t: t, jnp.arange(3.0), progress_bar=ProgressBar(desc=("{i}", lambda d: d["i"])))
