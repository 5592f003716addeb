"""The program a ``StatefulFunction`` compiles for a ``Trace``, and the checks on its first call.

``pure_program`` turns a trace into ``(written values, read-only values, *leaves) ->
(output, new values)``; the helpers decide what its donating form may do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

from ._donation import donation_switched_on, exclusively_held, values_nbytes
from ._program import Program, Trace, jaxpr_evaluator, merger

__all__ = ["pure_program", "named"]


def _written_nbytes(trace: Trace) -> int:
    """The total size in bytes of the current values of the states ``trace`` reads and writes."""
    rw, _ = trace.split_values([s._value for s in trace.in_states])
    return values_nbytes(rw)


def _shapes_kept(trace: Trace, program: Program, leaves: Sequence[Any], may_donate_first: bool) -> bool:
    """Whether the program gives every written input state a value of its shapes and dtypes.

    The program's output types come from ``jax.eval_shape`` of a compiled form:
    the one the call that follows will likely run (the donating one when it may
    donate from its first call, ``may_donate_first``, and nothing but the States
    holds the written values), since ``jax.jit`` keeps that trace for it. A program
    on several devices (not ``may_donate_first``) is asked with the values' shapes
    and dtypes alone.
    """
    likely_donates = (
        may_donate_first
        and donation_switched_on()
        and exclusively_held([trace.in_states[k]._value for k in trace.rw_index])
    )
    values = [s._value for s in trace.in_states]
    rw, ro = trace.split_values(values)
    if not may_donate_first:
        # A program on several devices places its inputs itself (``prepare``, ``jax.pmap``):
        # where the values lie now (perhaps on another mesh, or under a mesh the caller
        # set, which tracing would refuse) says nothing about its output types.
        rw, ro, leaves = jax.tree.map(_shape_only, (rw, ro, list(leaves)))
    if likely_donates and program.donating is not None:
        result = jax.eval_shape(program.donating, rw, ro, *leaves)
        new_values = result[0] if program.donating_new_values_first else result[1]
    else:
        _, new_values = jax.eval_shape(program.run, rw, ro, *leaves)
    position = {id(s): j for j, s in enumerate(program.write_back)}
    for k in trace.rw_index:
        j = position.get(id(trace.in_states[k]))
        if j is None:
            return False
        before = [(jax.numpy.shape(x), jax.numpy.result_type(x)) for x in jax.tree.leaves(values[k])]
        after = [(x.shape, x.dtype) for x in jax.tree.leaves(new_values[j])]
        if before != after:
            return False
    return True


def _shape_only(leaf: Any) -> Any:
    """``leaf``'s shape and dtype without its placement (a Python or NumPy value stays as it is)."""
    if isinstance(leaf, jax.Array):
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, weak_type=getattr(leaf, "weak_type", False))
    return leaf


def _new_values_first(pure: Callable[..., tuple[Any, Any]]) -> Callable[..., tuple[Any, Any]]:
    """``pure`` returning ``(new values, output)`` instead of ``(output, new values)`` (same name)."""
    # XLA gives a donated input's buffer to the first output of its shape and dtype, in
    # output order: with the output first, an output shaped like a written state takes
    # that state's buffer and shifts every later pairing by one, which XLA compiles
    # markedly slower (a fifth slower for a thousand states). New values first pair each
    # state's buffer with its own new value, as ``donate_argnums`` on a hand-written step does.

    def program(*args: Any) -> tuple[Any, Any]:
        out, new_values = pure(*args)
        return new_values, out

    return named(program, getattr(pure, "__name__", "program"))


def named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` renamed ``name``, so JAX's messages (``jit(name)``, NaN reports) name the user's function.

    Args:
        fn: a program function the pipeline built.
        name: the user's function name.

    Example:
        >>> from state_core.engine import named
        >>> named(lambda: None, 'step').__name__
        'step'
    """
    fn.__name__ = fn.__qualname__ = name
    return fn


def pure_program(trace: Trace, who: str = "") -> Callable[..., tuple[Any, list[Any]]]:
    """``(written state values, read-only values, *dynamic leaves) -> (output, new values)``.

    The new values are those of ``trace.write_states`` (written, then created
    states). This is the default program; ``jax.jit`` of it is what a plain
    ``StatefulFunction`` runs.

    Args:
        trace: the ``Trace`` to turn into a program; the function returned does
            not refer to it.
        who: how messages name the call (see ``jaxpr_evaluator``).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction
        >>> from state_core.engine import pure_program
        >>> s = State(jnp.ones(2))
        >>> def f(x):
        ...     s.value = s.value * x
        >>> trace = StatefulFunction(f).trace(3.0)
        >>> pure_program(trace)([jnp.ones(2)], [], 3.0)
        (None, [Array([3., 3.], dtype=float32)])
    """
    evaluate = jaxpr_evaluator(trace, who)
    merge = merger(trace)

    def pure(rw: list[Any], ro: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any]]:
        out, written, created = evaluate(merge(rw, ro), dyn_leaves)
        return out, written + created

    return pure
