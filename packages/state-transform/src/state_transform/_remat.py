"""``remat`` (also named ``checkpoint``): rematerialisation for functions that read and write States.

``checkpoint`` is the same function under JAX's and brainstate's name. It has
nothing to do with saving to disk: that is ``state_nn.checkpoint`` (save /
restore).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable
from typing import Any, Concatenate, Generic, Self, overload

import jax

from state_core.engine import jaxpr_evaluator

from ._control_flow import Carry, ControlFlow, jit_disabled, trace_body
from ._typing import P, Q, R, S, T

__all__ = ["checkpoint", "remat", "RematFunction"]


class RematFunction(ControlFlow, Generic[P, R]):
    """The callable ``remat`` (``checkpoint``) returns: ``fun`` traced once per signature, run under ``jax.checkpoint``.

    Used as a method decorator it binds to the instance, so ``@remat`` works on
    a ``Module``'s ``update``.

    Args:
        fun: the function to rematerialise; it may read and write States.
        prevent_cse: keep XLA from merging the recomputation with the forward
            computation (common-subexpression elimination), which would undo
            the memory saving; as in ``jax.checkpoint``. ``False`` can be
            faster and is safe inside ``scan`` / ``for_loop`` bodies.
        policy: which intermediates may be saved instead of recomputed, one
            of ``jax.checkpoint_policies`` (for example
            ``dots_with_no_batch_dims_saveable``); ``None`` (the default)
            recomputes all of them.
        static_argnums: positions of arguments that are compile-time
            constants (hashable Python values, not traced); each new value
            traces ``fun`` again.

    Raises:
        TypeError: ``fun`` is not callable.

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
        fun: Callable[P, R],
        *,
        prevent_cse: bool = True,
        policy: Callable[..., bool] | None = None,
        static_argnums: int | Iterable[int] = (),
    ) -> None:
        if not callable(fun):
            raise TypeError(f"checkpoint: fun must be a callable, got {type(fun).__name__}.")
        statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        super().__init__([fun], ["fun"], "checkpoint", (prevent_cse, policy, statics), static_argnums=statics)
        self.prevent_cse = prevent_cse
        self.policy = policy
        self.name = getattr(fun, "__name__", None) or type(fun).__name__
        functools.update_wrapper(self, fun, updated=())

    # On the class: this object; on an instance: the method bound to it, without `self`.
    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(
        self: RematFunction[Concatenate[T, Q], S], instance: T, owner: type | None = None
    ) -> RematFunction[Q, S]: ...
    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """Used as a method decorator: the ``RematFunction`` of the method bound to ``instance``."""
        if instance is None:
            return self
        return RematFunction(
            types.MethodType(self.bodies[0], instance),
            prevent_cse=self.prevent_cse,
            policy=self.policy,
            static_argnums=self.static_argnums,
        )

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if jit_disabled():  # plain Python, as jax.checkpoint under disable_jit
            return self.bodies[0](*args, **kwargs)
        return super().__call__(*args, **kwargs)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        n = len(args)
        static = {i + n if i < 0 else i for i in self.static_argnums}
        fun = self.bodies[0]

        def with_statics(*dynamic: Any, **kw: Any) -> Any:
            it = iter(dynamic)
            return fun(*[args[i] if i in static else next(it) for i in range(n)], **kw)

        dynamic = tuple(a for i, a in enumerate(args) if i not in static)
        body = trace_body(with_statics, "checkpoint: fun", dynamic, kwargs, "checkpoint")
        carry = Carry([body], [body])
        carried, invariant = carry.read()
        evaluate, gather = jaxpr_evaluator(body), carry.inputs_of(body)

        def inner(carried: list[Any], invariant: list[Any], leaves: list[Any]) -> tuple[Any, list[Any]]:
            out, written, _ = evaluate(gather(carried, invariant), leaves)
            return out, carry.outputs(body, written, carried)

        rematted = jax.checkpoint(inner, prevent_cse=self.prevent_cse, policy=self.policy)
        out, states = rematted(carried, invariant, jax.tree.leaves((dynamic, kwargs)))
        carry.write(states)
        return out


# `remat(f, ...)` is the rematerialised function; `remat(...)` without `f` is a decorator.
@overload
def checkpoint(
    fun: Callable[P, R],
    *,
    prevent_cse: bool = True,
    policy: Callable[..., bool] | None = None,
    static_argnums: int | Iterable[int] = (),
) -> RematFunction[P, R]: ...
@overload
def checkpoint(
    fun: None = None,
    *,
    prevent_cse: bool = True,
    policy: Callable[..., bool] | None = None,
    static_argnums: int | Iterable[int] = (),
) -> Callable[[Callable[Q, S]], RematFunction[Q, S]]: ...


def checkpoint(
    fun: Callable[..., Any] | None = None,
    *,
    prevent_cse: bool = True,
    policy: Callable[..., bool] | None = None,
    static_argnums: int | Iterable[int] = (),
) -> RematFunction | Callable[[Callable[..., Any]], RematFunction]:
    """Rematerialisation (``remat``): ``jax.checkpoint`` for a function that reads and writes States.

    ``remat`` and ``checkpoint`` are the same function; ``checkpoint`` is the
    name JAX (``jax.checkpoint``) and brainstate use. It is unrelated to saving
    a model to disk, which is ``state_nn.checkpoint`` (save / restore).

    Under differentiation (our ``grad``, or ``jax.grad`` of a function that calls
    it) the values computed inside ``fun`` are recomputed on the backward pass
    instead of stored, as ``policy`` allows: less memory for a second forward
    computation. States that ``fun`` writes are updated as by a plain call.
    Usable as ``remat(fn)`` or as a decorator (``@remat`` or
    ``@remat(policy=...)``). Under ``jax.disable_jit()`` it calls ``fun``
    directly.

    Args:
        fun: the function to rematerialise; it may read and write States.
            Leave it out to get a decorator with the options below.
        prevent_cse: keep XLA from merging the recomputation with the forward
            computation (common-subexpression elimination), which would undo
            the memory saving; as in ``jax.checkpoint``. ``False`` can be
            faster and is safe inside ``scan`` / ``for_loop`` bodies.
        policy: which intermediates may be saved instead of recomputed, one
            of ``jax.checkpoint_policies`` (for example
            ``dots_with_no_batch_dims_saveable``); ``None`` (the default)
            recomputes all of them.
        static_argnums: positions of arguments that are compile-time
            constants (hashable Python values, not traced); each new value
            traces ``fun`` again.

    Returns:
        A ``RematFunction`` (or, without ``fun``, a decorator that makes one).

    Raises:
        TypeError: ``fun`` is not callable.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import checkpoint, grad, remat
        >>> w = ParamState(jnp.array(2.0), name='w')
        >>> @remat
        ... def block(x):
        ...     return jnp.sin(x * w.value)
        >>> g = grad(lambda x: block(x) ** 2, grad_states=w)
        >>> float(g(1.0)) == float(2 * jnp.sin(2.0) * jnp.cos(2.0))
        True
        >>> remat is checkpoint
        True
    """
    if fun is None:

        def decorate(f: Callable[..., Any]) -> RematFunction:
            return RematFunction(f, prevent_cse=prevent_cse, policy=policy, static_argnums=static_argnums)

        return decorate
    return RematFunction(fun, prevent_cse=prevent_cse, policy=policy, static_argnums=static_argnums)


# The primary name in the docs (it says what the function does); ``checkpoint``
# stays for JAX and brainstate users.
remat = checkpoint
