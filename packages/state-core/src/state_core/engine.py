"""Building blocks for engine authors: the pieces state-aware transformations are made of.

User code does not need this module. Every state-aware transformation is one
pipeline, ``StatefulFunction``:

    call -> signature -> cache -> miss: trace once (``trace_function``) -> ``Trace``
                                         -> strategy: ``_analyze`` -> info, ``_compile`` -> ``Program``
                               -> replay (``program_runner``): check, read, run once, write back

A new transformation subclasses ``StatefulFunction`` and overrides its strategy
hooks; this module names what those hooks work with: the frozen ``Trace`` and
``Program`` records, ``jaxpr_evaluator`` (the one evaluation of a traced jaxpr),
the signatures that pick a program, the shared caches, the object-graph walk, the
``StateRules`` type for ``{axis: filter}`` / ``{filter: spec}`` rules and the
readers and writers of state values. Kinds of State take part through three
methods of ``State``: ``splits_across_lanes`` / ``split_across_lanes`` (one value
per mapped lane, as random keys do) and ``handout_lock`` (an atomic
read-modify-write).

Example:
    A strategy that doubles what the function returns (reading, checking and
    writing states is the pipeline's job):

    >>> import jax
    >>> import jax.numpy as jnp
    >>> from state_core import State, StatefulFunction
    >>> from state_core.engine import Program, pure_program
    >>> class Doubled(StatefulFunction):
    ...     def _compile(self, trace, info):
    ...         pure = pure_program(trace)
    ...         def run(rw, ro, *leaves):
    ...             out, new_values = pure(rw, ro, *leaves)
    ...             return out * 2, new_values
    ...         return Program(run=jax.jit(run), write_back=trace.write_states)
    >>> total = State(jnp.zeros(()))
    >>> def add(x):
    ...     total.value = total.value + x
    ...     return total.value
    >>> f = Doubled(add)
    >>> f(1.0), f(2.0), total.value
    (Array(2., dtype=float32), Array(6., dtype=float32), Array(3., dtype=float32))
"""

from ._cache import DEFAULT_CACHE_SIZE, FunctionRecord, TraceCache, register_cache_owner
from ._call_contexts import register_call_context
from ._call_signature import positions_of_names
from ._context import GENERATION, user_stacklevel
from ._donation import (
    donation_allowed,
    donation_min_bytes,
    exclusively_held,
    set_donation_min_bytes,
)
from ._graph import GraphSnapshot, graph_children, graph_roots, graph_states, snapshot_graph, state_label, walk_graph
from ._identity import IdentityRef, Unshareable, callable_identity, frozen
from ._jax_internals import (
    ArrayImpl,
    api_boundary,
    close_jaxpr,
    hide_library_frames,
    is_batched,
    is_eager,
    is_jaxpr,
    jaxpr_consts,
    mesh_type,
    open_jaxpr,
)
from ._pretty import format_fields, format_object
from ._program import CacheEntry, Program, Trace, jaxpr_evaluator, merger
from ._pure_program import named, pure_program
from ._registry import clear_caches, shared_record
from ._replay import (
    STATES_CHANGED,
    handout_locks,
    may_fail_at_run_time,
    program_runner,
    read_state_values,
    replay,
    runs_cheaply_op_by_op,
    spans_devices,
    write_state_values,
)
from ._rules import StateRules
from ._sharding import (
    annotated_spec,
    check_spec_fits,
    input_placer,
    place_value,
    sharding_annotation,
    state_sharding,
)
from ._signature import (
    canonical_signature,
    context_markers,
    leaf_signature,
    positional_key,
    pushed_context,
    reference_avals,
    state_signature,
    states_match,
    trace_context,
    values_unchanged,
)
from ._trace import forget_created_states, private_state_values
from ._tracing import abstract_value, shape_structs, trace_function

__all__ = [
    # the records of the pipeline
    "Trace",
    "Program",
    "CacheEntry",
    "trace_function",
    "abstract_value",
    "shape_structs",
    "jaxpr_evaluator",
    "open_jaxpr",
    "jaxpr_consts",
    "close_jaxpr",
    "is_jaxpr",
    "pure_program",
    "named",
    "merger",
    # the replay
    "replay",
    "program_runner",
    "read_state_values",
    "write_state_values",
    "STATES_CHANGED",
    "may_fail_at_run_time",
    "runs_cheaply_op_by_op",
    "spans_devices",
    "handout_locks",
    "exclusively_held",
    "donation_allowed",
    "set_donation_min_bytes",
    "donation_min_bytes",
    # signatures
    "leaf_signature",
    "canonical_signature",
    "state_signature",
    "states_match",
    "values_unchanged",
    "reference_avals",
    "positional_key",
    "positions_of_names",
    "trace_context",
    "register_call_context",
    "pushed_context",
    "context_markers",
    "mesh_type",
    # caches
    "TraceCache",
    "FunctionRecord",
    "shared_record",
    "callable_identity",
    "frozen",
    "Unshareable",
    "IdentityRef",
    "DEFAULT_CACHE_SIZE",
    "register_cache_owner",
    "clear_caches",
    # object graphs and rules
    "walk_graph",
    "graph_children",
    "graph_states",
    "graph_roots",
    "GraphSnapshot",
    "snapshot_graph",
    "state_label",
    "GENERATION",
    "StateRules",
    # tracing helpers
    "private_state_values",
    "forget_created_states",
    "is_eager",
    "is_batched",
    "ArrayImpl",
    "hide_library_frames",
    "api_boundary",
    "format_fields",
    "format_object",
    "user_stacklevel",
    # sharding annotations
    "sharding_annotation",
    "annotated_spec",
    "state_sharding",
    "check_spec_fits",
    "place_value",
    "input_placer",
]
