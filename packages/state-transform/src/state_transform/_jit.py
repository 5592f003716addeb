"""``jit``: a state-aware ``jax.jit``."""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable

import jax
from state_core import StatefulFunction, TracedCall

__all__ = ["jit", "JittedFunction"]


def _as_tuple(argnums: int | Iterable[int] | None) -> tuple[int, ...]:
    if argnums is None:
        return ()
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


class JittedFunction(StatefulFunction):
    """The callable ``jit`` returns: a ``StatefulFunction`` compiled with ``jax.jit``.

    ``donate_argnums`` donates those positional arguments' buffers; ``donate_states=True``
    also donates the buffers of the states the function writes (they are replaced
    by the new values anyway).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import JittedFunction
        >>> buf = State(jnp.zeros(3))
        >>> def fill(v):
        ...     buf.value = buf.value + v
        >>> f = JittedFunction(fill, donate_states=True)
        >>> f(1.0); f(2.0)
        >>> buf.value
        Array([3., 3., 3.], dtype=float32)
    """

    __module__ = "state_transform"

    def __init__(
        self,
        fun: Callable[..., Any],
        static_argnums: int | Iterable[int] = (),
        static_argnames: str | Iterable[str] = (),
        donate_argnums: int | Iterable[int] = (),
        donate_states: bool = False,
        **jit_kwargs: Any,
    ) -> None:
        super().__init__(fun, static_argnums, static_argnames)
        self.donate_argnums = _as_tuple(donate_argnums)
        self.donate_states = donate_states
        self.jit_kwargs = jit_kwargs
        functools.update_wrapper(self, fun, updated=())

    def _compile(self, entry: TracedCall) -> Callable[..., Any]:
        donate: list[int] = []
        if self.donate_states and entry.out_states:
            donate.append(0)
        if self.donate_argnums:
            dyn_args, _ = jax.tree.unflatten(entry.dyn_treedef, [0] * entry.dyn_treedef.num_leaves)
            wanted = {i if i >= 0 else i + entry.key[0] for i in self.donate_argnums}
            static = {i if i >= 0 else i + entry.key[0] for i in self.static_argnums}
            leaf = 1
            dyn_positions = [i for i in range(entry.key[0]) if i not in static]
            for position, arg in zip(dyn_positions, dyn_args):
                n = len(jax.tree.leaves(arg))
                if position in wanted:
                    donate.extend(range(leaf, leaf + n))
                leaf += n
        return jax.jit(self._pure_function(entry), donate_argnums=tuple(donate), **self.jit_kwargs)


def jit(
    fun: Callable[..., Any] | None = None,
    static_argnums: int | Iterable[int] = (),
    static_argnames: str | Iterable[str] = (),
    donate_argnums: int | Iterable[int] = (),
    donate_states: bool = False,
    **jit_kwargs: Any,
) -> JittedFunction | Callable[[Callable[..., Any]], JittedFunction]:
    """Compile ``fun`` with ``jax.jit``; the States it reads and writes are handled for you.

    The function runs once per new argument signature (to trace it); later calls
    run the compiled program and write the new state values back. Works as
    ``jit(fn)``, ``@jit`` or ``@jit(static_argnums=...)``, and composes with
    ``vmap2``, ``pmap2``, ``grad`` and itself. Extra keyword arguments go to
    ``jax.jit``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import jit
        >>> total = State(jnp.zeros(()))
        >>> @jit
        ... def add(x):
        ...     total.value = total.value + x
        ...     return total.value
        >>> add(2.0), add(3.0)
        (Array(2., dtype=float32), Array(5., dtype=float32))
    """
    if fun is None:
        return functools.partial(
            jit,
            static_argnums=static_argnums,
            static_argnames=static_argnames,
            donate_argnums=donate_argnums,
            donate_states=donate_states,
            **jit_kwargs,
        )
    return JittedFunction(fun, static_argnums, static_argnames, donate_argnums, donate_states, **jit_kwargs)
