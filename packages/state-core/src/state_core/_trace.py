"""Recording which states a block of code reads and writes."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator

from ._context import CTX, PRIVATE_LOCK, PRIVATE_THREADS
from ._jax_internals import current_trace, is_eager, is_tracer
from ._state import State, StateLeakError

import jax

__all__ = [
    "StateTraceStack",
    "catch_new_states",
    "NewStateCatcher",
    "active_trace_stacks",
    "private_state_values",
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
        >>> from state_core._trace import private_state_values
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
    CTX.overlay = {}
    try:
        yield
    finally:
        CTX.overlay = None
        with PRIVATE_LOCK:
            PRIVATE_THREADS[0] -= 1


def active_trace_stacks() -> int:
    """How many ``StateTraceStack`` blocks are active in this thread (0 when eager).

    Example:
        >>> from state_core import StateTraceStack, active_trace_stacks
        >>> with StateTraceStack():
        ...     active_trace_stacks()
        1
    """
    return len(CTX.stacks)


class StateTraceStack:
    """Record, in first-access order, the states read and written inside a ``with`` block.

    Stacks nest. A state access is recorded on every active stack opened at or
    after the point where the state was created (a state created inside a block
    is local to it and is not recorded there). The value each state had when it
    was first accessed is kept, so the block can be undone with
    ``restore_original_values()``.

    Args:
        name: an optional label, shown in the repr.

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

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self.states: list[State] = []
        self.original_values: list[Any] = []
        self._index: dict[int, int] = {}
        self._read: set[int] = set()
        self._written: set[int] = set()
        self._created: list[State] = []
        self._active = False
        # Set by tracing engines: called on the first read of a state, returns the
        # value the traced code should see (typically a fresh trace input).
        self._first_read_hook: Callable[[State], Any] | None = None
        self._is_jaxpr_trace = False
        self._jax_trace: Any = None  # the JAX trace that was current when the block began

    # -- context management -----------------------------------------------------------
    def __enter__(self) -> "StateTraceStack":
        if self._active:
            raise RuntimeError("A StateTraceStack cannot be entered twice at the same time.")
        self._active = True
        self._jax_trace = current_trace()
        CTX.stacks.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stacks = CTX.stacks
        if not stacks or stacks[-1] is not self:
            raise RuntimeError("StateTraceStack blocks must be exited in the reverse order of entry.")
        stacks.pop()
        self._active = False
        self._release_created_states(len(stacks))
        if self._is_jaxpr_trace and isinstance(exc[1], jax.errors.TracerBoolConversionError):
            self._explain_branch_on_state(exc[1])

    def _release_created_states(self, level: int) -> None:
        # States created inside this block now belong to the enclosing block.
        parent = CTX.stacks[-1] if CTX.stacks else None
        for state in self._created:
            state._level = level
            if self._is_jaxpr_trace and state._leaked_at is None:
                if any(is_tracer(x) for x in jax.tree.leaves(state._value)):
                    state._leaked_at = state._created_at or "<unknown location>"
            if parent is not None:
                parent._created.append(state)
        self._created = []

    def _explain_branch_on_state(self, err: BaseException) -> None:
        # `if flag.value:` on a boolean state fails with JAX's generic message; name the
        # state and the alternatives. (A traced flag cannot pick the Python branch: the
        # program is compiled once and replayed for every later value of the flag.)
        flags = [
            s
            for s in self.states
            if any(is_tracer(x) and x.dtype == bool for x in jax.tree.leaves(s._value))
        ]
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
    def _first_access(self, state: State) -> None:
        self._index[id(state)] = len(self.states)
        self.states.append(state)
        self.original_values.append(state._value)

    def _on_read(self, state: State) -> None:
        key = id(state)
        if key not in self._index:
            self._first_access(state)
            self._read.add(key)
            if self._first_read_hook is not None:
                state._value = self._first_read_hook(state)
        else:
            self._read.add(key)

    def _on_write(self, state: State, checked: bool = False) -> None:
        if not checked and self._jax_trace is not None and CTX.stacks[-1] is self:
            self._check_write_trace(state)
        key = id(state)
        if key not in self._index:
            self._first_access(state)
        self._written.add(key)

    def _check_write_trace(self, state: State) -> None:
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

    def was_written(self, state: State) -> bool:
        """True if ``state`` was written inside the block."""
        return id(state) in self._written

    def was_read(self, state: State) -> bool:
        """True if ``state`` was read inside the block."""
        return id(state) in self._read

    def get_read_states(self) -> list[State]:
        """States that were read and never written, in first-access order."""
        return [s for s in self.states if id(s) not in self._written]

    def get_write_states(self) -> list[State]:
        """States that were written (and possibly read), in first-access order."""
        return [s for s in self.states if id(s) in self._written]

    def get_read_state_values(self) -> list[Any]:
        """Current values of ``get_read_states()``."""
        return [s._value for s in self.get_read_states()]

    def get_write_state_values(self) -> list[Any]:
        """Current values of ``get_write_states()``."""
        return [s._value for s in self.get_write_states()]

    def restore_original_values(self) -> None:
        """Put back the value every recorded state had at its first access."""
        for state, value in zip(self.states, self.original_values):
            state.restore_value(value)

    def __len__(self) -> int:
        return len(self.states)

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return (
            f"<StateTraceStack{label}: {len(self.states)} states, "
            f"{len(self._written)} written>"
        )


class NewStateCatcher:
    """The object a ``catch_new_states`` block yields: the states created inside it."""

    def __init__(self, tag: str | Iterable[str] | None) -> None:
        self.tag = tag
        self.states: list[State] = []

    def _add(self, state: State) -> None:
        if self.tag is not None:
            state.add_tag(*((self.tag,) if isinstance(self.tag, str) else self.tag))
        self.states.append(state)

    def get_states(self) -> list[State]:
        """The created states, in creation order."""
        return list(self.states)

    def get_state_values(self) -> list[Any]:
        """The current values of the created states."""
        return [s._value for s in self.states]

    def __iter__(self):
        return iter(self.states)

    def __len__(self) -> int:
        return len(self.states)


class catch_new_states:
    """Collect every ``State`` created inside the ``with`` block (optionally tagging it).

    Args:
        tag: a tag (or tags) added to each new state; ``None`` adds none.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, catch_new_states
        >>> with catch_new_states(tag='init') as caught:
        ...     a = State(jnp.zeros(3))
        ...     b = State(jnp.ones(2))
        >>> len(caught.states), sorted(a.tags)
        (2, ['init'])
    """

    def __init__(self, tag: str | Iterable[str] | None = None) -> None:
        self._catcher = NewStateCatcher(tag)

    def __enter__(self) -> NewStateCatcher:
        CTX.catchers.append(self._catcher)
        return self._catcher

    def __exit__(self, *exc: Any) -> None:
        CTX.catchers.remove(self._catcher)
