"""The documentation cannot rot: every page's code runs.

The site itself (strict build, every public name in the reference with a
docstring and its parameters, the index) is checked by ``test_docs_site.py``.

* Every ```python block of every page under ``docs/`` (except the developers'
  notes in ``docs/_notes/``) is run, page by page: the blocks of one page are
  joined in order and executed in one fresh interpreter with 8 CPU devices, so
  later blocks see what earlier ones defined, and pages added later are picked up
  without registering them anywhere. The pages in ``RUN_WITH_CLAIMS`` are run (and
  their printed claims checked) by their own test instead.

Opting a block out: put the HTML comment ``<!-- docs: no-run (reason) -->`` on the
line right before its fence. It is invisible on the site. Use it only for code
that needs several processes (``jax.distributed``); everything else must run.
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
DOCS = ROOT / "docs"
NO_RUN = "<!-- docs: no-run"
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
# Set before any page code runs: the pages use up to 8 devices, like the test suite.
PRELUDE = "import jax\njax.config.update('jax_num_cpu_devices', 8)\n"


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "_notes" not in p.relative_to(DOCS).parts)


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """``(line, code, runs)`` for every python fence; ``runs`` is False after a no-run marker."""
    blocks = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        line = text.count("\n", 0, match.start()) + 2
        blocks.append((line, match.group(1), not before.strip().startswith(NO_RUN)))
    return blocks


def page_script(page: Path) -> str:
    """The page's runnable blocks as one script, each headed by the page line it starts at."""
    text = page.read_text(encoding="utf-8")
    out = [PRELUDE]
    for line, code, runs in python_blocks(text):
        if runs:
            out.append(f"# --- {page.relative_to(ROOT)}, line {line}\n{code}")
    return "\n".join(out)


def test_block_parser_and_marker():
    text = (
        "intro\n\n```python\nx = 1\n```\n\n"
        "<!-- docs: no-run (needs several processes) -->\n```python\nimport jax.distributed\n```\n"
        "```bash\nhatch run test\n```\n"
    )
    blocks = python_blocks(text)
    assert [(code, runs) for _, code, runs in blocks] == [("x = 1\n", True), ("import jax.distributed\n", False)]
    assert blocks[0][0] == 4  # the first line of code inside the fence


def test_the_pages_exist_and_have_code():
    names = {p.relative_to(DOCS).as_posix() for p in pages()}
    for required in (
        "index.md",
        "getting-started.md",
        "guides/vmap2.md",
        "guides/pmap2.md",
        "guides/shard-map.md",
        "guides/map.md",
        "guides/training-optax.md",
        "guides/sharding-multihost.md",
        "coming-from-brainstate.md",
        "coming-from-flax-nnx.md",
    ):
        assert required in names, f"docs/{required} is missing"
    for page in pages():
        if page.parent.name == "guides":
            assert any(runs for _, _, runs in python_blocks(page.read_text())), f"{page} runs no code"


# Pages whose blocks another test already runs, in order, and checks the printed claims of;
# running them again here would add minutes of CPU and no check.
RUN_WITH_CLAIMS = {
    "guides/simulation-loops.md": "test_integration_lif.py",
    "guides/checkpointing.md": "test_integration_checkpoint_docs.py",
    "guides/common-mistakes.md": "test_docs_mistakes.py",
}


def pages_with_code() -> list[Path]:
    return [
        p
        for p in pages()
        if p.relative_to(DOCS).as_posix() not in RUN_WITH_CLAIMS
        and any(runs for _, _, runs in python_blocks(p.read_text(encoding="utf-8")))
    ]


@pytest.mark.parametrize(("page", "test_file"), sorted(RUN_WITH_CLAIMS.items()))
def test_pages_left_out_here_are_run_with_their_claims_elsewhere(page, test_file):
    text = (DOCS / page).read_text(encoding="utf-8")
    assert any(runs for _, _, runs in python_blocks(text)), f"docs/{page} has no code to run"
    assert all(runs for _, _, runs in python_blocks(text)), f"docs/{page}: {test_file} would run its no-run blocks"
    runner = (ROOT / "tests-integration" / test_file).read_text(encoding="utf-8")
    assert f'"{page.rsplit("/", 1)[-1]}"' in runner or f'"docs/{page}"' in runner, f"{test_file} no longer runs {page}"


@pytest.mark.parametrize("page", pages_with_code(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_code_runs(page, tmp_path):
    script = page_script(page)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["JAX_PLATFORMS"] = "cpu"
    env["MPLBACKEND"] = "Agg"
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, (
        f"the code of docs/{page.relative_to(DOCS)} failed:\n{proc.stderr[-4000:]}\n--- stdout:\n{proc.stdout[-2000:]}"
    )
