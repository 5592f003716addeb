import contextlib

import jax
import pytest

# Expose 8 virtual CPU devices for sharding/pmap tests; must run before the JAX backend initialises.
jax.config.update('jax_num_cpu_devices', 8)

import state_core  # noqa: E402  (after the device count is set)

# A State read inside a plain JAX transformation freezes its value into the program. The
# libraries themselves must never do that, so the suite treats every such read as an error;
# tests of the warning choose their mode with ``plain_trace_policy``.
state_core.set_plain_trace_policy('error')


_COMPILES: list[str] = []
_LISTENING = [False]


def _on_event(event, duration, **kwargs):
    if _LISTENING[0] and "backend_compile" in event:
        _COMPILES.append(event)


jax.monitoring.register_event_duration_secs_listener(_on_event)


@pytest.fixture
def count_compiles():
    """``with count_compiles() as seen: ...``: ``len(seen)`` is the number of XLA compiles inside the block."""

    @contextlib.contextmanager
    def counting():
        _COMPILES.clear()
        _LISTENING[0] = True
        try:
            yield _COMPILES
        finally:
            _LISTENING[0] = False

    return counting
