import jax
import pytest

# Expose 8 virtual CPU devices for sharding/pmap tests; must run before the JAX backend initialises.
jax.config.update('jax_num_cpu_devices', 8)

import state_core  # noqa: E402  (after the device count is set)

# A State read inside a plain JAX transformation freezes its value into the program. The
# libraries themselves must never do that, so the suite treats every such read as an error;
# tests of the warning choose their mode with ``plain_trace_policy``.
state_core.set_plain_trace_policy('error')

from state_core._context import CTX, OPEN_STACKS  # noqa: E402  (after the device count is set)


@pytest.fixture(autouse=True)
def _clean_context():
    """Every test must leave the thread-local trace bookkeeping as it found it."""
    assert CTX.stacks == [] and CTX.catchers == [] and CTX.strict == 0, "a previous test leaked trace context"
    assert OPEN_STACKS.value == 0, "a previous test left trace stacks counted as open"
    yield
    leftover = (list(CTX.stacks), list(CTX.catchers), CTX.strict, OPEN_STACKS.value)
    CTX.stacks.clear()
    CTX.catchers.clear()
    CTX.strict = 0
    OPEN_STACKS.value = 0
    assert leftover == ([], [], 0, 0), f"test leaked trace context: {leftover}"
