"""Recording which states a block of code reads and writes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, overload

import jax

from ._context import CTX, OPEN_STACKS, PRIVATE_LOCK, PRIVATE_THREADS
from ._errors import StateLeakError
from ._filter import to_predicate
from ._jax_internals import current_trace, is_eager, is_tracer
from ._state import State, use_private_values

__all__ = [
    "StateTraceStack",
    "active_trace_stacks",
    "private_state_values",
    "forget_created_states",
]


@contextlib.contextmanager
def private_state_values() -> Iterator[None]:
    """For engines: values put into states in this block are seen only by this thread.

    A tracing engine wraps the trace of a user function in this block. Every
    ``state._value`` written inside it (the tracers of the trace, values restored
    afterwards) goes to a per-thread overlay that is discarded at the end, so
    other threads reading ``state.value`` meanwhile see the concrete value, never
    a tracer. Engines must read what they need (written values) before the block
    ends. Nested blocks share the outermost block's overlay.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_core.engine import private_state_values
        >>> s = State(jnp.zeros(2))
        >>> with private_state_values():
        ...     s.restore_value(jnp.ones(2))   # a trace would put a tracer here
        ...     float(s.value[0])
        1.0
        >>> float(s.value[0])                  # the concrete value was never touched
        0.0
    """
    if CTX.overlay is not None:
        yield
        return
    with PRIVATE_LOCK:
        PRIVATE_THREADS[0] += 1
        if PRIVATE_THREADS[0] == 1:
            use_private_values(True)
    CTX.overlay = {}
    try:
        yield
    finally:
        CTX.overlay = None
        with PRIVATE_LOCK:
            PRIVATE_THREADS[0] -= 1
            if PRIVATE_THREADS[0] == 0:
                use_private_values(False)


def active_trace_stacks() -> int:
    """How many ``StateTraceStack`` blocks are active in this thread (0 when eager).

    Example:
        >>> from state_core import StateTraceStack, active_trace_stacks
        >>> with StateTraceStack():
        ...     active_trace_stacks()
        1
    """
    return len(CTX.stacks)


def forget_created_states(states: Iterable[State[Any]], where: str | None = None) -> None:
    """For engines: ``states`` lived and died inside one traced body; the enclosing blocks forget them.

    A state created while a traced body ran (a loop step, a branch) and never
    kept outside it is local to that body: its value is a tracer of the body's
    trace, which no enclosing program can give back. When the body's block ends,
    its new states pass to the enclosing block, whose trace would export their
    values; this takes them back out of every active ``StateTraceStack`` and every
    ``catch_new_states`` block, so nothing reports or exports them. One that holds
    a tracer of the body raises ``StateLeakError`` when read later, as any state
    does whose trace is over.

    Args:
        states: the local states.
        where: the body they are local to, as messages name it (for example
            ``'the body of for_loop'``); the ``StateLeakError`` of a later read
            says it. None: not named.

    Example:
        >>> from state_core import State, StateTraceStack, catch_new_states
        >>> from state_core.engine import forget_created_states
        >>> with catch_new_states() as caught, StateTraceStack():
        ...     local = State(0.0)
        ...     forget_created_states([local])
        >>> len(caught)
        0
    """
    states = list(states)
    ids = {id(s) for s in states}
    if not ids:
        return
    if where is not None:
        for state in states:
            if state._leaked_at is not None:  # it holds a tracer of the body: reading it later fails
                state._leaked_at = f"{state._created_at or '<unknown location>'} (local to {where})"
    for stack in CTX.stacks:
        if stack._created:
            stack._created = [s for s in stack._created if id(s) not in ids]
    for catcher in CTX.catchers:
        catcher.states = [s for s in catcher.states if id(s) not in ids]


class StateTraceStack:
    """Record, in first-access order, the states read and written inside a ``with`` block.

    Stacks nest. A state access is recorded on every active stack opened at or
    after the point where the state was created (a state created inside a block
    is local to it and is not recorded there). The value each state had when it
    was first accessed is kept, so the block can be undone with
    ``restore_original_values()``.

    Args:
        name: an optional label, shown in the repr.
        first_read: for tracing engines: called on the first read of each state
            in the block, it returns the value the code should see there (for
            example a fresh trace input); the state keeps that value until the
            block restores it. None: states are read as they are.
        traces_jaxpr: for tracing engines: the block runs code under a JAX trace
            whose values must not outlive it (a state left holding one is
            reported when it is read, and a Python branch on a traced value is
            explained in terms of States).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StateTraceStack
        >>> a, b = State(jnp.zeros(2), name='a'), State(jnp.ones(2), name='b')
        >>> with StateTraceStack() as trace:
        ...     b.value = a.value + b.value
        >>> [s.name for s in trace.get_read_states()], [s.name for s in trace.get_write_states()]
        (['a'], ['b'])
        >>> trace.restore_original_values()
        >>> b.value
        Array([1., 1.], dtype=float32)
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        first_read: Callable[[State[Any]], Any] | None = None,
        traces_jaxpr: bool = False,
    ) -> None:
        self.name = name
        self.states: list[State[Any]] = []
        self.original_values: list[Any] = []
        self._index: dict[int, int] = {}
        self._read: set[int] = set()
        self._written: set[int] = set()
        self._created: list[State[Any]] = []
        self._active = False
        self._first_read_hook = first_read
        self._is_jaxpr_trace = traces_jaxpr
        self._jax_trace: Any = None  # the JAX trace that was current when the block began

    # -- context management -----------------------------------------------------------
    def __enter__(self) -> StateTraceStack:
        if self._active:
            raise RuntimeError("A StateTraceStack cannot be entered twice at the same time.")
        self._active = True
        self._jax_trace = current_trace()
        OPEN_STACKS.add(1)
        CTX.stacks.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stacks = CTX.stacks
        if not stacks or stacks[-1] is not self:
            if exc[0] is None:
                raise RuntimeError("StateTraceStack blocks must be exited in the reverse order of entry.")
            # An exception is unwinding blocks out of order: let it through unmasked, and
            # close the blocks it abandoned above this one so the thread's context stays sound.
            if self not in stacks:
                return
            while stacks[-1] is not self:
                inner = stacks.pop()
                OPEN_STACKS.add(-1)
                inner._active = False
                inner._release_created_states(len(stacks))
        stacks.pop()
        OPEN_STACKS.add(-1)
        self._active = False
        self._release_created_states(len(stacks))
        if self._is_jaxpr_trace and isinstance(exc[1], jax.errors.TracerBoolConversionError):
            self._explain_branch_on_state(exc[1])

    def _release_created_states(self, level: int) -> None:
        # States created inside this block now belong to the enclosing block.
        parent = CTX.stacks[-1] if CTX.stacks else None
        for state in self._created:
            state._level = level
            if (
                self._is_jaxpr_trace
                and state._leaked_at is None
                and any(is_tracer(x) for x in jax.tree.leaves(state._value))
            ):
                state._leaked_at = state._created_at or "<unknown location>"
            if parent is not None:
                parent._created.append(state)
        self._created = []

    def _explain_branch_on_state(self, err: BaseException) -> None:
        # `if flag.value:` on a boolean state fails with JAX's generic message; name the
        # state and the alternatives. (A traced flag cannot pick the Python branch: the
        # program is compiled once and replayed for every later value of the flag.)
        flags = [s for s in self.states if any(is_tracer(x) and x.dtype == bool for x in jax.tree.leaves(s._value))]
        if not flags:
            return
        names = ", ".join(s.describe() for s in flags)
        where = f" ({self.name})" if self.name else ""
        raise TypeError(
            f"Python control flow (if / while / and / or / bool()) on the boolean value of "
            f"{names} inside a traced function{where}: the value is traced, so Python cannot "
            "branch on it. Branch inside the program with jax.lax.cond / state_transform.cond "
            "(or jnp.where), or read the flag outside the transformed function and pass it as "
            "a static argument."
        ) from err

    # -- recording ------------------------------------------------------------------------
    def _first_access(self, state: State[Any]) -> None:
        # Read the value before recording the state: a read that raises (a lazy key that
        # cannot be made here) must leave ``states`` and ``original_values`` in step, or
        # restoring them afterwards would fail and hide the real error.
        original = state._value
        self._index[id(state)] = len(self.states)
        self.states.append(state)
        self.original_values.append(original)

    def _on_read(self, state: State[Any]) -> None:
        key = id(state)
        if key not in self._index:
            self._first_access(state)
            self._read.add(key)
            if self._first_read_hook is not None:
                # The engine's tracing step: the trace's input (a tracer) stands in for the
                # value until the trace ends and ``original_values`` are put back.
                state._value = self._first_read_hook(state)
        else:
            self._read.add(key)

    def _on_write(self, state: State[Any], checked: bool = False) -> None:
        if not checked and self._jax_trace is not None and CTX.stacks[-1] is self:
            self._check_write_trace(state)
        key = id(state)
        if key not in self._index:
            inner = CTX.stacks[-1] if CTX.stacks else None
            if inner is not None and inner is not self and inner._is_jaxpr_trace:
                # Written inside a nested traced body (a loop step, a cond branch) that may
                # run zero or many times: seen from this block it is a read-modify-write.
                self._on_read(state)
            else:
                self._first_access(state)
        self._written.add(key)

    def _check_write_trace(self, state: State[Any]) -> None:
        # A write recorded here must happen in the JAX trace this block runs in. In a
        # plain (not state-aware) transformation nested inside it, such as the body of
        # jax.lax.scan, the new value is that transformation's tracer and would escape.
        trace = current_trace()
        if trace is not self._jax_trace and not is_eager():
            raise StateLeakError(
                f"{state.describe()} is written by a state-aware transformation (jit, vmap2, "
                "grad, ...) called inside a JAX transformation that is not state-aware (the "
                "body of jax.lax.scan / jax.lax.cond / jax.lax.while_loop, jax.checkpoint, a "
                "plain jax.vmap ...) nested in a state-aware one; the new value would leak out "
                "of it as a tracer. Use the state-aware version (state_transform.scan / "
                "for_loop / cond / checkpoint) for the enclosing transformation, or carry the "
                "value through its outputs and write the state after it."
            )

    # -- queries ------------------------------------------------------------------------
    def __contains__(self, state: object) -> bool:
        return id(state) in self._index

    def was_written(self, state: State[Any]) -> bool:
        """True if ``state`` was written inside the block.

        Args:
            state: the state to look up; a state the block never touched gives ``False``.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0), State(2.0)
            >>> with StateTraceStack() as trace:
            ...     b.value = a.value + 1
            >>> trace.was_written(a), trace.was_written(b)
            (False, True)
        """
        return id(state) in self._written

    def was_read(self, state: State[Any]) -> bool:
        """True if ``state`` was read inside the block.

        A state that was only written (never read) gives ``False``.

        Args:
            state: the state to look up; a state the block never touched gives ``False``.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0), State(2.0)
            >>> with StateTraceStack() as trace:
            ...     b.value = a.value + 1
            >>> trace.was_read(a), trace.was_read(b)
            (True, False)
        """
        return id(state) in self._read

    # Written slots become None only with replace_writen=True.
    @overload
    def get_read_states(self, replace_writen: Literal[False] = False) -> list[State[Any]]: ...
    @overload
    def get_read_states(self, replace_writen: bool) -> list[State[Any] | None]: ...

    def get_read_states(self, replace_writen: bool = False) -> list[State[Any]] | list[State[Any] | None]:
        """States that were read and never written, in first-access order.

        Args:
            replace_writen: keep one slot per recorded state, with ``None`` in the
                slots of written states (brainstate's layout and spelling), so the
                list lines up with ``states``. By default written states are left out.

        Returns:
            The read-only states (or one entry per recorded state with
            ``replace_writen=True``).

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0, name='a'), State(2.0, name='b')
            >>> with StateTraceStack() as trace:
            ...     b.value = a.value + 1
            >>> [s.name for s in trace.get_read_states()]
            ['a']
            >>> [s and s.name for s in trace.get_read_states(replace_writen=True)]
            ['a', None]
        """
        if replace_writen:
            return [None if id(s) in self._written else s for s in self.states]
        return [s for s in self.states if id(s) not in self._written]

    # Read-only slots become None only with replace_read=True.
    @overload
    def get_write_states(self, replace_read: Literal[False] = False) -> list[State[Any]]: ...
    @overload
    def get_write_states(self, replace_read: bool) -> list[State[Any] | None]: ...

    def get_write_states(self, replace_read: bool = False) -> list[State[Any]] | list[State[Any] | None]:
        """States that were written (and possibly read), in first-access order.

        Args:
            replace_read: keep one slot per recorded state, with ``None`` in the
                slots of read-only states, so the list lines up with ``states``. By
                default read-only states are left out.

        Returns:
            The written states (or one entry per recorded state with
            ``replace_read=True``).

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0, name='a'), State(2.0, name='b')
            >>> with StateTraceStack() as trace:
            ...     b.value = a.value + 1
            >>> [s.name for s in trace.get_write_states()]
            ['b']
            >>> [s and s.name for s in trace.get_write_states(replace_read=True)]
            [None, 'b']
        """
        if replace_read:
            return [s if id(s) in self._written else None for s in self.states]
        return [s for s in self.states if id(s) in self._written]

    def get_read_state_values(self, replace_writen: bool = False) -> list[Any]:
        """Current values of ``get_read_states(replace_writen)`` (``None`` stays ``None``).

        Args:
            replace_writen: as in ``get_read_states``: ``None`` in the slots of
                written states instead of leaving them out.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0), State(2.0)
            >>> with StateTraceStack() as trace:
            ...     b.value = a.value + 1
            >>> trace.get_read_state_values(), trace.get_read_state_values(replace_writen=True)
            ([1.0], [1.0, None])
        """
        return [None if s is None else s._value for s in self.get_read_states(replace_writen)]

    def get_write_state_values(self, replace_read: bool = False) -> list[Any]:
        """Current values of ``get_write_states(replace_read)`` (``None`` stays ``None``).

        Args:
            replace_read: as in ``get_write_states``: ``None`` in the slots of
                read-only states instead of leaving them out.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0), State(2.0)
            >>> with StateTraceStack() as trace:
            ...     b.value = a.value + 1
            >>> trace.get_write_state_values(), trace.get_write_state_values(replace_read=True)
            ([2.0], [None, 2.0])
        """
        return [None if s is None else s._value for s in self.get_write_states(replace_read)]

    def restore_original_values(self) -> None:
        """Put back the value every recorded state had at its first access.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> s = State(1.0)
            >>> with StateTraceStack() as trace:
            ...     s.value = 5.0
            >>> trace.restore_original_values()
            >>> s.value
            1.0
        """
        for state, value in zip(self.states, self.original_values, strict=True):
            state.restore_value(value)

    # -- brainstate-compatible queries and updates ----------------------------------------
    @property
    def been_writen(self) -> list[bool]:
        """One flag per recorded state (first-access order): ``True`` if it was written.

        (The spelling is brainstate's.)

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0), State(2.0)
            >>> with StateTraceStack() as trace:
            ...     b.value = a.value + 1
            >>> trace.been_writen
            [False, True]
        """
        return [id(s) in self._written for s in self.states]

    @property
    def original_state_values(self) -> tuple[Any, ...]:
        """The value each recorded state had at its first access, in first-access order.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> s = State(1.0)
            >>> with StateTraceStack() as trace:
            ...     s.value = 5.0
            >>> trace.original_state_values
            (1.0,)
        """
        return tuple(self.original_values)

    def get_state_values(self, separate: bool = False, replace: bool = False) -> Any:
        """Current values of the recorded states.

        Args:
            separate: return ``(written values, read-only values)`` instead of one tuple.
            replace: with ``separate``, keep one slot per state in both tuples,
                ``None`` where the state belongs to the other group.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0), State(2.0)
            >>> with StateTraceStack() as trace:
            ...     b.value = a.value + 1
            >>> trace.get_state_values(), trace.get_state_values(separate=True, replace=True)
            ((1.0, 2.0), ((None, 2.0), (1.0, None)))
        """
        values = [s._value for s in self.states]
        if not separate:
            return tuple(values)
        flags = self.been_writen
        if replace:
            writes = tuple(v if w else None for v, w in zip(values, flags, strict=True))
            reads = tuple(None if w else v for v, w in zip(values, flags, strict=True))
        else:
            writes = tuple(v for v, w in zip(values, flags, strict=True) if w)
            reads = tuple(v for v, w in zip(values, flags, strict=True) if not w)
        return writes, reads

    def recovery_original_values(self) -> None:
        """brainstate's name for ``restore_original_values()``.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> s = State(1.0)
            >>> with StateTraceStack() as trace:
            ...     s.value = 5.0
            >>> trace.recovery_original_values()
            >>> s.value
            1.0
        """
        self.restore_original_values()

    def state_subset(self, state_type: Any) -> list[State[Any]]:
        """The recorded states matched by ``state_type``, in first-access order.

        Args:
            state_type: a ``State`` subclass, or any filter (``OfType``,
                ``WithTag``, a predicate ...) the states are tested against.

        Example:
            >>> from state_core import ParamState, State, StateTraceStack
            >>> w, h = ParamState(1.0, name='w'), State(0.0, name='h')
            >>> with StateTraceStack() as trace:
            ...     h.value = w.value * 2
            >>> [s.name for s in trace.state_subset(ParamState)]
            ['w']
        """
        predicate = to_predicate(state_type)
        return [s for s in self.states if predicate((), s)]

    def assign_state_vals(self, state_vals: Sequence[Any]) -> None:
        """Give every recorded state a value: written states by a recorded write, others restored.

        Args:
            state_vals: one value per recorded state, in first-access order.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0), State(2.0)
            >>> with StateTraceStack() as trace:
            ...     b.value = a.value + 1
            >>> trace.assign_state_vals([10.0, 20.0])
            >>> a.value, b.value
            (10.0, 20.0)
        """
        state_vals = list(state_vals)
        if len(state_vals) != len(self.states):
            raise ValueError(
                f"assign_state_vals: the trace recorded {len(self.states)} state(s) but "
                f"{len(state_vals)} value(s) were given; pass one value per state in "
                "`trace.states` order."
            )
        # Check every structure first, so a bad value leaves all states untouched.
        for state, value in zip(self.states, state_vals, strict=True):
            if jax.tree.structure(value) != jax.tree.structure(state._value):  # type: ignore[operator]  # PyTreeDef stub
                raise ValueError(
                    f"assign_state_vals: the value for {state.describe()} has pytree structure "
                    f"{jax.tree.structure(value)} but the state holds "
                    f"{jax.tree.structure(state._value)}; no state was changed."
                )
        for state, value in zip(self.states, state_vals, strict=True):
            if id(state) in self._written:
                state.value = value
            else:
                state.restore_value(value)

    def merge(self, *traces: StateTraceStack) -> StateTraceStack:
        """Add the states recorded by ``traces`` to this one (in place) and return it.

        A state new to this trace keeps the original value and the read/write
        flags the other trace recorded; a state already here becomes written if
        any trace wrote it.

        Args:
            *traces: the other stacks (their recorded states are added in their
                first-access order); they are not changed.

        Returns:
            This stack, to chain calls (``t1 + t2`` builds a new one instead).

        Raises:
            TypeError: an argument is not a ``StateTraceStack``.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> a, b = State(1.0, name='a'), State(2.0, name='b')
            >>> with StateTraceStack() as t1:
            ...     _ = a.value
            >>> with StateTraceStack() as t2:
            ...     a.value = b.value
            >>> merged = t1 + t2
            >>> [s.name for s in merged.states], merged.been_writen
            (['a', 'b'], [True, False])
        """
        for trace in traces:
            if not isinstance(trace, StateTraceStack):
                raise TypeError(f"StateTraceStack.merge expects StateTraceStack objects, got {type(trace).__name__}.")
            for state, original in zip(trace.states, trace.original_values, strict=True):
                key = id(state)
                if key not in self._index:
                    self._index[key] = len(self.states)
                    self.states.append(state)
                    self.original_values.append(original)
                if key in trace._read:
                    self._read.add(key)
                if key in trace._written:
                    self._written.add(key)
        return self

    def __add__(self, other: StateTraceStack) -> StateTraceStack:
        if not isinstance(other, StateTraceStack):
            return NotImplemented
        return StateTraceStack().merge(self, other)

    def __len__(self) -> int:
        return len(self.states)

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<StateTraceStack{label}: {len(self.states)} states, {len(self._written)} written>"
