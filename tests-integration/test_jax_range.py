"""The declared JAX ranges are the tested ones, and every place that states them agrees.

Each distribution that imports JAX declares ``jax>=LOW,<NEXT`` in its
pyproject.toml. The ``jax`` matrix of hatch.toml pins exactly those lower ends
(``hatch run test`` runs the suite there as well as at the newest JAX), and the
READMEs tell readers the same numbers.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parents[1]
DISTS = ["state-core", "state-random", "state-transform", "state-nn"]
# Which matrix environment tests the lowest JAX of each distribution.
MATRIX_END = {
    "state-core": "lowest-transform",
    "state-random": "lowest-transform",
    "state-transform": "lowest-transform",
    "state-nn": "lowest-transform",
}


def _jax_requirement(dist: str) -> tuple[str, str]:
    deps = tomllib.loads((ROOT / "packages" / dist / "pyproject.toml").read_text())["project"]["dependencies"]
    found = [d.replace(" ", "") for d in deps if re.match(r"jax(?![a-z_-])", d)]
    assert len(found) == 1, f"{dist} declares jax {len(found)} times: {deps}"
    match = re.fullmatch(r"jax>=([\d.]+),<([\d.]+)", found[0])
    assert match, f"{dist}: {found[0]!r} is not a bounded range jax>=LOW,<NEXT"
    return match.group(1), match.group(2)


def _imports_jax(dist: str) -> bool:
    src = ROOT / "packages" / dist / "src"
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "jax" for a in node.names):
                return True
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "jax":
                return True
    return False


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


@pytest.mark.parametrize("dist", DISTS)
def test_each_distribution_that_imports_jax_declares_a_bounded_range(dist):
    assert _imports_jax(dist)
    low, high = _jax_requirement(dist)
    assert _version_tuple(low) < _version_tuple(high)


def test_matrix_pins_the_declared_lower_ends():
    hatch = tomllib.loads((ROOT / "hatch.toml").read_text())
    (matrix,) = hatch["envs"]["jax"]["matrix"]
    pins: dict[str, set[str]] = {end: set() for end in matrix["end"]}
    for entry in hatch["envs"]["jax"]["overrides"]["matrix"]["end"]["extra-dependencies"]:
        for end in entry["if"]:
            pins[end].add(entry["value"])
    for dist, end in MATRIX_END.items():
        low, _ = _jax_requirement(dist)
        assert {f"jax=={low}", f"jaxlib=={low}"} <= pins[end], f"{dist} declares jax>={low}; {end} pins {pins[end]}"
    # The test command runs both ends.
    test_script = " ".join(hatch["envs"]["default"]["scripts"]["test"])
    for end in pins:
        assert f"jax.{end}:" in test_script


def test_one_upper_bound_and_the_running_jax_is_inside_every_range():
    highs = {_jax_requirement(d)[1] for d in DISTS}
    assert len(highs) == 1, highs
    running = _version_tuple(jax.__version__)
    for dist in DISTS:
        low, high = _jax_requirement(dist)
        if dist in ("state-transform", "state-nn") or running >= _version_tuple(low):
            assert _version_tuple(low) <= running < _version_tuple(high), (dist, jax.__version__)


@pytest.mark.parametrize("dist", DISTS)
def test_readmes_state_the_declared_range(dist):
    low, high = _jax_requirement(dist)
    readme = (ROOT / "packages" / dist / "README.md").read_text()
    assert f"JAX >= {low}, < {high}" in readme
    assert f"JAX {low}" in (ROOT / "README.md").read_text()
