"""state-transform: state-aware ``vmap2``, ``pmap2``, ``shard_map``, ``jit`` and ``grad``.

Every transformation here traces the user function once per call signature with
``state_core.StatefulFunction``, caches the compiled program, and on later calls
only gathers state values, runs the program and writes the results back.

Example:
    >>> import jax.numpy as jnp
    >>> from state_core import ShortTermState
    >>> from state_core.filter import OfType
    >>> from state_transform import vmap2
    >>> count = ShortTermState(jnp.zeros(4))
    >>> def bump(delta):
    ...     count.value = count.value + delta
    ...     return count.value
    >>> step = vmap2(bump, state_in_axes={0: OfType(ShortTermState)},
    ...              state_out_axes={0: OfType(ShortTermState)})
    >>> step(jnp.array([1., 2., 3., 4.]))
    Array([1., 2., 3., 4.], dtype=float32)
"""

from state_core import clear_caches
from state_core.engine import hide_library_frames

from .__about__ import __version__
from ._bounded_while import bounded_while_loop
from ._checkpointed import checkpointed_for_loop, checkpointed_scan
from ._conditions import cond, ifelse, switch
from ._debug_nan import debug_nan, debug_nan_if
from ._eval_shape import eval_shape
from ._grad import GradFunction, grad
from ._jit import JittedFunction, jit
from ._legacy_vmap import vmap
from ._loops import for_loop, fori_loop, map, scan, while_loop
from ._named import named_call, named_scope
from ._new_states import pmap2_new_states, vmap2_new_states
from ._pmap import pmap2
from ._progress import ProgressBar
from ._remat import RematFunction, checkpoint, remat
from ._shard_map import ShardMapFunction, shard_map
from ._stateful_mapping import StatefulMapping
from ._value_and_grad import JacobianFunction, ValueAndGradFunction, hessian, jacfwd, jacrev, value_and_grad
from ._vector_grad import fwd_grad, vector_grad
from ._vjp_jvp import jvp, vjp
from ._vmap import vmap2
from ._vmap_new_states import vmap_new_states

__all__ = [
    "__version__",
    "StatefulMapping",
    "vmap2",
    "vmap",
    "pmap2",
    "vmap2_new_states",
    "vmap_new_states",
    "pmap2_new_states",
    "shard_map",
    "ShardMapFunction",
    "jit",
    "JittedFunction",
    "grad",
    "GradFunction",
    "debug_nan",
    "debug_nan_if",
    "eval_shape",
    "named_call",
    "named_scope",
    # control flow
    "scan",
    "for_loop",
    "fori_loop",
    "while_loop",
    "bounded_while_loop",
    "checkpointed_scan",
    "checkpointed_for_loop",
    "map",
    "cond",
    "switch",
    "ifelse",
    "checkpoint",
    "remat",
    "RematFunction",
    "value_and_grad",
    "ValueAndGradFunction",
    "jacrev",
    "jacfwd",
    "hessian",
    "JacobianFunction",
    "vector_grad",
    "fwd_grad",
    "vjp",
    "jvp",
    "ProgressBar",
    "clear_caches",
]

hide_library_frames(__file__)
