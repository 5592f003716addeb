"""Loop and branch bodies stop at the pipeline's trace step; a mapping's options are given when it is built."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from state_core import State
from state_core.engine import Strategy
from state_transform import StatefulMapping, cond, for_loop, jit, pmap2, scan


def _strategies(cls=Strategy):
    """Every strategy class loaded (the default and its subclasses, in all layers)."""
    found = [cls]
    for sub in cls.__subclasses__():
        found.extend(_strategies(sub))
    return found


@pytest.fixture
def compiled_names(monkeypatch):
    """The names of the programs the pipeline builds (one per ``Strategy.compile``)."""
    names = []
    for cls in _strategies():
        if "compile" in vars(cls):
            monkeypatch.setattr(cls, "compile", _recording(vars(cls)["compile"], names))
    return names


def _recording(compile_fn, names):
    def compile_and_record(self, trace, info, name):
        names.append(name)
        return compile_fn(self, trace, info, name)

    return compile_and_record


@pytest.mark.parametrize("kind", ["for_loop", "scan", "cond"])
def test_a_body_is_traced_but_never_compiled_on_its_own(compiled_names, kind):
    acc = State(jnp.zeros(2), name="acc")

    def body(x):
        acc.value = acc.value + x
        return acc.value.sum()

    def step(xs):
        if kind == "for_loop":
            return for_loop(body, xs)
        if kind == "scan":
            return scan(lambda c, x: (c + body(x), None), jnp.zeros(()), xs)[0]
        return cond(xs[0, 0] > 0, lambda: body(xs[0]), lambda: body(-xs[0]))

    xs = jnp.ones((3, 2))
    out = jit(step)(xs)
    expected = {"for_loop": [2.0, 4.0, 6.0], "scan": 12.0, "cond": 2.0}[kind]
    np.testing.assert_allclose(out, np.asarray(expected))
    np.testing.assert_allclose(acc.value, np.full(2, 3.0 if kind != "cond" else 1.0))
    # The jit program and the loop's (or branch's) program; none for a body.
    assert len(compiled_names) == 2, compiled_names
    assert not any("body" in name or name.endswith("_fun") for name in compiled_names), compiled_names


def test_a_mapping_limits_its_size_by_the_option_it_was_built_with():
    w = State(jnp.ones((3, 2)), name="w")

    def f(x):
        return w.value.sum() + x

    mapping = StatefulMapping(f, in_axes=0, state_in_axes={0: w}, max_axis_size=lambda: 2)
    with pytest.raises(ValueError, match="the mapped axis has size 3 but only 2 device"):
        mapping(jnp.ones(3))
    np.testing.assert_allclose(w.value, np.ones((3, 2)))
    roomy = StatefulMapping(f, in_axes=0, state_in_axes={0: w}, max_axis_size=lambda: 3)
    np.testing.assert_allclose(roomy(jnp.ones(3)), np.full(3, 3.0))


def test_pmap2_gives_its_device_count_and_donations_to_the_mapping_it_builds():
    n = jax.local_device_count()
    mapped = pmap2(lambda x: x * 2, donate_argnums=0)
    assert type(mapped) is StatefulMapping
    x = jax.pmap(lambda v: v)(jnp.arange(float(n)))  # already one lane per device
    np.testing.assert_allclose(mapped(x), np.arange(n) * 2.0)
    assert x.is_deleted()  # donated, as asked
    kept = jax.pmap(lambda v: v)(jnp.arange(float(n)))
    np.testing.assert_allclose(pmap2(lambda x: x * 2)(kept), np.arange(n) * 2.0)
    assert not kept.is_deleted()
    with pytest.raises(ValueError, match=f"the mapped axis has size {n + 1} but only {n} device"):
        mapped(jnp.arange(float(n + 1)))


def test_donate_argnums_is_refused_for_jax_vmap_at_construction():
    with pytest.raises(ValueError, match=r"donate_argnums=\(0,\) is passed to the mapping function, but jax.vmap"):
        StatefulMapping(lambda x: x * 2, donate_argnums=(0,))
    with pytest.raises(ValueError, match=r"donate_argnums=0 is passed to the mapping function, but jax.vmap"):
        StatefulMapping(lambda x: x * 2, donate_argnums=0)  # position 0 is a donation too
