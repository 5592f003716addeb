"""``jit``: a state-aware ``jax.jit``."""

from __future__ import annotations

import dataclasses
import functools
import types
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Generic, NamedTuple, Self, cast, overload

import jax

from state_core import StatefulFunction, states_of_callable
from state_core.engine import (
    Program,
    Strategy,
    Trace,
    TraceContext,
    check_spec_fits,
    input_placer,
    named,
    positions_of_names,
    pure_program,
    read_state_values,
    state_label,
    state_sharding,
)

from ._meshes import annotation_mesh_guard
from ._typing import P, Q, R, S, T

__all__ = ["jit", "JittedFunction", "JitStrategy"]

# Marks an in/out sharding the user did not give (``None`` is a valid sharding request).
_UNSET = object()


def _as_tuple(argnums: int | Iterable[int] | None) -> tuple[int, ...]:
    if argnums is None:
        return ()
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def _checked(
    check: Callable[[], None] | None, prepare: Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]]
) -> Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]]:
    """``prepare`` preceded by ``check`` (a ``Program.prepare`` runs before the program: a refusal changes nothing)."""
    if check is None:
        return prepare

    def checked(values: list[Any], leaves: list[Any]) -> tuple[list[Any], list[Any]]:
        check()
        return prepare(values, leaves)

    return checked


class JitInfo(NamedTuple):
    """The shardings a jitted signature gives its annotated states (its strategy's record).

    Attributes:
        in_shardings: per input state, its ``NamedSharding`` or None.
        out_shardings: per written or created state, its ``NamedSharding`` or None.
        mesh_check: run before every call: refuses a call under ``jax.set_mesh`` of a
            mesh the annotated states cannot be used with (None: nothing annotated).
    """

    in_shardings: tuple[Any, ...]
    out_shardings: tuple[Any, ...]
    mesh_check: Callable[[], None] | None = None

    @property
    def annotated(self) -> bool:
        """Whether any state is laid out by its annotation."""
        return any(s is not None for s in self.in_shardings + self.out_shardings)


@dataclasses.dataclass(frozen=True, kw_only=True)
class JitStrategy(Strategy[TraceContext]):
    """How ``jit`` traces and compiles: ``jax.jit`` with the user's options, states laid out as annotated.

    Args:
        donate_argnums: positions of the user's arguments whose buffers the program
            may reuse (``jax.jit``'s ``donate_argnums``).
        in_shardings: ``jax.jit``'s ``in_shardings`` for the user's arguments, or unset.
        out_shardings: ``jax.jit``'s ``out_shardings`` for the return value, or unset.
        jit_kwargs: any other ``jax.jit`` option.
        transform: ``"jit"`` (see ``Strategy``).
    """

    donate_argnums: tuple[int, ...] = ()
    in_shardings: Any = _UNSET
    out_shardings: Any = _UNSET
    jit_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    transform: str = dataclasses.field(default="jit", compare=False)

    def _dynamic_positions(self, trace: Trace) -> list[int]:
        static = {i if i >= 0 else i + trace.n_args for i in self.static_argnums}
        return [i for i in range(trace.n_args) if i not in static]

    def _leaf_ranges(self, trace: Trace) -> list[tuple[int, int, int]]:
        """``(user position, first leaf, end leaf)`` for each dynamic positional argument."""
        dyn_args, _ = jax.tree.unflatten(trace.dyn_treedef, [0] * trace.dyn_treedef.num_leaves)
        ranges = []
        leaf = 0
        for position, arg in zip(self._dynamic_positions(trace), dyn_args, strict=True):
            n = len(jax.tree.leaves(arg))
            ranges.append((position, leaf, leaf + n))
            leaf += n
        return ranges

    def _user_leaf_shardings(self, trace: Trace, name: str) -> list[Any]:
        """One sharding (or None) per dynamic argument leaf, from the user's ``in_shardings``."""
        dyn_args, dyn_kwargs = jax.tree.unflatten(trace.dyn_treedef, [0] * trace.dyn_treedef.num_leaves)
        if self.in_shardings is _UNSET:
            return [None] * trace.dyn_treedef.num_leaves
        given = self.in_shardings
        if not isinstance(given, (tuple, list)):
            given = (given,) * len(dyn_args)
        if len(given) != len(dyn_args):
            raise ValueError(
                f"{self.call_name(name)}: in_shardings has {len(given)} entries but it was called with "
                f"{len(dyn_args)} non-static positional argument(s); give one sharding (or None) "
                "per argument, or a single sharding for all."
            )
        leaf_shardings: list[Any] = []
        for arg, sharding in zip(dyn_args, given, strict=True):
            leaves = jax.tree.leaves(arg)
            if sharding is None or isinstance(sharding, jax.sharding.Sharding):
                leaf_shardings.extend([sharding] * len(leaves))
            else:  # a pytree of shardings matching the argument
                leaf_shardings.extend(jax.tree.leaves(sharding, is_leaf=lambda x: x is None))
        leaf_shardings.extend([None] * len(jax.tree.leaves(dyn_kwargs)))
        return leaf_shardings

    def analyze(
        self, ctx: TraceContext, trace: Trace, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any]
    ) -> JitInfo:
        """The ``NamedSharding`` of every annotated state the program reads or writes.

        Checked here, before anything runs: a state whose annotation has no mesh or
        does not fit its value stops the call with the state's name and path.
        """
        states = {id(s): s for s in (*trace.in_states, *trace.write_states)}
        annotated = [s for s in states.values() if s.metadata.get("sharding") is not None]
        if not annotated:
            return JitInfo((None,) * len(trace.in_states), (None,) * len(trace.write_states))
        paths = states_of_callable(ctx.fun).paths_by_state()
        shardings = {id(s): state_sharding(s, path=paths.get(id(s))) for s in annotated}
        # A written value may change shape: its layout must fit the new value too.
        for state, aval in zip(trace.write_states, trace.write_state_avals(), strict=True):
            sharding = shardings.get(id(state))
            if sharding is not None:
                where = (
                    f"{self.call_name(ctx.name)}: {state_label(state, paths.get(id(state)))} (the new value it writes)"
                )
                check_spec_fits(sharding.spec, sharding.mesh, aval, where)
        labelled = [
            (state_label(s, paths.get(id(s))), s.metadata["sharding"], sharding)
            for s in annotated
            if (sharding := shardings[id(s)]) is not None
        ]
        mesh_check = annotation_mesh_guard(labelled, self.call_name(ctx.name))
        if mesh_check is not None:
            mesh_check()  # before anything is compiled or run
        return JitInfo(
            tuple(shardings.get(id(s)) for s in trace.in_states),
            tuple(shardings.get(id(s)) for s in trace.write_states),
            mesh_check,
        )

    def compile(self, trace: Trace, info: JitInfo, name: str) -> Program:
        """``jax.jit`` of the program with the user's donations, shardings and options; states laid out as annotated."""
        donate: list[int] = []
        if self.donate_argnums:
            wanted = {i if i >= 0 else i + trace.n_args for i in self.donate_argnums}
            for position, start, end in self._leaf_ranges(trace):
                if position in wanted:
                    donate.extend(range(2 + start, 2 + end))
        kwargs = dict(self.jit_kwargs)
        annotated = info.annotated
        if annotated or self.in_shardings is not _UNSET:
            rw = [info.in_shardings[k] for k in trace.rw_index]
            ro = [info.in_shardings[k] for k in trace.ro_index]
            kwargs["in_shardings"] = (rw, ro, *self._user_leaf_shardings(trace, name))
        if annotated or self.out_shardings is not _UNSET:
            user_out = None if self.out_shardings is _UNSET else self.out_shardings
            kwargs["out_shardings"] = (user_out, list(info.out_shardings))
        prepare = _checked(info.mesh_check, input_placer(trace.in_states, info.in_shardings)) if annotated else None
        pure = named(pure_program(trace, self.call_name(name)), name)
        run = jax.jit(pure, donate_argnums=tuple(donate), **kwargs)
        # The written states' values (argument 0) are donated too when nothing else holds them.
        donating = self.donating(jax.jit, pure, trace, **kwargs)
        if donating and donate:  # (in the order of `run`: the user's donations pair as they would there)
            donating = {"donating": jax.jit(pure, donate_argnums=(0, *donate), **kwargs)}
        return Program(run=run, write_back=trace.write_states, prepare=prepare, placed_by=self._placed_by(), **donating)

    def _placed_by(self) -> tuple[tuple[str, Any], ...]:
        """Where the user's ``in_shardings`` / ``out_shardings`` place the program (a device error names them)."""

        def found(what: str, given: Any) -> list[tuple[str, Any]]:
            if given is _UNSET:
                return []
            leaves = jax.tree.leaves(given, is_leaf=lambda x: isinstance(x, jax.sharding.Sharding))
            return [(what, leaf) for leaf in leaves if isinstance(leaf, jax.sharding.Sharding)]

        return (*found("its in_shardings", self.in_shardings), *found("its out_shardings", self.out_shardings))

    def spans_devices(self, trace: Trace, info: JitInfo) -> bool:
        """Whether an annotated or placed input state lies on several devices."""
        # A state that lives on a mesh, or is annotated with one, makes the program span its devices.
        if any(s is not None and len(s.device_set) > 1 for s in info.in_shardings + info.out_shardings):
            return True
        for state in trace.in_states:
            for leaf in jax.tree.leaves(state._value):
                sharding = getattr(leaf, "sharding", None)
                if sharding is not None and len(sharding.device_set) > 1:
                    return True
        return False


# (frozen: every jit without options shares it; building one costs an inline `jit(f)(x)` ~2 us)
_PLAIN_JIT = JitStrategy()


class JittedFunction(StatefulFunction, Generic[P, R]):
    """The callable ``jit`` returns: a ``StatefulFunction`` compiled with ``jax.jit``.

    The compiled program takes the values of the states the function writes, the
    values of the states it only reads, and the user's arguments.
    ``donate_argnums``, ``in_shardings``, ``out_shardings`` and the ``static_*``
    options refer to the user's arguments and return value only, exactly as for
    ``jax.jit``. The states the function writes are updated in place
    (``donate_states=True``, the default): when nothing but a State refers to its
    old value, that buffer is donated to the program; an array the user still
    holds (or a typed key whose key data the user holds) is never donated, and
    states the function only reads never are. ``donate_states=False`` always
    allocates new buffers.

    Args:
        fun: the function to compile; it may read and write ``State.value`` but
            must not take or return States.
        static_argnums: positions of arguments that are compile-time constants
            (hashable; a new value traces again), as in ``jax.jit``.
        static_argnames: names of parameters that are compile-time constants,
            whether passed by keyword or by position (as in ``jax.jit``).
        donate_argnums: positions of the user's arguments whose buffers the
            program may reuse, as in ``jax.jit`` (the caller must not use those
            arrays afterwards). States are donated by ``donate_states``, never here.
        donate_states: update written States in place (default True): exactly as
            ``jit``'s ``donate_states``.
        name: a label for reprs and messages (default: ``fun.__name__``).
        in_shardings: as in ``jax.jit``, for the non-static positional arguments
            only: one sharding (or None) per argument, a pytree of shardings
            matching it, or a single sharding for all. Unset: JAX chooses.
        out_shardings: as in ``jax.jit``, for the return value only. Unset: JAX
            chooses.
        cache_size: how many call signatures stay compiled (default 64, least
            recently used dropped beyond it); a function with its own cache size
            keeps its programs to itself.
        donate_argnames: as ``donate_argnums``, by parameter name (added to
            ``donate_argnums`` at the parameter's position; an argument passed by
            keyword is not donated).
        **jit_kwargs: any other ``jax.jit`` option (``keep_unused``,
            ``compiler_options`` ...), applied to the program.

    Attributes:
        origin_fun: the function given to ``jit``.
        stateful_fun: the ``StatefulFunction`` that traces it (this object).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState, State
        >>> from state_transform import JittedFunction
        >>> buf, scale = State(jnp.zeros(3)), ParamState(jnp.ones(3))
        >>> def fill(v):
        ...     buf.value = buf.value + v * scale.value
        >>> f = JittedFunction(fill)
        >>> f(1.0)
        >>> kept = buf.value          # the user holds the value: it is not donated
        >>> f(2.0)
        >>> kept, buf.value, scale.value
        (Array([1., 1., 1.], dtype=float32), Array([3., 3., 3.], dtype=float32), Array([1., 1., 1.], dtype=float32))
    """

    __module__ = "state_transform"
    strategy: JitStrategy

    def __init__(
        self,
        fun: Callable[P, R],
        static_argnums: int | Iterable[int] = (),
        static_argnames: str | Iterable[str] = (),
        donate_argnums: int | Iterable[int] = (),
        donate_states: bool = True,
        *,
        name: str | None = None,
        in_shardings: Any = _UNSET,
        out_shardings: Any = _UNSET,
        cache_size: int | None = None,
        donate_argnames: str | Iterable[str] = (),
        **jit_kwargs: Any,
    ) -> None:
        # Donated by name means donated at its position too; passed by keyword, the
        # argument is not donated (a new buffer: slower, never wrong).
        numbers = _as_tuple(donate_argnums)
        by_name = positions_of_names(fun, (donate_argnames,) if isinstance(donate_argnames, str) else donate_argnames)
        plain = (
            static_argnums == ()
            and static_argnames == ()
            and not numbers
            and not by_name
            and donate_states is True
            and in_shardings is _UNSET
            and out_shardings is _UNSET
            and not jit_kwargs
        )
        strategy = (
            _PLAIN_JIT
            if plain
            else JitStrategy(
                static_argnums=_as_tuple(static_argnums),
                static_argnames=(static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames),
                donate_states=donate_states,
                donate_argnums=(*numbers, *(i for i in by_name if i not in numbers)),
                in_shardings=in_shardings,
                out_shardings=out_shardings,
                jit_kwargs=jit_kwargs,
            )
        )
        super().__init__(fun, name=name, cache_size=cache_size, strategy=strategy)
        self.origin_fun = fun
        self._bound: dict[int, tuple[Any, JittedFunction]] = {}
        functools.update_wrapper(self, fun, updated=())

    if TYPE_CHECKING:  # the call takes and returns what `fun` does (StatefulFunction.__call__ runs it)

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    @property
    def donate_argnums(self) -> tuple[int, ...]:
        """The positions of the user's arguments the program may reuse (``donate_argnames`` included)."""
        return self.strategy.donate_argnums

    @property
    def in_shardings(self) -> Any:
        """The ``in_shardings`` given for the user's arguments (an unset marker when none was)."""
        return self.strategy.in_shardings

    @property
    def out_shardings(self) -> Any:
        """The ``out_shardings`` given for the return value (an unset marker when none was)."""
        return self.strategy.out_shardings

    @property
    def jit_kwargs(self) -> dict[str, Any]:
        """The other ``jax.jit`` options the program is compiled with."""
        return dict(self.strategy.jit_kwargs)

    @property
    def stateful_fun(self) -> StatefulFunction:
        """The ``StatefulFunction`` tracing ``origin_fun`` (for introspection): this object itself.

        Example:
            >>> from state_core import State
            >>> from state_transform import jit
            >>> s = State(0.0, name='s')
            >>> def bump():
            ...     s.value = s.value + 1
            >>> f = jit(bump)
            >>> f()
            >>> f.stateful_fun is f, [t.name for t in f.stateful_fun.get_write_states()]
            (True, ['s'])
        """
        return self

    # ------------------------------------------------------------------ jax.jit's extras
    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """Lower the program for these arguments (``jax.stages.Lowered``); runs nothing.

        Its arguments are the written states' values, the read-only states' values
        and the user's arguments.

        Args:
            *args: the positional arguments of the call to lower (static ones
                included); traced first if the signature is new.
            **kwargs: its keyword arguments.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> from state_transform import jit
            >>> s = State(jnp.ones(2))
            >>> f = jit(lambda x: s.value * x)
            >>> 'mul' in f.lower(2.0).as_text()
            True
        """
        entry, leaves = self._lookup(args, kwargs)
        rw, ro = entry.trace.split_values(read_state_values(entry.trace.in_states))
        # The strategy builds the program with `jax.jit` (a lookup that compiles gives it one).
        assert entry.program is not None
        compiled = cast(jax.stages.Wrapped, entry.program.run)
        return compiled.lower(rw, ro, *leaves)

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """Lower and compile the program for these arguments (``jax.stages.Compiled``); runs nothing.

        The same as ``self.lower(*args, **kwargs).compile()``: use it to read the
        compiled program's cost or memory analysis, or its text.

        Args:
            *args: as for ``lower``.
            **kwargs: as for ``lower``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_transform import jit
            >>> compiled = jit(lambda x: x * 2).compile(jnp.ones(3))
            >>> type(compiled).__name__
            'Compiled'
        """
        return self.lower(*args, **kwargs).compile()

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The ``jax.ShapeDtypeStruct`` tree of the return value, without running or writing anything.

        Args:
            *args: the positional arguments of a call (arrays or
                ``jax.ShapeDtypeStruct`` leaves; static ones included).
            **kwargs: its keyword arguments.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_transform import jit
            >>> jit(lambda x: x.sum(0)).eval_shape(jnp.ones((3, 4)))
            ShapeDtypeStruct(shape=(4,), dtype=float32)
        """
        return self._lookup(args, kwargs, compile_program=False)[0].trace.out_shapes

    # On the class: this object; on an instance: the method bound to it, without `self`.
    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Self: ...
    @overload
    def __get__(
        self: JittedFunction[Concatenate[T, Q], S], obj: T, objtype: type | None = None
    ) -> JittedFunction[Q, S]: ...
    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        """Used as a method decorator: one jitted function per instance, bound to it."""
        if obj is None:
            return self
        key = id(obj)
        found = self._bound.get(key)
        if found is not None and found[0]() is obj:
            return found[1]
        bound = JittedFunction(
            types.MethodType(self.origin_fun, obj),
            tuple(i - 1 for i in self.static_argnums if i > 0),
            self.static_argnames,
            tuple(i - 1 for i in self.donate_argnums if i > 0),
            self.donate_states,
            name=self.name,
            in_shardings=self.in_shardings,
            out_shardings=self.out_shardings,
            cache_size=self._cache.maxsize,
            **self.jit_kwargs,
        )
        bound_cache = self._bound
        self._bound[key] = (weakref.ref(obj, lambda _ref: bound_cache.pop(key, None)), bound)
        return bound


# `jit(f, ...)` is the compiled function; `jit(...)` without `f` is a decorator.
@overload
def jit(
    fun: Callable[P, R],
    static_argnums: int | Iterable[int] = (),
    static_argnames: str | Iterable[str] = (),
    donate_argnums: int | Iterable[int] = (),
    donate_states: bool = True,
    **jit_kwargs: Any,
) -> JittedFunction[P, R]: ...
@overload
def jit(
    fun: None = None,
    static_argnums: int | Iterable[int] = (),
    static_argnames: str | Iterable[str] = (),
    donate_argnums: int | Iterable[int] = (),
    donate_states: bool = True,
    **jit_kwargs: Any,
) -> Callable[[Callable[Q, S]], JittedFunction[Q, S]]: ...


def jit(
    fun: Callable[..., Any] | None = None,
    static_argnums: int | Iterable[int] = (),
    static_argnames: str | Iterable[str] = (),
    donate_argnums: int | Iterable[int] = (),
    donate_states: bool = True,
    **jit_kwargs: Any,
) -> JittedFunction | Callable[[Callable[..., Any]], JittedFunction]:
    """Compile ``fun`` with ``jax.jit``; the States it reads and writes are handled for you.

    The function runs once per new argument signature (to trace it); later calls
    run the compiled program and write the new state values back. Works as
    ``jit(fn)``, ``@jit``, ``@jit(static_argnums=...)`` and on methods (one
    compiled function per instance), and composes with ``vmap2``, ``pmap2``,
    ``grad`` and itself. ``.lower(...)`` and ``.eval_shape(...)`` work as on a
    ``jax.jit`` function.

    A State created with ``sharding=`` (a ``PartitionSpec`` on the mesh set with
    ``jax.set_mesh``, or a ``NamedSharding``) is laid out that way: the program
    takes and returns its value with that sharding, so it stays split across
    the devices from call to call. Unannotated states get no constraint.

    Args:
        fun: the function to compile; it may read and write ``State.value`` but
            must not take or return States. ``None`` returns a decorator that
            takes the function (``@jit(static_argnums=1)``).
        static_argnums: positions of arguments that are compile-time constants
            (hashable; a new value traces again), as in ``jax.jit``.
        static_argnames: names of keyword arguments that are compile-time constants.
        donate_argnums: positions of the user's arguments whose buffers the
            program may reuse, as in ``jax.jit``; the caller must not use those
            arrays afterwards.
        donate_states: update the states ``fun`` writes in place (default True).
            At each call, the old value of a written state is donated to the
            program (its buffer is reused for the new value) only when nothing but
            the State refers to it: no variable or container of yours, no other
            State, no argument or read-only state of the same call, no value an
            earlier call returned and, for a typed PRNG key, not its key data
            (``jax.random.key_data``). Otherwise a new buffer is allocated and the
            old value stays readable. Nothing is donated inside another
            transformation, while ``jax_debug_nans`` / ``jax_debug_infs`` is on, for
            a program that calls back into Python, when the new value has another
            shape, dtype or layout, or when the written values hold less than
            ``state_core.engine.set_donation_min_bytes`` (0 by default). Not seen by the
            check: a second array object JAX made to share the buffer
            (``jax.device_put(state.value, device)`` onto the device it already lies
            on, ``state.value.addressable_data(i)``); it is deleted with the old
            value, so copy it (``jnp.copy``) or pass ``False``. ``False`` never
            donates, as plain ``jax.jit`` without ``donate_argnums``.
        **jit_kwargs: ``donate_argnames=`` (as ``donate_argnums``, by parameter
            name; an argument passed by keyword is not donated), ``name=`` (a
            label for messages), ``cache_size=`` (how many call signatures stay
            compiled, default 64), ``in_shardings`` /
            ``out_shardings`` (as in ``jax.jit``, for the user's arguments and
            return value) and any other ``jax.jit`` option.

    Returns:
        A ``JittedFunction`` (or, without ``fun``, a decorator that makes one).

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

        A state annotated with a sharding keeps it:

        >>> import jax
        >>> from jax.sharding import NamedSharding, PartitionSpec as P
        >>> mesh = jax.make_mesh((jax.device_count(),), ('x',))
        >>> buf = State(jnp.zeros(jax.device_count()), sharding=NamedSharding(mesh, P('x')))
        >>> @jit
        ... def bump():
        ...     buf.value = buf.value + 1.0
        >>> bump()
        >>> buf.value.sharding.spec, len(buf.value.addressable_shards)
        (P('x',), 8)
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
