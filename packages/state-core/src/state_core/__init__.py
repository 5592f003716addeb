"""state-core: explicit, mutable ``State`` objects that JAX transformations understand.

This is the lowest layer of the state stack. It holds the ``State`` family,
filters that select states, collections of states gathered from object graphs,
and the tracing engine (``StateTraceStack``, ``catch_new_states``,
``StatefulFunction``) on which every state-aware transformation is built: the
kernel, which is all ``import state_core`` loads. Beside it, loaded on first use:
``environ``, the simulation environment (``dt``, ``t``, ``i``, ``fit``, the
precision; it plugs into the engine through
``state_core.engine.register_call_context``), ``units``, which recognises
brainunit quantities without importing brainunit, ``graph``, the brainstate /
flax-style graph helpers (``treefy_split`` ...), the hidden-group states, and
``compat``, brainstate's spellings of this layer, and the state hooks
(``register_state_hook`` ..., ``State.register_hook``).

Example:
    >>> import jax.numpy as jnp
    >>> import state_core
    >>> w = state_core.ParamState(jnp.ones(3), name='w')
    >>> f = state_core.StatefulFunction(lambda x: (w.value * x).sum())
    >>> f(jnp.arange(3.0))
    Array(3., dtype=float32)
"""

from typing import TYPE_CHECKING, Any

from . import engine, filter
from .__about__ import __version__
from ._collection import StateDict, collect_states, states_of_callable
from ._donation import donation, donation_enabled, set_donation
from ._errors import BatchAxisError, StateError, StateLeakError
from ._first_calls import eager_first_calls, eager_first_calls_enabled, set_eager_first_calls
from ._introspection import make_jaxpr
from ._jax_internals import hide_library_frames
from ._new_state_catcher import NewStateCatcher, catch_new_states
from ._plain_trace_reads import (
    PlainTraceStateAccessWarning,
    plain_trace_policy,
    plain_trace_policy_in_effect,
    set_plain_trace_policy,
)
from ._pretty import format_value
from ._registry import clear_caches
from ._sharding import get_named_sharding, get_partition_spec, shard_states
from ._state import (
    HiddenState,
    LongTermState,
    NonBatchState,
    ParamState,
    ShortTermState,
    State,
    check_not_state,
    check_state_value_tree,
    maybe_state,
    strict_state_checks,
)
from ._stateful_function import StatefulFunction
from ._trace import StateTraceStack, active_trace_stacks

__all__ = [
    "__version__",
    "filter",
    "graph",
    "engine",
    "environ",
    "units",
    "compat",
    "State",
    "ShortTermState",
    "LongTermState",
    "ParamState",
    "HiddenState",
    "NonBatchState",
    "HiddenGroupState",
    "HiddenTreeState",
    "StateError",
    "StateLeakError",
    "BatchAxisError",
    "register_state_hook",
    "unregister_state_hook",
    "clear_state_hooks",
    "has_state_hooks",
    "list_state_hooks",
    "HookContext",
    "HookHandle",
    "HookCancellationError",
    "PlainTraceStateAccessWarning",
    "set_plain_trace_policy",
    "plain_trace_policy",
    "plain_trace_policy_in_effect",
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
    "clear_caches",
    "donation",
    "set_donation",
    "donation_enabled",
    "eager_first_calls",
    "set_eager_first_calls",
    "eager_first_calls_enabled",
    "StateDict",
    "collect_states",
    "states_of_callable",
    "get_partition_spec",
    "get_named_sharding",
    "shard_states",
]

hide_library_frames(__file__)

if TYPE_CHECKING:
    from . import compat, environ, graph, units
    from ._hidden_group import HiddenGroupState, HiddenTreeState
    from ._state_hooks import (
        HookCancellationError,
        HookContext,
        HookHandle,
        clear_state_hooks,
        has_state_hooks,
        list_state_hooks,
        register_state_hook,
        unregister_state_hook,
    )

# Outside the kernel: imported when first used, so a framework built on the kernel
# alone never loads the simulation context.
_ON_FIRST_USE = {
    "environ": ("state_core.environ", None),
    "units": ("state_core.units", None),
    "graph": ("state_core.graph", None),
    "compat": ("state_core.compat", None),
    "HiddenGroupState": ("state_core._hidden_group", "HiddenGroupState"),
    "HiddenTreeState": ("state_core._hidden_group", "HiddenTreeState"),
    **{
        name: ("state_core._state_hooks", name)
        for name in (
            "register_state_hook",
            "unregister_state_hook",
            "clear_state_hooks",
            "has_state_hooks",
            "list_state_hooks",
            "HookContext",
            "HookHandle",
            "HookCancellationError",
        )
    },
}


def __getattr__(name: str) -> Any:
    where = _ON_FIRST_USE.get(name)
    if where is None:
        raise AttributeError(f"module 'state_core' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(where[0])
    value = module if where[1] is None else getattr(module, where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
