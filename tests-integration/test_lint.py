"""Lint and type checks over the repository, run by the suite so they cannot drift.

Marked ``lint`` and run with the rest of the suite; ``-m "not lint"`` leaves them
out by hand. The same checks: ``hatch run lint`` and ``hatch run types``.

* ruff check and ruff format --check, with ``ruff.toml``;
* mypy, strict on every package's ``src/`` (``mypy.ini``);
* mypy with its default (basic) settings on ``examples/`` and on the README's
  python blocks, including the idioms users copy from it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lint

ROOT = Path(__file__).resolve().parents[1]

# The README idioms whose types users rely on: each line must type-check as written.
IDIOMS = '''
from typing import Any, assert_type

import jax.numpy as jnp
from state_core import ParamState, StateDict, collect_states
from state_core.filter import OfType
from state_nn import Linear
from state_transform import (
    GradFunction, JittedFunction, StatefulMapping, ValueAndGradFunction, grad, jit, pmap2, value_and_grad, vmap2
)

model = Linear(3, 2)
w = ParamState(jnp.ones(3))

def loss(x: jnp.ndarray) -> jnp.ndarray:
    return jnp.sum(w.value * x)

def loss_aux(x: jnp.ndarray) -> tuple[jnp.ndarray, dict[str, jnp.ndarray]]:
    return jnp.sum(w.value * x), {"x": x}

grads = grad(loss, grad_states={'w': w})(jnp.ones(3))
params, rest = collect_states(model).split(OfType(ParamState), ...)
values = model.states(ParamState).to_values()

# The overloads: each calling convention has its own return type, from the function's
# parameters and result (the gradients' structure is known at run time only: Any).
x = jnp.ones(3)
assert_type(grad(loss, grad_states=w)(x), Any)
assert_type(grad(loss, grad_states=w, return_value=True)(x), tuple[Any, jnp.ndarray])
assert_type(grad(loss_aux, grad_states=w, has_aux=True)(x), tuple[Any, dict[str, jnp.ndarray]])
assert_type(
    grad(loss_aux, grad_states=w, has_aux=True, return_value=True)(x),
    tuple[Any, jnp.ndarray, dict[str, jnp.ndarray]],
)
g, value = grad(loss, grad_states=w, return_value=True)(jnp.ones(3))
g, value, aux = grad(loss_aux, grad_states=w, has_aux=True, return_value=True)(jnp.ones(3))

@grad(grad_states=w)
def decorated(x: jnp.ndarray) -> jnp.ndarray:
    return jnp.sum(w.value * x)

assert_type(decorated(x), Any)
assert_type(value_and_grad(loss, grad_states=w)(x), tuple[jnp.ndarray, Any])
assert_type(value_and_grad(grad_states=w)(loss)(x), tuple[jnp.ndarray, Any])
value, g = value_and_grad(loss, grad_states=w)(jnp.ones(3))
assert_type(model.states(), StateDict)
assert_type(model.states(ParamState), StateDict)
assert_type(model.states(ParamState, ...), tuple[StateDict, StateDict])
assert_type(collect_states(model).split(OfType(ParamState)), tuple[StateDict])
assert_type(collect_states(model).split(OfType(ParamState), ...), tuple[StateDict, StateDict])

# jit / vmap2 / pmap2: with the function, the transformed callable, which takes the function's
# parameters and returns its result; without, a decorator that types what it decorates so.
assert_type(jit(loss)(x), jnp.ndarray)
assert_type(jit(static_argnums=0)(loss)(x), jnp.ndarray)
assert_type(vmap2(loss, in_axes=0)(x), jnp.ndarray)
assert_type(vmap2(in_axes=0)(loss)(x), jnp.ndarray)
assert_type(pmap2(loss, axis_name="i")(x), jnp.ndarray)
assert_type(pmap2(axis_name="i")(loss)(x), jnp.ndarray)

@jit
def jitted(x: jnp.ndarray) -> jnp.ndarray:
    return x * 2

@vmap2(in_axes=0, state_in_axes={0: OfType(ParamState)})
def mapped(x: jnp.ndarray) -> jnp.ndarray:
    return x * w.value

assert_type(jitted(x), jnp.ndarray)
assert_type(mapped(x), jnp.ndarray)

# A bare class name in an annotation still means any function: JittedFunction[..., Any].
any_jitted: JittedFunction = jitted
any_grad: GradFunction = decorated
'''


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=900)


def _ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, f"{proc.args}:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"


def test_ruff_check():
    pytest.importorskip("ruff")
    _ok(_run("ruff", "check", "."))


def test_ruff_format():
    pytest.importorskip("ruff")
    _ok(_run("ruff", "format", "--check", "."))


def _cache(name: str) -> str:
    # One persistent cache per configuration (the strict and basic runs may run at the
    # same time under xdist): later runs are incremental, a few seconds instead of minutes.
    return str(ROOT / ".mypy_cache" / name)


@pytest.mark.types  # also at the lowest end: JAX 0.10's annotations must accept our code too
def test_mypy_strict_on_src():
    pytest.importorskip("mypy")
    _ok(_run("mypy", "--config-file", str(ROOT / "mypy.ini"), "--cache-dir", _cache("strict")))


def _readme_blocks() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "jax.distributed" not in b]
    # Each block is checked as its own module: a block's names may repeat another's.
    return "\n".join(
        f"def _block_{i}() -> None:\n" + "".join(f"    {line}\n" for line in b.splitlines())
        for i, b in enumerate(blocks)
    )


def test_mypy_basic_on_examples_and_readme(tmp_path):
    pytest.importorskip("mypy")
    (tmp_path / "readme_snippets.py").write_text(_readme_blocks())
    (tmp_path / "idioms.py").write_text(IDIOMS)
    _ok(
        _run(
            "mypy",
            "--config-file",
            str(ROOT / "mypy-basic.ini"),
            "--cache-dir",
            _cache("basic"),
            str(ROOT / "examples"),
            str(tmp_path / "readme_snippets.py"),
            str(tmp_path / "idioms.py"),
        )
    )
