"""The declared JAX ranges are the tested ones, and every place that states them agrees.

Each distribution that imports JAX declares ``jax>=LOW,<NEXT`` in its
pyproject.toml. The ``lowest`` environment of hatch.toml pins exactly those lower
ends, the ``newest`` one takes the newest JAX they admit (``hatch run test`` runs
both), and the READMEs tell readers the same numbers.
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
# The newest JAX the test command runs at; the declared upper bound is the next minor release.
NEWEST_TESTED = "0.12"


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


def test_the_lowest_end_pins_the_declared_lower_ends_and_installs_every_package():
    lowest = tomllib.loads((ROOT / "hatch.toml").read_text())["envs"]["lowest"]
    pins = set(lowest["dependencies"])
    for dist in DISTS:
        low, _ = _jax_requirement(dist)
        assert {f"jax=={low}", f"jaxlib=={low}"} <= pins, f"{dist} declares jax>={low}; the lowest end pins {pins}"
        assert f"packages/{dist}" in lowest["workspace"]["members"]


def test_no_environment_sets_xla_flags_of_its_own():
    # `hatch run test` chooses the XLA flags per step (tools/both_ends.py: the package
    # suites compile unoptimised at both ends); an environment-wide XLA_FLAGS would also
    # reach the user-facing tests, the demo and the benchmark, which keep XLA's defaults.
    envs = tomllib.loads((ROOT / "hatch.toml").read_text())["envs"]
    for name, env in envs.items():
        assert "XLA_FLAGS" not in env.get("env-vars", {}), name


def test_the_newest_end_is_the_one_below_the_upper_bound():
    for dist in DISTS:
        _, high = _jax_requirement(dist)
        major, minor = _version_tuple(NEWEST_TESTED)[:2]
        assert _version_tuple(high)[:2] == (major, minor + 1), (
            f"{dist} admits jax<{high}; the tests run {NEWEST_TESTED}"
        )
    newest = tomllib.loads((ROOT / "hatch.toml").read_text())["envs"]["newest"]
    assert not any(d.startswith(("jax=", "jaxlib=")) for d in newest["dependencies"]), "the newest end pins no JAX"


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
