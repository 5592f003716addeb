"""How a Module shows itself: repr (abstract values), str / IPython / treescope (values)."""

import jax
import jax.numpy as jnp
import pytest

import state_core
import state_nn


class Printer:
    """The part of IPython's pretty printer that ``_repr_pretty_`` uses."""

    def __init__(self):
        self.parts = []

    def text(self, text):
        self.parts.append(text)


class Net(state_nn.Module):
    def __init__(self):
        super().__init__(name="net")
        self.fc = state_nn.Linear(2, 1, w_init=jnp.array([[1.0], [2.0]]))
        self.memory = [state_core.HiddenState(jnp.arange(100.0)), "not shown"]
        self.lr = 0.1  # a plain attribute: not shown


NET_STR = """Net(
  name='net',
  fc=Linear(
    in_size=(2,),
    out_size=(1,),
    weight=ParamState(
      value=Array([[1.], [2.]], dtype=float32)
    ),
    bias=ParamState(
      value=Array([0.], dtype=float32)
    )
  ),
  memory=[
    HiddenState(
      value=float32[100] min=0 max=99 mean=49.5
    )
  ]
)"""


def test_str_shows_values_and_repr_abstract_values():
    net = Net()
    assert str(net) == NET_STR
    assert repr(net) == NET_STR.replace("Array([[1.], [2.]], dtype=float32)", "ShapedArray(float32[2,1])").replace(
        "Array([0.], dtype=float32)", "ShapedArray(float32[1])"
    ).replace("float32[100] min=0 max=99 mean=49.5", "ShapedArray(float32[100])")


def test_ipython_display_shows_values():
    printer = Printer()
    Net()._repr_pretty_(printer, False)
    assert printer.parts == [NET_STR]
    printer = Printer()
    Net()._repr_pretty_(printer, True)
    assert printer.parts == ["Net(...)"]


def test_ipython_pretty_printer_uses_the_hook():
    pretty = pytest.importorskip("IPython.lib.pretty")
    assert pretty.pretty(Net()) == NET_STR


def test_sequential_str_names_function_layers():
    net = state_nn.Sequential(state_nn.Linear(1, 1, w_init=jnp.ones((1, 1))), jax.nn.relu)
    assert str(net) == (
        "Sequential(\n  in_size=(1,),\n  out_size=(1,),\n  layers=[\n    Linear(\n      in_size=(1,),\n"
        "      out_size=(1,),\n      weight=ParamState(\n        value=Array([[1.]], dtype=float32)\n      ),\n"
        "      bias=ParamState(\n        value=Array([0.], dtype=float32)\n      )\n    ),\n    relu\n  ]\n)"
    )


def test_str_survives_cycles():
    class Node(state_nn.Module):
        def __init__(self):
            self.w = state_core.ParamState(jnp.zeros(1))
            self.me = self

    assert str(Node()) == "Node(\n  w=ParamState(\n    value=Array([0.], dtype=float32)\n  ),\n  me=Node(...)\n)"


def test_treescope_renders_modules_with_values():
    treescope = pytest.importorskip("treescope")
    text = treescope.render_to_text(Net())
    assert text.startswith(
        "Net(\n  name='net',\n  fc=Linear(\n    in_size=(2,),\n    out_size=(1,),\n    weight=ParamState("
    )
    assert "[2.]" in text  # the weight's values, not its shape only
    assert "memory=[" in text and "HiddenState(" in text
    assert "not shown" not in text and "lr=" not in text


def test_treescope_renders_function_layers_and_dropout_settings():
    treescope = pytest.importorskip("treescope")
    net = state_nn.Sequential(state_nn.Linear(1, 1), jax.nn.relu, state_nn.Dropout(0.1))
    text = treescope.render_to_text(net)
    assert "jax.nn.relu," in text
    assert "Dropout(rate=0.1, deterministic=False)" in text


def test_treescope_renders_a_map_and_cycles():
    treescope = pytest.importorskip("treescope")

    class Node(state_nn.Module):
        def __init__(self):
            self.w = state_core.ParamState(jnp.zeros(1))
            self.me = self

    text = treescope.render_to_text(Node())
    assert text.startswith("Node(\n  w=ParamState(value=<jax.Array([0.], dtype=float32)>),\n  me=")
    ensemble = state_nn.Map(state_nn.Dropout(0.5), init_map_size=2)
    assert treescope.render_to_text(ensemble).startswith("Map(\n  module=Dropout(rate=0.5, deterministic=False),")
