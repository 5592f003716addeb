"""``Strategy``: how the pipeline traces, analyses and compiles one kind of transformation.

A strategy is a frozen value. The pipeline (``StatefulFunction``) owns the cache,
the trace lock, the state reads and the write-back; it hands the strategy a fresh
``TraceContext`` for each new signature and asks it, in order: how to trace
(``trace``, ``abstract_inputs``, ``state_input_avals``, ``axis_env``), what it
decides about the ``Trace`` (``analyze``, a frozen record of its own type) and
which ``Program`` to build (``compile``). Two transformations with equal
strategies over the same function compute the same thing and share their programs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import Any, ClassVar, Generic, TypeVar, cast

import jax

from ._call_signature import normalize_argnames, normalize_argnums
from ._context import CTX
from ._donation import donation_min_bytes
from ._first_calls import eager_first_calls_enabled
from ._identity import _VALUE_TYPES, callable_identity, frozen
from ._program import Program, Trace
from ._pure_program import _new_values_first, _written_nbytes, named, pure_program
from ._rules import StateRules
from ._state import State
from ._tracing import abstract_value

__all__ = ["Strategy", "TraceContext"]


@dataclasses.dataclass(eq=False)
class TraceContext:
    """What one trace of a function learns; made fresh per trace, never shared between threads.

    Args:
        fun: the user function being traced (for paths of the States it reaches).
        name: how messages name it.
        learned: what earlier traces of this function (by any equal transformation)
            decided and kept; read it with ``recall``.
        learn: decisions of this trace to keep for later ones, added to ``learned``
            by the pipeline once the trace and its analysis succeed.

    Example:
        >>> from state_core.engine import TraceContext
        >>> ctx = TraceContext(fun=abs, name='abs', learned={'seen': 1})
        >>> ctx.learn['size'] = 3            # kept if this trace succeeds
        >>> ctx.recall('size'), ctx.recall('seen'), ctx.recall('other')
        (3, 1, None)
    """

    fun: Callable[..., Any]
    name: str
    learned: Mapping[Any, Any] = dataclasses.field(default_factory=dict)
    learn: dict[Any, Any] = dataclasses.field(default_factory=dict)

    def recall(self, key: Hashable) -> Any:
        """What this trace, or an earlier one, decided for ``key`` (None if nothing).

        Args:
            key: a hashable key the strategy chose (e.g. ``("stacked", id(state))``).
        """
        found = self.learn.get(key)
        return self.learned.get(key) if found is None else found


_PLAIN = frozenset(_VALUE_TYPES)  # (the types ``frozen`` keys by value)


def _field_key(value: Any) -> Hashable:
    """``frozen(value)``, with the values most options hold (numbers, strings, tuples of them,
    state rules, empty dicts) keyed as they are: a transformation built inline keys its
    strategy at every step, and these checks cost a fraction of ``frozen``'s."""
    kind = type(value)
    if kind in _PLAIN or kind is StateRules:
        return value
    if kind is tuple:
        for item in value:
            if type(item) not in _PLAIN:
                return frozen(value)
        return value
    if kind is dict and not value:
        return _EMPTY_DICT
    return frozen(value)


_EMPTY_DICT = (dict, ())  # (what ``frozen({})`` gives)


#: The ``TraceContext`` type a strategy's hooks share (a subclass adds what its traces learn).
CtxT = TypeVar("CtxT", bound=TraceContext)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Strategy(Generic[CtxT]):
    """The default strategy: trace at the arguments' own shapes, compile with ``jax.jit``.

    Subclasses add the options their programs depend on as fields and override the
    hooks below (``Strategy[MyContext]`` when their traces share a ``TraceContext``
    subclass); every hook takes what it needs as arguments, so one strategy
    value serves any number of functions and threads. ``state_core.engine``'s
    guide builds one end to end.

    Args:
        static_argnums: positional arguments treated as compile-time constants.
        static_argnames: keyword arguments treated as compile-time constants.
        donate_states: update written States in place when nothing else holds
            their old values (see ``StatefulFunction``).
        transform: how messages name the transformation: a call of ``f`` is
            ``"{transform}(f)"`` (``"jit(f)"``), or ``"f"`` when empty. It only
            names things, so programs are shared whatever it says.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction
        >>> from state_core.engine import Strategy
        >>> s = State(jnp.zeros(2))
        >>> def add(x, n):
        ...     s.value = s.value + x * n
        >>> f = StatefulFunction(add, strategy=Strategy(static_argnums=1))
        >>> f(jnp.ones(2), 3); s.value
        Array([3., 3.], dtype=float32)
        >>> f.strategy == Strategy(static_argnums=(1,))
        True
    """

    static_argnums: tuple[int, ...] = ()
    static_argnames: tuple[str, ...] = ()
    donate_states: bool = True
    transform: str = dataclasses.field(default="", compare=False)
    # ``identity()``, once computed: the fields never change.
    _identity: Hashable = dataclasses.field(default=None, init=False, repr=False, compare=False)

    #: Whether a new program may run op by op (no XLA compile) when it is the first
    #: call of its transformation object: a transformation built inline for one call
    #: (or a one-shot initialisation) then costs what running it eagerly costs, and a
    #: reused object compiles at its second call. Strategies whose first call would
    #: compile anyway (``jit``, loops, ``pmap2``) leave it off;
    #: ``state_core.set_eager_first_calls`` turns it on for every strategy whose
    #: program can run op by op.
    eager_first_call: ClassVar[bool] = False

    #: The fields ``identity`` keys and how, per class (filled at its first call).
    _keyed_fields: ClassVar[tuple[tuple[str, Callable[[Any], Hashable]], ...] | None] = None

    def __post_init__(self) -> None:
        nums: Any = self.static_argnums
        names: Any = self.static_argnames
        object.__setattr__(self, "static_argnums", normalize_argnums(nums, "static_argnums"))
        object.__setattr__(self, "static_argnames", normalize_argnames(names))
        object.__setattr__(self, "donate_states", bool(self.donate_states))

    def call_name(self, name: str) -> str:
        """How messages name a call of the function ``name``: ``"jit(step)"``, or ``"step"``.

        Args:
            name: the function's name.

        Example:
            >>> from state_core.engine import Strategy
            >>> Strategy(transform='my_map').call_name('step'), Strategy().call_name('step')
            ('my_map(step)', 'step')
        """
        return f"{self.transform}({name})" if self.transform else name

    # ------------------------------------------------------------------ identity
    def identity(self) -> Hashable | None:
        """What this strategy's programs depend on, as a hashable key (None: never share).

        The default keys every field that takes part in comparison (a dataclass
        field's default, ``compare=True``) with ``state_core.engine.frozen``:
        numbers and strings by value, functions by what they compute, States and
        other objects by identity and weakly, so the shared program registry
        never keeps a user's objects alive. A field declared with
        ``dataclasses.field(metadata={"key": fn})`` is keyed by ``fn(value)``
        instead (``IdentityRef`` for an object compared by identity, which is also
        the cheapest key). It is computed once per strategy. A subclass whose programs also depend
        on a field kept out of comparison (a tree of States, a callable asked at
        each trace) extends ``super().identity()`` with a key for it.

        Raises:
            Unshareable: a field holds a function no key can name (the pipeline
                then keeps the programs to the one transformation object).

        Example:
            >>> from state_core.engine import Strategy
            >>> Strategy(static_argnums=1).identity() == Strategy(static_argnums=(1,)).identity()
            True
        """
        found = self._identity
        if found is not None:
            return found
        cls = type(self)
        # The keyed fields are kept on each class itself (its own ``__dict__``, not a
        # parent's): looking fields up costs microseconds, which an inline-built
        # transformation would pay at every step.
        keyed = cls.__dict__.get("_keyed_fields")
        if keyed is None:
            keyed = tuple((f.name, f.metadata.get("key", _field_key)) for f in dataclasses.fields(cls) if f.compare)
            cls._keyed_fields = keyed
        found = tuple([key(getattr(self, name)) for name, key in keyed])
        object.__setattr__(self, "_identity", found)
        return found

    def function_identity(self, fun: Callable[..., Any]) -> Hashable | None:
        """The function's part of what a program computes (None: never share).

        Programs are shared by equal ``(strategy, function)`` pairs. By default the
        function is named by ``callable_identity``: its code and what it captured.
        A strategy whose fields already say everything the traced function computes
        (a loop's strategy holds the loop's bodies and parameters; the function is
        the loop's generic runner) returns a constant.

        Args:
            fun: the function the pipeline traces.

        Example:
            >>> from state_core.engine import Strategy
            >>> make = lambda k: (lambda x: x * k)
            >>> Strategy().function_identity(make(2)) == Strategy().function_identity(make(2))
            True
        """
        return callable_identity(fun)

    # ------------------------------------------------------------------ tracing
    def new_trace_context(self, fun: Callable[..., Any], name: str, learned: Mapping[Any, Any]) -> CtxT:
        """A fresh ``TraceContext`` (or a subclass) for one trace of ``fun``.

        Args:
            fun: the function about to be traced.
            name: how messages name it.
            learned: what earlier traces of this function decided (read-only).
        """
        return cast(CtxT, TraceContext(fun, name, learned))

    def trace(self, ctx: CtxT, trace_once: Callable[[], Trace]) -> Trace:
        """Trace the function: ``trace_once()`` runs it once under a JAX trace.

        A strategy may wrap it (in a context manager) or call it again after
        learning something (``ctx`` keeps what the traces learn).

        Args:
            ctx: this trace's context.
            trace_once: runs the user function once and returns its ``Trace``.
        """
        return trace_once()

    def abstract_inputs(
        self, ctx: CtxT, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any], leaves: list[Any]
    ) -> list[Any]:
        """The abstract values the function is traced with, one per dynamic argument leaf.

        Args:
            ctx: this trace's context.
            dyn_args: the call's dynamic positional arguments.
            dyn_kwargs: its dynamic keyword arguments.
            leaves: their leaves, flattened.
        """
        return [abstract_value(x) for x in leaves]

    def state_input_avals(self, ctx: CtxT, state: State[Any], value: Any) -> Any:
        """The abstract value the traced code sees when it first reads ``state``.

        Args:
            ctx: this trace's context.
            state: the State read.
            value: its current value.
        """
        return jax.tree.map(abstract_value, value)

    def axis_env(self, ctx: CtxT) -> list[tuple[Any, int]] | None:
        """Named axes (``(name, size)`` pairs) bound while tracing (None: none).

        Args:
            ctx: this trace's context.
        """
        return None

    # ------------------------------------------------------------------ deciding and compiling
    def analyze(self, ctx: CtxT, trace: Trace, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any]) -> Any:
        """What the strategy decides about a new trace, as its own frozen record (None by default).

        It may raise to refuse the call (nothing has run, no State changed).

        Args:
            ctx: this trace's context.
            trace: the new trace.
            dyn_args: the call's dynamic positional arguments.
            dyn_kwargs: its dynamic keyword arguments.
        """
        return None

    def compile(self, trace: Trace, info: Any, name: str) -> Program:
        """The ``Program`` of a trace: ``(rw values, ro values, *leaves) -> (out, new values)``.

        Args:
            trace: the trace to compile.
            info: what ``analyze`` returned for it.
            name: how the program and messages name the function.
        """
        pure = named(pure_program(trace, self.call_name(name)), name)
        return Program(
            run=jax.jit(pure),
            write_back=trace.write_states,
            eager=pure if self.eager_first_call or eager_first_calls_enabled() else None,
            **self.donating(jax.jit, pure, trace),
        )

    def spans_devices(self, trace: Trace, info: Any) -> bool:
        """Whether the program runs on several devices (the pipeline then waits before writing back).

        Args:
            trace: the compiled trace.
            info: what ``analyze`` returned for it.
        """
        return False

    def donating(
        self, jit: Callable[..., Any], pure: Callable[..., Any], trace: Trace, **kwargs: Any
    ) -> dict[str, Any]:
        """The ``Program`` fields of the donating form of ``pure``, or none.

        The form is ``jit(pure, donate_argnums=(0,), **kwargs)`` (the written states'
        values donated) with the new values returned first; none when this strategy
        does not donate, the trace writes no input state, it runs inside another
        trace or writes less than ``donation_min_bytes()``.

        Args:
            jit: the compiling wrapper (``jax.jit``).
            pure: the program, ``(rw, ro, *leaves) -> (output, new values)``.
            trace: its trace.
            **kwargs: further ``jit`` options; with ``out_shardings`` (a prefix of
                ``(output, new values)``) the form keeps ``pure``'s order.
        """
        if not self.donate_states or not trace.rw_index or CTX.stacks or _written_nbytes(trace) < donation_min_bytes():
            return {}  # (a jax.jit object costs a small program's first call about 1%)
        if "out_shardings" in kwargs:
            return {"donating": jit(pure, donate_argnums=(0,), **kwargs)}
        return {
            "donating": jit(_new_values_first(pure), donate_argnums=(0,), **kwargs),
            "donating_new_values_first": True,
        }
