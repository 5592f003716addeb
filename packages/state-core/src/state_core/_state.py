"""``State``: an explicit, mutable container of a pytree of arrays."""

from __future__ import annotations

import contextlib
from typing import Any, Generic, Iterable, Iterator, TypeVar

import jax
import numpy as np

from ._context import CTX, GENERATION, user_call_site
from ._jax_internals import current_trace, is_tracer
from ._pretty import format_fields

__all__ = [
    "State",
    "ShortTermState",
    "LongTermState",
    "ParamState",
    "HiddenState",
    "StateLeakError",
    "strict_state_checks",
]

T = TypeVar("T")


class StateLeakError(RuntimeError):
    """A traced value escaped from the transformation that produced it."""


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


def _describe_structure(tree: Any) -> str:
    return str(jax.tree.structure(tree)).replace("PyTreeDef", "")


def _leaf_aval_str(leaf: Any) -> str:
    try:
        return repr(jax.typeof(leaf))
    except TypeError:
        return type(leaf).__name__


def _contains_tracer(tree: Any) -> bool:
    return any(is_tracer(leaf) for leaf in jax.tree.leaves(tree))


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
    are the same object.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> w = ParamState(jnp.ones((2, 4)))
        >>> w.value = w.value * 2
        >>> w
        ParamState(
          value=ShapedArray(float32[2,4])
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
        self._value = value
        self._name = name
        GENERATION.value += 1  # lets engines notice object graphs that gained new States
        if tag is None:
            self._tags: frozenset[str] = frozenset()
        elif isinstance(tag, str):
            self._tags = frozenset((tag,))
        else:
            self._tags = frozenset(tag)
        self.strict = bool(strict)
        self.metadata: dict[str, Any] = metadata
        stacks = CTX.stacks
        # A state created inside a trace is local to it: only stacks opened later record it.
        self._level = len(stacks)
        self._leaked_at: str | None = None
        if stacks:
            self._created_at: str | None = user_call_site()
            stacks[-1]._created.append(self)
        else:
            self._created_at = None
        # A state born holding tracers belongs to the JAX trace that made those tracers.
        self._born_traced = bool(stacks) or _contains_tracer(value)
        for catcher in CTX.catchers:
            catcher._add(self)

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
    def tag(self) -> str | None:
        """The single tag of this state, ``None`` when it has none (several: sorted first)."""
        return min(self._tags) if self._tags else None

    def describe(self) -> str:
        """A short human description used in error messages, e.g. ``ParamState 'weight'``."""
        kind = type(self).__name__
        if self._name:
            return f"{kind} '{self._name}'"
        return f"{kind} holding {self._aval_repr()}"

    # -- value ---------------------------------------------------------------------------
    @property
    def value(self) -> T:
        """The current value; reading records the access on active trace stacks."""
        if self._leaked_at is not None:
            self._raise_leaked()
        stacks = CTX.stacks
        if len(stacks) > self._level:
            for stack in stacks[self._level :]:
                stack._on_read(self)
        return self._value

    @value.setter
    def value(self, new_value: T) -> None:
        if self._leaked_at is not None:
            self._raise_leaked()
        if isinstance(new_value, State):
            raise TypeError(
                f"Cannot assign a State to {self.describe()}.value; assign `other.value` instead."
            )
        self._check_write(new_value)
        stacks = CTX.stacks
        if len(stacks) > self._level:
            if stacks[-1]._jax_trace is not current_trace() and _contains_tracer(new_value):
                raise StateLeakError(
                    f"{self.describe()} was written inside a JAX transformation that is not "
                    "state-aware (for example the body of jax.lax.scan / jax.lax.cond, or a plain "
                    "jax.vmap / jax.checkpoint) nested in a state-aware one. The traced value "
                    "would leak out of that transformation. Carry the value through the "
                    "transformation's outputs (e.g. the scan carry) and write the state after it, "
                    "or use the state-aware version of the transformation."
                )
            for stack in stacks[self._level :]:
                stack._on_write(self)
        elif not self._born_traced and _contains_tracer(new_value):
            raise StateLeakError(
                f"{self.describe()} was assigned a JAX tracer outside any state-aware "
                "transformation (for example inside a plain jax.jit, jax.vmap or jax.grad). "
                "The traced value would leak out of that transformation. Use the state-aware "
                "versions (state_transform.jit / vmap2 / grad) so the write is returned and "
                "applied after the call, or return the value instead of storing it."
            )
        self._value = new_value

    def restore_value(self, value: T) -> None:
        """Set the value without recording a write and without checks.

        Transformations use this to put values back (for example after tracing or
        when an error undoes a call). Restoring a concrete value into a state that
        was created inside a finished trace makes it usable again.
        """
        if self._leaked_at is not None and (CTX.stacks or not _contains_tracer(value)):
            self._leaked_at = None
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
            for path_and_old, new in zip(
                jax.tree.leaves_with_path(self._value), jax.tree.leaves(new_value)
            ):
                path, old = path_and_old
                if np.shape(old) != np.shape(new) or _dtype_of(old) != _dtype_of(new):
                    where = jax.tree_util.keystr(path) if path else ""
                    raise ValueError(
                        f"Strict state check failed for {self.describe()}{where}: the state "
                        f"holds {_leaf_aval_str(old)} but the new value is {_leaf_aval_str(new)}. "
                        "Cast or reshape the value, or leave strict mode to allow the change."
                    )

    def _raise_leaked(self) -> None:
        raise StateLeakError(
            f"{self.describe()} was created inside a traced function at {self._leaked_at} "
            "and is used after that trace finished; its value is a stale tracer. Create "
            "states outside transformed functions, or create them with "
            "state_transform.vmap2_new_states / catch_new_states and export their values."
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
            fields.append(("tag", repr(self.tag if len(self._tags) == 1 else sorted(self._tags))))
        fields.append(("value", self._aval_repr()))
        return fields

    def __repr__(self) -> str:
        return format_fields(type(self).__name__, self._repr_fields())

    def __reduce__(self) -> Any:
        raise TypeError(f"{self.describe()} cannot be pickled; save `state.value` instead.")


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
        >>> h.value.shape
        (8,)
    """

    __module__ = "state_core"


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
