import importlib.util
import os
import sys

import jax
import pytest

# Expose 8 virtual CPU devices for sharding/pmap tests; must run before the JAX backend initialises.
jax.config.update('jax_num_cpu_devices', 8)

import state_core  # noqa: E402  (after the device count is set)

# A State read inside a plain JAX transformation freezes its value into the program. The
# libraries themselves must never do that, so the suite treats every such read as an error;
# tests of the warning choose their mode with ``plain_trace_policy``.
state_core.set_plain_trace_policy('error')


@pytest.fixture
def brainstate_python() -> str:
    """A Python with brainstate, to run a ported program's original: BRAINSTATE_PYTHON, or this one."""
    configured = os.environ.get("BRAINSTATE_PYTHON")
    if configured:
        return configured
    if importlib.util.find_spec("brainstate") is None:
        pytest.skip("brainstate is not installed (set BRAINSTATE_PYTHON to a Python that has it)")
    return sys.executable
