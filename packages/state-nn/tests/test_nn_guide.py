"""The code blocks of docs/guides/modules.md run, in order, in one namespace."""

import pathlib
import re

import pytest

GUIDE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "guides" / "modules.md"


@pytest.mark.skipif(not GUIDE.exists(), reason="the docs are not next to the tests (installed package)")
def test_modules_guide_code_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    assert len(blocks) >= 10
    namespace: dict = {"__name__": "modules_guide"}
    for i, block in enumerate(blocks):
        code = compile(block, f"{GUIDE.name}[block {i}]", "exec")
        exec(code, namespace)
