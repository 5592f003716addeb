"""The layer contract: each package imports only from the layers below it.

    state_nn  >  state_transform  >  state_random  >  state_core

Checked twice, independently:

* by import-linter, using the root ``.importlinter`` config (``layers`` contract);
* by a plain ``ast`` scan of every ``.py`` file under ``packages/*/src``, which
  needs nothing installed and reports file, line and offending import.
"""

from __future__ import annotations

import ast
import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPORTLINTER_CONFIG = ROOT / ".importlinter"

# Lowest layer first: a module may import only from its own layer or lower ones.
LAYERS = ("state_core", "state_random", "state_transform", "state_nn")
DISTS = {
    "state_core": "state-core",
    "state_random": "state-random",
    "state_transform": "state-transform",
    "state_nn": "state-nn",
}
RANK = {name: i for i, name in enumerate(LAYERS)}


def _src_dir(package: str, root: Path = ROOT) -> Path:
    return root / "packages" / DISTS[package] / "src"


# --------------------------------------------------------------------------- #
# ast-based checker
# --------------------------------------------------------------------------- #


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_modules(tree: ast.AST, module: str, is_package: bool):
    """Yield ``(lineno, absolute_module_name)`` for every import in ``tree``.

    Covers ``import x``, ``from x import y``, relative imports (resolved against
    ``module``), imports nested in functions / ``if TYPE_CHECKING:`` blocks, and
    ``importlib.import_module("x")`` / ``__import__("x")`` with literal names.
    """
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                yield node.lineno, node.module or ""
            else:
                keep = len(package_parts) - (node.level - 1)
                if keep <= 0:
                    # Relative import escaping the top-level package.
                    yield node.lineno, "." * node.level + (node.module or "")
                    continue
                base = package_parts[:keep]
                yield node.lineno, ".".join(base + ([node.module] if node.module else []))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and not first.value.startswith(".")
            ):
                yield node.lineno, first.value


def find_layer_violations(root: Path = ROOT) -> list[str]:
    """Return one human-readable message per upward import found under ``root``."""
    violations: list[str] = []
    for package in LAYERS:
        src = _src_dir(package, root)
        for path in sorted((src / package).rglob("*.py")):
            rel = path.relative_to(root)
            text = path.read_text(encoding="utf-8")
            try:
                tree = ast.parse(text, filename=str(path))
            except SyntaxError as exc:
                violations.append(f"{rel}:{exc.lineno}: cannot parse ({exc.msg})")
                continue
            lines = text.splitlines()
            module = _module_name(path, src)
            for lineno, target in _imported_modules(tree, module, path.name == "__init__.py"):
                top = target.split(".")[0]
                if target.startswith("."):
                    violations.append(f"{rel}:{lineno}: relative import {target!r} escapes package {package!r}")
                elif top in RANK and RANK[top] > RANK[package]:
                    source = lines[lineno - 1].strip() if lineno <= len(lines) else ""
                    violations.append(
                        f"{rel}:{lineno}: {module} (layer {RANK[package]}, {package}) imports "
                        f"{target} (layer {RANK[top]}, {top}), a HIGHER layer: `{source}`"
                    )
    return violations


def test_every_package_has_sources():
    for package in LAYERS:
        pkg_dir = _src_dir(package) / package
        assert pkg_dir.is_dir(), f"missing package directory {pkg_dir.relative_to(ROOT)}"
        assert any(pkg_dir.rglob("*.py")), f"no .py files under {pkg_dir.relative_to(ROOT)}"


def test_no_upward_imports_ast():
    violations = find_layer_violations()
    assert not violations, (
        "Layer contract violated (allowed: state_nn > state_transform > state_random > "
        "state_core; a module may import only its own or LOWER layers):\n  " + "\n  ".join(violations)
    )


def test_ast_checker_detects_upward_imports(tmp_path):
    """Self-test of the checker on a synthetic tree, so it cannot silently pass."""
    for package in LAYERS:
        pkg = _src_dir(package, tmp_path) / package
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text('"""ok"""\n')
    core = _src_dir("state_core", tmp_path) / "state_core"
    (core / "bad.py").write_text(
        "import numpy\n"
        "from state_core import x\n"
        "import state_nn.layers\n"
        "def f():\n"
        "    from state_random import keys\n"
        "    import importlib\n"
        "    return importlib.import_module('state_transform')\n"
    )
    nn = _src_dir("state_nn", tmp_path) / "state_nn"
    (nn / "ok.py").write_text("import state_core\nfrom state_transform import jit\nfrom . import ok\n")
    transform = _src_dir("state_transform", tmp_path) / "state_transform"
    (transform / "sub").mkdir()
    (transform / "sub" / "__init__.py").write_text("from .. import something\nfrom ... import nope\n")

    violations = find_layer_violations(tmp_path)
    joined = "\n".join(violations)
    assert len(violations) == 4, joined
    assert "state_core/bad.py:3:" in joined and "import state_nn.layers" in joined
    assert "state_core/bad.py:5:" in joined and "state_random" in joined
    assert "state_core/bad.py:7:" in joined and "state_transform" in joined
    assert "escapes package 'state_transform'" in joined


# --------------------------------------------------------------------------- #
# import-linter
# --------------------------------------------------------------------------- #


def test_importlinter_config_matches_layers():
    parser = configparser.ConfigParser()
    assert parser.read(IMPORTLINTER_CONFIG), f"cannot read {IMPORTLINTER_CONFIG}"
    roots = parser["importlinter"]["root_packages"].split()
    assert sorted(roots) == sorted(LAYERS)
    layers = parser["importlinter:contract:layers"]["layers"].split()
    assert parser["importlinter:contract:layers"]["type"].strip() == "layers"
    assert layers == list(reversed(LAYERS)), layers


def test_import_linter_layers_contract():
    pytest.importorskip("importlinter")
    env = dict(os.environ)
    # Lint the source tree of this checkout, whatever happens to be installed.
    src_dirs = [str(_src_dir(p)) for p in LAYERS]
    env["PYTHONPATH"] = os.pathsep.join([*src_dirs, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # Equivalent to `lint-imports --config <root>/.importlinter --no-cache`, but
    # independent of PATH / console-script location.
    cmd = [
        sys.executable,
        "-c",
        "from importlinter.cli import lint_imports_command; lint_imports_command()",
        "--config",
        str(IMPORTLINTER_CONFIG),
        "--no-cache",
        "--no-logo",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"import-linter failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
