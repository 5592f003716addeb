"""Running a user function once under a JAX trace and recording what it did to States.

``trace_function`` is the single place where user code meets the tracer. The
function runs inside ``jax.make_jaxpr``; the first read of a State makes its value
a new input of the jaxpr (so the program takes state values as arguments instead
of freezing them in as constants), writes are recorded, and States created during
the run that end up holding traced values become outputs too, so that a replay
leaves them concrete. Every original value is restored afterwards: tracing never
changes a state, and the tracers are visible to the tracing thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax

from ._context import CTX
from ._jax_internals import close_jaxpr, current_trace, is_tracer, jaxpr_consts, new_trace_input, open_jaxpr
from ._program import Trace
from ._signature import canonical_signature, state_signature
from ._state import State, check_not_state
from ._trace import StateTraceStack, private_state_values

__all__ = ["trace_function", "abstract_value", "shape_structs"]

_ABSENT = object()


def abstract_value(x: Any) -> Any:
    """The abstract value a trace sees for ``x``: its shape and dtype (and weak type).

    A value of an enclosing trace (or its abstract stand-in) keeps its whole type:
    inside ``shard_map`` that records the mesh axes it varies over, and a program
    traced without them lacks the ``pvary`` (whose transpose is the ``psum`` of
    gradients) that JAX inserts where varying and replicated values meet.

    Args:
        x: an array, a Python or NumPy number, a tracer or a ``jax.ShapeDtypeStruct``.
    """
    aval = jax.typeof(x)
    if is_tracer(x) or type(x) is jax.ShapeDtypeStruct:
        return aval
    return jax.core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type)


def shape_structs(value: Any) -> Any:
    """``value`` with every leaf replaced by its ``jax.ShapeDtypeStruct`` (shape and dtype).

    The template of a state's value: what ``eval_shape`` reports, the zero
    gradient of a state a loss never reads, the shape-only copy of a state.

    Args:
        value: an array, a number, or a pytree of them (a state's value).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core.engine import shape_structs
        >>> shape_structs({'w': jnp.zeros((2, 3)), 'n': 1})
        {'n': ShapeDtypeStruct(shape=(), dtype=int32), 'w': ShapeDtypeStruct(shape=(2, 3), dtype=float32)}
    """
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(jax.numpy.shape(x), jax.numpy.result_type(x)), value)


def _current_value(state: State[Any]) -> Any:
    """The value this thread sees in ``state``, without materialising a lazy one."""
    overlay = CTX.overlay
    if overlay is not None:
        value = overlay.get(state, _ABSENT)
        if value is not _ABSENT:
            return value
    return state.__dict__.get("_value", _ABSENT)


def _holds_tracer(state: State[Any]) -> bool:
    value = _current_value(state)
    return value is not _ABSENT and any(is_tracer(x) for x in jax.tree.leaves(value))


def trace_function(
    fun: Callable[..., Any],
    name: str,
    key: Hashable,
    abstract: Sequence[Any],
    rebuild: Callable[[Sequence[Any]], tuple[tuple[Any, ...], dict[str, Any]]],
    dyn_treedef: Any,
    n_args: int,
    *,
    state_input_avals: Callable[[State[Any], Any], Any] | None = None,
    axis_env: Sequence[tuple[Any, int]] | None = None,
    context: Hashable = None,
) -> Trace:
    """Run ``fun`` once under ``jax.make_jaxpr`` and return the ``Trace`` of what it did.

    Args:
        fun: the user function.
        name: names the function in messages.
        key: the call signature the trace is for (stored in the ``Trace``).
        abstract: one abstract value per dynamic argument leaf.
        rebuild: ``flat tracers -> (args, kwargs)`` for calling ``fun`` (statics put back).
        dyn_treedef: the structure of the dynamic ``(args, kwargs)``.
        n_args: the number of positional arguments of the call.
        state_input_avals: ``(state, value) -> abstract value tree`` for a state read for
            the first time (default: ``abstract_value`` of each leaf); mapping engines
            return per-lane shapes here.
        axis_env: named axes ``(name, size)`` bound while tracing.
        context: the ``trace_context()`` of the call.
    """
    in_states: list[State[Any]] = []
    in_state_avals: list[tuple[Any, ...]] = []
    state_sigs: list[Any] = []
    # Everything below is local to this trace (closures), never stored elsewhere.
    jax_trace: list[Any] = []
    recorded: list[Any] = []

    def first_read(state: State[Any]) -> Any:
        value = state._value
        avals = jax.tree.map(abstract_value, value) if state_input_avals is None else state_input_avals(state, value)
        aval_leaves, aval_def = jax.tree.flatten(avals)
        tracers = [new_trace_input(jax_trace[-1], a) for a in aval_leaves]
        in_states.append(state)
        in_state_avals.append(tuple(canonical_signature(x) for x in jax.tree.leaves(value)))
        state_sigs.append(state_signature(value))
        return jax.tree.unflatten(aval_def, tracers)

    def traced(*flat: Any) -> Any:
        jax_trace.append(current_trace())
        args, kwargs = rebuild(flat)
        stack = StateTraceStack(name, first_read=first_read, traces_jaxpr=True)
        # The tracers swapped into states are visible to this thread only.
        with private_state_values():
            try:
                with stack:
                    out = fun(*args, **kwargs)
                    # States made during the run (here or in nested traces) that hold
                    # traced values: their final values leave the program too.
                    created = [s for s in stack._created if _holds_tracer(s)]
                    created_values = [_current_value(s) for s in created]
                written = stack.get_write_states()
                written_values = [s._value for s in written]
            finally:
                stack.restore_original_values()
        check_not_state(out, f"The return value of {name}")
        recorded[:] = [stack, written, created]
        return out, written_values, created_values

    if axis_env:
        closed, shapes = jax.make_jaxpr(traced, return_shape=True, axis_env=list(axis_env))(*abstract)
    else:
        closed, shapes = jax.make_jaxpr(traced, return_shape=True)(*abstract)
    stack, written, created = recorded
    jaxpr = open_jaxpr(closed)
    consts = jaxpr_consts(closed)
    n_dyn = len(abstract)
    # Put state inputs first: (state values, dynamic args) is the documented order.
    debug_info = jaxpr.debug_info
    if debug_info is not None:
        debug_info = debug_info._replace(arg_names=None)  # the inputs were reordered
    jaxpr = jaxpr.replace(invars=list(jaxpr.invars[n_dyn:]) + list(jaxpr.invars[:n_dyn]), debug_info=debug_info)
    closed = close_jaxpr(jaxpr, consts)
    out_shapes, written_shapes, created_shapes = shapes
    return Trace(
        key=key,
        closed_jaxpr=closed,
        in_states=tuple(in_states),
        in_state_avals=tuple(in_state_avals),
        state_sigs=tuple(state_sigs),
        out_states=tuple(written),
        created_states=tuple(created),
        states=tuple(stack.states),
        read_only_states=tuple(stack.get_read_states()),
        out_treedef=jax.tree.structure(out_shapes),
        out_shapes=out_shapes,
        n_out_leaves=len(jax.tree.leaves(out_shapes)),
        out_state_defs=tuple(jax.tree.structure(v) for v in [*written_shapes, *created_shapes]),
        dyn_treedef=dyn_treedef,
        n_args=n_args,
        cacheable=not any(is_tracer(c) for c in consts),
        context=context,
    )
