"""``State``: an explicit, mutable container of a pytree of arrays."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

import jax
import numpy as np

from ._context import CTX, GENERATION, PRIVATE_THREADS, user_call_site
from ._errors import StateLeakError
from ._jax_internals import current_trace, is_eager, is_tracer
from ._pretty import format_fields, format_value

__all__ = [
    "State",
    "ShortTermState",
    "LongTermState",
    "ParamState",
    "HiddenState",
    "StateLeakError",
    "strict_state_checks",
    "maybe_state",
    "check_state_value_tree",
]

T = TypeVar("T")


@contextlib.contextmanager
def strict_state_checks() -> Iterator[None]:
    """Within this block every ``State`` write must keep each leaf's shape and dtype.

    By default a write may change shapes and dtypes (models resize states in
    ``reset_state(batch_size)``; mapping transforms add axes).  Strict mode turns
    such changes into a ``ValueError`` that shows both avals.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, strict_state_checks
        >>> s = State(jnp.zeros(3), name='buffer')
        >>> with strict_state_checks():
        ...     s.value = jnp.ones(3)      # same shape and dtype: fine
        >>> s.value
        Array([1., 1., 1.], dtype=float32)
    """
    CTX.strict += 1
    try:
        yield
    finally:
        CTX.strict -= 1


_LIBRARY_MODULES = frozenset(
    {"state_core", "state_random", "state_transform", "state_nn", "jax", "jaxlib", "contextlib"}
)


def _creation_site() -> tuple[str, int] | str:
    """``(file, line)`` of the innermost frame outside our libraries and JAX."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__", "").partition(".")[0] not in _LIBRARY_MODULES:
            return (frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return "<unknown location>"


def _as_tags(tag: str | Iterable[str] | None) -> frozenset[str]:
    if tag is None:
        return frozenset()
    if isinstance(tag, str):
        return frozenset((tag,))
    tags = frozenset(tag)
    for t in tags:
        if not isinstance(t, str):
            raise TypeError(f"State tags must be strings, got {t!r} of type {type(t).__name__}.")
    return tags


def _describe_structure(tree: Any) -> str:
    return str(jax.tree.structure(tree)).replace("PyTreeDef", "")


def _leaf_aval_str(leaf: Any) -> str:
    try:
        return repr(jax.typeof(leaf))
    except TypeError:
        return type(leaf).__name__


def _contains_tracer(tree: Any) -> bool:
    return any(is_tracer(leaf) for leaf in jax.tree.leaves(tree))


# ``_leaked_at`` of a state born holding tracers while its trace may still run:
# reads check whether those tracers are stale (see ``State._check_leaked``).
_WATCH = "<watched>"
_ABSENT = object()


class State(Generic[T]):
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
        self._born_traced = bool(stacks) or traced
        for catcher in CTX.catchers:
            catcher._add(self)
        self._source_info: Any = self._created_at or _creation_site()

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
        """Add one or more tags to this state."""
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
    # ``__dict__['_value']``; while a thread traces (``private_state_values``), the
    # values it puts into states (tracers) go to that thread's overlay instead, so
    # other threads keep seeing the concrete value.
    def _get_private_or_concrete(self) -> Any:
        if PRIVATE_THREADS[0]:
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
        if PRIVATE_THREADS[0]:
            overlay = CTX.overlay
            if overlay is not None:
                overlay[self] = value
                return
        self.__dict__["_value"] = value

    _value = property(_get_private_or_concrete, _set_private_or_concrete)

    def _short_description(self) -> str:
        # Like ``describe()`` but never reads the value (which may be missing or stale).
        kind = type(self).__name__
        return f"{kind} '{self._name}'" if self._name else kind

    @property
    def value(self) -> T:
        """The current value; reading records the access on active trace stacks."""
        if self._leaked_at is not None:
            self._check_leaked()
        stacks = CTX.stacks
        if len(stacks) > self._level:
            for stack in stacks[self._level :]:
                stack._on_read(self)
        if PRIVATE_THREADS[0]:
            return self._value
        try:
            return self.__dict__["_value"]
        except KeyError:
            return self._value  # lazily computed by a subclass

    @value.setter
    def value(self, new_value: T) -> None:
        if self._leaked_at is not None:
            self._check_leaked()
        if isinstance(new_value, State):
            raise TypeError(f"Cannot assign a State to {self.describe()}.value; assign `other.value` instead.")
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
        self._value = new_value

    def restore_value(self, value: T) -> None:
        """Set the value without recording a write and without checks.

        Transformations use this to put values back (for example after tracing or
        when an error undoes a call). Restoring a concrete value into a state that
        was created inside a finished trace makes it usable again.

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
        self._value = value

    def _check_write(self, new_value: Any) -> None:
        old_def = jax.tree.structure(self._value)
        new_def = jax.tree.structure(new_value)
        if old_def != new_def:
            raise ValueError(
                f"Cannot assign to {self.describe()}: the new value has pytree structure "
                f"{_describe_structure(new_value)} but the state holds "
                f"{_describe_structure(self._value)}. A state keeps its pytree structure; "
                "create a new State if you need a different one."
            )
        if self.strict or CTX.strict:
            for path_and_old, new in zip(jax.tree.leaves_with_path(self._value), jax.tree.leaves(new_value)):
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
            "stale tracer. Create states outside transformed functions, or create them with "
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
        State.__init__(new, value, self._name, self._tags, strict=self.strict, **self.metadata)
        return new

    def __copy__(self) -> State[T]:
        return self._clone(self._value)

    def __deepcopy__(self, memo: dict) -> State[T]:
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

    def __str__(self) -> str:
        """The state with its value: small arrays in full, large ones summarised."""
        fields = [(k, self._value_text() if k == "value" else v) for k, v in self._repr_fields()]
        return format_fields(type(self).__name__, fields)

    def _value_text(self) -> str:
        return format_value(self._value)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # IPython / Jupyter display: show values (``repr`` keeps the abstract form).
        printer.text(f"{type(self).__name__}(...)" if cycle else str(self))

    def __treescope_repr__(self, path: str | None, subtree_renderer: Any) -> Any:
        """Render in treescope (notebooks) as a constructor call with the value's leaves."""
        from treescope import repr_lib  # treescope calls this hook, so it is installed

        attributes: dict[str, Any] = {}
        if self._name is not None:
            attributes["name"] = self._name
        if self._tags:
            attributes["tag"] = sorted(self._tags)
        attributes["value"] = self._value
        return repr_lib.render_object_constructor(
            object_type=type(self),
            attributes=attributes,
            path=path,
            subtree_renderer=subtree_renderer,
            roundtrippable=False,
        )

    # -- misc -------------------------------------------------------------------------------
    def _aval_repr(self) -> str:
        leaves, treedef = jax.tree.flatten(self._value)
        shown = [_ShownAval(_leaf_aval_str(x)) for x in leaves]
        if treedef.num_leaves == 1 and treedef.num_nodes == 1:
            return repr(shown[0])
        return repr(jax.tree.unflatten(treedef, shown))

    def _repr_fields(self) -> list[tuple[str, Any]]:
        fields: list[tuple[str, Any]] = []
        if self._name is not None:
            fields.append(("name", repr(self._name)))
        if self._tags:
            tags = sorted(self._tags)
            fields.append(("tag", repr(tags[0] if len(tags) == 1 else tags)))
        fields.append(("value", self._aval_repr()))
        return fields

    def __repr__(self) -> str:
        return format_fields(type(self).__name__, self._repr_fields())

    def __reduce__(self) -> Any:
        # A State's identity is what transformations track, and a pickled copy would be
        # a different, unconnected state; checkpoints store values instead.
        raise TypeError(
            f"{self.describe()} cannot be pickled; save `state.value` (or "
            "`collect_states(obj).to_values()`) instead, and use copy.deepcopy for an "
            "in-memory copy."
        )


# Attributes State.__init__ sets itself; a deep copy recreates them instead of copying.
_BOOKKEEPING = frozenset(
    {"_value", "_name", "_tags", "strict", "_level", "_leaked_at", "_created_at", "_born_traced", "_source_info"}
)


class _ShownAval:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _dtype_of(x: Any) -> Any:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return np.asarray(x).dtype
    return dtype


class ShortTermState(State[T]):
    """A state that is reset between episodes or trials (e.g. a neuron's membrane potential).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ShortTermState
        >>> v = ShortTermState(jnp.zeros(4), name='v')
        >>> v.value = v.value + 1.0
        >>> v.value
        Array([1., 1., 1., 1.], dtype=float32)
    """

    __module__ = "state_core"


class LongTermState(State[T]):
    """A state that persists across episodes (e.g. running averages, counters).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import LongTermState
        >>> steps = LongTermState(jnp.asarray(0), name='steps')
        >>> steps.value = steps.value + 1
        >>> int(steps.value)
        1
    """

    __module__ = "state_core"


class ParamState(LongTermState[T]):
    """A trainable parameter.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> w = ParamState(jnp.ones((2, 3)), name='w')
        >>> w.value.shape
        (2, 3)
    """

    __module__ = "state_core"


class HiddenState(ShortTermState[T]):
    """The hidden state of a recurrent or dynamical system (e.g. an RNN carry).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import HiddenState
        >>> h = HiddenState(jnp.zeros(8), name='h')
        >>> h.value.shape, h.varshape, h.num_state
        ((8,), (8,), 1)
    """

    __module__ = "state_core"

    @property
    def varshape(self) -> tuple[int, ...]:
        """The shape of the hidden variable (shared by every leaf when the value is a pytree).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenState
            >>> HiddenState({'v': jnp.zeros((4, 3)), 'u': jnp.zeros((4, 3))}).varshape
            (4, 3)
        """
        shapes = {tuple(np.shape(leaf)) for leaf in jax.tree.leaves(self._value)}
        if len(shapes) != 1:
            shown = sorted(shapes) if shapes else "no leaves"
            raise ValueError(
                f"{self.describe()} has no single varshape: its leaves have shapes {shown}. "
                "Use one HiddenState per variable shape, or read `value` leaf by leaf."
            )
        return shapes.pop()

    @property
    def num_state(self) -> int:
        """How many hidden variables the state holds (its number of leaves).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenState
            >>> HiddenState((jnp.zeros(2), jnp.zeros(2))).num_state
            2
        """
        return len(jax.tree.leaves(self._value))


def check_not_state(tree: Any, where: str) -> None:
    """Raise ``TypeError`` if a State is a leaf of ``tree`` (``where`` names the place)."""
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

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, maybe_state
        >>> maybe_state(State(jnp.ones(2))), maybe_state(3.0)
        (Array([1., 1.], dtype=float32), 3.0)
    """
    return x.value if isinstance(x, State) else x


@contextlib.contextmanager
def check_state_value_tree(val: bool = True) -> Iterator[None]:
    """Check that writes keep each state's pytree structure (brainstate's name).

    States here always check the structure on every write (a ``ValueError``
    naming the state), so this block adds nothing and ``val=False`` cannot turn
    the check off; it exists so code written for brainstate runs unchanged. For
    shape and dtype checks too, use ``strict_state_checks()``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, check_state_value_tree
        >>> s = State(jnp.zeros(2), name='s')
        >>> with check_state_value_tree():
        ...     s.value = (jnp.zeros(2), jnp.zeros(2))
        Traceback (most recent call last):
        ...
        ValueError: Cannot assign to State 's': the new value has pytree structure ((*, *)) but the state holds (*). A state keeps its pytree structure; create a new State if you need a different one.
    """
    yield
