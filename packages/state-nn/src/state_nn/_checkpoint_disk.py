"""Where a checkpoint lives on disk: atomic replacement, recovery after a kill, reading its metadata.

``save`` never writes into the checkpoint directory ``D`` itself. orbax writes the
new checkpoint inside the staging directory ``D.state-nn-new`` (with its own
temporary directories, renamed only once complete), and then:

1. the previous checkpoint ``D``, if any, is renamed to ``D.state-nn-old``;
2. the new checkpoint is renamed to ``D``;
3. ``D.state-nn-old`` and the staging directory are deleted.

At every instant one complete checkpoint is reachable: ``D``, or, between steps 1
and 2, ``D.state-nn-old``, which readers fall back to while ``D`` is missing. A save
that raises runs the same clean-up as the next save after a killed one
(``recover``): the previous checkpoint is put back if it was set aside, and every
leftover is deleted. So a save that fails, or is killed before step 2, leaves the
previous checkpoint at ``D``; one killed after step 2 leaves the new one.

The metadata reader sorts a directory into ours / not ours / damaged without
raising, so that ``save`` can decide what ``overwrite=True`` may replace and
``restore`` can say what is wrong and how to fix it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

import jax

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MetaReport",
    "recover",
    "replace",
    "location_to_read",
    "load_meta",
    "is_replaceable",
    "first_line",
    "checkpointer",
]

FORMAT = "state-nn-checkpoint"
FORMAT_VERSION = 1
"""The version of the checkpoint layout ``save`` writes (``read_metadata(path)['format_version']``)."""
_LEAF_KINDS = ("array", "key", "numpy", "python")

_NEW = ".state-nn-new"  # staging directory of a save in progress
_OLD = ".state-nn-old"  # the previous checkpoint, set aside during the swap
_ORBAX_TMP = ".orbax-checkpoint-tmp"  # what an orbax write straight to D leaves when it is killed
_STAGED = "checkpoint"  # the new checkpoint's name inside the staging directory

# The top-level entries orbax writes for our two items: a directory holding only
# these (and a `meta` item) is a checkpoint, even when its metadata is damaged.
_CHECKPOINT_ENTRIES = frozenset({"meta", "values", "_CHECKPOINT_METADATA", "commit_success.txt"})


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def _primary() -> bool:
    # With several JAX processes (jax.distributed) sharing the file system, orbax writes
    # collectively but only process 0 moves directories, as orbax itself does.
    return jax.process_index() == 0


def _sync(point: str) -> None:
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(f"state_nn.checkpoint.{point}")


def recover(directory: str) -> None:
    """Finish what an interrupted save left behind: the previous checkpoint back at ``directory``, no leftovers.

    Run by ``save`` before it writes (after a process was killed mid-save) and
    when it ends, successfully or not (after a success it deletes the previous
    checkpoint; after a failure it puts it back).
    """
    if _primary():
        old = directory + _OLD
        if not os.path.lexists(directory) and os.path.isdir(old):
            os.rename(old, directory)
        for leftover in (old, directory + _NEW, directory + _ORBAX_TMP):
            if os.path.lexists(leftover):
                _remove(leftover)
    _sync("recovered")


def replace(directory: str, write: Callable[[str], None]) -> None:
    """Call ``write(path)`` to create a complete checkpoint at ``path``, then swap it in at ``directory``.

    The caller has run ``recover(directory)`` and checked that ``directory`` may be
    replaced. If anything raises (or the process is interrupted), ``directory``
    keeps the checkpoint it held before.
    """
    staging = directory + _NEW
    new = os.path.join(staging, _STAGED)
    if _primary():
        os.makedirs(staging)
    _sync("staged")
    try:
        write(new)  # orbax's save returns on every process once the checkpoint is complete
        if _primary():
            if os.path.lexists(directory):
                os.rename(directory, directory + _OLD)
            os.rename(new, directory)
    finally:
        recover(directory)


def location_to_read(directory: str) -> str | None:
    """The directory holding the checkpoint at ``directory``, or ``None`` when there is none.

    While a save swaps checkpoints (or after it was killed between its two
    renames), ``directory`` is briefly missing and the previous checkpoint is
    still complete under its set-aside name: readers use that one.
    """
    if os.path.lexists(directory):
        return directory
    old = directory + _OLD
    return old if os.path.isdir(old) else None


class MetaReport:
    """What ``load_meta`` found: ``meta`` (checked) when ``status == 'ok'``, else why not in ``problem``.

    ``status`` is ``'ok'``, ``'foreign'`` (not a checkpoint written by ``save``),
    ``'newer'`` (written by a newer format) or ``'damaged'`` (ours, but unreadable
    or malformed).
    """

    __slots__ = ("status", "meta", "problem")

    def __init__(self, status: str, meta: dict[str, Any] | None = None, problem: str = "") -> None:
        self.status = status
        self.meta = meta
        self.problem = problem


def _looks_like_checkpoint(directory: str) -> bool:
    entries = set(os.listdir(directory))
    return "meta" in entries and entries <= _CHECKPOINT_ENTRIES


def first_line(err: BaseException) -> str:
    """``Type: first line of the message`` of an error from orbax, json or tensorstore (kept short)."""
    text = str(err).strip().splitlines()
    line = text[0] if text else ""
    return f"{type(err).__name__}: {line[:200]}" if line else type(err).__name__


def checkpointer(ocp: Any) -> Any:
    """An orbax checkpointer for our two items (``values``, ``meta``)."""
    # Handlers named up front, so that reading one item does not warn about the other.
    # Directories created up front, not by a background thread that could recreate them after a failed
    # save was cleaned up.
    options = ocp.CompositeOptions(async_options=ocp.AsyncOptions(create_directories_asynchronously=False))
    handler = ocp.CompositeCheckpointHandler(
        values=ocp.PyTreeCheckpointHandler(), meta=ocp.JsonCheckpointHandler(), composite_options=options
    )
    return ocp.Checkpointer(handler)


def load_meta(ocp: Any, directory: str) -> MetaReport:
    """Read and check the ``meta`` item of the directory ``directory``."""
    if not os.path.isdir(os.path.join(directory, "meta")):
        return MetaReport("foreign", problem="it has no state_nn metadata")
    try:
        with checkpointer(ocp) as reader:
            meta = reader.restore(directory, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
    except (OSError, ValueError, KeyError) as err:  # what orbax and json raise for a missing or truncated file
        status = "damaged" if _looks_like_checkpoint(directory) else "foreign"
        return MetaReport(status, problem=f"its metadata cannot be read ({first_line(err)})")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        return MetaReport("foreign", problem="its metadata has another format")
    version = meta.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        return MetaReport("newer", meta)
    problem = _malformed(meta)
    if problem:
        return MetaReport("damaged", problem=f"its metadata is malformed: {problem}")
    return MetaReport("ok", meta)


def is_replaceable(report: MetaReport, directory: str) -> bool:
    """True when ``overwrite=True`` may replace ``directory``: empty, or a checkpoint of ours (even damaged)."""
    return not os.listdir(directory) or report.status != "foreign"


# ---------------------------------------------------------------------- schema
def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _malformed_leaf(leaf: Any) -> str:
    if not isinstance(leaf, dict):
        return "a leaf entry is not an object"
    if not (leaf.get("name") is None or isinstance(leaf.get("name"), str)):
        return f"leaf name {leaf.get('name')!r} is not a string"
    if not isinstance(leaf.get("where"), str) or not isinstance(leaf.get("dtype"), str):
        return "a leaf lacks its position or dtype"
    if leaf.get("kind") not in _LEAF_KINDS:
        return f"leaf kind {leaf.get('kind')!r} is unknown"
    shape = leaf.get("shape")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        return f"leaf shape {shape!r} is not a list of sizes"
    if not (leaf.get("pytype") is None or isinstance(leaf.get("pytype"), str)):
        return "a leaf's Python type is not a string"
    return ""


def _malformed(meta: dict[str, Any]) -> str:
    """What is wrong with the structure of ``meta`` (empty when nothing is)."""
    if not _is_int(meta.get("format_version")):
        return "the format version is missing"
    if not isinstance(meta.get("versions"), dict) or not isinstance(meta.get("metadata"), dict):
        return "the versions or the user metadata are missing"
    states = meta.get("states")
    if not isinstance(states, list):
        return "the list of states is missing"
    paths, names = set(), set()
    for entry in states:
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            return "a state entry is not an object with a type"
        path = entry.get("path")
        if not isinstance(path, list) or not all(isinstance(k, str) or _is_int(k) for k in path):
            return f"state path {path!r} is not a list of str and int keys"
        if tuple(path) in paths:
            return f"state path {path!r} appears twice"
        paths.add(tuple(path))
        leaves = entry.get("leaves")
        if not isinstance(leaves, list):
            return f"state {path!r} has no list of leaves"
        for leaf in leaves:
            problem = _malformed_leaf(leaf)
            if problem:
                return f"state {path!r}: {problem}"
            if leaf["name"] is not None:
                if leaf["name"] in names:
                    return f"the storage name {leaf['name']!r} is used twice"
                names.add(leaf["name"])
    return ""
