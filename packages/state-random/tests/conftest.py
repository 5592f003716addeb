import jax

# Expose 8 virtual CPU devices for sharding/pmap tests; must run before the JAX backend initialises.
jax.config.update('jax_num_cpu_devices', 8)

import state_core  # noqa: E402  (after the device count is set)

# A State read inside a plain JAX transformation freezes its value into the program. The
# libraries themselves must never do that, so the suite treats every such read as an error;
# tests of the warning choose their mode with ``plain_trace_policy``.
state_core.set_plain_trace_policy('error')
