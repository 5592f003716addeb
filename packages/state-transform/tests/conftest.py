import jax

# Expose 8 virtual CPU devices for sharding/pmap tests; must run before the JAX backend initialises.
jax.config.update('jax_num_cpu_devices', 8)

import state_core  # noqa: E402  (after the device count is set)

# A State read inside a plain JAX transformation freezes its value into the program. The
# libraries themselves must never do that, so the suite treats every such read as an error;
# tests of the warning choose their mode with ``plain_trace_policy``.
state_core.set_plain_trace_policy('error')

import pytest  # noqa: E402

from state_core.engine import set_donation_min_bytes  # noqa: E402


@pytest.fixture
def donate_small():
    """Donate written states of any size (by default only from 128 KiB): the tests' states are tiny."""
    previous = set_donation_min_bytes(0)
    yield
    set_donation_min_bytes(previous)
