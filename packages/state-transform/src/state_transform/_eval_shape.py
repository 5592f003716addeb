"""``eval_shape``: the output shapes of a state-aware function, without running it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from state_core import State, StatefulFunction
from state_core.engine import shape_structs

__all__ = ["eval_shape"]


def eval_shape(fun: Callable[..., Any], *args: Any, return_state_shapes: bool = False, **kwargs: Any) -> Any:
    """The ``jax.ShapeDtypeStruct`` tree of ``fun(*args, **kwargs)``, traced once and never run.

    The state-aware ``jax.eval_shape``: ``fun`` may read and write States. It is
    traced abstractly (no computation, no device memory), and every State keeps
    its value. The trace is cached like a ``jit`` trace, so asking again with the
    same signature costs a dictionary lookup.

    Args:
        fun: the function; it returns an array or a pytree of arrays.
        *args: example positional arguments: arrays, ``jax.ShapeDtypeStruct``
            leaves or pytrees of them.
        return_state_shapes: also return a dict from every State that ``fun``
            reads or writes to the ``jax.ShapeDtypeStruct`` tree of its value.
        **kwargs: example keyword arguments.

    Returns:
        The output's ``jax.ShapeDtypeStruct`` tree; with ``return_state_shapes``,
        ``(state_shapes, out_shapes)``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import eval_shape
        >>> total = State(jnp.zeros((2, 3)))
        >>> def accumulate(x):
        ...     total.value = total.value + x
        ...     return total.value.sum(axis=0)
        >>> eval_shape(accumulate, jnp.ones((2, 3)))
        ShapeDtypeStruct(shape=(3,), dtype=float32)
        >>> shapes, out = eval_shape(accumulate, jnp.ones((2, 3)), return_state_shapes=True)
        >>> shapes[total]
        ShapeDtypeStruct(shape=(2, 3), dtype=float32)
        >>> total.value.sum()   # nothing ran
        Array(0., dtype=float32)
    """
    if not callable(fun):
        raise TypeError(f"eval_shape: `fun` must be callable, got {type(fun).__name__}.")
    trace = StatefulFunction(fun).trace(*args, **kwargs)
    if not return_state_shapes:
        return trace.out_shapes
    state_shapes: dict[State[Any], Any] = {state: shape_structs(state.value) for state in trace.states}
    return state_shapes, trace.out_shapes
