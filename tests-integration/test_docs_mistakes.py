"""The common-mistakes page shows the messages users really get.

Every ```python block of ``docs/guides/common-mistakes.md`` that is followed by a
```text block must print exactly that text (``test_docs.py`` only checks that the
blocks run). Temporary directories the page creates print as ``<tmp>``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guides" / "common-mistakes.md"
BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```[ \t]*\n(?:\s*^```text[^\n]*\n(.*?)^```[ \t]*$)?", re.S | re.M)
MARK = "@@ common-mistakes block {} @@"


def blocks() -> list[tuple[str, str | None]]:
    """``(code, expected output or None)`` for every python block of the page."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(PAGE.read_text(encoding="utf-8"))]


def test_every_mistake_shows_its_message():
    assert len([b for b in blocks() if b[1] is not None]) >= 12
    script = ["import jax", "jax.config.update('jax_num_cpu_devices', 8)"]
    for i, (code, _) in enumerate(blocks()):
        script.append(f"print({MARK.format(i)!r})")
        script.append(code)
    tmp = Path(os.environ.get("PYTEST_TMPDIR", "/tmp")).resolve()
    env = {**os.environ, "TMPDIR": str(tmp), "JAX_PLATFORMS": "cpu"}
    run = subprocess.run(
        [sys.executable, "-c", "\n".join(script)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = re.sub(re.escape(str(tmp)) + r"/[^/'\s]+", "<tmp>", run.stdout)
    parts = re.split(r"^@@ common-mistakes block (\d+) @@\n", out, flags=re.M)
    printed = {int(parts[k]): parts[k + 1] for k in range(1, len(parts), 2)}
    for i, (code, expected) in enumerate(blocks()):
        if expected is not None:
            assert printed[i].strip() == expected.strip(), f"block {i}:\n{code}"
