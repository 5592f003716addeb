"""state-core: explicit, mutable ``State`` objects that JAX transformations understand.

This is the lowest layer of the state stack. It holds the ``State`` family,
filters that select states, collections of states gathered from object graphs,
and the tracing engine (``StateTraceStack``, ``catch_new_states``,
``StatefulFunction``) on which every state-aware transformation is built.

Example:
    >>> import jax.numpy as jnp
    >>> import state_core
    >>> w = state_core.ParamState(jnp.ones(3), name='w')
    >>> f = state_core.StatefulFunction(lambda x: (w.value * x).sum())
    >>> f(jnp.arange(3.0))
    Array(3., dtype=float32)
"""

from . import filter
from .__about__ import __version__
from ._collection import StateDict, collect_states, states_of_callable
from ._errors import BatchAxisError, StateError, StateLeakError
from ._jax_internals import ArrayImpl
from ._introspection import make_jaxpr
from ._pretty import format_fields, format_value
from ._state import (
    HiddenState,
    LongTermState,
    ParamState,
    ShortTermState,
    State,
    check_not_state,
    check_state_value_tree,
    maybe_state,
    strict_state_checks,
)
from ._stateful_function import (
    StaleTraceError,
    StatefulFunction,
    canonical_signature,
    check_state_avals,
    states_changed,
    unflatten_states,
    TracedCall,
    leaf_signature,
    read_state_values,
    write_state_values,
)
from ._trace import NewStateCatcher, StateTraceStack, active_trace_stacks, catch_new_states

__all__ = [
    "__version__",
    "filter",
    "State",
    "ShortTermState",
    "LongTermState",
    "ParamState",
    "HiddenState",
    "StateError",
    "StateLeakError",
    "BatchAxisError",
    "maybe_state",
    "check_state_value_tree",
    "make_jaxpr",
    "format_value",
    "strict_state_checks",
    "check_not_state",
    "StateTraceStack",
    "catch_new_states",
    "active_trace_stacks",
    "NewStateCatcher",
    "StatefulFunction",
    "TracedCall",
    "StaleTraceError",
    "canonical_signature",
    "check_state_avals",
    "states_changed",
    "unflatten_states",
    "leaf_signature",
    "read_state_values",
    "write_state_values",
    "StateDict",
    "collect_states",
    "states_of_callable",
    "format_fields",
    "ArrayImpl",
]
