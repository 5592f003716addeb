"""The README's tour must run: every python block except the multi-host sketch."""

import pathlib
import re

import numpy as np

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _blocks():
    text = README.read_text()
    return [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "jax.distributed" not in b]


def test_readme_has_tour_blocks():
    assert len(_blocks()) >= 4


def test_readme_blocks_run_and_print_what_they_claim():
    namespace: dict = {}
    for block in _blocks():
        exec(compile(block, str(README), "exec"), namespace)
    # The tour's claims, checked on the objects it built.
    assert [s.name for s in namespace["f"].get_read_states()] == ["w"]
    assert [s.name for s in namespace["f"].get_write_states()] == ["h"]
    np.testing.assert_allclose(np.asarray(namespace["count"].value), [0.0, 1.0, 2.0, 3.0])
    assert namespace["ensemble"].dict_vmap_states[0][0].value.shape == (10, 5)
