"""state-core refuses, at import, a JAX it cannot drive, and says what to install.

The supported range is written once, in ``packages/state-core/pyproject.toml``;
the error message reads it back from the installed package metadata.
"""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import pytest

from state_core import _jax_internals

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _declared_jax() -> str:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (jax_req,) = [d for d in deps if re.match(r"jax\b", d) and not d.startswith("jaxlib")]
    return jax_req.replace(" ", "")


def test_installed_jax_has_everything():
    assert _jax_internals.missing_jax_features() == []


def test_supported_range_comes_from_the_metadata():
    assert _jax_internals.supported_jax_range() == _declared_jax()
    # A bounded range: the lower end is the oldest tested JAX, the upper end excludes untested ones.
    assert re.fullmatch(r"jax>=\d+\.\d+(\.\d+)?,<\d+\.\d+", _declared_jax())


def test_check_jax_message_names_version_missing_call_and_range():
    with pytest.raises(
        ImportError,
        match=r"state-core cannot run on JAX 0\.8\.1: this JAX has no "
        r"jax\.extend\.core\.take_current_trace, .*Supported: jax>=",
    ) as info:
        _jax_internals.check_jax("0.8.1", ["jax.extend.core.take_current_trace"])
    assert _declared_jax() in str(info.value)
    assert f"pip install '{_declared_jax()}'" in str(info.value)


def test_check_jax_accepts_a_complete_jax():
    assert _jax_internals.check_jax(jax.__version__, []) is None


def test_missing_feature_is_detected(monkeypatch):
    monkeypatch.delattr(_jax_internals.jex_core, "take_current_trace")
    assert _jax_internals.missing_jax_features() == ["jax.extend.core.take_current_trace"]


def test_import_fails_cleanly_on_a_jax_without_the_trace_api():
    """The real import path, in a fresh interpreter whose JAX lacks take_current_trace."""
    code = "import jax, jax.extend.core as c\njax.__version__ = '0.8.1'\ndel c.take_current_trace\nimport state_core\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "ImportError: state-core cannot run on JAX 0.8.1: this JAX has no jax.extend.core.take_current_trace"
    ), proc.stderr[-2000:]
    assert _declared_jax() in last
