"""``vjp`` and ``jvp`` for functions that read and write States."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

from state_core.engine import jaxpr_evaluator

from ._control_flow import Carry, ControlFlow
from ._diff_base import StateDerivative, plain_state_dicts

__all__ = ["vjp", "jvp"]


class _VJP(StateDerivative):
    """``vjp``'s program: the primal output, ``jax.vjp``'s pullback (a pytree) and the aux."""

    def __init__(
        self, fun: Callable[..., Any], grad_states: Any, argnums: int | Sequence[int] | None, has_aux: bool
    ) -> None:
        super().__init__(fun, grad_states, argnums, has_aux, False, "vjp", default_argnums=None)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        problem = self.objective(args, kwargs)
        value, pull, (aux, written) = jax.vjp(problem.fn, problem.grad_values, problem.diff_args, has_aux=True)
        problem.write(written)
        return value, pull, aux

    def pullback(self, pull: Callable[[Any], tuple[Any, Any]], cotangent: Any) -> Any:
        """The cotangents of the grad states and/or the arguments for the output cotangent ``cotangent``."""
        g_states, g_args = pull(cotangent)
        return plain_state_dicts(self.grads(g_states, g_args))


def vjp(
    fun: Callable[..., Any],
    *primals: Any,
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = 0,
    has_aux: bool = False,
) -> tuple[Any, ...]:
    """``jax.vjp`` for a function that reads and writes States: the output and its pullback.

    ``fun(*primals)`` runs once (traced once per signature and compiled); states it
    writes are updated. The returned ``vjp_fn(v)`` maps a cotangent ``v`` of the
    output (same structure, shapes and dtypes) to ``v @ J``, for the states in
    ``grad_states`` (at the values they held before the call) and the positional
    arguments in ``argnums``:

    * ``grad_states`` None: the argument cotangents (unwrapped for an int ``argnums``,
      a tuple for a sequence);
    * ``grad_states`` given and ``argnums`` None (or no ``primals``): the state
      cotangents, in the structure of ``grad_states``;
    * both: ``(state cotangents, argument cotangents)``.

    ``vjp_fn`` is a ``jax.tree_util.Partial``: it may be called many times (for a
    Jacobian: ``jax.vmap(vjp_fn)(jnp.eye(n))``), and passed through ``jax.jit``.

    Args:
        fun: the function; returns ``(output, aux)`` with ``has_aux=True``.
        *primals: the positional arguments at which ``fun`` is evaluated.
        grad_states: a State or a list/tuple/dict of States to differentiate with respect to.
        argnums: positional argument(s) to differentiate with respect to; None for none.
        has_aux: ``fun`` returns ``(output, aux)``; ``aux`` is returned, not differentiated.

    Returns:
        ``(output, vjp_fn)``, or ``(output, vjp_fn, aux)`` with ``has_aux=True``.

    Raises:
        ValueError: nothing to differentiate (no ``primals`` or ``argnums=None``, and no
            ``grad_states``), or ``argnums`` names a missing or repeated argument.
        TypeError: ``grad_states`` holds something that is not a State.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import vjp
        >>> w = ParamState(jnp.array([2., 3.]))
        >>> out, vjp_fn = vjp(lambda x: jnp.sum(w.value * x), jnp.array([5., 7.]), grad_states=w)
        >>> out
        Array(31., dtype=float32)
        >>> vjp_fn(1.0)
        (Array([5., 7.], dtype=float32), Array([2., 3.], dtype=float32))
    """
    if argnums is not None and not primals:
        argnums = None
    if argnums is None and grad_states is None:
        raise ValueError(
            "vjp: nothing to differentiate: pass positional primals (selected by argnums) and/or grad_states."
        )
    transform = _VJP(fun, grad_states, argnums, has_aux)
    value, pull, aux = transform(*primals)
    vjp_fn = jax.tree_util.Partial(transform.pullback, pull)
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


class _JVP(ControlFlow):
    """``jvp``'s program: ``jax.jvp`` of the traced function; the states are constants."""

    def __init__(self, fun: Callable[..., Any], has_aux: bool) -> None:
        super().__init__([fun], ["fun"], "jvp", (has_aux,))
        self.has_aux = has_aux
        self.name = getattr(fun, "__name__", None) or type(fun).__name__

    def _run(self, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
        body = self.trace_body(0, primals)
        has_aux = self.has_aux
        if has_aux and not (isinstance(body.out_shapes, (tuple, list)) and len(body.out_shapes) == 2):
            raise TypeError(
                f"jvp(has_aux=True) needs {self.name} to return a (value, aux) pair, but it returned "
                f"{jax.tree.structure(body.out_shapes)}. Return `value, aux`, or drop has_aux=True."
            )
        carry = Carry([body], [body])
        carried, invariant = carry.read()
        values = carry.inputs_of(body)(carried, invariant)
        evaluate = jaxpr_evaluator(body)

        def fn(*args: Any) -> tuple[Any, tuple[Any, list[Any]]]:
            out, written, _ = evaluate(values, jax.tree.leaves((args, {})))
            value, aux = out if has_aux else (out, None)
            return value, (aux, written)

        value, tangent, (aux, written) = jax.jvp(fn, primals, tangents, has_aux=True)
        carry.write(carry.outputs(body, written, carried))
        return (value, tangent, aux) if has_aux else (value, tangent)


def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], *, has_aux: bool = False) -> Any:
    """``jax.jvp`` for a function that reads and writes States: the output and ``J @ tangents``.

    The states ``fun`` reads are constants of the forward pass (zero tangent);
    states it writes are updated. The function is traced once per signature and
    compiled.

    Args:
        fun: the function; returns ``(output, aux)`` with ``has_aux=True``.
        primals: a tuple or list of the positional arguments.
        tangents: a tuple or list of tangents, one per primal, of the same structure.
        has_aux: ``fun`` returns ``(output, aux)``; ``aux`` is returned, not differentiated.

    Returns:
        ``(output, tangent_out)``, or ``(output, tangent_out, aux)`` with ``has_aux=True``.

    Raises:
        TypeError: ``primals`` or ``tangents`` is not a tuple or list.
        ValueError: ``tangents`` does not have one entry per primal.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import jvp
        >>> gain = State(jnp.array(4.0))
        >>> jvp(lambda x: gain.value * x ** 2, (jnp.array([1., 2.]),), (jnp.array([1., 1.]),))
        (Array([ 4., 16.], dtype=float32), Array([ 8., 16.], dtype=float32))
    """
    if not isinstance(primals, (tuple, list)):
        raise TypeError(f"jvp: primals must be a tuple or list of positional arguments, got {type(primals).__name__}.")
    if not isinstance(tangents, (tuple, list)):
        raise TypeError(f"jvp: tangents must be a tuple or list matching primals, got {type(tangents).__name__}.")
    if len(primals) != len(tangents):
        raise ValueError(
            f"jvp: got {len(primals)} primal(s) but {len(tangents)} tangent(s); give one tangent per primal."
        )
    return _JVP(fun, has_aux)(tuple(primals), tuple(tangents))
