"""brainstate's spellings of the core layer, kept out of ``state_core``'s own namespace.

Everything here exists so that a brainstate program ports by renaming its imports
(see the porting page); new code does not need it. What it adds over the main
names is accepted for compatibility and, where brainstate gave it a meaning we
do not need, checked and kept for inspection only.

Example:
    >>> import jax.numpy as jnp
    >>> from state_core import State
    >>> from state_core.compat import StatefulFunction
    >>> s = State(jnp.zeros(2))
    >>> def step(x):
    ...     s.value = s.value + x
    >>> f = StatefulFunction(step, return_only_write=True, ir_optimizations=('dce',))
    >>> f(jnp.ones(2)); s.value
    Array([1., 1.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._stateful_function import StatefulFunction as _StatefulFunction

__all__ = ["StatefulFunction", "IR_PASSES"]

#: brainstate's jaxpr pass names, accepted by ``ir_optimizations=``.
IR_PASSES = frozenset({"constant_fold", "cse", "dce", "algebraic_simplification", "copy_propagation"})


class StatefulFunction(_StatefulFunction):
    """``state_core.StatefulFunction`` that also takes brainstate's two extra options.

    Args:
        fun: the function to trace (see ``state_core.StatefulFunction``).
        *args: ``static_argnums``, ``static_argnames``, as in ``state_core.StatefulFunction``.
        return_only_write: brainstate's switch between returning written or all
            states from the traced program. Our programs always return only the
            written states; ``False`` is accepted and changes nothing observable
            through a call. Must be a bool.
        ir_optimizations: brainstate's jaxpr passes to run. XLA runs these
            optimisations when it compiles, so ``None``, a bool, or any of the
            names in ``IR_PASSES`` is accepted and kept for inspection.
        **options: every other keyword of ``state_core.StatefulFunction``.

    Raises:
        TypeError: ``return_only_write`` is not a bool.
        ValueError: ``ir_optimizations`` names a pass brainstate does not have.

    Example:
        >>> from state_core.compat import StatefulFunction
        >>> f = StatefulFunction(lambda x: x * 2, ir_optimizations='cse')
        >>> f.return_only_write, f.ir_optimizations, float(f(2.0))
        (True, 'cse', 4.0)
    """

    def __init__(
        self,
        fun: Callable[..., Any],
        *args: Any,
        return_only_write: bool = True,
        ir_optimizations: Any = None,
        **options: Any,
    ) -> None:
        if not isinstance(return_only_write, bool):
            raise TypeError(
                f"StatefulFunction: return_only_write must be a bool, got {type(return_only_write).__name__}."
            )
        if ir_optimizations is not None and not isinstance(ir_optimizations, bool):
            names = (ir_optimizations,) if isinstance(ir_optimizations, str) else tuple(ir_optimizations)
            unknown = [n for n in names if n not in IR_PASSES]
            if unknown:
                raise ValueError(
                    f"StatefulFunction: unknown ir_optimizations {unknown}; use None or any of {sorted(IR_PASSES)}."
                )
        super().__init__(fun, *args, **options)
        self.return_only_write = return_only_write
        self.ir_optimizations = ir_optimizations
