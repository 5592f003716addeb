"""Two brainstate programs, ported by renaming their imports, give brainstate's numbers.

``examples/hh_population.py`` (Hodgkin–Huxley population: ``Dynamics``, units,
``exp_euler_step``, ``RandomState`` noise, ``for_loop`` in ``jit``) and
``examples/train_inline_grad.py`` (an MLP trained with an inline ``grad`` per step
and optax) are brainstate programs whose marked import block was renamed
(``brainstate`` -> ``state_core``, ``brainstate.nn`` -> ``state_nn``, ...); each
module docstring lists the renames line by line.

The expected numbers are what the brainstate originals print with the same
arguments on CPU in float32, recorded per jaxlib release line (``RECORDED`` says
which brainstate, brainunit, JAX and optax). To check them again against brainstate, point ``BRAINSTATE_PYTHON``
at a Python that has those packages (or run the suite where brainstate is
installed): ``test_the_brainstate_originals_print_these_numbers`` rebuilds each
original from its docstring and runs it there.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import pathlib
import re
import subprocess
from typing import Any

import jaxlib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from state_core import environ

u = pytest.importorskip("brainunit")

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
BLOCK_START = "# ---- renamed imports"
BLOCK_END = "# ---- end of renamed imports ----"
RENAMES = {
    "brainstate": "state_core",
    "brainstate.nn": "state_nn",
    "brainstate.random": "state_random",
    "brainstate.transform": "state_transform",
}
# Imports the examples share with their brainstate originals (outside the marked block).
SHARED_IMPORTS = {"brainunit", "jax.numpy", "optax", "sys"}

# The calls the tests below make, as source, for the brainstate run to make the same ones.
HH_CALL = "main(n_neurons=20, duration=30.0 * u.ms)"
TRAIN_CALL = "main(hidden=16, epochs=4, n_per_class=64, use_jit={use_jit})"

# What the brainstate originals print, per jaxlib release line. XLA's compiler decides
# the last bits of a float32 simulation (which operations it fuses, in which order),
# and a compiler release may move them: brainstate 0.6.0 on jaxlib 0.12 prints a mean
# voltage 1.9e-6 (relative) away from brainstate 0.5.4 on jaxlib 0.10, and so do we.
# So each release line has its own record, taken from brainstate on that jaxlib, and
# our run must match the record of the jaxlib it runs on: integers (spike counts and
# times, accuracy) exactly, floats within rtol=1e-6 (in practice bit for bit). A
# jaxlib without a record skips the comparison with the message that says how to add
# one (run the suite with BRAINSTATE_PYTHON pointing at brainstate on that jaxlib).
_HH_COMMON = {
    "n_steps": 3000,
    "total_spikes": 35,
    "spike_counts": [0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3],
    "last_spike_step": [
        -1,
        -1,
        1673,
        1125,
        2951,
        2642,
        2509,
        2451,
        2287,
        2275,
        2171,
        2140,
        2048,
        2034,
        1990,
        1972,
        1929,
        1913,
        1881,
        2987,
    ],
    "rate_hz": 58.333335876464844,
    "mean_v_mv": -58.573326110839844,
}
RECORDED: dict[str, dict[str, Any]] = {
    "0.10": {
        "by": "brainstate 0.5.4, brainunit 0.5.2, jax and jaxlib 0.10.2, optax 0.2.8",
        "hh": {**_HH_COMMON, "mean_v_end_mv": -54.669288635253906},
        "train": {
            True: {  # under jit
                "epoch_losses": [1.823162317276001, 1.0773133039474487, 0.6817834377288818, 0.45814865827560425],
                "test_loss": 0.3848339021205902,
                "test_accuracy": 0.8125,  # 39 of 48
            },
            False: {  # eagerly: brainstate evaluates each step's gradient op by op, the inline-built
                # gradients here share one compiled program, so the last bit of a loss may differ
                "epoch_losses": [1.823162317276001, 1.0773133039474487, 0.6817833781242371, 0.45814868807792664],
                "test_loss": 0.3848339021205902,
                "test_accuracy": 0.8125,
            },
        },
    },
    "0.12": {
        "by": "brainstate 0.6.0, brainunit 0.6.0, jax and jaxlib 0.12.0.1, optax 0.2.8",
        "hh": {**_HH_COMMON, "mean_v_end_mv": -54.669185638427734},
        "train": {
            True: {
                "epoch_losses": [1.823162317276001, 1.0773133039474487, 0.6817833781242371, 0.45814865827560425],
                "test_loss": 0.3848338723182678,
                "test_accuracy": 0.8125,
            },
            False: {
                "epoch_losses": [1.823162317276001, 1.0773131847381592, 0.6817833781242371, 0.45814865827560425],
                "test_loss": 0.3848338723182678,
                "test_accuracy": 0.8125,
            },
        },
    },
}


def _release_line(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _recorded(jaxlib_version: str) -> dict[str, Any]:
    line = _release_line(jaxlib_version)
    if line not in RECORDED:
        pytest.skip(
            f"no brainstate numbers recorded for jaxlib {line} (recorded: {', '.join(RECORDED)}); run this "
            "file with BRAINSTATE_PYTHON set to a Python with brainstate on that jaxlib and record what it prints"
        )
    return RECORDED[line]


@pytest.fixture(autouse=True)
def _clean_environment():
    yield
    environ.reset()  # the HH example sets dt globally


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_json(result: dict[str, Any]) -> dict[str, Any]:
    """The run's summary with arrays as lists, the form a brainstate subprocess reports too."""
    return json.loads(json.dumps(result, default=lambda a: np.asarray(a).tolist()))


def _check_hh(result: dict[str, Any], jaxlib_version: str) -> None:
    expected = _recorded(jaxlib_version)["hh"]
    for key in ("n_steps", "total_spikes", "spike_counts", "last_spike_step"):
        assert_array_equal(result[key], expected[key], err_msg=key)
    for key in ("rate_hz", "mean_v_end_mv", "mean_v_mv"):
        assert_allclose(result[key], expected[key], rtol=1e-6, err_msg=key)


def _check_train(result: dict[str, Any], use_jit: bool, jaxlib_version: str) -> None:
    expected = _recorded(jaxlib_version)["train"][use_jit]
    assert_allclose(result["epoch_losses"], expected["epoch_losses"], rtol=1e-6)
    assert_allclose(result["test_loss"], expected["test_loss"], rtol=1e-6)
    assert round(result["test_accuracy"] * 48) == round(expected["test_accuracy"] * 48)


def test_hh_population_gives_brainstate_numbers(capsys):
    hh = _load("hh_population")
    result = _as_json(hh.main(n_neurons=20, duration=30.0 * u.ms))
    _check_hh(result, jaxlib.__version__)
    assert "total spikes: 35 (the state counted 35)" in capsys.readouterr().out


@pytest.mark.parametrize("use_jit", [True, False], ids=["jit", "eager"])
def test_train_inline_grad_gives_brainstate_numbers(use_jit):
    train = _load("train_inline_grad")
    _check_train(
        _as_json(train.main(hidden=16, epochs=4, n_per_class=64, use_jit=use_jit)), use_jit, jaxlib.__version__
    )


def _renamed_block(path: pathlib.Path) -> tuple[list[str], str]:
    """The marked import lines of an example, and the source with that block cut out."""
    lines = path.read_text().splitlines()
    starts = [n for n, line in enumerate(lines) if line.startswith(BLOCK_START)]
    ends = [n for n, line in enumerate(lines) if line == BLOCK_END]
    assert len(starts) == 1 and len(ends) == 1 and starts[0] < ends[0], f"{path.name}: one marked import block"
    block = [line for line in lines[starts[0] + 1 : ends[0]] if line.strip()]
    rest = "\n".join(lines[: starts[0]] + lines[ends[0] + 1 :])
    return block, rest


def _docstring_renames(path: pathlib.Path) -> list[tuple[str, str]]:
    """``(brainstate line, our line)`` pairs listed in the module docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return re.findall(r"^ *(from brainstate[\w.]* import .+)\n *-> (from \w+ import .+)$", doc, flags=re.M)


def _brainstate_original(path: pathlib.Path) -> str:
    """The example with the marked block put back as the docstring says brainstate writes it."""
    source = path.read_text()
    for original, ours in _docstring_renames(path):
        source = source.replace(f"\n{ours}\n", f"\n{original}\n", 1)
    return source


@pytest.mark.parametrize("name", ["hh_population", "train_inline_grad"])
def test_example_differs_from_brainstate_only_in_the_marked_imports(name):
    path = EXAMPLES / f"{name}.py"
    block, rest = _renamed_block(path)
    renames = _docstring_renames(path)
    # The docstring lists exactly the block, line for line ...
    assert [ours for _, ours in renames] == block
    for original, ours in renames:
        (bs_node,), (our_node,) = ast.parse(original).body, ast.parse(ours).body
        assert isinstance(bs_node, ast.ImportFrom) and isinstance(our_node, ast.ImportFrom)
        # ... each line a module rename that keeps the imported names.
        assert RENAMES[bs_node.module or ""] == our_node.module, original
        assert [a.name for a in bs_node.names] == [a.name for a in our_node.names], original
        assert all(a.asname is None for a in our_node.names), ours
    # Outside the block the program imports only what the brainstate original imports too,
    # so every name of ours it uses comes through the renamed lines.
    tree = ast.parse(rest)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert {a.name for a in node.names} <= SHARED_IMPORTS, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{name}: an import outside the marked block: {ast.unparse(node)}")
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {*RENAMES, *RENAMES.values()}
    # Putting brainstate's lines back changes exactly the block.
    original = _brainstate_original(path)
    changed = [a for a, b in zip(original.splitlines(), path.read_text().splitlines(), strict=True) if a != b]
    assert changed == [bs for bs, _ in renames]


@pytest.mark.slow
def test_the_brainstate_originals_print_these_numbers(tmp_path, brainstate_python):
    python = brainstate_python
    for name in ("hh_population", "train_inline_grad"):
        (tmp_path / f"{name}.py").write_text(_brainstate_original(EXAMPLES / f"{name}.py"))
    calls = {
        "hh": f"hh_population.{HH_CALL}",
        "jit": f"train_inline_grad.{TRAIN_CALL.format(use_jit=True)}",
        "eager": f"train_inline_grad.{TRAIN_CALL.format(use_jit=False)}",
    }
    driver = (
        "import json, sys\nimport numpy as np\nimport brainunit as u\n"
        "import hh_population, train_inline_grad\n"
        f"results = {{{', '.join(f'{k!r}: {v}' for k, v in calls.items())}}}\n"
        "import jaxlib\n"
        "results['jaxlib'] = jaxlib.__version__\n"
        "print('RESULTS', json.dumps(results, default=lambda a: np.asarray(a).tolist()))\n"
    )
    proc = subprocess.run(
        [python, "-c", driver], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.split("RESULTS ", 1)[1])
    _check_hh(results["hh"], results["jaxlib"])
    _check_train(results["jit"], True, results["jaxlib"])
    _check_train(results["eager"], False, results["jaxlib"])
