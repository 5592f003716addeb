"""Sharding annotations on States: ``State(value, sharding=P(...))`` read, checked and applied.

A State's ``sharding`` metadata is a ``jax.sharding.PartitionSpec`` (laid out on
the mesh set with ``jax.set_mesh``, or the one passed in) or a
``jax.sharding.NamedSharding`` (which names its own mesh). The helpers here turn
annotations into specs and shardings, check them against the values they describe
and move values onto the mesh; ``state_transform.jit`` and ``shard_map`` use the
same functions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ._collection import StateDict
from ._context import CTX
from ._graph import state_label
from ._jax_internals import ArrayImpl, context_mesh, is_tracer
from ._state import State
from ._state_io import write_state_values

__all__ = ["get_partition_spec", "get_named_sharding", "shard_states"]

_REPLICATED = PartitionSpec()


def sharding_annotation(state: State[Any]) -> PartitionSpec | NamedSharding | None:
    """The ``sharding`` metadata of ``state`` (``None`` when it has none); rejects other types.

    Raises:
        TypeError: the metadata is neither a ``PartitionSpec`` nor a ``NamedSharding``.
    """
    annotation = state.metadata.get("sharding")
    if annotation is None or isinstance(annotation, (PartitionSpec, NamedSharding)):
        return annotation
    raise TypeError(
        f"{state.describe()} has sharding={annotation!r}; a state's sharding must be a "
        "jax.sharding.PartitionSpec or a jax.sharding.NamedSharding (or None)."
    )


def annotated_spec(state: State[Any]) -> PartitionSpec | None:
    """The PartitionSpec of ``state``'s annotation (``None`` when it has none).

    Args:
        state: the state whose ``sharding`` metadata is read.

    Raises:
        TypeError: the metadata is neither a ``PartitionSpec`` nor a ``NamedSharding``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import NamedSharding, PartitionSpec as P
        >>> from state_core import State
        >>> from state_core.engine import annotated_spec
        >>> mesh = jax.make_mesh((jax.device_count(),), ('x',))
        >>> annotated_spec(State(jnp.zeros(8), sharding=NamedSharding(mesh, P('x'))))
        P('x',)
    """
    annotation = sharding_annotation(state)
    if isinstance(annotation, NamedSharding):
        return annotation.spec
    return annotation


def check_spec_fits(spec: PartitionSpec, mesh: Any, value: Any, where: str) -> None:
    """Raise ``ValueError`` (naming ``where``) unless ``spec`` on ``mesh`` fits every leaf of ``value``.

    Args:
        spec: the PartitionSpec to check.
        mesh: the mesh it is laid out on.
        value: the value (any pytree) whose every leaf must fit ``spec``.
        where: what the value is, the start of the message (a state's description).

    Raises:
        ValueError: ``spec`` has more entries than a leaf has dimensions, names an
            axis ``mesh`` lacks, or splits a dimension whose size the devices of its
            axes do not divide.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import PartitionSpec as P
        >>> from state_core.engine import check_spec_fits
        >>> mesh = jax.make_mesh((1,), ('x',))
        >>> check_spec_fits(P('x'), mesh, jnp.zeros(4), 'w')
        >>> check_spec_fits(P('y'), mesh, jnp.zeros(4), 'w')
        Traceback (most recent call last):
        ...
        ValueError: w is annotated with sharding P('y',), which names mesh axis 'y', but the mesh has axes ('x',).
    """
    for leaf in jax.tree.leaves(value):
        shape = tuple(leaf.shape) if hasattr(leaf, "shape") else tuple(np.shape(leaf))
        if len(spec) > len(shape):
            raise ValueError(
                f"{where} is annotated with sharding {spec}, which has {len(spec)} entries, but its "
                f"value has shape {shape} (rank {len(shape)}); give at most one entry per dimension."
            )
        for dim, entry in enumerate(spec):
            names = () if entry is None else (tuple(entry) if isinstance(entry, tuple) else (entry,))
            for name in names:
                if name not in mesh.shape:
                    raise ValueError(
                        f"{where} is annotated with sharding {spec}, which names mesh axis {name!r}, "
                        f"but the mesh has axes {tuple(mesh.axis_names)}."
                    )
            parts = math.prod(mesh.shape[n] for n in names)
            if shape[dim] % parts:
                raise ValueError(
                    f"{where} is annotated with sharding {spec}: dimension {dim} of its value "
                    f"(shape {shape}) has size {shape[dim]}, which is not divisible by the {parts} "
                    f"devices of mesh axes {names}. Pad the value or choose another axis."
                )


def state_sharding(state: State[Any], mesh: Any = None, path: Any = None) -> NamedSharding | None:
    """The checked ``NamedSharding`` ``state``'s annotation asks for, or ``None`` without one.

    A ``NamedSharding`` annotation keeps its own mesh unless ``mesh`` is given; a
    PartitionSpec needs ``mesh`` or the mesh set with ``jax.set_mesh``. Raises
    ``ValueError`` naming the state (and ``path``) when there is no mesh or the
    spec does not fit the value.

    Args:
        state: the annotated state.
        mesh: the mesh to lay the annotation out on; None: a NamedSharding's own mesh, else the mesh set with
            ``jax.set_mesh``.
        path: the state's path in its collection, named in error messages; None: no path.

    Raises:
        ValueError: no mesh is given or set, or the spec does not fit the value
            (see ``check_spec_fits``).
        TypeError: the annotation is neither a ``PartitionSpec`` nor a ``NamedSharding``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import PartitionSpec as P
        >>> from state_core import State
        >>> from state_core.engine import state_sharding
        >>> mesh = jax.make_mesh((1,), ('x',))
        >>> state_sharding(State(jnp.zeros(4), sharding=P('x')), mesh).spec
        P('x',)
        >>> state_sharding(State(jnp.zeros(4))) is None
        True
    """
    annotation = sharding_annotation(state)
    if annotation is None:
        return None
    spec = annotation.spec if isinstance(annotation, NamedSharding) else annotation
    if mesh is None:
        mesh = annotation.mesh if isinstance(annotation, NamedSharding) else context_mesh()
    if mesh is None:
        raise ValueError(
            f"{state_label(state, path)} is annotated with sharding {spec}, but no mesh is set: call "
            "jax.set_mesh(mesh) (or use it as a context manager) before using it, pass mesh=..., "
            "or annotate with a jax.sharding.NamedSharding(mesh, spec)."
        )
    check_spec_fits(spec, mesh, state._value, state_label(state, path))
    if isinstance(annotation, NamedSharding) and annotation.mesh is mesh:
        return annotation
    return NamedSharding(mesh, spec)


def _placed(x: Any, sharding: NamedSharding) -> bool:
    """True if ``x`` already lies on ``sharding``, or on its full-rank form (``full_rank``).

    Any other equivalent layout (the same devices under another mesh) is moved.
    """
    have = getattr(x, "sharding", None)
    return have == sharding or (have is not None and have == full_rank(sharding, x.ndim))


@functools.lru_cache(maxsize=256)
def full_rank(sharding: NamedSharding, ndim: int) -> NamedSharding:
    """``sharding`` with its spec padded by ``None`` to ``ndim`` dimensions (``P()`` -> ``P(None, None)``).

    It is the form JAX gives a compiled program's outputs, and the same layout:
    a program's written state comes back in it, and JAX runs the program compiled
    for ``P()`` on it without compiling again (checked at both ends of the JAX
    range), so a value in this form is taken as placed, not moved every call.

    Args:
        sharding: the declared ``NamedSharding``.
        ndim: the number of dimensions of the value.

    Example:
        >>> import jax
        >>> from jax.sharding import NamedSharding, PartitionSpec as P
        >>> from state_core._sharding import full_rank
        >>> mesh = jax.make_mesh((jax.device_count(),), ('x',))
        >>> full_rank(NamedSharding(mesh, P('x')), 2).spec
        P('x', None)
    """
    missing = ndim - len(sharding.spec)
    if missing <= 0:
        return sharding
    spec = PartitionSpec(*sharding.spec, *(None,) * missing)
    return NamedSharding(sharding.mesh, spec, memory_kind=sharding.memory_kind)


def place_value(value: Any, sharding: NamedSharding) -> Any:
    """``value`` with every leaf on ``sharding``; ``value`` itself when nothing moves.

    Tracers are left alone (and nothing is staged into an enclosing plain
    ``jax.jit``). On a mesh spanning several processes every process holds the
    whole value and keeps the shards of its own devices; typed PRNG keys move as
    their key data.

    Args:
        value: any pytree of arrays (and tracers, left alone).
        sharding: the sharding every leaf is placed on.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import NamedSharding, PartitionSpec as P
        >>> from state_core.engine import place_value
        >>> mesh = jax.make_mesh((jax.device_count(),), ('x',))
        >>> place_value(jnp.zeros(jax.device_count()), NamedSharding(mesh, P('x'))).sharding.spec
        P('x',)
    """
    leaves, treedef = jax.tree.flatten(value)
    if all(is_tracer(x) or _placed(x, sharding) for x in leaves):
        return value
    with jax.ensure_compile_time_eval():
        moved = [x if is_tracer(x) or _placed(x, sharding) else _put_leaf(x, sharding) for x in leaves]
    return jax.tree.unflatten(treedef, moved)


def _put_leaf(x: Any, sharding: NamedSharding) -> jax.Array:
    if jax.process_count() == 1:
        placed: jax.Array = jax.device_put(x, sharding)
        return placed
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        data = _put_leaf(jax.random.key_data(x), sharding)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        moved: jax.Array = jax.device_put(x, sharding)  # already global: JAX moves shards between processes
        return moved
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def input_placer(
    in_states: Sequence[State[Any]],
    shardings: Sequence[NamedSharding | None],
    place: Callable[[Any, NamedSharding], Any] = place_value,
) -> Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]]:
    """A ``Program.prepare`` that moves input state values to the shardings the program expects.

    A value moved eagerly is stored back in its state, so the next call finds it in
    place (no copy, no new compile for a new input layout). This happens before the
    program runs and stores the same value on another layout; the moved values are
    stored together, through the one write-back (``write_state_values``), all or none.

    Args:
        in_states: the program's input states (``Trace.in_states``).
        shardings: one ``NamedSharding`` per input state, or None for a state the
            program takes as it is.
        place: ``place(value, sharding) -> value``: how one state value is moved
            (default ``place_value``); an engine with a layout of its own passes
            its placement.

    Returns:
        ``prepare(values, leaves) -> (values, leaves)``, with one value per input
        state; the dynamic argument leaves pass through.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import NamedSharding, PartitionSpec as P
        >>> from state_core import State
        >>> from state_core.engine import input_placer
        >>> mesh = jax.make_mesh((jax.device_count(),), ('x',))
        >>> s = State(jnp.zeros(jax.device_count()))
        >>> prepare = input_placer([s], [NamedSharding(mesh, P('x'))])
        >>> _ = prepare([s.value], [])
        >>> s.value.sharding.spec
        P('x',)
    """
    positions = [(k, sharding) for k, sharding in enumerate(shardings) if sharding is not None]

    def prepare(values: list[Any], leaves: list[Any]) -> tuple[list[Any], list[Any]]:
        moved: list[int] = []
        for k, sharding in positions:
            value = values[k]
            if type(value) is ArrayImpl and _placed(value, sharding):
                continue  # already placed (or in the form the program's outputs take): the common case
            placed = place(value, sharding)
            if placed is not value:
                values[k] = placed
                moved.append(k)
        if moved and not CTX.stacks:
            write_state_values([in_states[k] for k in moved], [values[k] for k in moved], "placing input states")
        return values, leaves

    return prepare


# ---------------------------------------------------------------------- user-facing helpers
def _is_state(x: Any) -> bool:
    return isinstance(x, State)


def _map_states(fn: Any, states: Any, what: str) -> Any:
    """Apply ``fn(state, path)`` to a State, a StateDict (giving a ``{path: result}`` dict) or a pytree of States."""
    if isinstance(states, State):
        return fn(states, None)
    if isinstance(states, StateDict):
        return {path: fn(state, path) for path, state in states.items()}
    if isinstance(states, (dict, list, tuple)):
        return jax.tree_util.tree_map_with_path(lambda p, s: fn(s, p), states, is_leaf=_is_state)
    raise TypeError(
        f"{what} expects a State, a StateDict (e.g. module.states() or collect_states(obj)) or a "
        f"dict/list/tuple of States, got {type(states).__name__}."
    )


def _check_states(states: Any, what: str) -> None:
    if isinstance(states, (dict, list, tuple)) and not isinstance(states, StateDict):
        for leaf in jax.tree.leaves(states, is_leaf=_is_state):
            if not isinstance(leaf, State):
                raise TypeError(f"{what} expects States in the collection, found a {type(leaf).__name__}.")


def get_partition_spec(states: Any) -> Any:
    """The PartitionSpec each state is annotated with (``P()`` for unannotated ones).

    Args:
        states: a ``State``, a ``StateDict`` (``module.states()``,
            ``collect_states(obj)``) or a dict/list/tuple of States.

    Returns:
        A PartitionSpec for a State; ``{path: spec}`` for a StateDict (the same
        keys as ``StateDict.to_values()``); the same container with specs in place
        of States otherwise.

    Example:
        >>> import jax.numpy as jnp
        >>> from jax.sharding import PartitionSpec as P
        >>> from state_core import ParamState, State, collect_states, get_partition_spec
        >>> net = {'w': ParamState(jnp.ones((4, 8)), sharding=P(None, 'model')), 'h': State(jnp.zeros(8))}
        >>> get_partition_spec(collect_states(net))
        {('w',): P(None, 'model'), ('h',): P()}
    """
    _check_states(states, "get_partition_spec")
    return _map_states(lambda s, _p: annotated_spec(s) or _REPLICATED, states, "get_partition_spec")


def get_named_sharding(states: Any, mesh: Mesh) -> Any:
    """The ``NamedSharding`` on ``mesh`` of each state's annotation (replicated for unannotated ones).

    Structured like ``get_partition_spec``. Each annotation is checked against
    the state's value: a ``ValueError`` names the state when the spec has more
    entries than the value has dimensions, names an axis the mesh lacks, or
    splits a dimension the mesh axis size does not divide.

    Args:
        states: a ``State``, a ``StateDict`` (``module.states()``, ``collect_states(obj)``) or a dict/list/tuple of
            States.
        mesh: the ``jax.sharding.Mesh`` to lay the annotations out on.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import PartitionSpec as P
        >>> from state_core import ParamState, get_named_sharding
        >>> mesh = jax.make_mesh((2, 4), ('data', 'model'))
        >>> w = ParamState(jnp.ones((4, 8)), sharding=P(None, 'model'))
        >>> get_named_sharding(w, mesh).spec
        P(None, 'model')
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"get_named_sharding: mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}.")
    _check_states(states, "get_named_sharding")

    def named(state: State[Any], path: Any) -> NamedSharding:
        found = state_sharding(state, mesh, path)
        return found if found is not None else NamedSharding(mesh, _REPLICATED)

    return _map_states(named, states, "get_named_sharding")


def _flatten_states(states: Any) -> Iterable[tuple[Any, State[Any]]]:
    if isinstance(states, State):
        return [(None, states)]
    if isinstance(states, StateDict):
        return list(states.items())
    return jax.tree_util.tree_flatten_with_path(states, is_leaf=_is_state)[0]


def shard_states(states: Any, mesh: Mesh | None = None) -> None:
    """Move the states' values onto the devices their ``sharding`` annotations name.

    An annotated state gets its annotation's sharding (a PartitionSpec on
    ``mesh``, or on the mesh set with ``jax.set_mesh`` when ``mesh`` is None; a
    NamedSharding on its own mesh unless ``mesh`` is given). Unannotated states
    are replicated on the mesh when there is one, otherwise left where they are.
    Every annotation is checked first, so an error (a ``ValueError`` naming the
    state) leaves every value where it was. Values are unchanged; only their
    placement moves.

    Args:
        states: a ``State``, a ``StateDict`` (``module.states()``) or a
            dict/list/tuple of States.
        mesh: the mesh for PartitionSpec annotations; default: the mesh set
            with ``jax.set_mesh``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import PartitionSpec as P
        >>> from state_core import ParamState, shard_states
        >>> mesh = jax.make_mesh((2, 4), ('data', 'model'))
        >>> w = ParamState(jnp.ones((4, 8)), sharding=P(None, 'model'))
        >>> shard_states([w], mesh)
        >>> w.value.sharding.spec, w.value.addressable_shards[0].data.shape
        (P(None, 'model'), (4, 2))
    """
    if mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"shard_states: mesh must be a jax.sharding.Mesh or None, got {type(mesh).__name__}.")
    _check_states(states, "shard_states")
    fallback = mesh if mesh is not None else context_mesh()
    plan = []
    for path, state in _flatten_states(states):
        if path is not None and not isinstance(states, StateDict):
            path = tuple(getattr(k, "key", getattr(k, "idx", k)) for k in path)
        sharding = state_sharding(state, mesh, path)
        if sharding is None and fallback is not None:
            sharding = NamedSharding(fallback, _REPLICATED)
        if sharding is not None:
            plan.append((state, sharding))
    # Everything was checked: now move (a value already in place is not copied).
    placed = [(state, place_value(state.value, sharding)) for state, sharding in plan]
    for state, value in placed:
        state.value = value
