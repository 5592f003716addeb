"""The checkpointing guide and README section run as written (their python blocks, in order)."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = "docs/guides/checkpointing.md"
README_SECTION = ("README.md", "## Saving and restoring")


def _run(page, section=None):
    text = (ROOT / page).read_text()
    if section is not None:  # only the blocks of that section
        text = text.split(section, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, f"{page} has no python block"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(ROOT / page), "exec"), namespace)
    return namespace


def test_guide_runs_and_reaches_its_claims():
    namespace = _run(GUIDE)
    assert namespace["resumed"] == namespace["uninterrupted"]
    assert len(set(namespace["resumed"])) == 3  # three different steps, not one value repeated
    assert namespace["table"]["embedding"].value.sharding == namespace["rows"]


def test_readme_section_runs():
    namespace = _run(*README_SECTION)
    assert namespace["model"].layers[0].weight.value.shape == (2, 4)
