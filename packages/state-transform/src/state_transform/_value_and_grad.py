"""``value_and_grad``, ``jacrev``, ``jacfwd``, ``hessian`` w.r.t. States and/or arguments."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Generic, overload

import jax

from state_core import State
from state_core.engine import IdentityRef, jaxpr_evaluator

from ._control_flow import Carry, ControlFlow
from ._grad import grad
from ._typing import P, Q, R, S

__all__ = ["value_and_grad", "ValueAndGradFunction", "jacrev", "jacfwd", "hessian", "JacobianFunction"]


class ValueAndGradFunction(Generic[P, R]):
    """The callable ``value_and_grad`` returns: ``(value, grads)`` or ``((value, aux), grads)``.

    Args:
        fun: the function to differentiate; returns a scalar (or ``(scalar,
            aux)`` with ``has_aux=True``) and may read and write States.
        grad_states: a State, or a list/tuple/dict of States, to differentiate
            with respect to; ``grads`` mirrors this structure. ``None`` (the
            default) differentiates with respect to arguments only.
        argnums: the positional argument(s) to differentiate with respect to.
            ``None`` means argument 0 when ``grad_states`` is ``None`` and no
            argument otherwise.
        has_aux: ``fun`` returns ``(value, aux)``; ``aux`` is passed through
            undifferentiated.

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
        fun: Callable[P, R],
        grad_states: Any = None,
        argnums: int | Sequence[int] | None = None,
        has_aux: bool = False,
    ) -> None:
        self.has_aux = has_aux
        self._grad = grad(fun, grad_states=grad_states, argnums=argnums, has_aux=has_aux, return_value=True)
        functools.update_wrapper(self, fun, updated=())

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R, Any]:
        if self.has_aux:
            grads, value, aux = self._grad(*args, **kwargs)
            # `fun` returned this (value, aux) pair: it is of `fun`'s return type.
            returned: Any = (value, aux)
            return returned, grads
        grads, value = self._grad(*args, **kwargs)
        return value, grads


# Without ``fun`` a decorator factory, with it the function itself.
@overload
def value_and_grad(
    fun: None = None,
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    has_aux: bool = False,
) -> Callable[[Callable[Q, S]], ValueAndGradFunction[Q, S]]: ...
@overload
def value_and_grad(
    fun: Callable[P, R],
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    has_aux: bool = False,
) -> ValueAndGradFunction[P, R]: ...


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

    Args:
        fun: the function to differentiate; returns a scalar (or ``(scalar,
            aux)`` with ``has_aux=True``) and may read and write States. Leave
            it out to use ``value_and_grad(grad_states=...)`` as a decorator.
        grad_states: a State, or a list/tuple/dict of States (for example
            ``module.states(ParamState)``), to differentiate with respect to;
            ``grads`` mirrors this structure. ``None`` (the default)
            differentiates with respect to arguments only.
        argnums: the positional argument(s) to differentiate with respect to.
            ``None`` means argument 0 when ``grad_states`` is ``None`` and no
            argument otherwise.
        has_aux: ``fun`` returns ``(value, aux)``; ``aux`` is passed through
            undifferentiated.

    Returns:
        A ``ValueAndGradFunction`` (or, without ``fun``, a decorator that makes one).

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

        def decorate(f: Callable[..., Any]) -> ValueAndGradFunction:
            return ValueAndGradFunction(f, grad_states, argnums, has_aux)

        return decorate
    return ValueAndGradFunction(fun, grad_states, argnums, has_aux)


class JacobianFunction(ControlFlow):
    """The callable ``jacrev`` / ``jacfwd`` / ``hessian`` return.

    Differentiates ``fun`` (which may read and write States) with respect to
    ``grad_states`` and/or positional arguments ``argnums``, with the matching
    ``jax`` transformation applied to the traced program. The result mirrors
    ``grad``: state part, argument part, or ``(state part, argument part)``;
    then ``value`` (if ``return_value``) and ``aux`` (if ``has_aux``).

    Args:
        fun: the function to differentiate; it may read and write States.
        grad_states: a State or a list/tuple/dict of States to differentiate
            with respect to; ``None`` for arguments only.
        argnums: positional argument(s) to differentiate with respect to
            (``None``: argument 0 when ``grad_states`` is ``None``, else none).
        has_aux: ``fun`` returns ``(value, aux)``.
        return_value: also return the value.
        mode: ``'rev'`` (``jax.jacrev``), ``'fwd'`` (``jax.jacfwd``) or ``'hessian'``.

    Raises:
        ValueError: ``mode`` is not one of the three.
        TypeError: ``grad_states`` holds something other than States.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import JacobianFunction
        >>> w = ParamState(jnp.array([1., 2.]), name='w')
        >>> JacobianFunction(lambda: w.value ** 2, grad_states=w, mode='rev')()
        Array([[2., 0.],
               [0., 4.]], dtype=float32)
    """

    __module__ = "state_transform"

    _TRANSFORMS: ClassVar[dict[str, Callable[..., Any]]] = {
        "rev": jax.jacrev,
        "fwd": jax.jacfwd,
        "hessian": jax.hessian,
    }

    def __init__(
        self,
        fun: Callable[..., Any],
        grad_states: Any = None,
        argnums: int | Sequence[int] | None = None,
        has_aux: bool = False,
        return_value: bool = False,
        mode: str = "rev",
    ) -> None:
        if mode not in self._TRANSFORMS:
            raise ValueError(f"JacobianFunction: mode must be one of {sorted(self._TRANSFORMS)}, got {mode!r}.")
        who = self._TRANSFORMS[mode].__name__  # jacrev, jacfwd, hessian
        states, self._state_treedef = jax.tree.flatten(grad_states, is_leaf=lambda x: isinstance(x, State))
        for s in states:
            if not isinstance(s, State):
                raise TypeError(
                    f"{who}: grad_states must be a State or a list/tuple/dict of States, but it contains a "
                    f"{type(s).__name__}."
                )
        if argnums is None and grad_states is None:
            argnums = 0
        if isinstance(argnums, list):
            argnums = tuple(argnums)
        params = (mode, self._state_treedef, tuple(IdentityRef(s) for s in states), argnums, has_aux, return_value)
        super().__init__([fun], ["fun"], mode, params)
        self.grad_states = grad_states
        self._states = states
        self.argnums = argnums
        self.has_aux = has_aux
        self.return_value = return_value
        self.mode = mode
        self.name = getattr(fun, "__name__", None) or type(fun).__name__
        functools.update_wrapper(self, fun, updated=())

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        body = self.trace_body(0, args, kwargs)
        carry = Carry([body], [body])
        carried, invariant = carry.read()
        evaluate = jaxpr_evaluator(body)
        values = carry.inputs_of(body)(carried, invariant)
        where = {id(s): k for k, s in enumerate(body.in_states)}
        grad_at = [where.get(id(s)) for s in self._states]
        # A grad state the function never reads has a zero derivative: its value is only a placeholder.
        current = [values[k] if k is not None else s.value for k, s in zip(grad_at, self._states, strict=True)]
        argnums = self.argnums
        arg_tuple = () if argnums is None else ((argnums,) if isinstance(argnums, int) else tuple(argnums))
        has_aux, transform = self.has_aux, self._TRANSFORMS[self.mode]

        def objective(g_values: list[Any], d_args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
            vals = list(values)
            for k, v in zip(grad_at, g_values, strict=True):
                if k is not None:
                    vals[k] = v
            full = list(args)
            for i, a in zip(arg_tuple, d_args, strict=True):
                full[i] = a
            out, written, _ = evaluate(vals, jax.tree.leaves((tuple(full), kwargs)))
            value, aux = out if has_aux else (out, None)
            return value, (value, aux, written)

        diff_args = tuple(args[i] for i in arg_tuple)
        wrt = (0, 1) if (self.grad_states is not None and arg_tuple) else (0 if arg_tuple == () else 1)
        derivative, (value, aux, written) = transform(objective, argnums=wrt, has_aux=True)(current, diff_args)
        carry.write(carry.outputs(body, written, carried))
        return self._assemble(derivative, value, aux)

    def _assemble(self, derivative: Any, value: Any, aux: Any) -> Any:
        single_arg = isinstance(self.argnums, int)

        def states_of(leaves: Iterable[Any]) -> Any:
            return jax.tree.unflatten(self._state_treedef, list(leaves))

        def per_output(arrange: Callable[[Any], Any]) -> Any:
            # A Jacobian has the output's structure on the outside and the inputs'
            # inside: arrange the inputs' part of each output (a tuple or dict output
            # keeps one Jacobian per element, as with jax.jacrev).
            return jax.tree.map(lambda _, part: arrange(part), value, derivative)

        if self.grad_states is not None and self.argnums is not None:
            if self.mode == "hessian":
                result = derivative  # the full block structure ((ss, sa), (as, aa))
            else:
                result = per_output(lambda d: (states_of(d[0]), d[1][0] if single_arg else tuple(d[1])))
        elif self.grad_states is not None:
            if self.mode == "hessian":
                result = states_of(states_of(row) for row in derivative)
            else:
                result = per_output(states_of)
        else:
            if self.mode == "hessian":
                result = derivative[0][0] if single_arg else derivative
            else:
                result = per_output(lambda d: d[0] if single_arg else tuple(d))
        extra = ((value,) if self.return_value else ()) + ((aux,) if self.has_aux else ())
        return (result, *extra) if extra else result


def _jacobian_factory(mode: str, doc: str) -> Callable[..., Any]:
    def make(
        fun: Callable[..., Any] | None = None,
        grad_states: Any = None,
        argnums: int | Sequence[int] | None = None,
        has_aux: bool = False,
        return_value: bool = False,
    ) -> Any:
        if fun is None:
            return functools.partial(
                make, grad_states=grad_states, argnums=argnums, has_aux=has_aux, return_value=return_value
            )
        return JacobianFunction(fun, grad_states, argnums, has_aux, return_value, mode=mode)

    make.__doc__ = doc
    return make


jacrev = _jacobian_factory(
    "rev",
    """Jacobian of ``fun`` w.r.t. ``grad_states`` and/or ``argnums`` by reverse mode (``jax.jacrev``).

    Arguments and result layout as in ``grad`` (``fun`` may return any array,
    not only a scalar). States that ``fun`` writes are updated.

    Args:
        fun: the function to differentiate; it may read and write States. Leave
            it out to use the transformation as a decorator
            (``@jacrev(grad_states=...)``).
        grad_states: a State, or a list/tuple/dict of States, to differentiate
            with respect to; the state part of the result mirrors this
            structure. ``None`` (the default) differentiates with respect to
            arguments only.
        argnums: the positional argument(s) to differentiate with respect to.
            ``None`` means argument 0 when ``grad_states`` is ``None`` and no
            argument otherwise.
        has_aux: ``fun`` returns ``(output, aux)``; ``aux`` is passed through
            undifferentiated and returned last.
        return_value: also return ``fun``'s output (after the derivative,
            before ``aux``).

    Returns:
        A ``JacobianFunction`` (or, without ``fun``, a decorator that makes one).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import jacrev
        >>> w = ParamState(jnp.array([1., 2.]), name='w')
        >>> jacrev(lambda x: w.value * x, grad_states=w)(3.0)
        Array([[3., 0.],
               [0., 3.]], dtype=float32)
    """,
)
jacrev.__name__ = jacrev.__qualname__ = "jacrev"

jacfwd = _jacobian_factory(
    "fwd",
    """Jacobian of ``fun`` w.r.t. ``grad_states`` and/or ``argnums`` by forward mode (``jax.jacfwd``).

    The same as ``jacrev`` computed column by column, which is cheaper when
    there are fewer inputs than outputs. States that ``fun`` writes are updated.

    Args:
        fun: the function to differentiate; it may read and write States. Leave
            it out to use the transformation as a decorator
            (``@jacfwd(grad_states=...)``).
        grad_states: a State, or a list/tuple/dict of States, to differentiate
            with respect to; the state part of the result mirrors this
            structure. ``None`` (the default) differentiates with respect to
            arguments only.
        argnums: the positional argument(s) to differentiate with respect to.
            ``None`` means argument 0 when ``grad_states`` is ``None`` and no
            argument otherwise.
        has_aux: ``fun`` returns ``(output, aux)``; ``aux`` is passed through
            undifferentiated and returned last.
        return_value: also return ``fun``'s output (after the derivative,
            before ``aux``).

    Returns:
        A ``JacobianFunction`` (or, without ``fun``, a decorator that makes one).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import jacfwd
        >>> w = ParamState(jnp.array([1., 2.]), name='w')
        >>> jacfwd(lambda x: jnp.sin(w.value) * x, argnums=0)(2.0)
        Array([0.84147096, 0.9092974 ], dtype=float32)
    """,
)
jacfwd.__name__ = jacfwd.__qualname__ = "jacfwd"

hessian = _jacobian_factory(
    "hessian",
    """Hessian of a scalar ``fun`` w.r.t. ``grad_states`` and/or ``argnums`` (``jax.hessian``).

    With both ``grad_states`` and ``argnums`` the result is the full block
    structure ``((d2/ds ds, d2/ds da), (d2/da ds, d2/da da))``. States that
    ``fun`` writes are updated.

    Args:
        fun: the function to differentiate, returning a scalar; it may read and write States. Leave
            it out to use the transformation as a decorator
            (``@hessian(grad_states=...)``).
        grad_states: a State, or a list/tuple/dict of States, to differentiate
            with respect to; the state part of the result mirrors this
            structure. ``None`` (the default) differentiates with respect to
            arguments only.
        argnums: the positional argument(s) to differentiate with respect to.
            ``None`` means argument 0 when ``grad_states`` is ``None`` and no
            argument otherwise.
        has_aux: ``fun`` returns ``(output, aux)``; ``aux`` is passed through
            undifferentiated and returned last.
        return_value: also return ``fun``'s output (after the derivative,
            before ``aux``).

    Returns:
        A ``JacobianFunction`` (or, without ``fun``, a decorator that makes one).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import hessian
        >>> w = ParamState(jnp.array([1., 2.]), name='w')
        >>> hessian(lambda: jnp.sum(w.value ** 3), grad_states=w)()
        Array([[ 6.,  0.],
               [ 0., 12.]], dtype=float32)
    """,
)
hessian.__name__ = hessian.__qualname__ = "hessian"
