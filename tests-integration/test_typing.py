"""What a user's type checker sees through the transformations: ``mypy --strict`` on samples.

``typing_samples/`` holds small modules written as a user would. One mypy run (the
repository's ``mypy.ini``, strict) checks them all:

* ``transforms.py`` and ``ensemble.py`` must type-check clean; their ``assert_type``
  calls pin what mypy infers (``jit(f)`` takes ``f``'s parameters and returns its
  result, ``grad``'s overloads, ``Map[Cell]`` ...). They are also imported, so every
  call in them runs and the values they check stay true.
* ``errors.py`` must produce exactly the errors its lines are marked with,
  ``# error: <code>: <part of the message>``, and no other: a wrong argument to a
  jitted function, a mapped function's result used as the wrong type, and so on.

Marked ``lint`` with the other mypy runs (``-m "not lint"`` leaves it out).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.lint

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests-integration" / "typing_samples"
POSITIVE = ("transforms.py", "ensemble.py")
NEGATIVE = "errors.py"

_REPORTED = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+): error: (?P<message>.*?)\s+\[(?P<code>[a-z-]+)\]$", re.M)
_MARKED = re.compile(r"#\s*error:\s*(?P<code>[a-z-]+)(?::\s*(?P<text>.*))?$")


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str, str]]]:
    """One mypy run over every sample: ``{file name: [(line, code, message), ...]}``."""
    api = pytest.importorskip("mypy.api")
    cache = tmp_path_factory.mktemp("mypy-cache")
    files = [str(SAMPLES / name) for name in (*POSITIVE, NEGATIVE)]
    stdout, stderr, status = api.run(
        ["--config-file", str(ROOT / "mypy.ini"), "--cache-dir", str(cache), "--no-pretty", *files]
    )
    # Status 1 is "errors found" (errors.py has them on purpose); 2 is a crash or bad usage.
    assert status in (0, 1), f"mypy did not run:\n{stdout}\n{stderr}"
    report: dict[str, list[tuple[int, str, str]]] = {}
    for m in _REPORTED.finditer(stdout):
        report.setdefault(Path(m["file"]).name, []).append((int(m["line"]), m["code"], m["message"]))
    # Every "error:" line was parsed: none escapes the comparisons below.
    assert sum(map(len, report.values())) == stdout.count(": error: "), stdout
    return report


@pytest.mark.parametrize("name", POSITIVE)
def test_positive_samples_type_check_clean(mypy_report, name):
    assert mypy_report.get(name, []) == []


def _marked_errors() -> dict[int, tuple[str, str]]:
    marked = {}
    for number, line in enumerate((SAMPLES / NEGATIVE).read_text(encoding="utf-8").splitlines(), start=1):
        if m := _MARKED.search(line):
            marked[number] = (m["code"], (m["text"] or "").strip())
    return marked


def test_negative_samples_report_exactly_the_marked_errors(mypy_report):
    marked = _marked_errors()
    assert len(marked) == 21  # the markers are read: a broken pattern cannot pass silently
    reported = mypy_report.get(NEGATIVE, [])
    assert sorted((line, code) for line, code, _ in reported) == sorted(
        (line, code) for line, (code, _) in marked.items()
    )
    for line, _, message in reported:
        assert marked[line][1] in message, f"errors.py:{line}: {message!r} lacks {marked[line][1]!r}"


def test_negative_sample_errors_name_the_wrapped_function_types(mypy_report):
    # The messages speak of the wrapped function's parameter and result types.
    messages = {line: message for line, _, message in mypy_report.get(NEGATIVE, [])}
    first = min(messages)
    expected = 'Argument 1 to "__call__" of "JittedFunction" has incompatible type "str"; expected "Array"'
    assert messages[first] == expected


@pytest.mark.parametrize("name", POSITIVE)
def test_positive_samples_run(name):
    # The samples check their own values (numpy.testing); importing runs them.
    spec = importlib.util.spec_from_file_location(f"typing_sample_{Path(name).stem}", SAMPLES / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if name == "transforms.py":
        np.testing.assert_allclose(module.power(module.x, 2), [9.0, 16.0])
    else:
        np.testing.assert_allclose(module.ensemble.module.hidden.value, np.full((4, 3), 1.5))
