"""`.ci/check_tools.py`, run first by `hatch run test`, stops old tools with a message that says why."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("check_tools", ROOT / ".ci" / "check_tools.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_passes_here(capsys):
    assert _load().main() == 0
    assert capsys.readouterr().err == ""


def test_old_python_is_named(monkeypatch, capsys):
    guard = _load()
    monkeypatch.setattr(guard.sys, "version_info", (3, 10, 13))
    assert guard.main() == 1
    err = capsys.readouterr().err
    assert "needs Python >= 3.11" in err and sys.executable in err


def test_old_hatch_is_named(monkeypatch, capsys):
    guard = _load()
    real = importlib.util.find_spec
    monkeypatch.setattr(guard.importlib.util, "find_spec", lambda name: None if name == "state_random" else real(name))
    monkeypatch.setattr(guard.shutil, "which", lambda name: None)
    assert guard.main() == 1
    err = capsys.readouterr().err
    assert "state_random are not installed" in err
    assert "needs Hatch >= 1.16" in err and "pip install --upgrade 'hatch>=1.16'" in err


def test_the_test_command_runs_the_guard_first_and_pins_python():
    hatch = tomllib.loads((ROOT / "hatch.toml").read_text())
    default = hatch["envs"]["default"]
    assert default["scripts"]["test"][0] == "check-tools"
    assert default["scripts"]["check-tools"].endswith(".ci/check_tools.py")
    # On Python < 3.11 the environment cannot even install: the first dependency is a
    # local guard package whose only content is requires-python >= 3.11.
    assert default["dependencies"][0].startswith("this-repository-needs-python @ {root:uri}/.ci/python-guard")
    assert "python_version < '3.11'" in default["dependencies"][0]
    guard = tomllib.loads((ROOT / ".ci" / "python-guard" / "pyproject.toml").read_text())
    assert guard["project"]["requires-python"] == ">=3.11"
