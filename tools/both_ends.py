"""Run this repository's Hatch scripts at the two ends of the platform range it supports.

``hatch run test`` and the other root commands call this script (see hatch.toml):

    python tools/both_ends.py test [PYTEST ARGS]   # newest end: the whole suite; lowest end: the package suites
    python tools/both_ends.py run ENV SCRIPT [ARGS] # one script of one pinned environment (``newest``, ``lowest``, ...)

Each end is a Hatch environment pinned to one Python (``python = "3.13"`` for
``newest``, ``"3.11"`` for ``lowest``). Hatch looks for that Python on PATH only,
and many machines keep the interpreters they have elsewhere: pyenv's versions are
not on PATH unless selected, Hatch's own Pythons (``hatch python install``) live in
its data directory. So this script finds the pinned Python first, on PATH, in
``/usr/bin`` or ``/usr/local/bin``, among pyenv's versions, or among Hatch's own,
and puts its directory at the front of PATH for the one Hatch call that needs it.

The lowest end's environment is created in the background while the newest
end's suite runs (creating one mostly downloads wheels), so a fresh machine does
not wait for it afterwards.

When an end's Python cannot be found, ``test`` still runs the other end, then says
which end did not run and how to get its Python; it fails in CI (``CI`` set), where
both ends are required, and passes with that warning elsewhere.

Only the standard library is used: this runs in Hatch's launcher environment,
before any of the project's dependencies are installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIN_HATCH = (1, 16)


@dataclass(frozen=True)
class Step:
    """One part of ``hatch run test``: a script of a pinned environment."""

    env: str
    script: str
    what: str  # for the summary, e.g. "the package suites"
    takes_args: bool  # whether ``hatch run test ARGS`` passes ARGS on to it
    unoptimised: bool = False  # whether XLA compiles without LLVM's optimiser (``UNOPTIMISED``)


# XLA's compile is most of the package suites' time, and a quarter of it is LLVM's
# optimiser. The package suites check our code's behaviour (what is traced, cached,
# donated, written back, refused), which does not depend on how well XLA's generated
# code is optimised, so they compile without it (at the newest end: 508 instead of
# 667 s of CPU). Unoptimised code may differ from optimised code in the last bit of
# a float, so everything users read (the docs, the docstring examples, the README,
# the seeds' recorded numbers) and the integration suite run with XLA's defaults,
# as users' programs do.
UNOPTIMISED = "--xla_backend_optimization_level=0"

# The newest end runs everything (docs, lint, strict types, the install test, the
# integration suite); the lowest end runs each package's own suite (hatch.toml says
# which tests that leaves out and why).
TEST_STEPS = (
    Step("newest", "package-suites", "the package suites, compiled unoptimised", takes_args=False, unoptimised=True),
    Step("newest", "user-facing", "integration, docs and types, with XLA's defaults", takes_args=False),
    Step("lowest", "package-suites", "the package suites, compiled unoptimised", takes_args=False, unoptimised=True),
)
# ``hatch run test ARGS``: the arguments choose the tests (``-k``, paths), so the
# newest end runs them as one suite, with XLA's defaults.
TEST_STEPS_WITH_ARGS = (Step("newest", "suite", "the suite", takes_args=True), TEST_STEPS[-1])


def load_hatch_config(root: Path = ROOT) -> dict:
    """hatch.toml, parsed."""
    import tomllib

    with open(root / "hatch.toml", "rb") as f:
        return tomllib.load(f)


def pinned_python(env: str, config: dict) -> str | None:
    """The Python version ``env`` is pinned to in hatch.toml (following ``template``), or None."""
    envs = config.get("envs", {})
    seen = set()
    while env in envs and env not in seen:
        seen.add(env)
        spec = envs[env]
        if "python" in spec:
            return str(spec["python"])
        env = spec.get("template", "default")
    return None


def reports_version(python: str, version: str) -> bool:
    """True if ``python`` runs and is CPython ``version`` (e.g. "3.13") with a working ``venv``.

    A pyenv shim for a version that is installed but not selected exists on PATH
    and fails when run, so every candidate is run once.
    """
    probe = "import sys, venv; print('%d.%d' % sys.version_info[:2])"
    try:
        proc = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return False
    return proc.returncode == 0 and proc.stdout.strip() == version


def _version_key(path: str) -> tuple[int, ...]:
    match = re.search(r"versions/(\d+(?:\.\d+)*)/", path)
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


def python_candidates(version: str, hatch: str | None = None) -> list[str]:
    """Where a Python ``version`` may be, most likely first (the paths need not exist)."""
    name = f"python{version}"
    found = [shutil.which(name) or "", f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    # pyenv names free-threaded and development builds 3.13t, 3.13-dev: plain releases only.
    releases = [
        str(p)
        for p in (pyenv_root / "versions").glob(f"{version}.*/bin/{name}")
        if re.fullmatch(r"\d+\.\d+\.\d+", p.parts[-3])
    ]
    found += sorted(releases, key=_version_key, reverse=True)
    if hatch:
        proc = subprocess.run([hatch, "python", "find", version], capture_output=True, text=True, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            found.append(proc.stdout.strip().splitlines()[-1])
    return [p for p in found if p]


def find_python(version: str, hatch: str | None = None) -> str | None:
    """The path of a working Python ``version``, or None when this machine has none we can find."""
    for candidate in python_candidates(version, hatch):
        if os.access(candidate, os.X_OK) and reports_version(candidate, version):
            return candidate
    return None


def missing_python_message(env: str, version: str) -> str:
    """What to tell a user whose machine has no Python for ``env``."""
    return (
        f"the {env} end (Python {version}) did not run: no working python{version} on PATH, in /usr/bin or "
        f"/usr/local/bin, among pyenv's versions or among Hatch's own Pythons. Get one with "
        f"`hatch python install {version}` (or `pyenv install {version}`, or your system's python{version} "
        "package), then run the command again."
    )


def hatch_version(hatch: str) -> tuple[int, ...]:
    """The version of the ``hatch`` executable, as numbers ("Hatch, version 1.18.2" -> (1, 18, 2))."""
    out = subprocess.run([hatch, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(p) for p in match.groups() if p is not None) if match else ()


def check_hatch(hatch: str | None) -> str | None:
    """An error message when Hatch is missing or too old for hatch.toml, else None.

    Hatch before 1.16 ignores ``workspace.members`` without a word and installs
    none of our packages; the suite would then fail with "No module named ...".
    """
    if hatch is None:
        return "hatch is not on PATH: install it with `pip install 'hatch>=1.16'`."
    found = hatch_version(hatch)
    if found < MIN_HATCH:
        shown = ".".join(map(str, found)) or "unknown"
        return (
            f"this repository needs Hatch >= {'.'.join(map(str, MIN_HATCH))} (it installs the workspace "
            f"packages listed in hatch.toml; older Hatch skips them silently); found {shown}. Upgrade with "
            "`pip install --upgrade 'hatch>=1.16'`, then run `hatch env prune`."
        )
    return None


def in_ci() -> bool:
    """True when the ``CI`` environment variable says this is a CI run."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _environ_with(python: str, unoptimised: bool = False) -> dict[str, str]:
    """This process's environment, with ``python``'s directory first on PATH, for a Hatch call.

    With ``unoptimised``, ``XLA_FLAGS`` starts with ``UNOPTIMISED`` (flags already
    set follow it, so they win where they disagree).

    ``PYTHONDONTWRITEBYTECODE`` is left out: the test command starts hundreds of
    Python processes (xdist workers, docs pages, multi-process runs, the install
    test's programs), and where a machine sets it each of them would compile JAX's
    sources again. Without it the first import of a module writes its bytecode
    (about 6 s of CPU for JAX and its dependencies, once per environment), so the
    environments need not compile all of site-packages when they are created
    (~25 s each).
    """
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ["PATH"] = os.pathsep.join([str(Path(python).parent), environ.get("PATH", "")])
    if unoptimised:
        environ["XLA_FLAGS"] = f"{UNOPTIMISED} {environ.get('XLA_FLAGS', '')}".strip()
    return environ


def run_script(hatch: str, env: str, script: str, args: list[str], python: str, unoptimised: bool = False) -> int:
    """``hatch run ENV:SCRIPT ARGS`` with ``python``'s directory first on PATH; its exit status.

    ``unoptimised``: XLA compiles without LLVM's optimiser (see ``UNOPTIMISED``).
    """
    return subprocess.run(
        [hatch, "run", f"{env}:{script}", *args], cwd=ROOT, env=_environ_with(python, unoptimised), check=False
    ).returncode


@dataclass
class Preparation:
    """``hatch env create ENV`` running in the background, its output going to ``log``."""

    env: str
    process: subprocess.Popen[bytes]
    log: Path

    def wait(self) -> None:
        """Wait for it; if it failed, show its log (the step's own ``hatch run`` then tries again)."""
        status = self.process.wait()
        if status != 0:
            _say(f"creating the {self.env} environment in the background failed (exit {status}); its output:")
            sys.stderr.write(self.log.read_text(errors="replace"))
            _say(f"the {self.env} step creates it again and reports any error")
        self.log.unlink(missing_ok=True)


def start_env_creation(hatch: str, env: str, python: str) -> Preparation:
    """Start ``hatch env create ENV`` in the background.

    Creating an environment mostly downloads and unpacks wheels, so the lowest
    end's is made while the newest end's suite runs, instead of after it (seconds
    with uv on a machine whose uv cache holds the wheels; it was a minute and a
    half with pip).
    """
    log = Path(tempfile.mkstemp(prefix=f"hatch-env-{env}-", suffix=".log")[1])
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [hatch, "env", "create", env], cwd=ROOT, env=_environ_with(python), stdout=out, stderr=subprocess.STDOUT
        )
    return Preparation(env, process, log)


def _say(message: str) -> None:
    print(f"[both_ends] {message}", file=sys.stderr, flush=True)


def _usable_hatch() -> str | None:
    """The path of a Hatch recent enough for hatch.toml, or None after saying what is wrong."""
    hatch = shutil.which("hatch")
    problem = check_hatch(hatch)
    if problem:
        _say(f"error: {problem}")
        return None
    return hatch


def run_one(env: str, script: str, args: list[str]) -> int:
    """``run ENV SCRIPT ARGS``: one script of one pinned environment."""
    hatch = _usable_hatch()
    if hatch is None:
        return 2
    version = pinned_python(env, load_hatch_config())
    if version is None:
        _say(f"error: hatch.toml pins no Python for the environment {env!r}")
        return 2
    python = find_python(version, hatch)
    if python is None:
        _say(f"error: {missing_python_message(env, version)}")
        return 2
    return run_script(hatch, env, script, args, python)


def run_test(args: list[str]) -> int:
    """``hatch run test``: every step of ``TEST_STEPS`` (with ARGS: ``TEST_STEPS_WITH_ARGS``) whose Python exists."""
    hatch = _usable_hatch()
    if hatch is None:
        return 2
    config = load_hatch_config()
    steps = TEST_STEPS_WITH_ARGS if args else TEST_STEPS
    results: list[str] = []
    failed = missing = False
    versions = [pinned_python(step.env, config) for step in steps]
    pythons = [find_python(version, hatch) if version else None for version in versions]
    # Every other end's environment is made while the first one runs.
    preparing: dict[str, Preparation] = {}
    for step, python in zip(steps, pythons, strict=True):
        if python is not None and step.env != steps[0].env and step.env not in preparing:
            preparing[step.env] = start_env_creation(hatch, step.env, python)
    skipped: set[str] = set()
    for step, version, python in zip(steps, versions, pythons, strict=True):
        if python is None:
            missing = True
            if step.env not in skipped:
                skipped.add(step.env)
                results.append(f"NOT RUN  {step.env}: {missing_python_message(step.env, version or '?')}")
            continue
        if step.env in preparing:
            preparing.pop(step.env).wait()
        _say(f"{step.what} at the {step.env} end: Python {version} ({python})")
        start = time.monotonic()
        status = run_script(hatch, step.env, step.script, args if step.takes_args else [], python, step.unoptimised)
        took = time.monotonic() - start
        failed = failed or status != 0
        verdict = "passed" if status == 0 else f"FAILED (exit {status})"
        results.append(f"{verdict:<8} {step.env}: {step.what}, Python {version}, {took:.0f} s")
    for line in results:
        _say(line)
    if failed:
        return 1
    if missing:
        if in_ci():
            _say("error: CI runs both ends; install the missing Python on the CI machine.")
            return 1
        _say("warning: one end did not run (see above); the other passed.")
    return 0


def main(argv: list[str]) -> int:
    """Entry point: ``test [ARGS]`` or ``run ENV SCRIPT [ARGS]``."""
    if sys.version_info < (3, 11):  # noqa: UP036 - Hatch may run on an older Python than we support
        _say(
            f"error: Hatch runs this repository's commands on Python {sys.version.split()[0]} ({sys.executable}); "
            "they need Python >= 3.11. Install Hatch on Python 3.11 or newer, then run `hatch env prune`."
        )
        return 2
    if argv[:1] == ["test"]:
        return run_test(argv[1:])
    if argv[:1] == ["run"] and len(argv) >= 3:
        return run_one(argv[1], argv[2], argv[3:])
    _say("usage: both_ends.py test [PYTEST ARGS] | both_ends.py run ENV SCRIPT [ARGS]")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
