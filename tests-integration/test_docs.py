"""The documentation cannot rot: the site builds strictly and every page's code runs.

* ``mkdocs build --strict`` (the same as ``hatch run docs:build``): a broken link,
  a missing API reference or a docstring warning fails the test.
* Every ```python block of every page under ``docs/`` (except the developers'
  notes in ``docs/_notes/``) is run, page by page: the blocks of one page are
  joined in order and executed in one fresh interpreter with 8 CPU devices, so
  later blocks see what earlier ones defined, and pages added later are picked up
  without registering them anywhere.

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


def pages_with_code() -> list[Path]:
    return [p for p in pages() if any(runs for _, _, runs in python_blocks(p.read_text(encoding="utf-8")))]


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


def test_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs dependencies are in the default hatch environment")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    built = tmp_path / "site"
    for page in ("index.html", "getting-started/index.html", "api/state-transform/index.html"):
        assert (built / page).is_file(), f"{page} was not built"
    api = (built / "api" / "state-transform" / "index.html").read_text()
    assert "vmap2" in api and "shard_map" in api


# The modules the API reference renders (docs/api/*.md), and the names it shows.
API_MODULES = (
    "state_core",
    "state_core.filter",
    "state_core.environ",
    "state_core.units",
    "state_random",
    "state_transform",
    "state_nn",
)


def _public_api():
    import importlib
    import inspect

    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name.startswith("_"):  # the reference leaves out `_` names (mkdocs.yml filters)
                continue
            obj = getattr(module, name)
            if not callable(obj) or type(obj).__module__ == "typing":  # constants, type aliases: no own __doc__
                continue
            yield f"{module_name}.{name}", obj
            if inspect.isclass(obj) and obj.__module__.split(".")[0] in {m.split(".")[0] for m in API_MODULES}:
                for attr, value in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                    if inspect.isfunction(fn):
                        yield f"{module_name}.{name}.{attr}", fn


def test_every_public_name_in_the_api_reference_has_a_docstring():
    missing = [name for name, obj in _public_api() if not (obj.__doc__ or "").strip()]
    assert not missing, f"public names without a docstring (the API reference would show them bare): {missing}"
