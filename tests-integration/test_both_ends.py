"""`tools/both_ends.py`, behind `hatch run test`: it finds each end's Python, runs both ends,
and says what it could not run."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import ClassVar

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("both_ends", ROOT / "tools" / "both_ends.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def both_ends():
    return _load()


def _fake_python(path: Path, version: str, works: bool = True) -> Path:
    """An executable that answers the version probe like a Python ``version`` (or fails, like a pyenv shim)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = f"#!/bin/sh\necho {version}\n" if works else "#!/bin/sh\necho 'pyenv: command not found' >&2\nexit 127\n"
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_every_root_command_goes_through_the_driver():
    hatch = tomllib.loads((ROOT / "hatch.toml").read_text())
    scripts = hatch["envs"]["default"]["scripts"]
    for name in (
        "test",
        "suite",
        "demo",
        "bench",
        "bench-compare",
        "lint",
        "types",
        "lint-imports",
        "brainstate-suite",
        "py",
    ):
        assert scripts[name].startswith("python {root}/tools/both_ends.py "), name
    # The launcher installs nothing: it must work before any dependency is there.
    assert hatch["envs"]["default"]["dependencies"] == [] and hatch["envs"]["default"]["skip-install"] is True


def test_each_step_names_a_script_of_a_pinned_environment(both_ends):
    config = both_ends.load_hatch_config()
    assert [(s.env, both_ends.pinned_python(s.env, config)) for s in both_ends.TEST_STEPS] == [
        ("newest", "3.13"),
        ("newest", "3.13"),
        ("lowest", "3.11"),
    ]
    assert [s.env for s in both_ends.TEST_STEPS_WITH_ARGS] == ["newest", "lowest"]
    for step in (*both_ends.TEST_STEPS, *both_ends.TEST_STEPS_WITH_ARGS):
        assert step.script in config["envs"][step.env]["scripts"]
    # Environments that build on an end inherit its Python; the launcher has none.
    assert both_ends.pinned_python("compare", config) == "3.13"
    assert both_ends.pinned_python("default", config) is None


def test_this_python_is_found_for_its_own_version(both_ends):
    version = "{}.{}".format(*sys.version_info[:2])
    found = both_ends.find_python(version)
    assert found is not None and both_ends.reports_version(found, version)


def test_a_pyenv_version_off_path_is_found_newest_release_first(both_ends, tmp_path, monkeypatch):
    root = tmp_path / "pyenv"
    _fake_python(root / "versions" / "3.97.1" / "bin" / "python3.97", "3.97")
    newest = _fake_python(root / "versions" / "3.97.12" / "bin" / "python3.97", "3.97")
    _fake_python(root / "versions" / "3.97t-dev" / "bin" / "python3.97", "3.97")  # not a plain release
    # A pyenv shim on PATH for a version pyenv has not selected: it exists and fails.
    shims = tmp_path / "shims"
    _fake_python(shims / "python3.97", "3.97", works=False)
    monkeypatch.setenv("PYENV_ROOT", str(root))
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    candidates = both_ends.python_candidates("3.97")
    assert candidates[0] == str(shims / "python3.97")
    assert not any("3.97t-dev" in c for c in candidates)
    assert both_ends.find_python("3.97") == str(newest)


def test_a_python_that_reports_another_version_is_not_taken(both_ends, tmp_path, monkeypatch):
    root = tmp_path / "pyenv"
    _fake_python(root / "versions" / "3.98.0" / "bin" / "python3.98", "3.11")
    monkeypatch.setenv("PYENV_ROOT", str(root))
    assert both_ends.find_python("3.98") is None


def test_a_missing_end_is_named_with_how_to_get_its_python(both_ends):
    message = both_ends.missing_python_message("newest", "3.13")
    assert message.startswith("the newest end (Python 3.13) did not run: no working python3.13 on PATH")
    assert "`hatch python install 3.13`" in message and "pyenv install 3.13" in message


def _missing_newest(both_ends, monkeypatch, ran):
    monkeypatch.setattr(both_ends, "check_hatch", lambda hatch: None)
    monkeypatch.setattr(both_ends.shutil, "which", lambda name: "/usr/bin/hatch" if name == "hatch" else None)
    monkeypatch.setattr(both_ends, "find_python", lambda version, hatch=None: None if version == "3.13" else "/py")
    monkeypatch.setattr(
        both_ends, "run_script", lambda hatch, env, script, args, python, unoptimised: ran.append(env) or 0
    )
    monkeypatch.setattr(both_ends, "start_env_creation", _FakePreparation)


class _FakePreparation:
    """Stands in for ``hatch env create`` in the background; records when it starts and is waited for."""

    events: ClassVar[list] = []

    def __init__(self, hatch, env, python):
        self.env = env
        self.events.append(("create", env))

    def wait(self):
        self.events.append(("waited", self.env))


@pytest.mark.parametrize(("ci", "status"), [("true", 1), ("", 0)])
def test_the_other_end_still_runs_and_ci_fails_without_both(both_ends, monkeypatch, capsys, ci, status):
    ran: list[str] = []
    _missing_newest(both_ends, monkeypatch, ran)
    monkeypatch.setenv("CI", ci)
    assert both_ends.run_test([]) == status
    assert ran == ["lowest"]
    err = capsys.readouterr().err
    assert "NOT RUN  newest: the newest end (Python 3.13) did not run" in err
    assert "passed   lowest: the package suites, compiled unoptimised, Python 3.11" in err
    assert err.count("NOT RUN  newest") == 1  # one line for the end, not one per step
    assert ("CI runs both ends" in err) is bool(ci)


def test_a_failing_end_fails_the_command_after_both_ran(both_ends, monkeypatch, capsys):
    ran: list[str] = []
    monkeypatch.setattr(both_ends, "check_hatch", lambda hatch: None)
    monkeypatch.setattr(both_ends.shutil, "which", lambda name: "/usr/bin/hatch")
    monkeypatch.setattr(both_ends, "find_python", lambda version, hatch=None: "/py")
    events = _FakePreparation.events = []
    monkeypatch.setattr(both_ends, "start_env_creation", _FakePreparation)
    monkeypatch.setattr(
        both_ends,
        "run_script",
        lambda hatch, env, script, args, python, unoptimised: (
            ran.append((env, args)) or events.append(("run", env)) or int(env == "newest")
        ),
    )
    assert both_ends.run_test(["-k", "foo"]) == 1
    assert ran == [("newest", ["-k", "foo"]), ("lowest", [])]  # pytest arguments go to the whole suite only
    assert "FAILED (exit 1) newest" in capsys.readouterr().err
    # The lowest end's environment is made while the newest end runs, and ready before its step.
    assert events == [("create", "lowest"), ("run", "newest"), ("waited", "lowest"), ("run", "lowest")]


def test_without_arguments_the_package_suites_compile_unoptimised_and_the_rest_keeps_xla_defaults(
    both_ends, monkeypatch, capsys
):
    ran: list[tuple[str, str, bool]] = []
    monkeypatch.setattr(both_ends, "check_hatch", lambda hatch: None)
    monkeypatch.setattr(both_ends.shutil, "which", lambda name: "/usr/bin/hatch")
    monkeypatch.setattr(both_ends, "find_python", lambda version, hatch=None: "/py")
    events = _FakePreparation.events = []
    monkeypatch.setattr(both_ends, "start_env_creation", _FakePreparation)

    def run_script(hatch, env, script, args, python, unoptimised):
        ran.append((env, script, unoptimised))
        events.append(("run", env))
        return 0

    monkeypatch.setattr(both_ends, "run_script", run_script)
    assert both_ends.run_test([]) == 0
    assert ran == [
        ("newest", "package-suites", True),
        ("newest", "user-facing", False),
        ("lowest", "package-suites", True),
    ]
    # Only the other end's environment is made in the background (the first end's own
    # `hatch run` makes its environment), and it is waited for once.
    assert events == [
        ("create", "lowest"),
        ("run", "newest"),
        ("run", "newest"),
        ("waited", "lowest"),
        ("run", "lowest"),
    ]
    assert "passed   newest: integration, docs and types, with XLA's defaults" in capsys.readouterr().err


def test_the_newest_ends_two_parts_select_the_whole_suite_once():
    # Every package test runs in `package-suites` unless it is `docs`; `user-facing` takes
    # exactly the `docs` ones and every test under tests-integration/ (marked `integration`).
    scripts = tomllib.loads((ROOT / "hatch.toml").read_text())["envs"]["newest"]["scripts"]
    assert scripts["package-suites"] == "pytest -n 2 --dist worksteal -m 'not docs' {root}/packages {args}"
    assert scripts["user-facing"] == (
        "pytest -n 2 --dist worksteal -m 'integration or docs' {root}/tests-integration {root}/packages {args}"
    )
    assert "integration" in (ROOT / "pytest.ini").read_text()


def test_integration_tests_carry_their_marker(request):
    assert request.node.get_closest_marker("integration") is not None


def test_unoptimised_steps_put_the_flag_first_and_keep_the_callers_flags(both_ends, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/dump")
    environ = both_ends._environ_with("/py/bin/python", unoptimised=True)
    assert environ["XLA_FLAGS"] == "--xla_backend_optimization_level=0 --xla_dump_to=/tmp/dump"
    assert both_ends._environ_with("/py/bin/python")["XLA_FLAGS"] == "--xla_dump_to=/tmp/dump"
    monkeypatch.delenv("XLA_FLAGS")
    assert both_ends._environ_with("/py/bin/python", unoptimised=True)["XLA_FLAGS"] == (
        "--xla_backend_optimization_level=0"
    )
    assert "XLA_FLAGS" not in both_ends._environ_with("/py/bin/python")


def test_a_failed_background_creation_is_shown_and_left_to_the_step(both_ends, tmp_path, capsys):
    log = tmp_path / "create.log"
    log.write_text("ERROR: no matching distribution for jaxlib==0.10.0\n")
    failed = both_ends.Preparation("lowest", subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]), log)
    failed.wait()
    err = capsys.readouterr().err
    assert "creating the lowest environment in the background failed (exit 3)" in err
    assert "no matching distribution for jaxlib==0.10.0" in err
    assert "the lowest step creates it again" in err
    assert not log.exists()


def test_old_or_missing_hatch_is_refused_with_the_fix(both_ends, monkeypatch):
    monkeypatch.setattr(both_ends, "hatch_version", lambda hatch: (1, 12, 0))
    message = both_ends.check_hatch("/usr/bin/hatch")
    assert "needs Hatch >= 1.16" in message and "found 1.12.0" in message
    assert "pip install --upgrade 'hatch>=1.16'" in message
    assert "pip install 'hatch>=1.16'" in both_ends.check_hatch(None)
    monkeypatch.setattr(both_ends, "hatch_version", lambda hatch: (1, 18, 2))
    assert both_ends.check_hatch("/usr/bin/hatch") is None


def test_old_python_is_named(both_ends, monkeypatch, capsys):
    monkeypatch.setattr(both_ends.sys, "version_info", (3, 10, 13))
    assert both_ends.main(["test"]) == 2
    assert "they need Python >= 3.11" in capsys.readouterr().err


def test_usage_is_printed_for_unknown_commands(both_ends, capsys):
    assert both_ends.main(["frobnicate"]) == 2
    assert "usage: both_ends.py test" in capsys.readouterr().err


def test_the_commands_may_write_bytecode_and_find_the_pinned_python_first(both_ends, monkeypatch):
    # Environments are installed without bytecode: a machine-wide PYTHONDONTWRITEBYTECODE
    # would make every process of the suite compile JAX's sources again.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PATH", "/usr/bin")
    environ = both_ends._environ_with("/opt/py313/bin/python3.13")
    assert "PYTHONDONTWRITEBYTECODE" not in environ
    assert environ["PATH"] == os.pathsep.join(["/opt/py313/bin", "/usr/bin"])
    hatch = tomllib.loads((ROOT / "hatch.toml").read_text())
    for end in ("newest", "lowest"):
        assert hatch["envs"][end]["installer"] == "uv"
        assert "UV_COMPILE_BYTECODE" not in hatch["envs"][end].get("env-vars", {})
