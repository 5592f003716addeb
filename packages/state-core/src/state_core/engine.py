"""Extension points for framework authors: what a new state-aware transformation is built on.

User code does not need this module. Every state-aware transformation is one
pipeline, ``StatefulFunction``, run with its own ``Strategy``:

    call -> signature -> cache -> miss: trace once -> ``Trace``
                                         -> strategy: ``analyze`` -> info, ``compile`` -> ``Program``
                               -> replay: check, read states, run once, write back all or nothing

A strategy is a frozen value: a new transformation subclasses ``Strategy``, adds
its options as fields and overrides the hooks it needs; the pipeline, not the
strategy, reads, checks and writes the States. The guide
[Building a state-aware transform](../guides/writing-a-transform.md)
(``docs/guides/writing-a-transform.md``) builds one end to end. The names here
are grouped by what an author does with them (the order of ``__all__``):

* build a strategy: ``Strategy`` and its per-trace ``TraceContext``, the frozen
  ``Trace`` and ``Program`` records,
  ``pure_program`` / ``jaxpr_evaluator`` (the one evaluation of a traced jaxpr),
  ``StateRules`` for ``{filter: value}`` options, ``register_call_context`` for a
  setting that belongs to the call signature;
* read a traced jaxpr the same way on every supported JAX;
* say what a transformation computes, so equal ones share their programs;
* find the States a function reaches through its object graph;
* read and write state values outside a program (the one write-back);
* tune in-place updates (donation);
* nest in other traces and place values on devices;
* report errors and warnings at the user's line, as JAX does.

Kinds of State take part through three methods of ``State``:
``splits_across_lanes`` / ``split_across_lanes`` (one value per mapped lane, as
random keys do) and ``handout_lock`` (an atomic read-modify-write).

Example:
    A strategy that doubles what the function returns (reading, checking and
    writing states is the pipeline's job):

    >>> import dataclasses
    >>> import jax
    >>> import jax.numpy as jnp
    >>> from state_core import State, StatefulFunction
    >>> from state_core.engine import Program, Strategy, pure_program
    >>> @dataclasses.dataclass(frozen=True, kw_only=True)
    ... class Doubled(Strategy):
    ...     def compile(self, trace, info, name):
    ...         pure = pure_program(trace)
    ...         def run(rw, ro, *leaves):
    ...             out, new_values = pure(rw, ro, *leaves)
    ...             return out * 2, new_values
    ...         return Program(run=jax.jit(run), write_back=trace.write_states)
    >>> total = State(jnp.zeros(()))
    >>> def add(x):
    ...     total.value = total.value + x
    ...     return total.value
    >>> f = StatefulFunction(add, strategy=Doubled())
    >>> f(1.0), f(2.0), total.value
    (Array(2., dtype=float32), Array(6., dtype=float32), Array(3., dtype=float32))
"""

from ._cache import DEFAULT_CACHE_SIZE
from ._call_contexts import register_call_context
from ._call_signature import positions_of_names
from ._context import user_stacklevel
from ._device_mismatch import describe_devices
from ._donation import donation_min_bytes, exclusively_held, held_alone_check, set_donation_min_bytes
from ._graph import graph_children, graph_roots, graph_states, state_label
from ._identity import IdentityRef, Unshareable, callable_identity, frozen
from ._jax_internals import (
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
from ._pretty import format_object
from ._program import Program, Trace, jaxpr_evaluator, merger
from ._pure_program import named, pure_program
from ._replay import handout_locks
from ._rules import StateRules
from ._sharding import annotated_spec, check_spec_fits, input_placer, place_value, state_sharding
from ._signature import canonical_signature, context_markers, pushed_context
from ._state_io import read_state_values, write_state_values
from ._strategy import Strategy, TraceContext
from ._trace import forget_created_states, private_state_values
from ._tracing import shape_structs

__all__ = [
    # build a strategy: the records it reads and returns, the default program, its options
    "Strategy",
    "TraceContext",
    "Trace",
    "Program",
    "pure_program",
    "jaxpr_evaluator",
    "merger",
    "named",
    "shape_structs",
    "StateRules",
    "register_call_context",
    # read a traced jaxpr the same way on JAX 0.10 to 0.12
    "open_jaxpr",
    "jaxpr_consts",
    "close_jaxpr",
    "is_jaxpr",
    # say what a transformation computes, so equal transformations share programs
    "callable_identity",
    "frozen",
    "Unshareable",
    "IdentityRef",
    "DEFAULT_CACHE_SIZE",
    # find the States a function reaches through its object graph
    "graph_roots",
    "graph_states",
    "graph_children",
    "state_label",
    # read and write state values outside a program (the one write-back)
    "read_state_values",
    "write_state_values",
    "handout_locks",
    "private_state_values",
    "forget_created_states",
    # tune in-place updates
    "exclusively_held",
    "held_alone_check",
    "set_donation_min_bytes",
    "donation_min_bytes",
    # nest in other traces, place values on devices
    "canonical_signature",
    "positions_of_names",
    "pushed_context",
    "context_markers",
    "mesh_type",
    "annotated_spec",
    "state_sharding",
    "check_spec_fits",
    "place_value",
    "input_placer",
    # report errors and warnings at the user's line
    "is_eager",
    "is_batched",
    "api_boundary",
    "hide_library_frames",
    "user_stacklevel",
    "format_object",
    "describe_devices",
]
