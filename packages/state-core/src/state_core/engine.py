"""Building blocks for engine authors: the pieces state-aware transformations are made of.

User code does not need this module. It names what a new transformation built
on ``StatefulFunction`` uses: the ``TracedCall`` record of a traced signature,
the signature helpers that pick a cached program, the checked ``replay`` that
runs one (split of written and read-only state values, one run, all-or-nothing
write-back), the bounded ``TraceCache`` and the low-level readers and writers
of state values.

Example:
    >>> import jax.numpy as jnp
    >>> from state_core import State, StatefulFunction
    >>> from state_core.engine import read_state_values, replay
    >>> s = State(jnp.ones(2))
    >>> def double():
    ...     s.value = s.value * 2
    >>> f = StatefulFunction(double)
    >>> call = f.trace()
    >>> replay(call, read_state_values(call.in_states), [], 'double')
    >>> s.value
    Array([2., 2.], dtype=float32)
"""

from ._cache import DEFAULT_CACHE_SIZE, TraceCache, clear_caches, register_cache_owner
from ._context import GENERATION
from ._jax_internals import ArrayImpl, api_boundary, hide_library_frames, is_batched, is_eager, mesh_type
from ._pretty import format_fields
from ._replay import (
    StaleTraceError,
    TracedCall,
    canonical_signature,
    check_state_avals,
    leaf_signature,
    may_fail_at_run_time,
    merger,
    read_state_values,
    replay,
    state_signature,
    states_changed,
    states_match,
    unflatten_states,
    write_state_values,
)
from ._sharding import annotated_spec, check_spec_fits, place_value, sharding_annotation, state_sharding
from ._trace import private_state_values

__all__ = [
    "TracedCall",
    "replay",
    "merger",
    "states_match",
    "state_signature",
    "states_changed",
    "check_state_avals",
    "leaf_signature",
    "mesh_type",
    "canonical_signature",
    "unflatten_states",
    "read_state_values",
    "write_state_values",
    "may_fail_at_run_time",
    "StaleTraceError",
    "TraceCache",
    "DEFAULT_CACHE_SIZE",
    "register_cache_owner",
    "clear_caches",
    "GENERATION",
    "ArrayImpl",
    "hide_library_frames",
    "api_boundary",
    "format_fields",
    "private_state_values",
    "is_eager",
    "is_batched",
    "sharding_annotation",
    "annotated_spec",
    "state_sharding",
    "check_spec_fits",
    "place_value",
]
