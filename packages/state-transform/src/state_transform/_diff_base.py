"""The strategy of ``vector_grad``, ``fwd_grad`` and ``vjp``: a traced body as a pure objective.

Each of them is a ``ControlFlow`` whose ``_run`` traces the user function once
(``trace_body``), turns it into ``objective(grad state values, argument values)
-> (value, (aux, written state values))`` and applies one ``jax`` transformation
(``jax.vjp``, ``jax.jvp``) to it. The states the function writes are written
once, through ``Carry``, from the values of the primal (undifferentiated)
computation, so the pipeline caches, runs and writes back these transformations
as it does any other program.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import jax

from state_core import State, StateDict
from state_core.engine import IdentityRef, jaxpr_evaluator

from ._control_flow import Carry, ControlFlow

__all__ = ["StateDerivative", "Objective", "plain_state_dicts"]


def _is_state(x: Any) -> bool:
    return isinstance(x, State)


def plain_state_dicts(result: Any) -> Any:
    """Every ``StateDict`` in ``result`` as a plain ``dict`` (the form optax and ``grad`` give)."""
    return jax.tree.map(
        lambda x: dict(x) if isinstance(x, StateDict) else x,
        result,
        is_leaf=lambda x: isinstance(x, StateDict),
    )


def normalize_argnums(argnums: Any, who: str) -> int | tuple[int, ...] | None:
    """``argnums`` as an int, a tuple of ints or None; ``TypeError`` naming ``who`` for anything else."""
    if argnums is None:
        return None
    if isinstance(argnums, (list, tuple)):
        return tuple(_one_argnum(a, who) for a in argnums)
    return _one_argnum(argnums, who)


def _one_argnum(a: Any, who: str) -> int:
    if isinstance(a, bool):
        raise TypeError(f"{who}: argnums must be an int or a sequence of ints, got the bool {a!r}.")
    try:
        return operator.index(a)
    except TypeError:
        raise TypeError(f"{who}: argnums must be an int or a sequence of ints, got {a!r}.") from None


class Objective:
    """One call's differentiation problem: the pure objective, where it is evaluated, and the write-back.

    Attributes:
        grad_values: the input values of the distinct ``grad_states`` (differentiated).
        diff_args: the positional arguments selected by ``argnums`` (differentiated).
        fn: ``fn(grad_values, diff_args) -> (value, (aux, written))``; ``aux`` is None
            without ``has_aux``, ``written`` the new values of the written states.
    """

    def __init__(
        self,
        fn: Callable[[list[Any], tuple[Any, ...]], tuple[Any, tuple[Any, list[Any]]]],
        grad_values: list[Any],
        diff_args: tuple[Any, ...],
        finish: Callable[[list[Any]], None],
    ) -> None:
        self.fn = fn
        self.grad_values = grad_values
        self.diff_args = diff_args
        self._finish = finish

    def write(self, written: list[Any]) -> None:
        """Give the states the function writes the values ``written`` (from the objective's aux)."""
        self._finish(written)


class StateDerivative(ControlFlow):
    """A ``ControlFlow`` that differentiates its body w.r.t. ``grad_states`` and positional ``argnums``.

    Subclasses implement ``_run``: build the ``Objective`` with ``objective(args,
    kwargs)``, apply a ``jax`` transformation to ``objective.fn``, write the states
    with ``objective.write`` and shape the result with ``layout``.
    """

    __module__ = "state_transform"

    def __init__(
        self,
        fun: Callable[..., Any],
        grad_states: Any,
        argnums: int | Sequence[int] | None,
        has_aux: bool,
        return_value: bool,
        who: str,
        options: Any = (),
        default_argnums: int | None = 0,
    ) -> None:
        states, treedef = jax.tree.flatten(grad_states, is_leaf=_is_state)
        for s in states:
            if not isinstance(s, State):
                raise TypeError(
                    f"{who}: grad_states must be a State or a list/tuple/dict of States, but it "
                    f"contains a {type(s).__name__}."
                )
        argnums = normalize_argnums(argnums, who)
        if argnums is None and grad_states is None:
            argnums = default_argnums
        # A state listed twice is differentiated once; every entry naming it gets that gradient.
        unique: dict[int, State[Any]] = {}
        for s in states:
            unique.setdefault(id(s), s)
        self._unique = list(unique.values())
        self._slot = {key: k for k, key in enumerate(unique)}
        params = (who, treedef, tuple(IdentityRef(s) for s in states), argnums, has_aux, return_value, options)
        super().__init__([fun], ["fun"], who, params)
        self.grad_states = grad_states
        self._states = states
        self._state_treedef = treedef
        self.argnums = argnums
        self.has_aux = has_aux
        self.return_value = return_value
        self.name = getattr(fun, "__name__", None) or type(fun).__name__
        functools.update_wrapper(self, fun, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return plain_state_dicts(super().__call__(*args, **kwargs))

    # ------------------------------------------------------------------ the problem
    def _arg_positions(self, n_args: int) -> tuple[int, ...]:
        """``argnums`` as a tuple of non-negative positions, checked against ``n_args``."""
        argnums = self.argnums
        if argnums is None:
            return ()
        positions = (argnums,) if isinstance(argnums, int) else argnums
        for i in positions:
            if not -n_args <= i < n_args:
                raise ValueError(
                    f"{self.who}: argnums contains {i}, but {self.name} was called with {n_args} "
                    "positional argument(s)."
                )
        normalized = tuple(i % n_args for i in positions)
        if len(set(normalized)) != len(normalized):
            raise ValueError(
                f"{self.who}: argnums {argnums} names a positional argument twice; list each argument once."
            )
        return normalized

    def objective(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Objective:
        """Trace the body for ``args`` and return its pure ``Objective`` (runs inside ``_run``)."""
        body = self.trace_body(0, args, kwargs)
        if self.has_aux:
            returned = body.out_shapes
            if not (isinstance(returned, (tuple, list)) and len(returned) == 2):
                raise TypeError(
                    f"{self.who}(has_aux=True) needs {self.name} to return a (value, aux) pair, but it "
                    f"returned {jax.tree.structure(returned)}. Return `value, aux`, or drop has_aux=True."
                )
        carry = Carry([body], [body])
        carried, invariant = carry.read()
        values = carry.inputs_of(body)(carried, invariant)
        where = {id(s): k for k, s in enumerate(body.in_states)}
        grad_at = [where.get(id(s)) for s in self._unique]
        # A grad state the body never reads has a zero derivative: its value only stands in.
        grad_values = [values[k] if k is not None else s.value for k, s in zip(grad_at, self._unique, strict=True)]
        positions = self._arg_positions(len(args))
        evaluate = jaxpr_evaluator(body)
        has_aux = self.has_aux

        def fn(g_values: list[Any], d_args: tuple[Any, ...]) -> tuple[Any, tuple[Any, list[Any]]]:
            vals = list(values)
            for k, v in zip(grad_at, g_values, strict=True):
                if k is not None:
                    vals[k] = v
            full = list(args)
            for i, a in zip(positions, d_args, strict=True):
                full[i] = a
            out, written, _ = evaluate(vals, jax.tree.leaves((tuple(full), kwargs)))
            value, aux = out if has_aux else (out, None)
            return value, (aux, written)

        def finish(written: list[Any]) -> None:
            carry.write(carry.outputs(body, written, carried))

        return Objective(fn, grad_values, tuple(args[i] for i in positions), finish)

    # ------------------------------------------------------------------ the result
    def state_part(self, unique_grads: Sequence[Any]) -> Any:
        """The gradients of the distinct grad states, in the structure of ``grad_states``."""
        leaves = [unique_grads[self._slot[id(s)]] for s in self._states]
        return jax.tree.unflatten(self._state_treedef, leaves)

    def grads(self, unique_grads: Sequence[Any], arg_grads: Sequence[Any]) -> Any:
        """``grad``'s layout: the state part, the argument part, or ``(state part, argument part)``."""
        if self.argnums is None:
            return self.state_part(unique_grads)
        arg_part = arg_grads[0] if isinstance(self.argnums, int) else tuple(arg_grads)
        if self.grad_states is None:
            return arg_part
        return self.state_part(unique_grads), arg_part

    def layout(self, unique_grads: Sequence[Any], arg_grads: Sequence[Any], value: Any, aux: Any) -> Any:
        """``grads``, then ``value`` (``return_value``) and ``aux`` (``has_aux``), as ``grad`` returns them."""
        grads = self.grads(unique_grads, arg_grads)
        extra = ((value,) if self.return_value else ()) + ((aux,) if self.has_aux else ())
        return (grads, *extra) if extra else grads
