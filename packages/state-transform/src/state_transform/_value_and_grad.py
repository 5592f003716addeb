"""``value_and_grad``: the loss and its gradients (w.r.t. States and/or arguments) in one call."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from ._grad import grad

__all__ = ["value_and_grad", "ValueAndGradFunction"]


class ValueAndGradFunction:
    """The callable ``value_and_grad`` returns: ``(value, grads)`` or ``((value, aux), grads)``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import ValueAndGradFunction
        >>> w = ParamState(jnp.array(3.0))
        >>> ValueAndGradFunction(lambda: w.value ** 2, grad_states=w)()
        (Array(9., dtype=float32, weak_type=True), Array(6., dtype=float32, weak_type=True))
    """

    __module__ = "state_transform"

    def __init__(
        self,
        fun: Callable[..., Any],
        grad_states: Any = None,
        argnums: int | Sequence[int] | None = None,
        has_aux: bool = False,
    ) -> None:
        self.has_aux = has_aux
        self._grad = grad(fun, grad_states=grad_states, argnums=argnums, has_aux=has_aux, return_value=True)
        functools.update_wrapper(self, fun, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.has_aux:
            grads, value, aux = self._grad(*args, **kwargs)
            return (value, aux), grads
        grads, value = self._grad(*args, **kwargs)
        return value, grads


def value_and_grad(
    fun: Callable[..., Any] | None = None,
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    has_aux: bool = False,
) -> ValueAndGradFunction | Callable[[Callable[..., Any]], ValueAndGradFunction]:
    """Like ``jax.value_and_grad``, with gradients w.r.t. States as in ``grad``.

    Returns a function giving ``(value, grads)``, or ``((value, aux), grads)``
    with ``has_aux=True`` (the order ``jax.value_and_grad`` uses; ``grad(...,
    return_value=True)`` gives the same numbers as ``(grads, value)``). ``grads``
    has the structure described in ``grad``. States that ``fun`` writes are updated.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import value_and_grad
        >>> w = ParamState(jnp.array([1., 2.]), name='w')
        >>> loss, g = value_and_grad(lambda x: jnp.sum(w.value * x), grad_states=[w])(jnp.array([3., 4.]))
        >>> loss, g
        (Array(11., dtype=float32), [Array([3., 4.], dtype=float32)])
    """
    if fun is None:
        return functools.partial(value_and_grad, grad_states=grad_states, argnums=argnums, has_aux=has_aux)
    return ValueAndGradFunction(fun, grad_states, argnums, has_aux)
