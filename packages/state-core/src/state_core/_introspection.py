"""Inspecting what a ``StatefulFunction`` traced, under the names brainstate's tools use.

Everything here is built on the tracer's public surface (``trace``,
``get_arg_cache_key``, ``get_traced_call``, ``jaxpr_call``, ``clear_cache``), so
it keeps working whatever the call path does internally. ``StatefulFunction``
gets these methods by deriving from ``StatefulFunctionIntrospection``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

import jax

from ._state import State
from ._state_io import write_state_values
from ._trace import StateTraceStack

__all__ = ["StatefulFunctionIntrospection", "make_jaxpr"]


class StatefulFunctionIntrospection:
    """brainstate-compatible inspection methods of ``StatefulFunction``.

    The plain forms (``get_jaxpr(*args, **kwargs)``, ``get_out_treedef(...)``,
    ``get_state_trace(...)``) take the same arguments as a call and trace once if
    that signature is new (``compile_if_miss=False`` raises instead); the
    ``*_by_cache(key)`` forms take a key from ``get_arg_cache_key(*args, **kwargs)``.
    Inspection never reads or writes a state's value.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction
        >>> s = State(jnp.zeros(2), name='s')
        >>> def step(x):
        ...     s.value = s.value + x
        ...     return s.value.sum()
        >>> f = StatefulFunction(step)
        >>> x = jnp.ones(2)
        >>> print(f.get_jaxpr(x))
        { lambda ; a:f32[2] b:f32[2]. let
            c:f32[2] = add a b
            d:f32[] = reduce_sum[axes=(0,) out_sharding=None] c
          in (d, c) }
        >>> key = f.get_arg_cache_key(x)
        >>> [st.name for st in f.get_write_states_by_cache(key)], f.get_out_shapes_by_cache(key)
        (['s'], ShapeDtypeStruct(shape=(), dtype=float32))
        >>> s.value  # inspection did not run the function
        Array([0., 0.], dtype=float32)
    """

    # Provided by StatefulFunction.
    fun: Callable[..., Any]
    name: str
    trace: Callable[..., Any]
    get_arg_cache_key: Callable[..., Hashable]
    get_traced_call: Callable[..., Any]
    jaxpr_call: Callable[..., Any]

    # ------------------------------------------------------------------ lookups
    def _traced_for(self, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        """The ``Trace`` of a call with these arguments.

        ``compile_if_miss=False`` (a keyword) raises ``ValueError`` instead of tracing
        a new signature; without arguments, the latest trace is returned.
        """
        compile_if_miss = kwargs.pop("compile_if_miss", True)
        if not args and not kwargs:
            return self.get_traced_call()
        if compile_if_miss:
            return self.trace(*args, **kwargs)
        return self.get_traced_call(self.get_arg_cache_key(*args, **kwargs))

    def _cached_calls(self) -> list[tuple[Hashable, Any]]:
        # The cache is the one piece of StatefulFunction state these stats need.
        cache = getattr(self, "_cache", None) or {}
        return list(cache.items())

    # ------------------------------------------------------------------ by arguments
    def get_states(self, *args: Any, **kwargs: Any) -> list[State[Any]]:
        """Every state the function accessed for a call with these arguments, in first-access order.

        ``get_states_by_cache(key)`` takes a key from ``get_arg_cache_key`` instead.

        Args:
            *args: the positional arguments of a call (static ones included).
            **kwargs: the keyword arguments of a call; ``compile_if_miss=False``
                among them raises ``ValueError`` for a signature not traced yet
                instead of tracing it. Without any argument the latest trace is
                described.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State, StatefulFunction
            >>> a, b = State(jnp.zeros(2), name='a'), State(jnp.ones(2), name='b')
            >>> def step(x):
            ...     b.value = a.value + x
            >>> f = StatefulFunction(step)
            >>> [s.name for s in f.get_states(jnp.ones(2))]
            ['a', 'b']
            >>> [s.name for s in f.get_read_states(jnp.ones(2))], [s.name for s in f.get_write_states()]
            (['a'], ['b'])
        """
        return list(self._traced_for(args, kwargs).states)

    def get_read_states(self, *args: Any, **kwargs: Any) -> list[State[Any]]:
        """States the function read but never wrote, in first-access order.

        Args:
            *args: the positional arguments of a call (static ones included).
            **kwargs: the keyword arguments of a call; ``compile_if_miss=False``
                among them raises ``ValueError`` for a signature not traced yet
                instead of tracing it. Without any argument the latest trace is
                described.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> rate, total = State(0.5, name='rate'), State(0.0, name='total')
            >>> def add(x):
            ...     total.value = total.value + rate.value * x
            >>> [s.name for s in StatefulFunction(add).get_read_states(2.0)]
            ['rate']
        """
        return list(self._traced_for(args, kwargs).read_only_states)

    def get_write_states(self, *args: Any, **kwargs: Any) -> list[State[Any]]:
        """States the function wrote, in first-access order.

        Args:
            *args: the positional arguments of a call (static ones included).
            **kwargs: the keyword arguments of a call; ``compile_if_miss=False``
                among them raises ``ValueError`` for a signature not traced yet
                instead of tracing it. Without any argument the latest trace is
                described.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> rate, total = State(0.5, name='rate'), State(0.0, name='total')
            >>> def add(x):
            ...     total.value = total.value + rate.value * x
            >>> [s.name for s in StatefulFunction(add).get_write_states(2.0)]
            ['total']
        """
        return list(self._traced_for(args, kwargs).out_states)

    def get_out_shapes(self, *args: Any, **kwargs: Any) -> Any:
        """``jax.ShapeDtypeStruct`` tree of the function's output; runs nothing.

        Args:
            *args: the positional arguments of a call (static ones included).
            **kwargs: the keyword arguments of a call; ``compile_if_miss=False``
                among them raises ``ValueError`` for a signature not traced yet
                instead of tracing it. Without any argument the latest trace is
                described.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import StatefulFunction
            >>> f = StatefulFunction(lambda x: (x.sum(), x * 2))
            >>> f.get_out_shapes(jnp.ones((3, 2)))
            (ShapeDtypeStruct(shape=(), dtype=float32), ShapeDtypeStruct(shape=(3, 2), dtype=float32))
        """
        return self._traced_for(args, kwargs).out_shapes

    def get_jaxpr(self, *args: Any, **kwargs: Any) -> Any:
        """The closed jaxpr ``(input state leaves..., arg leaves...) -> (outputs..., written state leaves...)``.

        Args:
            *args: the positional arguments of a call.
            **kwargs: the keyword arguments of a call; ``compile_if_miss=False`` among them raises ``ValueError`` for a
                signature not traced yet instead of tracing it.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State, StatefulFunction
            >>> s = State(jnp.ones(2))
            >>> print(StatefulFunction(lambda x: s.value * x).get_jaxpr(jnp.ones(2)))
            { lambda ; a:f32[2] b:f32[2]. let c:f32[2] = mul a b in (c,) }
        """
        return self._traced_for(args, kwargs).closed_jaxpr

    def get_out_treedef(self, *args: Any, **kwargs: Any) -> Any:
        """The pytree structure of the function's return value for these arguments.

        Args:
            *args: the positional arguments of a call.
            **kwargs: the keyword arguments of a call; ``compile_if_miss=False`` among them raises ``ValueError`` for a
                signature not traced yet instead of tracing it.

        Example:
            >>> from state_core import StatefulFunction
            >>> StatefulFunction(lambda x: (x, {'y': x})).get_out_treedef(1.0)
            PyTreeDef((*, {'y': *}))
        """
        return self._traced_for(args, kwargs).out_treedef

    def get_state_trace(self, *args: Any, **kwargs: Any) -> StateTraceStack:
        """A ``StateTraceStack`` of the states the call accesses, with read/write flags.

        Its original values are the states' current values, so
        ``recovery_original_values()`` puts back what they hold now.

        Args:
            *args: the positional arguments of a call.
            **kwargs: the keyword arguments of a call; ``compile_if_miss=False`` among them raises ``ValueError`` for a
                signature not traced yet instead of tracing it.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> a, b = State(1.0, name='a'), State(0.0, name='b')
            >>> def f(x):
            ...     b.value = a.value * x
            >>> trace = StatefulFunction(f).get_state_trace(2.0)
            >>> [s.name for s in trace.states], trace.been_writen
            (['a', 'b'], [False, True])
        """
        return _recorded_trace(self._traced_for(args, kwargs), self.name)

    # ------------------------------------------------------------------ by cache key
    def get_out_shapes_by_cache(self, key: Hashable) -> Any:
        """``jax.ShapeDtypeStruct`` tree of the output traced for ``key``.

        Args:
            key: a cache key from ``get_arg_cache_key(*args, **kwargs)``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import StatefulFunction
            >>> f = StatefulFunction(lambda x: x.sum())
            >>> f(jnp.ones(3))
            Array(3., dtype=float32)
            >>> f.get_out_shapes_by_cache(f.get_arg_cache_key(jnp.ones(3)))
            ShapeDtypeStruct(shape=(), dtype=float32)
        """
        return self.get_traced_call(key).out_shapes

    def get_out_treedef_by_cache(self, key: Hashable) -> Any:
        """The output pytree structure traced for ``key``.

        Args:
            key: a cache key from ``get_arg_cache_key(*args, **kwargs)``.

        Example:
            >>> from state_core import StatefulFunction
            >>> f = StatefulFunction(lambda x: [x, x])
            >>> _ = f(1.0)
            >>> f.get_out_treedef_by_cache(f.get_arg_cache_key(1.0))
            PyTreeDef([*, *])
        """
        return self.get_traced_call(key).out_treedef

    def get_states_by_cache(self, key: Hashable) -> tuple[State[Any], ...]:
        """Every state accessed for ``key``, in first-access order.

        Args:
            key: a cache key from ``get_arg_cache_key(*args, **kwargs)``.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> a, b = State(1.0, name='a'), State(0.0, name='b')
            >>> def f(x):
            ...     b.value = a.value * x
            >>> sf = StatefulFunction(f)
            >>> key = sf.get_arg_cache_key(2.0)
            >>> sf(2.0)
            >>> [s.name for s in sf.get_states_by_cache(key)], [s.name for s in sf.get_read_states_by_cache(key)]
            (['a', 'b'], ['a'])
            >>> [s.name for s in sf.get_write_states_by_cache(key)]
            ['b']
        """
        return tuple(self.get_traced_call(key).states)

    def get_read_states_by_cache(self, key: Hashable) -> tuple[State[Any], ...]:
        """The states read but never written for ``key`` (example: ``get_states_by_cache``).

        Args:
            key: a cache key from ``get_arg_cache_key(*args, **kwargs)``.
        """
        return tuple(self.get_traced_call(key).read_only_states)

    def get_write_states_by_cache(self, key: Hashable) -> tuple[State[Any], ...]:
        """The states written for ``key`` (example: ``get_states_by_cache``).

        Args:
            key: a cache key from ``get_arg_cache_key(*args, **kwargs)``.
        """
        return tuple(self.get_traced_call(key).out_states)

    def get_state_trace_by_cache(self, key: Hashable) -> StateTraceStack:
        """``get_state_trace`` for a cache key.

        Args:
            key: a cache key from ``get_arg_cache_key(*args, **kwargs)``.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> s = State(0.0, name='s')
            >>> def f(x):
            ...     s.value = s.value + x
            >>> sf = StatefulFunction(f)
            >>> sf(1.0)
            >>> sf.get_state_trace_by_cache(sf.get_arg_cache_key(1.0)).been_writen
            [True]
        """
        return _recorded_trace(self.get_traced_call(key), self.name)

    # ------------------------------------------------------------------ cache health
    def get_cache_stats(self) -> dict[str, Any]:
        """How many call signatures are cached, and how many states they touch.

        Returns:
            ``{'size': number of cached signatures, 'maxsize': the cache bound or
            None, 'states': number of distinct states over all cached traces}``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State, StatefulFunction
            >>> s = State(jnp.zeros(2))
            >>> f = StatefulFunction(lambda x: s.value + x)
            >>> _ = f(1.0), f(jnp.ones(2))
            >>> f.get_cache_stats()['size'], f.get_cache_stats()['states']
            (2, 1)
        """
        calls = self._cached_calls()
        distinct = {id(s) for _, call in calls for s in call.states}
        cache = getattr(self, "_cache", None)
        return {"size": len(calls), "maxsize": getattr(cache, "maxsize", None), "states": len(distinct)}

    def validate_states(self, key: Hashable) -> bool:
        """Check that the states read for ``key`` still have the traced shapes and dtypes.

        Returns ``True``; raises ``ValueError`` naming each state that changed (the
        next call with that signature traces again).

        Args:
            key: a cache key from ``get_arg_cache_key(*args, **kwargs)``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State, StatefulFunction
            >>> s = State(jnp.zeros(2), name='s')
            >>> f = StatefulFunction(lambda x: s.value + x)
            >>> key = f.get_arg_cache_key(1.0)
            >>> _ = f(1.0)
            >>> f.validate_states(key)
            True
            >>> s.value = jnp.zeros(3)
            >>> f.validate_all_states() == {key: False}
            True
        """
        problems = _changed_states(self.get_traced_call(key))
        if problems:
            raise ValueError(
                f"{self.name}: the states read by this traced signature changed since it was "
                "traced: " + "; ".join(problems) + ". The next call traces again."
            )
        return True

    def validate_all_states(self) -> dict[Hashable, bool]:
        """``{cache key: True if every state read for it keeps its traced shapes/dtypes}``.

        (Example: ``validate_states``.)
        """
        return {key: not _changed_states(call) for key, call in self._cached_calls()}

    # ------------------------------------------------------------------ running
    def jaxpr_call_auto(self, *args: Any, **kwargs: Any) -> Any:
        """Evaluate the traced jaxpr (uncompiled) with the states' current values, write back.

        Like a call, but primitive by primitive instead of through ``jax.jit``: useful
        to compare against the compiled program. The new values are written back as a
        call writes them (``write_state_values``: all or none, recorded on the trace
        stacks, tracers of a plain ``jax.jit`` refused). If evaluation fails, no state
        changes.

        Args:
            *args: the positional arguments of the call.
            **kwargs: its keyword arguments.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> s = State(1.0)
            >>> def f(x):
            ...     s.value = s.value * x
            ...     return s.value
            >>> StatefulFunction(f).jaxpr_call_auto(3.0), s.value
            (Array(3., dtype=float32, weak_type=True), Array(3., dtype=float32, weak_type=True))
        """
        call = self.trace(*args, **kwargs)
        values = [s.value for s in call.in_states]
        new_values, out = self.jaxpr_call(values, *args, **kwargs)
        write_state_values(call.out_states, new_values, self.name, every_value=True)
        return out

    def debug_call(self, *args: Any, **kwargs: Any) -> Any:
        """Run the Python function eagerly, untraced, so ``print`` and debuggers see values.

        States are read and written directly; if the function raises, every state it
        touched gets back the value it had before the call.

        Args:
            *args: the positional arguments of the call.
            **kwargs: its keyword arguments.

        Example:
            >>> from state_core import State, StatefulFunction
            >>> s = State(1.0)
            >>> def f(x):
            ...     print(type(s.value).__name__)  # a concrete value, not a tracer
            ...     s.value = s.value + x
            >>> StatefulFunction(f).debug_call(2.0)
            float
            >>> s.value
            3.0
        """
        stack = StateTraceStack(f"debug_call {self.name}")
        finished = False
        try:
            with stack:
                out = self.fun(*args, **kwargs)
            finished = True
        finally:
            if not finished:
                stack.restore_original_values()
        return out


def _recorded_trace(call: Any, name: str) -> StateTraceStack:
    stack = StateTraceStack(name)
    written = {id(s) for s in call.out_states}
    for state in call.states:
        stack._first_access(state)
        (stack._written if id(state) in written else stack._read).add(id(state))
    return stack


def _changed_states(call: Any) -> list[str]:
    problems = []
    for state, expected in zip(call.in_states, call.in_state_avals, strict=True):
        now = tuple(_shape_dtype(x) for x in jax.tree.leaves(state._value))
        then = tuple((sig[0], sig[1]) for sig in expected)
        if now != then:
            problems.append(f"{state.describe()} was traced as {list(then)} and now holds {list(now)}")
    return problems


def _shape_dtype(x: Any) -> tuple[Any, ...]:
    aval = jax.typeof(x)
    return (aval.shape, aval.dtype)


def make_jaxpr(
    fun: Callable[..., Any],
    static_argnums: int | Iterable[int] = (),
    static_argnames: str | Iterable[str] = (),
    return_shape: bool = False,
) -> Callable[..., tuple[Any, ...]]:
    """Like ``jax.make_jaxpr``, for functions that read and write States.

    Returns a function that, given example arguments, traces ``fun`` afresh (so a
    state whose shape changed is seen as it is now) and returns ``(jaxpr, states)``
    or, with ``return_shape=True``, ``(jaxpr, states, out_shapes)`` (brainstate's
    order: the shapes come last, as in ``jax.make_jaxpr``). The jaxpr takes
    ``(values of the states read before any write..., argument leaves...)`` and
    returns ``(output leaves..., new values of the written states...)``; ``states``
    lists every state accessed, in first-access order. No state changes.

    Args:
        fun: the function to trace; it may read and write States.
        static_argnums: positions of arguments that are compile-time constants (as in ``jax.jit``).
        static_argnames: names of keyword arguments that are compile-time constants.
        return_shape: also return the ``jax.ShapeDtypeStruct`` tree of the output.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, make_jaxpr
        >>> s = State(jnp.zeros(3), name='s')
        >>> def f(x):
        ...     s.value = s.value * x
        ...     return x.sum()
        >>> jaxpr, states = make_jaxpr(f)(jnp.ones(3))
        >>> print(jaxpr)
        { lambda ; a:f32[3] b:f32[3]. let
            c:f32[3] = mul a b
            d:f32[] = reduce_sum[axes=(0,) out_sharding=None] b
          in (d, c) }
        >>> [st.name for st in states]
        ['s']
    """
    # Imported here: StatefulFunction derives from the mixin defined in this module.
    from ._stateful_function import StatefulFunction

    stateful: StatefulFunction = StatefulFunction(fun, static_argnums, static_argnames)

    def make(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        stateful.clear_cache()
        call = stateful.trace(*args, **kwargs)
        states = tuple(call.states)
        if return_shape:
            return call.closed_jaxpr, states, call.out_shapes
        return call.closed_jaxpr, states

    label = getattr(fun, "__name__", type(fun).__name__)
    make.__name__ = f"make_jaxpr({label})"
    make.__qualname__ = f"make_jaxpr({getattr(fun, '__qualname__', label)})"
    return make
