"""``checkpoint`` / ``remat``: rematerialisation for functions that read and write States."""

from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax

from state_core.engine import TracedCall, unflatten_states

from ._loop_program import LoopProgram, StatePlan, evaluator, run_program
from ._traced_body import TracedBody, signature_key

__all__ = ["checkpoint", "remat", "RematFunction"]


class RematFunction:
    """The callable ``checkpoint`` returns: ``fun`` traced once per signature, run under ``jax.checkpoint``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import RematFunction
        >>> calls = State(jnp.array(0), name='calls')
        >>> def layer(x):
        ...     calls.value = calls.value + 1
        ...     return jnp.sin(x) * 2
        >>> f = RematFunction(layer)
        >>> f(0.0), int(calls.value)
        (Array(0., dtype=float32, weak_type=True), 1)
    """

    __module__ = "state_transform"

    def __init__(
        self,
        fun: Callable[..., Any],
        *,
        prevent_cse: bool = True,
        policy: Callable[..., bool] | None = None,
        static_argnums: int | Iterable[int] = (),
    ) -> None:
        if not callable(fun):
            raise TypeError(f"checkpoint expects a callable, got {type(fun).__name__}.")
        self.fun = fun
        self.prevent_cse = prevent_cse
        self.policy = policy
        self.static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        name = getattr(fun, "__name__", None) or type(fun).__name__
        self._body = TracedBody(fun, name, self.static_argnums)
        self._bound: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        functools.update_wrapper(self, fun, updated=())

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """Used as a method decorator: one ``RematFunction`` of the bound method per instance."""
        if instance is None:
            return self
        if getattr(type(instance), "__hash__", None) is None or not hasattr(type(instance), "__weakref__"):
            return RematFunction(types.MethodType(self.fun, instance), **self._options())
        bound = self._bound.get(instance)
        if bound is None:
            bound = self._bound[instance] = RematFunction(types.MethodType(self.fun, instance), **self._options())
        return bound

    def _options(self) -> dict[Any, Any]:
        return dict(prevent_cse=self.prevent_cse, policy=self.policy, static_argnums=self.static_argnums)

    def _dynamic(self, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> list[Any]:
        n = len(args)
        static = {i + n if i < 0 else i for i in self.static_argnums}
        dyn = tuple(a for i, a in enumerate(args) if i not in static)
        return jax.tree.leaves((dyn, kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        body = self._body

        def trace() -> list[TracedCall]:
            return [body.sf.trace(*args, **kwargs)]

        leaves = self._dynamic(args, kwargs)
        # Static arguments select the trace too, so only calls without them use the signature key.
        key = None if self.static_argnums else signature_key("remat", (args, kwargs))
        return run_program([body], trace, ("remat",), self._build, (leaves,), "checkpoint", key)

    def _build(self, calls: Sequence[TracedCall]) -> LoopProgram:
        (call,) = calls
        plan = StatePlan([call], [call])
        run = evaluator(call)
        gather = plan.inputs_of(call)
        n_out = call.n_out_leaves
        out_defs = [jax.tree.structure(s._value) for s in call.out_states]

        def inner(carried: list[Any], invariant: list[Any], leaves: list[Any]) -> tuple[Any, list[Any]]:
            flat = run(*gather(carried, invariant), *leaves)
            out = jax.tree.unflatten(call.out_treedef, flat[:n_out])
            return out, unflatten_states(out_defs, flat[n_out:])

        rematted = jax.checkpoint(inner, prevent_cse=self.prevent_cse, policy=self.policy)

        def program(carried: list[Any], invariant: list[Any], leaves: list[Any]) -> tuple[Any, list[Any]]:
            plan.check_stale([call], carried, invariant)
            return rematted(carried, invariant, leaves)

        return LoopProgram(jax.jit(program), plan, [call])


def checkpoint(
    fun: Callable[..., Any] | None = None,
    *,
    prevent_cse: bool = True,
    policy: Callable[..., bool] | None = None,
    static_argnums: int | Iterable[int] = (),
) -> RematFunction | Callable[[Callable[..., Any]], RematFunction]:
    """``jax.checkpoint`` for a function that reads and writes States.

    Under differentiation (our ``grad``, or ``jax.grad`` of a function that calls
    it) the values computed inside ``fun`` are recomputed on the backward pass
    instead of stored, as ``policy`` allows. States that ``fun`` writes are
    updated as by a plain call. Usable as ``checkpoint(fn)`` or as a decorator.

    Args:
        fun: the function to rematerialise.
        prevent_cse: as in ``jax.checkpoint``.
        policy: a ``jax.checkpoint_policies`` policy (which intermediates may be saved).
        static_argnums: positional arguments that are compile-time constants.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import checkpoint, grad
        >>> w = ParamState(jnp.array(2.0), name='w')
        >>> @checkpoint
        ... def block(x):
        ...     return jnp.sin(x * w.value)
        >>> g = grad(lambda x: block(x) ** 2, grad_states=w)
        >>> float(g(1.0)) == float(2 * jnp.sin(2.0) * jnp.cos(2.0))
        True
    """
    if fun is None:

        def decorate(f: Callable[..., Any]) -> RematFunction:
            return RematFunction(f, prevent_cse=prevent_cse, policy=policy, static_argnums=static_argnums)

        return decorate
    return RematFunction(fun, prevent_cse=prevent_cse, policy=policy, static_argnums=static_argnums)


remat = checkpoint
