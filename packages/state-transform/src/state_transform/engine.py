"""Building blocks for authors of new state-aware transformations on top of ``state_transform``.

User code does not need this module. Like ``state_core.engine`` it names the
strategy pieces the transformations here are made of, so a framework can build
its own on the same pipeline: the mapping strategy (``MappingStrategy``), its
record (``MappingInfo``) and program builder, the mesh its lanes may be split over
(``LanesOnMesh``), the control-flow strategy
(``ControlFlow`` traces body functions inside the pipeline's trace and builds one
``lax`` primitive over them, with ``Carry`` for the states they write and read),
the lane-splitting helpers that ask States (``split_across_lanes``) for one value
per mapped lane, and the one parser of state rules (``parse_state_rules``:
``{axis: filter}``, ``{filter: PartitionSpec}`` and brainstate's
``{axis: {name: State}}``).

Example:
    A state-aware "apply twice" built on the control-flow strategy:

    >>> import jax.numpy as jnp
    >>> from state_core import State
    >>> from state_core.engine import jaxpr_evaluator
    >>> from state_transform.engine import Carry, ControlFlow
    >>> class Twice(ControlFlow):
    ...     def __init__(self, f):
    ...         super().__init__([f], ['f'], 'twice', ())
    ...     def _run(self, x):
    ...         body = self.trace_body(0, (x,))
    ...         carry = Carry([body], [body])
    ...         carried, invariant = carry.read()
    ...         evaluate, gather = jaxpr_evaluator(body), carry.inputs_of(body)
    ...         for _ in range(2):
    ...             x, written, _ = evaluate(gather(carried, invariant), [x])
    ...             carried = carry.outputs(body, written, carried)
    ...         carry.write(carried)
    ...         return x
    >>> n = State(jnp.zeros(()))
    >>> def inc(x):
    ...     n.value = n.value + 1
    ...     return x * 3
    >>> Twice(inc)(1.0), n.value
    (Array(9., dtype=float32, weak_type=True), Array(2., dtype=float32))
"""

from ._control_flow import Carry, ControlFlow, slice_spec, trace_body
from ._grad import GradStrategy
from ._jit import JitStrategy
from ._lanes import split_before_mapping, split_inside_lane
from ._lanes_on_mesh import LanesOnMesh
from ._mapping import MappingInfo, MappingStrategy
from ._mapping_program import build_mapped_program
from ._rules import AXES, DECLARED_STATES, SPECS, RuleSyntax, parse_state_rules
from ._shard_map import ShardMapStrategy

__all__ = [
    "JitStrategy",
    "GradStrategy",
    "MappingStrategy",
    "ShardMapStrategy",
    "ControlFlow",
    "Carry",
    "trace_body",
    "slice_spec",
    "MappingInfo",
    "LanesOnMesh",
    "build_mapped_program",
    "split_before_mapping",
    "split_inside_lane",
    "parse_state_rules",
    "RuleSyntax",
    "AXES",
    "SPECS",
    "DECLARED_STATES",
]
