"""Reprs (abstract) and strs (with values) of states and collections; copies and pickling."""

import copy
import pickle
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import (
    HiddenState,
    ParamState,
    ShortTermState,
    State,
    StateDict,
    StatefulFunction,
    collect_states,
    format_value,
)


# ---------------------------------------------------------------- repr: the abstract form
def test_repr_keeps_the_abstract_form():
    assert repr(ParamState(jnp.ones((2, 4)))) == "ParamState(\n  value=ShapedArray(float32[2,4])\n)"
    assert repr(State({"a": jnp.zeros(2, jnp.int32)}, name="d", tag=("y", "x"))) == (
        "State(\n  name='d',\n  tag=['x', 'y'],\n  value={'a': ShapedArray(int32[2])}\n)"
    )


# ---------------------------------------------------------------- str: values
def test_str_small_array_shows_values_on_one_line():
    w = ParamState(jnp.ones((2, 4)), name="w", tag="train")
    assert str(w) == (
        "ParamState(\n"
        "  name='w',\n"
        "  tag='train',\n"
        "  value=Array([[1., 1., 1., 1.], [1., 1., 1., 1.]], dtype=float32)\n"
        ")"
    )


def test_str_large_array_is_summarised():
    big = State(jnp.arange(1000.0).reshape(10, 100), name="big")
    assert str(big) == "State(\n  name='big',\n  value=float32[10,100] min=0 max=999 mean=499.5\n)"


def test_str_summaries_for_int_bool_complex_and_numpy():
    assert format_value(jnp.arange(20, dtype=jnp.int32)) == "int32[20] min=0 max=19 mean=9.5"
    mask = jnp.arange(40) < 10
    assert format_value(mask) == "bool[40] min=0 max=1 mean=0.25"
    assert format_value(jnp.zeros(17, jnp.complex64)) == "complex64[17]"
    assert format_value(np.full((3, 6), 2.0)) == "float64[3,6] min=2 max=2 mean=2"
    assert format_value(np.arange(3)) == "array([0, 1, 2])"


def test_str_pytree_and_scalars():
    s = ShortTermState({"n": 3, "v": jnp.zeros(2), "big": jnp.ones(100)})
    assert str(s) == (
        "ShortTermState(\n"
        "  value={'big': float32[100] min=1 max=1 mean=1, 'n': 3, "
        "'v': Array([0., 0.], dtype=float32)}\n"
        ")"
    )


def test_str_of_keys_and_tracers_is_abstract():
    key_state = State(jax.random.key(0))
    assert str(key_state) == "State(\n  value=ShapedArray(key<fry>[])\n)"
    seen = []
    s = State(jnp.zeros(3), name="s")

    def f(x):
        s.value = s.value + x
        seen.append(str(s))  # inside the trace the value is a tracer

    StatefulFunction(f)(1.0)
    assert seen == ["State(\n  name='s',\n  value=ShapedArray(float32[3])\n)"]


def test_str_of_a_deleted_array():
    x = jnp.ones(3)
    s = State(x)
    x.delete()
    assert str(s) == "State(\n  value=<deleted ShapedArray(float32[3])>\n)"


def test_ipython_display_uses_values():
    class Printer:
        def __init__(self):
            self.parts = []

        def text(self, t):
            self.parts.append(t)

    p = Printer()
    State(jnp.arange(2.0), name="a")._repr_pretty_(p, False)
    assert p.parts == ["State(\n  name='a',\n  value=Array([0., 1.], dtype=float32)\n)"]
    p = Printer()
    State(0.0)._repr_pretty_(p, True)
    assert p.parts == ["State(...)"]


def test_state_dict_repr_and_str_show_paths():
    class Net:
        def __init__(self):
            self.w = ParamState(jnp.ones(2))
            self.layers = [HiddenState(jnp.zeros(200))]

    states = collect_states(Net())
    assert repr(states) == "StateDict({w: ParamState, layers.0: HiddenState})"
    assert str(states) == (
        "StateDict(\n"
        "  w: ParamState = Array([1., 1.], dtype=float32),\n"
        "  layers.0: HiddenState = float32[200] min=0 max=0 mean=0\n"
        ")"
    )
    assert str(StateDict()) == "StateDict()"


def test_treescope_rendering():
    treescope = pytest.importorskip("treescope")
    w = ParamState(jnp.arange(3.0), name="w", tag="t")
    text = treescope.render_to_text(w)
    assert text.startswith("ParamState(\n  name='w',\n  tag=['t'],\n  value=")
    assert "[0., 1., 2.]" in text


# ---------------------------------------------------------------- copies
def test_copy_copy_of_a_state_is_independent():
    s = State(jnp.zeros(2), name="s", tag="a", unit="mV")
    c = copy.copy(s)
    assert c is not s and type(c) is State
    assert (c.name, c.tag, c.metadata) == ("s", frozenset({"a"}), {"unit": "mV"})
    c.value = c.value + 1
    assert_allclose(s.value, [0.0, 0.0])
    assert_allclose(c.value, [1.0, 1.0])


def test_deepcopy_of_a_state_copies_numpy_buffers_and_metadata():
    buf = np.zeros(3)
    s = State(buf, nested={"k": [1]})
    d = copy.deepcopy(s)
    assert d is not s and d.value is not buf
    d.metadata["nested"]["k"].append(2)
    assert s.metadata["nested"] == {"k": [1]}
    buf[0] = 5.0
    assert_allclose(d.value, [0.0, 0.0, 0.0])


def test_deepcopy_keeps_shared_states_shared():
    shared = ParamState(jnp.ones(2), name="shared")
    tree = {"a": shared, "b": [shared, State(jnp.zeros(1))]}
    copied = copy.deepcopy(tree)
    assert copied["a"] is copied["b"][0]
    assert copied["a"] is not shared
    copied["a"].value = jnp.full(2, 7.0)
    assert_allclose(copied["b"][0].value, [7.0, 7.0])
    assert_allclose(shared.value, [1.0, 1.0])


def test_copies_of_a_state_dict():
    states = collect_states({"w": ParamState(jnp.ones(2)), "h": ShortTermState(jnp.zeros(2))})
    shallow = copy.copy(states)
    assert type(shallow) is StateDict and shallow is not states
    assert shallow[("w",)] is states[("w",)]  # a shallow copy shares the states, like dict.copy
    deep = copy.deepcopy(states)
    assert type(deep) is StateDict and list(deep) == list(states)
    assert deep[("w",)] is not states[("w",)]
    deep[("w",)].value = jnp.zeros(2)
    assert_allclose(states[("w",)].value, [1.0, 1.0])
    deep.assign_values({("h",): jnp.ones(2)})
    assert_allclose(states[("h",)].value, [0.0, 0.0])


def test_deepcopied_states_work_in_transformations():
    s = State(jnp.zeros(2), name="s")
    d = copy.deepcopy(s)

    def step(x):
        d.value = d.value + x
        return d.value

    out = StatefulFunction(step)(jnp.ones(2))
    assert_allclose(out, [1.0, 1.0])
    assert_allclose(d.value, [1.0, 1.0])
    assert_allclose(s.value, [0.0, 0.0])


def test_pickling_stays_refused_with_a_clear_message():
    s = ParamState(jnp.ones(2), name="w")
    with pytest.raises(TypeError, match=re.escape("ParamState 'w' cannot be pickled; save `state.value`")):
        pickle.dumps(s)
    with pytest.raises(TypeError, match=re.escape("use copy.deepcopy for an in-memory copy")):
        pickle.dumps(collect_states({"w": s}))


def test_state_dict_ipython_display_uses_values():
    class Printer:
        def __init__(self):
            self.parts = []

        def text(self, t):
            self.parts.append(t)

    states = collect_states({"w": ParamState(jnp.ones(2)), "h": [HiddenState(jnp.arange(100.0))]})
    p = Printer()
    states._repr_pretty_(p, False)
    assert p.parts == [
        "StateDict(\n  w: ParamState = Array([1., 1.], dtype=float32),\n"
        "  h.0: HiddenState = float32[100] min=0 max=99 mean=49.5\n)"
    ]
    p = Printer()
    states._repr_pretty_(p, True)
    assert p.parts == ["StateDict(...)"]


def test_state_dict_ipython_pretty_printer_uses_the_hook():
    pretty = pytest.importorskip("IPython.lib.pretty")
    states = collect_states({"w": ParamState(jnp.ones(2))})
    assert pretty.pretty(states) == "StateDict(\n  w: ParamState = Array([1., 1.], dtype=float32)\n)"


def test_state_dict_treescope_rendering():
    treescope = pytest.importorskip("treescope")
    states = collect_states({"w": ParamState(jnp.arange(3.0), name="w"), "h": [HiddenState(jnp.zeros(1))]})
    text = treescope.render_to_text(states)
    assert text.startswith("StateDict({\n  ('w',):\n    ParamState(\n      name='w',\n      value=")
    assert "[0., 1., 2.]" in text
    assert "('h', 0):\n    HiddenState(value=<jax.Array([0.], dtype=float32)>)" in text
