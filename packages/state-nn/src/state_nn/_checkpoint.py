"""Saving and restoring the States of a model with orbax-checkpoint.

A checkpoint is one orbax directory with two items: ``values`` (every array
leaf of every saved state that holds at least one element, stored under a
generated name) and ``meta`` (JSON: the format version, package versions, the
user's metadata, and for each state its path, its class and the shape, dtype and
kind of each leaf). Zero-size leaves are described in ``meta`` only: orbax cannot
store them, and their shape and dtype are all there is to restore. Restoring
reads ``meta`` first, checks the target against it, reads only the leaves it
needs, checks them against ``meta``, and only then writes every target state at
once. How a save replaces a checkpoint atomically is in ``_checkpoint_disk``.

orbax is imported on first use only, so ``import state_nn`` stays light.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
from collections.abc import Hashable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import state_core
import state_random
from state_core import State, StateDict
from state_core.engine import write_state_values
from state_core.filter import FilterLike

from ._checkpoint_disk import (
    FORMAT,
    FORMAT_VERSION,
    checkpointer,
    first_line,
    is_replaceable,
    load_meta,
    location_to_read,
    recover,
    replace,
)

__all__ = ["save", "restore", "read_metadata", "DEFAULT_PATH", "FORMAT_VERSION"]

Path = tuple[Hashable, ...]

DEFAULT_PATH: Path = ("state_random.DEFAULT",)
"""The path under which ``save`` stores ``state_random.DEFAULT`` (reserved: a target may not use it)."""

_INSTALL_HINT = "install it with `pip install state-nn[checkpoint]`"
_MAX_LISTED = 8
_RESAVE = "Re-save it with state_nn.checkpoint.save, or restore another checkpoint."


def _orbax() -> Any:
    try:
        import orbax.checkpoint as ocp
    except ImportError as err:
        raise ImportError(
            f"state_nn.checkpoint needs the optional dependency orbax-checkpoint; {_INSTALL_HINT}."
        ) from err
    return ocp


def _show(path: Path) -> str:
    return ".".join(map(str, path)) if path else "<root>"


def _listing(paths: list[Path]) -> str:
    shown = ", ".join(repr(_show(p)) for p in paths[:_MAX_LISTED])
    return shown + (f" and {len(paths) - _MAX_LISTED} more" if len(paths) > _MAX_LISTED else "")


# ---------------------------------------------------------------------- leaves
@dataclasses.dataclass(frozen=True)
class _LeafInfo:
    """How one leaf of a state's value is stored: kind, shape, dtype (and key impl)."""

    kind: str  # "array" (jax.Array), "key" (typed PRNG key), "numpy", "python"
    shape: tuple[int, ...]
    dtype: str  # for keys: the PRNG implementation name
    pytype: str | None = None  # for "python": int / float / bool / complex

    def describe(self) -> str:
        if self.kind == "key":
            return f"key<{self.dtype}>{list(self.shape)}"
        return f"{self.dtype}{list(self.shape)}"

    def matches(self, other: _LeafInfo) -> bool:
        # Arrays may come back as numpy / Python numbers and back: only keys are a kind apart.
        return (self.kind == "key") == (other.kind == "key") and self.shape == other.shape and self.dtype == other.dtype


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _leaf_info(leaf: Any, path: Path, where: str, fn: str) -> _LeafInfo:
    if isinstance(leaf, jax.core.Tracer):
        raise RuntimeError(
            f"{fn}: state {_show(path)!r} holds a traced value{where}; call {fn} outside "
            "jit / grad / vmap and other transformations."
        )
    if isinstance(leaf, jax.Array):
        if _is_key(leaf):
            return _LeafInfo("key", tuple(leaf.shape), str(jax.random.key_impl(leaf)))
        return _LeafInfo("array", tuple(leaf.shape), str(leaf.dtype))
    if isinstance(leaf, (np.ndarray, np.generic)):
        return _LeafInfo("numpy", tuple(leaf.shape), str(leaf.dtype))
    if isinstance(leaf, (bool, int, float, complex)):
        return _LeafInfo("python", (), str(np.asarray(leaf).dtype), type(leaf).__name__)
    raise TypeError(
        f"{fn}: state {_show(path)!r} holds a {type(leaf).__name__}{where}; only arrays, "
        "typed PRNG keys and Python numbers can be checkpointed."
    )


@dataclasses.dataclass
class _Entry:
    """One state of the checkpoint (or of the target): its leaves, in tree order."""

    path: Path
    type_name: str
    names: list[str | None]  # the leaves' storage names (None: zero-size, not stored; empty for a target)
    wheres: list[str]  # jax.tree_util.keystr of each leaf inside the value
    leaves: list[_LeafInfo]


def _describe_value(path: Path, state: State[Any], fn: str) -> tuple[_Entry, list[Any], Any]:
    """The entry, the leaves and the treedef of ``state``'s current value."""
    with_path, treedef = jax.tree_util.tree_flatten_with_path(state.value)
    wheres = [jax.tree_util.keystr(kp) for kp, _ in with_path]
    leaves = [leaf for _, leaf in with_path]
    infos = [_leaf_info(leaf, path, f" at {w}" if w else "", fn) for w, leaf in zip(wheres, leaves, strict=True)]
    return _Entry(path, type(state).__name__, [], wheres, infos), leaves, treedef


# ---------------------------------------------------------------------- targets
def _target_states(target: Any, filters: tuple[FilterLike, ...], with_default: bool, fn: str) -> StateDict:
    """``path -> State`` of ``target`` (plus ``DEFAULT`` when asked), filtered."""
    if isinstance(target, StateDict):
        states = StateDict(target)
    elif isinstance(target, State):
        states = StateDict({(): target})
    elif isinstance(target, (str, bytes, int, float, complex, np.ndarray, jax.Array)) or target is None:
        raise TypeError(
            f"{fn}: `target` must be a Module, a StateDict, a dict of States or another object "
            f"holding States, got {type(target).__name__}."
        )
    else:
        states = state_core.collect_states(target)
    if not states:
        raise ValueError(
            f"{fn}: `target` ({type(target).__name__}) holds no State; pass the Module, StateDict "
            "or dict of States to checkpoint."
        )
    for path in states:
        for key in path:
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(
                    f"{fn}: state {_show(path)!r} is reached through the key {key!r} of type "
                    f"{type(key).__name__}; checkpoint paths may contain only str and int keys."
                )
    if with_default and not any(s is state_random.DEFAULT for s in states.values()):
        if DEFAULT_PATH in states:
            raise ValueError(
                f"{fn}: `target` has its own state at {_show(DEFAULT_PATH)!r}, the path reserved "
                "for state_random.DEFAULT; rename it or pass include_default=False."
            )
        states[DEFAULT_PATH] = state_random.DEFAULT
    if filters:
        states = states.filter(*filters)
        if not states:
            raise ValueError(f"{fn}: no state of `target` matches the filters {filters!r}.")
    return states


def _check_no_trace(fn: str) -> None:
    if state_core.active_trace_stacks():
        raise RuntimeError(
            f"{fn} cannot run inside a state-aware transformation (jit, grad, vmap2 ...); "
            "call it between steps, outside the transformed function."
        )


def _resolve(path: str | os.PathLike[str], fn: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{fn}: `path` must be a str or os.PathLike, got {type(path).__name__}.")
    return os.path.abspath(os.fspath(path))


def _versions() -> dict[str, str]:
    import importlib.metadata

    import state_transform

    from .__about__ import __version__

    found = {
        "state-nn": __version__,
        "state-core": state_core.__version__,
        "state-random": state_random.__version__,
        "state-transform": state_transform.__version__,
        "jax": jax.__version__,
    }
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):  # orbax imported from a source tree
        found["orbax-checkpoint"] = importlib.metadata.version("orbax-checkpoint")
    return found


# ---------------------------------------------------------------------- save
def save(
    path: str | os.PathLike[str],
    target: Any,
    *filters: FilterLike,
    include_default: bool = True,
    metadata: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> None:
    """Write the States of ``target`` to a new checkpoint directory at ``path``.

    ``target`` is a Module, a ``StateDict``, a dict of States (nested dicts and
    Modules allowed) or any object holding States. Each state is stored under its
    path with its values and dtypes; typed PRNG keys are stored as key data plus
    the name of their implementation and come back as typed keys.

    The global random stream ``state_random.DEFAULT`` (which ``Dropout`` and the
    module-level samplers draw from) is saved too, under ``DEFAULT_PATH``, so a
    resumed run draws the same numbers; ``include_default=False`` leaves it out.

    The new checkpoint is written next to ``path`` and moved in only once it is
    complete, so a save that fails or is killed never damages the checkpoint
    already at ``path``: it stays restorable, and the next save removes whatever
    the interrupted one left behind. States with zero elements are saved too.

    Args:
        path: the checkpoint directory to create (it must not exist, unless
            ``overwrite=True`` and it holds a checkpoint written by ``save``).
        target: the object whose States are saved.
        *filters: save only the states matching any of these ``state_core``
            filters (``DEFAULT`` counts as a ``RandomState`` at ``DEFAULT_PATH``).
        include_default: also save ``state_random.DEFAULT`` (default ``True``).
        metadata: JSON-serialisable data to store alongside (a step number,
            a config); ``restore`` and ``read_metadata`` return it.
        overwrite: replace an existing checkpoint at ``path`` (also a damaged
            one; never a directory that ``save`` did not write).

    Raises:
        ImportError: orbax-checkpoint is not installed.
        FileExistsError: ``path`` exists and ``overwrite`` is false, or it is
            not a checkpoint.
        TypeError / ValueError: a state holds something that is not an array,
            key or number, ``target`` holds no State, or ``metadata`` is not JSON.

    Example:
        >>> import os, tempfile
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> model = state_nn.Linear(2, 3)
        >>> path = os.path.join(tempfile.mkdtemp(), 'ckpt')
        >>> state_nn.checkpoint.save(path, model, metadata={'step': 10})
        >>> state_nn.checkpoint.read_metadata(path)['paths']
        [('weight',), ('bias',), ('state_random.DEFAULT',)]
    """
    fn = "save"
    ocp = _orbax()
    _check_no_trace(fn)
    directory = _resolve(path, fn)
    if not isinstance(include_default, bool):
        raise TypeError(f"{fn}: `include_default` must be a bool, got {type(include_default).__name__}.")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"{fn}: `metadata` must be a dict (JSON-serialisable), got {type(metadata).__name__}.")
    user_metadata = dict(metadata) if metadata is not None else {}
    try:
        json.dumps(user_metadata)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{fn}: `metadata` must be JSON-serialisable: {err}.") from None

    states = _target_states(target, filters, include_default, fn)
    values: dict[str, Any] = {}
    entries = []
    for i, (state_path, state) in enumerate(states.items()):
        entry, leaves, _ = _describe_value(state_path, state, fn)
        for j, (info, leaf) in enumerate(zip(entry.leaves, leaves, strict=True)):
            if math.prod(info.shape) == 0:  # nothing to store; meta holds its shape and dtype
                entry.names.append(None)
                continue
            name = f"s{i}_{j}"
            entry.names.append(name)
            if info.kind == "key":
                values[name] = jax.random.key_data(leaf)
            elif info.kind == "array":
                values[name] = leaf
            else:
                values[name] = np.asarray(leaf)
        entries.append(entry)

    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "versions": _versions(),
        "metadata": user_metadata,
        "states": [_entry_to_json(e) for e in entries],
    }
    recover(directory)  # a save killed earlier: its previous checkpoint back in place, leftovers gone
    if os.path.lexists(directory):
        if not overwrite:
            raise FileExistsError(
                f"{fn}: {directory!r} already exists; choose a new path or pass overwrite=True to replace a checkpoint."
            )
        if not (os.path.isdir(directory) and is_replaceable(load_meta(ocp, directory), directory)):
            raise FileExistsError(
                f"{fn}: {directory!r} exists and is not a checkpoint written by "
                "state_nn.checkpoint.save; overwrite=True replaces only such checkpoints."
            )
    items = {"meta": ocp.args.JsonSave(meta)}
    if values:  # orbax refuses an empty item
        items["values"] = ocp.args.PyTreeSave(values)

    def write(new: str) -> None:
        with checkpointer(ocp) as writer:
            writer.save(new, args=ocp.args.Composite(**items))

    os.makedirs(os.path.dirname(directory), exist_ok=True)
    replace(directory, write)


def _entry_to_json(entry: _Entry) -> dict[str, Any]:
    return {
        "path": list(entry.path),
        "type": entry.type_name,
        "leaves": [
            {"name": n, "where": w, "kind": i.kind, "shape": list(i.shape), "dtype": i.dtype, "pytype": i.pytype}
            for n, w, i in zip(entry.names, entry.wheres, entry.leaves, strict=True)
        ],
    }


def _entry_from_json(data: dict[str, Any]) -> _Entry:
    leaves = data["leaves"]
    return _Entry(
        tuple(data["path"]),
        data["type"],
        [leaf["name"] for leaf in leaves],
        [leaf["where"] for leaf in leaves],
        [_LeafInfo(leaf["kind"], tuple(leaf["shape"]), leaf["dtype"], leaf.get("pytype")) for leaf in leaves],
    )


# ---------------------------------------------------------------------- reading
def _read_meta(ocp: Any, directory: str, fn: str) -> tuple[str, dict[str, Any]]:
    """The directory holding the checkpoint at ``directory`` and its ``meta`` item, checked."""
    location = location_to_read(directory)
    if location is None:
        raise FileNotFoundError(f"{fn}: no checkpoint directory at {directory!r}.")
    if not os.path.isdir(location):
        raise ValueError(
            f"{fn}: {directory!r} is a file, not a checkpoint directory written by state_nn.checkpoint.save."
        )
    report = load_meta(ocp, location)
    if report.status == "foreign":
        raise ValueError(
            f"{fn}: {location!r} is not a checkpoint written by state_nn.checkpoint.save ({report.problem}); "
            "pass the directory that save created."
        )
    if report.status == "damaged":
        raise ValueError(f"{fn}: the checkpoint at {location!r} is damaged: {report.problem}. {_RESAVE}")
    meta = report.meta
    assert meta is not None
    if report.status == "newer":
        versions = meta.get("versions")
        written_by = (
            versions.get("state-nn", "an unknown version") if isinstance(versions, dict) else "an unknown version"
        )
        raise ValueError(
            f"{fn}: the checkpoint at {location!r} has format version {meta['format_version']!r}, newer than "
            f"the {FORMAT_VERSION} this state-nn reads; upgrade state-nn (it was written with {written_by})."
        )
    return location, meta


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Describe the checkpoint at ``path`` without reading its arrays.

    Returns a dict with ``format_version``, ``versions`` (package versions that
    wrote it), ``metadata`` (what was passed to ``save``) and ``paths`` (the
    saved states' paths, in order).

    Args:
        path: the checkpoint directory written by ``save``.

    Example:
        >>> import os, tempfile
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> path = os.path.join(tempfile.mkdtemp(), 'ckpt')
        >>> state_nn.checkpoint.save(path, {'w': state_core.ParamState(jnp.ones(2))},
        ...                          include_default=False, metadata={'step': 3})
        >>> info = state_nn.checkpoint.read_metadata(path)
        >>> info['metadata'], info['paths'], info['format_version']
        ({'step': 3}, [('w',)], 1)
    """
    fn = "read_metadata"
    _, meta = _read_meta(_orbax(), _resolve(path, fn), fn)
    return {
        "format_version": meta["format_version"],
        "versions": meta["versions"],
        "metadata": meta["metadata"],
        "paths": [tuple(s["path"]) for s in meta["states"]],
    }


# ---------------------------------------------------------------------- restore
def restore(
    path: str | os.PathLike[str],
    target: Any,
    *filters: FilterLike,
    include_default: bool | None = None,
    shardings: Any = None,
) -> dict[str, Any]:
    """Load a checkpoint written by ``save`` into the States of ``target``.

    ``target`` must hold states with the same paths, shapes and dtypes as the
    saved ones (build the model the same way, then restore). Each restored array
    gets the sharding of the target state's current value, so restoring onto a
    model placed on a mesh keeps its placement; ``shardings`` overrides it.

    Everything is read and checked before any state is written: on any error the
    target keeps all its values. Then every state is written at once: an
    interrupt (``KeyboardInterrupt``) during the write still leaves all of them
    restored, never some.

    Args:
        path: a checkpoint directory written by ``save``.
        target: the Module, ``StateDict`` or dict of States to restore into.
        *filters: restore only the target's states matching any of these
            ``state_core`` filters (a partial restore, for example
            ``state_core.ParamState`` to load weights only). Without filters the
            target's states and the checkpoint's must correspond one to one.
        include_default: ``None`` (default) restores ``state_random.DEFAULT`` when
            the checkpoint holds it; ``True`` requires it; ``False`` leaves
            ``DEFAULT`` untouched. ``DEFAULT`` also goes through ``filters``.
        shardings: a ``jax.sharding.Sharding`` for every array, or a dict
            ``path -> Sharding`` for some states (the others keep the target's).

    Returns:
        The ``metadata`` dict given to ``save``.

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: ``path`` is not such a checkpoint, the checkpoint is damaged
            or incomplete (unreadable metadata, missing arrays; re-save it), a
            target state is missing from it, or a shape, dtype or value
            structure differs (the message names the state's path).

    Example:
        >>> import os, tempfile
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> w = state_core.ParamState(jnp.arange(3.0))
        >>> path = os.path.join(tempfile.mkdtemp(), 'ckpt')
        >>> state_nn.checkpoint.save(path, {'w': w}, metadata={'step': 7})
        >>> w.value = jnp.zeros(3)
        >>> state_nn.checkpoint.restore(path, {'w': w})
        {'step': 7}
        >>> w.value
        Array([0., 1., 2.], dtype=float32)
    """
    fn = "restore"
    ocp = _orbax()
    _check_no_trace(fn)
    directory = _resolve(path, fn)
    if include_default is not None and not isinstance(include_default, bool):
        raise TypeError(f"{fn}: `include_default` must be None or a bool, got {type(include_default).__name__}.")
    location, meta = _read_meta(ocp, directory, fn)
    saved = {e.path: e for e in map(_entry_from_json, meta["states"])}
    with_default = include_default is True or (include_default is None and DEFAULT_PATH in saved)
    states = _target_states(target, filters, with_default, fn)
    explicit = _check_shardings(shardings, states, fn)

    plan = _plan(states, saved, bool(filters), location, fn)
    read = _read_arrays(ocp, location, saved, plan, explicit, fn)
    new_values = []
    for state_path, (_, stored, current, treedef) in plan.items():
        leaves = []
        for name, where, info, leaf in zip(stored.names, stored.wheres, stored.leaves, current, strict=True):
            shape, dtype = _stored_form(info, leaf)
            if name is None:  # a zero-size leaf: nothing was stored
                raw: Any = np.zeros(shape, dtype)
                if isinstance(leaf, jax.Array):
                    raw = jax.device_put(raw, explicit.get(state_path) or _sharding_of(leaf))
            else:
                raw = read[name]
                if tuple(raw.shape) != shape or np.dtype(raw.dtype) != dtype:
                    raise ValueError(
                        f"{fn}: the checkpoint at {location!r} is damaged: the array stored for state "
                        f"{_show(state_path)!r}{where} is {np.dtype(raw.dtype)}{list(raw.shape)} but its metadata "
                        f"says {dtype}{list(shape)}. {_RESAVE}"
                    )
            leaves.append(_rebuild(raw, info, leaf))
        new_values.append(jax.tree.unflatten(treedef, leaves))
    # Everything is read and checked: only now touch the target, every state or none
    # (write_state_values finishes the write even if an interrupt arrives half-way).
    write_state_values([entry[0] for entry in plan.values()], new_values, "state_nn.checkpoint.restore")
    return meta["metadata"]


_Plan = dict[Path, tuple[State[Any], _Entry, list[Any], Any]]


def _stored_form(info: _LeafInfo, current: Any) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and dtype a leaf is stored with (a key as its uint32 key data)."""
    if info.kind == "key":
        return (*info.shape, _key_data_width(current)), np.dtype(np.uint32)
    return info.shape, np.dtype(info.dtype)


def _read_arrays(
    ocp: Any, location: str, saved: dict[Path, _Entry], plan: _Plan, explicit: dict[Path, Any], fn: str
) -> dict[str, Any]:
    """The stored arrays the plan needs, by storage name, each placed like the target's leaf."""
    item: dict[str, Any] = {}
    restore_args: dict[str, Any] = {}
    for entry in saved.values():
        for name in entry.names:
            if name is not None:
                item[name] = restore_args[name] = ocp.PLACEHOLDER
    needed = False
    for state_path, (_, stored, current, _) in plan.items():
        for name, info, leaf in zip(stored.names, stored.leaves, current, strict=True):
            if name is None:
                continue
            needed = True
            shape, dtype = _stored_form(info, leaf)
            if isinstance(leaf, jax.Array):
                sharding = explicit.get(state_path) or _sharding_of(leaf)
                item[name] = jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
                restore_args[name] = ocp.ArrayRestoreArgs(sharding=sharding)
            else:
                item[name] = np.zeros(shape, dtype)
                restore_args[name] = ocp.RestoreArgs(restore_type=np.ndarray)
    if not needed:
        return {}
    if not os.path.isdir(os.path.join(location, "values")):
        raise ValueError(
            f"{fn}: the checkpoint at {location!r} is incomplete: its array data (the 'values' item) is "
            f"missing. {_RESAVE}"
        )
    try:
        with checkpointer(ocp) as reader:
            read: dict[str, Any] = reader.restore(
                location,
                args=ocp.args.Composite(values=ocp.args.PyTreeRestore(item, restore_args=restore_args)),
            )["values"]
    except (OSError, ValueError, KeyError) as err:  # what orbax and tensorstore raise for missing or damaged data
        raise ValueError(
            f"{fn}: the checkpoint at {location!r} is damaged or incomplete: reading its arrays failed "
            f"({first_line(err)}). {_RESAVE}"
        ) from err
    return read


def _plan(states: StateDict, saved: dict[Path, _Entry], partial: bool, directory: str, fn: str) -> _Plan:
    """Match every target state to its saved entry; one ValueError listing all mismatches."""
    plan = {}
    missing: list[Path] = []
    problems: list[str] = []
    for state_path, state in states.items():
        stored = saved.get(state_path)
        if stored is None:
            missing.append(state_path)
            continue
        entry, leaves, treedef = _describe_value(state_path, state, fn)
        if entry.wheres != stored.wheres:
            problems.append(
                f"state {_show(state_path)!r}: the saved value has {len(stored.wheres)} leaves "
                f"{stored.wheres[:_MAX_LISTED]}, the target's has {len(entry.wheres)} "
                f"{entry.wheres[:_MAX_LISTED]}"
            )
            continue
        for where, want, have in zip(entry.wheres, entry.leaves, stored.leaves, strict=True):
            if not want.matches(have):
                problems.append(
                    f"state {_show(state_path)!r}{where}: saved {have.describe()}, target holds {want.describe()}"
                )
        plan[state_path] = (state, stored, leaves, treedef)
    if missing:
        problems.insert(
            0,
            f"the target's states {_listing(missing)} are not in the checkpoint (it holds {_listing(list(saved))})",
        )
    if not partial:
        extra = [p for p in saved if p not in states and p != DEFAULT_PATH]
        if extra:
            problems.append(
                f"the checkpoint holds states the target lacks: {_listing(extra)} (pass filters "
                "to restore only some states)"
            )
    if problems:
        raise ValueError(
            f"{fn}: the checkpoint at {directory!r} does not fit `target`; nothing was restored:\n  - "
            + "\n  - ".join(problems)
        )
    return plan


def _check_shardings(shardings: Any, states: StateDict, fn: str) -> dict[Path, Any]:
    if shardings is None:
        return {}
    if isinstance(shardings, jax.sharding.Sharding):
        return {p: shardings for p in states}
    if not isinstance(shardings, Mapping):
        raise TypeError(
            f"{fn}: `shardings` must be a jax.sharding.Sharding or a dict path -> Sharding, got "
            f"{type(shardings).__name__}."
        )
    result = {}
    for key, sharding in shardings.items():
        state_path = key if isinstance(key, tuple) else (key,)
        if state_path not in states:
            raise ValueError(
                f"{fn}: `shardings` names {_show(state_path)!r}, which is not a restored state "
                f"(restored: {_listing(list(states))})."
            )
        if not isinstance(sharding, jax.sharding.Sharding):
            raise TypeError(
                f"{fn}: `shardings[{key!r}]` must be a jax.sharding.Sharding, got {type(sharding).__name__}."
            )
        result[state_path] = sharding
    return result


def _sharding_of(leaf: jax.Array) -> Any:
    return jax.random.key_data(leaf).sharding if _is_key(leaf) else leaf.sharding


def _key_data_width(key: jax.Array) -> int:
    return jax.random.key_data(key).shape[-1]


def _rebuild(stored: Any, info: _LeafInfo, current: Any) -> Any:
    """The restored leaf in the form of the target's current leaf."""
    if info.kind == "key":
        return jax.random.wrap_key_data(stored, impl=info.dtype)
    if isinstance(current, jax.Array):
        return stored
    if isinstance(current, np.generic):
        return np.asarray(stored)[()]
    if isinstance(current, np.ndarray):
        return np.asarray(stored)
    return type(current)(np.asarray(stored).item())
