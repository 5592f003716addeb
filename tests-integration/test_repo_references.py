"""The repository stands alone: nothing in it points at files that are not in it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Spelled in pieces so that this file does not match itself.
FORBIDDEN = [
    "DESIGN" + ".md",
    "DESIGN" + " §",
    "../" + "shared",
    "seeds" + "/0",
]


def _tracked_text_files() -> list[Path]:
    proc = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip("not a git checkout")
    files = [ROOT / line for line in proc.stdout.splitlines()]
    return [f for f in files if f.suffix in {".py", ".md", ".toml", ".ini", ".yml", ".txt", ""} and f.is_file()]


# CI's setup step may call the workplace's Python 3.13 provisioning tool, and only it.
CI_SETUP = ROOT / ".ci" / "run"


def test_no_reference_to_files_outside_the_repository():
    hits = []
    for path in _tracked_text_files():
        if path == CI_SETUP:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for word in FORBIDDEN:
            for match in re.finditer(re.escape(word), text):
                line = text.count("\n", 0, match.start()) + 1
                hits.append(f"{path.relative_to(ROOT)}:{line}: {word}")
    assert not hits, "references to files that are not in the repository:\n" + "\n".join(hits)


def test_test_files_named_in_docstrings_exist():
    """A module that says "pinned by tests/x.py" must name a file that exists."""
    missing = []
    for path in _tracked_text_files():
        if path.suffix != ".py":
            continue
        for name in re.findall(
            r"(?<![\w/])((?:tests|tests-integration)/test_[\w]+\.py)", path.read_text(encoding="utf-8")
        ):
            package = path.relative_to(ROOT).parts
            candidates = [ROOT / name]
            if package[0] == "packages":
                candidates.append(ROOT / "packages" / package[1] / name)
            if not any(c.is_file() for c in candidates):
                missing.append(f"{path.relative_to(ROOT)} names {name}")
    assert not missing, "\n".join(missing)
