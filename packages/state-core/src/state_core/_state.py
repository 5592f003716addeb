"""``State``: an explicit, mutable container of a pytree of arrays.

The kinds of state (``ParamState`` ...) live in ``_state_kinds`` and the helpers
(strict mode, messages) in ``_state_support``; both are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, TypeVar

import jax
import numpy as np

from ._context import CTX, GENERATION, OPEN_STACKS, user_call_site
from ._errors import StateLeakError
from ._jax_internals import EVAL_TRACE, TRACE_STATE, current_trace, is_eager, is_tracer
from ._plain_trace_reads import check_plain_trace_access, note_born_in_plain_trace
from ._state_display import StateDisplay
from ._state_hook_methods import HookMethods
from ._state_support import (
    _as_tags,
    _contains_tracer,
    _creation_site,
    _describe_structure,
    _dtype_of,
    _leaf_aval_str,
    check_state_value_tree,
    strict_state_checks,
)

__all__ = [
    "State",
    "ShortTermState",
    "LongTermState",
    "ParamState",
    "HiddenState",
    "NonBatchState",
    "StateLeakError",
    "strict_state_checks",
    "maybe_state",
    "check_state_value_tree",
]

T = TypeVar("T")


_WATCH = "<watched>"
# True while a hook is registered anywhere: the one test a read, write, restore or
# creation pays for hooks (``_state_hooks``, loaded with the first hook, keeps it up to date).
_HOOKS_ON = False


def set_hooks_on(on: bool) -> None:
    """Tell every State whether some hook is registered (called by ``_state_hooks`` as the count changes)."""
    global _HOOKS_ON
    _HOOKS_ON = on


_ABSENT = object()


class State(StateDisplay, HookMethods, Generic[T]):
    """A named, mutable holder of a pytree of arrays that JAX transformations understand.

    Reading ``state.value`` inside a state-aware transformation (``jit``, ``vmap2``,
    ``StatefulFunction`` …) makes the value an input of the traced program; writing
    it makes the new value an output that is written back after the call.

    Args:
        value: the initial value, any pytree of arrays or scalars.
        name: an optional human-readable name used in error messages and reprs.
        tag: an optional tag or collection of tags (``WithTag`` filters select on them).
        strict: reject writes that change a leaf's shape or dtype for this state.
        **metadata: free-form metadata kept in ``state.metadata``.

    Equality and hashing are by identity: two states are the same only if they
    are the same object. ``copy.copy`` / ``copy.deepcopy`` give new, independent
    states; pickling is refused (save ``state.value`` instead).

    ``repr`` shows the abstract value (the structure of a model at a glance);
    ``print`` / ``str``, IPython and treescope show the values, arrays of more
    than 16 elements as ``dtype[shape] min= max= mean=``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> w = ParamState(jnp.ones((2, 4)))
        >>> w.value = w.value * 2
        >>> w
        ParamState(
          value=ShapedArray(float32[2,4])
        )
        >>> print(w)
        ParamState(
          value=Array([[2., 2., 2., 2.], [2., 2., 2., 2.]], dtype=float32)
        )
    """

    __module__ = "state_core"

    def __init__(
        self,
        value: T,
        name: str | None = None,
        tag: str | Iterable[str] | None = None,
        *,
        strict: bool = False,
        **metadata: Any,
    ) -> None:
        if isinstance(value, State):
            raise TypeError(
                f"A State cannot hold another State (got {value!r} as the value of a new "
                f"{type(self).__name__}); pass `other.value` to copy its value."
            )
        if name is not None and not isinstance(name, str):
            raise TypeError(f"State name must be a str or None, got {type(name).__name__}.")
        self._name = name
        GENERATION.value += 1  # lets engines notice object graphs that gained new States
        self._tags: frozenset[str] = _as_tags(tag)
        self.strict = bool(strict)
        self.metadata: dict[str, Any] = metadata
        stacks = CTX.stacks
        traced = _contains_tracer(value)
        # Even a tracer goes to the concrete slot: a new state has no earlier value to
        # show other threads, and reading it outside its trace raises StateLeakError.
        self.__dict__["_value"] = value
        # A state created inside a trace is local to it: only stacks opened later record it.
        self._level = len(stacks)
        self._created_at: str | None = user_call_site() if (stacks or traced) else None
        # A state born holding tracers belongs to the JAX trace that made them; once
        # that trace is over its value is stale, which reads detect.
        self._leaked_at: str | None = _WATCH if traced else None
        if stacks:
            stacks[-1]._created.append(self)
        elif TRACE_STATE.value is not EVAL_TRACE:
            note_born_in_plain_trace(self)  # its value belongs to that trace: reading it there freezes nothing
        self._born_traced = bool(stacks) or traced
        for catcher in CTX.catchers:
            catcher._add(self)
        self._source_info: Any = self._created_at or _creation_site()
        if _HOOKS_ON:
            from ._state_hooks import run_hooks  # (loaded with the first hook: already there)

            info = {"name": name, "_name": name, "tag": self._tags, "strict": self.strict, **metadata}
            run_hooks("init", self, {"init_metadata": info}, value)

    # -- identity -----------------------------------------------------------------
    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    # -- metadata -------------------------------------------------------------------
    @property
    def name(self) -> str | None:
        """The state's name, or ``None``."""
        return self._name

    @name.setter
    def name(self, name: str | None) -> None:
        self._name = name

    @property
    def tags(self) -> frozenset[str]:
        """The state's tags (``WithTag`` selects on them)."""
        return self._tags

    def add_tag(self, *tags: str) -> None:
        """Add one or more tags to this state.

        Args:
            *tags: the tags to add (strings).
        """
        self._tags = self._tags.union(tags)

    @property
    def tag(self) -> frozenset[str]:
        """The set of tags this state carries (the same as ``tags``; brainstate's name).

        Assigning a tag, an iterable of tags or ``None`` replaces the set.

        Example:
            >>> from state_core import State
            >>> s = State(0.0, tag='fast')
            >>> s.tag
            frozenset({'fast'})
            >>> s.tag = ('a', 'b'); sorted(s.tag)
            ['a', 'b']
        """
        return self._tags

    @tag.setter
    def tag(self, tag: str | Iterable[str] | None) -> None:
        self._tags = _as_tags(tag)

    def describe(self) -> str:
        """A short human description used in error messages, e.g. ``ParamState 'weight'``."""
        kind = type(self).__name__
        if self._name:
            return f"{kind} '{self._name}'"
        return f"{kind} holding {self._aval_repr()}"

    # -- value ---------------------------------------------------------------------------
    # ``_value`` is what every engine reads and writes. The concrete value lives in
    # ``__dict__['_value']``. While some thread traces (``private_state_values``), the
    # class carries the ``_value`` property below, which sends the values that thread
    # puts into states (tracers) to its own overlay, so other threads keep seeing the
    # concrete value. While no thread traces the class has no ``_value`` attribute at
    # all, so ``state._value`` is a plain instance attribute: the hot call path pays
    # nothing for thread safety (see ``use_private_values``).
    _value: Any

    def _get_private_or_concrete(self) -> Any:
        overlay = CTX.overlay
        if overlay is not None:
            value = overlay.get(self, _ABSENT)
            if value is not _ABSENT:
                return value
        try:
            return self.__dict__["_value"]
        except KeyError:
            # A subclass may compute the value lazily in ``__getattr__`` (RandomState).
            raise AttributeError(f"{self._short_description()} has no value.") from None

    def _set_private_or_concrete(self, value: Any) -> None:
        overlay = CTX.overlay
        if overlay is not None:
            overlay[self] = value
            return
        self.__dict__["_value"] = value

    def _short_description(self) -> str:
        # Like ``describe()`` but never reads the value (which may be missing or stale).
        kind = type(self).__name__
        return f"{kind} '{self._name}'" if self._name else kind

    @property
    def value(self) -> T:
        """The current value; reading records the access on active trace stacks.

        Read inside a JAX transformation that is not state-aware (a plain ``jax.jit``,
        ``jax.vmap``, ``jax.grad`` or ``jax.lax.scan`` body), the value becomes a constant
        of the traced program and a write happens only while JAX traces: a
        ``PlainTraceStateAccessWarning`` says so (see ``set_plain_trace_policy``).
        """
        if self._leaked_at is not None:
            self._check_leaked()
        stacks = CTX.stacks if OPEN_STACKS.value else ()  # (no thread traces: no thread-local lookup)
        if stacks:
            if len(stacks) > self._level:
                for stack in stacks[self._level :]:
                    stack._on_read(self)
        # The eager read pays this one identity test (and no longer a len() and an
        # attribute load above), so it costs what it cost before the check existed.
        elif TRACE_STATE.value is not EVAL_TRACE:  # a JAX trace runs that records no state reads
            check_plain_trace_access(self, written=False)
        if _HOOKS_ON:
            from ._state_hooks import run_hooks

            value = self._value
            run_hooks("read", self, {}, value)
            return value
        return self._value

    @value.setter
    def value(self, new_value: T) -> None:
        if self._leaked_at is not None:
            self._check_leaked()
        if isinstance(new_value, State):
            raise TypeError(f"Cannot assign a State to {self.describe()}.value; assign `other.value` instead.")
        if _HOOKS_ON:
            self._write_with_hooks(new_value)
        else:
            self._write(new_value)

    def _write(self, new_value: Any) -> None:
        """A checked, recorded write (the setter without hooks)."""
        self._check_write(new_value)
        stacks = CTX.stacks
        if len(stacks) > self._level:
            if stacks[-1]._jax_trace is not current_trace() and _contains_tracer(new_value):
                raise StateLeakError(
                    f"{self.describe()} was written inside a JAX transformation that is not "
                    "state-aware (for example the body of jax.lax.scan / jax.lax.cond, or a plain "
                    "jax.vmap / jax.checkpoint) nested in a state-aware one. The traced value "
                    "would leak out of that transformation. Use the state-aware version: "
                    "state_transform.scan / for_loop / fori_loop / while_loop instead of "
                    "jax.lax.scan / fori_loop / while_loop, state_transform.cond / switch instead "
                    "of jax.lax.cond / switch, state_transform.checkpoint instead of "
                    "jax.checkpoint, state_transform.vmap2 instead of jax.vmap; or carry the value "
                    "through the transformation's outputs and write the state after it."
                )
            for stack in stacks[self._level :]:
                stack._on_write(self, checked=True)
        elif not self._born_traced and _contains_tracer(new_value):
            raise StateLeakError(
                f"{self.describe()} was assigned a JAX tracer outside any state-aware "
                "transformation (for example inside a plain jax.jit, jax.vmap or jax.grad). "
                "The traced value would leak out of that transformation. Use the state-aware "
                "versions (state_transform.jit / vmap2 / grad, and state_transform.scan / "
                "for_loop / while_loop / cond / checkpoint for control flow) so the write is "
                "returned and applied after the call, or return the value instead of storing it."
            )
        elif TRACE_STATE.value is not EVAL_TRACE:  # a JAX trace runs that records no state writes
            check_plain_trace_access(self, written=True)
        self._value = new_value

    def _write_with_hooks(self, new_value: Any) -> None:
        from ._state_hooks import run_hooks

        # write_before may replace or refuse the value before anything is checked or written.
        old_value = self._value
        before = {"old_value": old_value, "transformed_value": None, "cancel": False, "cancel_reason": None}
        ctx = run_hooks("write_before", self, before, new_value)
        if ctx is not None and ctx.transformed_value is not None:
            new_value = ctx.transformed_value
        self._write(new_value)
        run_hooks("write_after", self, {"old_value": old_value}, new_value)

    def restore_value(self, value: T) -> None:
        """Set the value without recording a write and without checks.

        Transformations use this to put values back (for example after tracing or
        when an error undoes a call). Restoring a concrete value into a state that
        was created inside a finished trace makes it usable again.

        Args:
            value: the new value, put in place as it is.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> s = State(jnp.zeros(2))
            >>> s.restore_value(jnp.ones(2))
            >>> s.value
            Array([1., 1.], dtype=float32)
        """
        if self._leaked_at is not None:
            traced = _contains_tracer(value)
            if CTX.stacks or not traced:
                self._leaked_at = _WATCH if traced else None
        if _HOOKS_ON:
            from ._state_hooks import run_hooks

            old_value = self.__dict__.get("_value")
            self._value = value
            run_hooks("restore", self, {"old_value": old_value}, value)
            return
        self._value = value

    # -- protocol for engines: what a kind of State asks of the transformations -------------
    def splits_across_lanes(self, value: Any) -> bool:
        """Whether a mapping transformation gives each lane its own part of ``value``.

        Mapping transformations (``vmap2``, ``pmap2``, ``shard_map`` ...) ask every
        state they read and that no axis rule claims. A plain State answers False
        (every lane sees the same value); ``state_random.RandomState`` answers True
        for a single key, so every lane draws different numbers. A subclass that
        answers True implements ``split_across_lanes``.

        Args:
            value: the state's current value (concrete, or abstract while tracing).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> State(jnp.zeros(2)).splits_across_lanes(jnp.zeros(2))
            False
        """
        return False

    def split_across_lanes(self, value: Any, num_lanes: int) -> tuple[Any, Any]:
        """``(lane_values, next_value)``: one value per lane (a leading axis of ``num_lanes``)
        and the value the state holds after the mapped call (also after a failed one).

        Runs inside compiled programs (``value`` may be traced) and, when a call
        fails, eagerly. Only called when ``splits_across_lanes(value)`` is True.

        Args:
            value: the state's value (may be traced).
            num_lanes: the number of lanes.

        Example:
            >>> from state_core import State
            >>> State(0.0).split_across_lanes(0.0, 2)
            Traceback (most recent call last):
            NotImplementedError: State does not split its value across lanes.
        """
        raise NotImplementedError(f"{type(self).__name__} does not split its value across lanes.")

    def handout_lock(self) -> Any:
        """A lock that makes a transformation's read-modify-write of this state atomic, or None.

        A state whose every value must be handed out once (a random key: two calls
        must never draw with the same key, even from two threads) returns a lock;
        the engine holds it from reading the value to writing the new one back.
        A plain State returns None.

        Example:
            >>> from state_core import State
            >>> State(0.0).handout_lock() is None
            True
        """
        return None

    def _check_write(self, new_value: Any) -> None:
        old_def = jax.tree.structure(self._value)
        new_def = jax.tree.structure(new_value)
        if old_def != new_def:  # type: ignore[operator]  # jaxlib PyTreeDef stub not found
            # A quantity's unit is part of its pytree structure: say which units differ.
            # (Imported here: only a failing write needs it, and the kernel stays free of units.)
            from .units import describe_unit_mismatch

            unit_problem = describe_unit_mismatch(self._value, new_value)
            if unit_problem is not None:
                raise ValueError(f"Cannot assign to {self.describe()}: {unit_problem}")
            raise ValueError(
                f"Cannot assign to {self.describe()}: the new value has pytree structure "
                f"{_describe_structure(new_value)} but the state holds "
                f"{_describe_structure(self._value)}. A state keeps its pytree structure; "
                "create a new State if you need a different one."
            )
        if self.strict or CTX.strict:
            for path_and_old, new in zip(
                jax.tree.leaves_with_path(self._value), jax.tree.leaves(new_value), strict=True
            ):
                path, old = path_and_old
                if np.shape(old) != np.shape(new) or _dtype_of(old) != _dtype_of(new):
                    where = jax.tree_util.keystr(path) if path else ""
                    raise ValueError(
                        f"Strict state check failed for {self.describe()}{where}: the state "
                        f"holds {_leaf_aval_str(old)} but the new value is {_leaf_aval_str(new)}. "
                        "Cast or reshape the value, or leave strict mode to allow the change."
                    )

    def _check_leaked(self) -> None:
        """Raise ``StateLeakError`` if this state's value is a tracer of a finished trace."""
        where = self._leaked_at
        if where is _WATCH:
            overlay = CTX.overlay
            value = overlay.get(self, _ABSENT) if overlay is not None else _ABSENT
            if value is _ABSENT:
                value = self.__dict__.get("_value", _ABSENT)
            if value is _ABSENT:  # created by a trace of another thread, or of a finished one
                self._raise_leaked(self._created_at or "<unknown location>")
            leaves = jax.tree.leaves(value)
            if not any(is_tracer(x) for x in leaves):
                self._leaked_at = None  # it holds a concrete value now
                return
            if not is_eager():
                return  # still inside a trace: its tracers may be alive
            # Not remembered: another thread may still be tracing with this state.
            where = self._created_at or "<unknown location>"
        self._raise_leaked(where)

    def _raise_leaked(self, where: str | None = None) -> None:
        raise StateLeakError(
            f"{self._short_description()} was created inside a traced function at "
            f"{where or self._leaked_at} and is used after that trace finished; its value is a "
            "stale tracer. Create states outside transformed functions, or pass their values out "
            "instead (through a loop's carry or a function's return value), or create them with "
            "state_transform.vmap2_new_states / catch_new_states and export their values."
        )

    # -- brainstate-compatible helpers: size, copies, call-site ------------------------------
    def numel(self) -> int:
        """The total number of elements over every leaf of the value.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> State({'w': jnp.zeros((2, 3)), 'b': jnp.zeros(3)}).numel()
            9
        """
        return sum(int(np.size(leaf)) for leaf in jax.tree.leaves(self._value))

    def value_call(self, fn: Any) -> Any:
        """Apply ``fn`` to every leaf of the value (a read) and return the new pytree.

        Args:
            fn: a function applied to each leaf of the value.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> State({'a': jnp.ones(2), 'b': jnp.zeros(1)}).value_call(lambda x: x.shape)
            {'a': (2,), 'b': (1,)}
        """
        return jax.tree.map(fn, self.value)

    def copy(self: State[T]) -> State[T]:
        """A new state of the same class, name, tags and metadata holding the same value.

        The copy has its own identity: writing one does not change the other. The
        leaves are shared, which is safe because JAX arrays are immutable (use
        ``copy.deepcopy`` to also duplicate NumPy buffers).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import ParamState
            >>> w = ParamState(jnp.zeros(2), name='w', tag='train')
            >>> w2 = w.copy()
            >>> w2.value = w2.value + 1
            >>> w.value, w2.value, w2.name, sorted(w2.tag), w2 is w
            (Array([0., 0.], dtype=float32), Array([1., 1.], dtype=float32), 'w', ['train'], False)
        """
        return self._clone(self._value)

    def replace(self: State[T], value: Any) -> State[Any]:
        """A new state of the same class, name, tags and metadata holding ``value``.

        Unlike writing ``value``, the structure may differ; this state is unchanged.

        Args:
            value: the value of the new state, any pytree (it may differ in structure from this state's).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import ParamState
            >>> w = ParamState(jnp.zeros(2), name='w')
            >>> w3 = w.replace(jnp.ones(3))
            >>> type(w3).__name__, w3.name, w3.value.shape, w.value.shape
            ('ParamState', 'w', (3,), (2,))
        """
        if isinstance(value, State):
            raise TypeError(f"{self.describe()}.replace() expects a value, got {value.describe()}; pass `other.value`.")
        return self._clone(value)

    def copy_from(self, other: State[Any]) -> None:
        """Write the value of ``other`` into this state (a recorded write; metadata unchanged).

        Args:
            other: the state whose value is copied.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> a, b = State(jnp.zeros(2)), State(jnp.ones(2))
            >>> a.copy_from(b)
            >>> a.value
            Array([1., 1.], dtype=float32)
        """
        if not isinstance(other, State):
            raise TypeError(
                f"{self.describe()}.copy_from() expects a State, got {type(other).__name__}; "
                "to write a plain value assign `state.value = x`."
            )
        self.value = other.value

    def _clone(self, value: Any) -> State[Any]:
        # Subclass attributes come along with __dict__; State.__init__ then gives the
        # clone its own bookkeeping (trace level, creation site, catchers) and value.
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.pop("_hooks", None)  # a copy is a new state: it starts without hooks
        new.__dict__.pop("_kept_records", None)  # nor keeps the original's programs alive
        State.__init__(new, value, self._name, self._tags, strict=self.strict, **self.metadata)
        return new

    def __copy__(self) -> State[T]:
        return self._clone(self._value)

    def __deepcopy__(self, memo: dict[int, Any]) -> State[T]:
        import copy as _copy

        new = object.__new__(type(self))
        memo[id(self)] = new  # a state reachable twice stays one state in the copy
        value = _copy.deepcopy(self._value, memo)  # first: a lazy value materialises here
        extra = {k: _copy.deepcopy(v, memo) for k, v in self.__dict__.items() if k not in _BOOKKEEPING}
        new.__dict__.update(extra)
        State.__init__(
            new,
            value,
            self._name,
            self._tags,
            strict=self.strict,
            **extra.get("metadata", {}),
        )
        return new

    @property
    def source_info(self) -> str:
        """Where the state was created, as ``file:line`` of the user's code.

        Example:
            >>> from state_core import State
            >>> ':' in State(0.0).source_info
            True
        """
        site = self._source_info
        if type(site) is tuple:  # formatted on first use: creating a state stays cheap
            site = self._source_info = f"{site[0]}:{site[1]}"
        return site

    @property
    def stack_level(self) -> int:
        """How many ``StateTraceStack`` blocks were open when the state was created.

        Accesses are recorded only on stacks opened at or after this level.

        Example:
            >>> from state_core import State, StateTraceStack
            >>> with StateTraceStack():
            ...     inner = State(0.0)
            >>> State(0.0).stack_level, inner.stack_level
            (0, 0)
        """
        return self._level

    @stack_level.setter
    def stack_level(self, level: int) -> None:
        self._level = int(level)

    def __reduce__(self) -> Any:
        # A State's identity is what transformations track, and a pickled copy would be
        # a different, unconnected state; checkpoints store values instead.
        raise TypeError(
            f"{self.describe()} cannot be pickled; save `state.value` (or "
            "`collect_states(obj).to_values()`) instead, and use copy.deepcopy for an "
            "in-memory copy."
        )


_PRIVATE_VALUE = property(State._get_private_or_concrete, State._set_private_or_concrete)


def use_private_values(on: bool) -> None:
    """Give ``State`` its per-thread ``_value`` property (``on``) or take it away.

    Called under ``PRIVATE_LOCK`` by ``private_state_values`` when the first thread
    starts tracing and when the last one stops. Without the property,
    ``state._value`` is the instance attribute holding the concrete value, which is
    what every thread should see while no thread traces.
    """
    if on:
        State._value = _PRIVATE_VALUE
    elif "_value" in State.__dict__:
        del State._value


# Attributes State.__init__ sets itself; a deep copy recreates them instead of copying.


_BOOKKEEPING = frozenset(
    {
        "_value",
        "_name",
        "_tags",
        "strict",
        "_level",
        "_leaked_at",
        "_created_at",
        "_born_traced",
        "_source_info",
        "_hooks",  # a copy is a new state: it starts without hooks
        "_kept_records",  # nor with the shared programs the original keeps alive (_registry)
    }
)


def check_not_state(tree: Any, where: str) -> None:
    """Raise ``TypeError`` if a State is a leaf of ``tree`` (``where`` names the place).

    Args:
        tree: any pytree.
        where: the place ``tree`` stands for, at the start of the message (for example ``'vmap2(f): argument 0'``); the
            path of the offending leaf is appended.
    """
    for path, leaf in jax.tree.leaves_with_path(tree):
        if isinstance(leaf, State):
            at = jax.tree_util.keystr(path)
            raise TypeError(
                f"{where}{at} is a State ({leaf.describe()}). States are not passed into or "
                "returned from transformed functions: read or write `state.value` inside "
                "the function (the transformation tracks it), or pass/return `state.value`."
            )


def maybe_state(x: Any) -> Any:
    """The value of ``x`` if it is a State (a recorded read), otherwise ``x`` itself.

    Args:
        x: a State or any other object.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, maybe_state
        >>> maybe_state(State(jnp.ones(2))), maybe_state(3.0)
        (Array([1., 1.], dtype=float32), 3.0)
    """
    return x.value if isinstance(x, State) else x


# The kinds of state subclass State, so they are imported once it exists.
from ._state_kinds import HiddenState, LongTermState, NonBatchState, ParamState, ShortTermState  # noqa: E402
