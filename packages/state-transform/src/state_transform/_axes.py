"""Checking mapping axes for arguments and states (the states' rules are read by ``_rules``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from state_core import BatchAxisError

__all__ = [
    "leaf_in_axes",
    "check_axis",
    "remove_axis",
    "format_sizes",
    "check_out_axes",
    "check_state_in_out_axes",
]


def _per_arg_axes(in_axes: Any, num_args: int, who: str) -> tuple[Any, ...]:
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(in_axes, tuple):
        if len(in_axes) != num_args:
            raise ValueError(
                f"{who}: in_axes has {len(in_axes)} entries but the function was called with "
                f"{num_args} positional argument(s); give one entry per positional argument "
                "(None for a broadcast argument) or a single int/None for all of them."
            )
        return in_axes
    if in_axes is None or isinstance(in_axes, int):
        return (in_axes,) * num_args
    if isinstance(in_axes, dict):
        raise ValueError(
            f"{who}: in_axes must be an int, None or a tuple with one entry per positional argument; "
            "a dict is only allowed inside that tuple, as the spec of a dict argument."
        )
    raise ValueError(f"{who}: in_axes must be an int, None or a tuple, got {in_axes!r}.")


def check_axis(axis: Any, ndim: int, where: str, shape: tuple[Any, ...], who: str) -> int | None:
    """Validate an axis for a value of ``ndim`` dimensions; return it non-negative.

    Args:
        axis: the mapped axis (an int, possibly negative) or ``None`` (not mapped).
        ndim: the number of dimensions of the value it maps.
        where: what the value is (``"argument 0['w']"``), for the error message.
        shape: the value's shape, for the error message.
        who: how the message names the call (``vmap2(step)``).

    Returns:
        ``axis % ndim``, or ``None`` when ``axis`` is ``None``.

    Raises:
        ValueError: ``axis`` is not an int, or is out of range for ``ndim``.
    """
    if axis is None:
        return None
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise ValueError(f"{who}: the mapped axis of {where} must be an int or None, got {axis!r}.")
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"{who}: cannot map {where} over axis {axis}: it has shape {shape} ({ndim} dimension(s)). "
            "Use an axis within range, or None to broadcast it."
        )
    return axis % ndim


def leaf_in_axes(
    in_axes: Any,
    args: Sequence[Any],
    kwargs: dict[Any, Any],
    static_positions: frozenset[int],
    keyword_axis: int | None = 0,
    *,
    who: str,
) -> tuple[list[Any], list[str], list[int | None]]:
    """One axis, one label and one positional index (None for keywords) per dynamic leaf.

    ``args`` holds every positional argument (statics included) so that a tuple
    ``in_axes`` lines up with the call; keyword arguments are mapped over
    ``keyword_axis`` (axis 0 as in ``jax.vmap``, or None: shared by every lane).

    Args:
        in_axes: the user's ``in_axes``: an int or ``None`` for every
            positional argument, or a tuple / list with one entry (a pytree
            prefix of the argument) per positional argument.
        args: the call's positional arguments, statics included.
        kwargs: the call's keyword arguments.
        static_positions: the positions of static arguments, which have no leaves.
        keyword_axis: the axis every keyword-argument leaf is mapped over.
        who: how messages name the call (``vmap2(step)``).

    Returns:
        ``(axes, labels, positions)``, one entry per dynamic leaf in the order
        of ``jax.tree.leaves((args, kwargs))`` without the statics.

    Raises:
        ValueError: ``in_axes`` does not fit the call (its length or structure).
    """
    per_arg = _per_arg_axes(in_axes, len(args), who)
    axes: list[Any] = []
    labels: list[str] = []
    positions: list[int | None] = []
    for i, (arg, prefix) in enumerate(zip(args, per_arg, strict=True)):
        if i in static_positions:
            continue
        try:
            pairs = _pair_with_prefix(prefix, arg)
        except ValueError as err:
            raise ValueError(
                f"{who}: in_axes entry {prefix!r} for positional argument {i} does not match the argument's "
                f"structure: {err}"
            ) from None
        for ax, sub in pairs:
            for path, _ in jax.tree.leaves_with_path(sub):
                labels.append(f"argument {i}{jax.tree_util.keystr(path)}")
                axes.append(ax)
                positions.append(i)
    for name, value in kwargs.items():
        for path, _ in jax.tree.leaves_with_path(value):
            labels.append(f"keyword argument '{name}'{jax.tree_util.keystr(path)}")
            axes.append(keyword_axis)
            positions.append(None)
    return axes, labels, positions


def _pair_with_prefix(prefix: Any, arg: Any) -> list[tuple[Any, Any]]:
    """``(axis, subtree)`` for every leaf of the ``in_axes`` prefix tree ``prefix`` over ``arg``."""
    pairs: list[tuple[Any, Any]] = []
    jax.tree.map(lambda ax, sub: pairs.append((ax, sub)), prefix, arg, is_leaf=lambda x: x is None)
    return pairs


def remove_axis(aval: Any, axis: int | None) -> Any:
    """The per-lane aval of ``aval`` mapped over ``axis``.

    Args:
        aval: the abstract value of the whole (mapped) value.
        axis: the non-negative mapped axis, or ``None`` (then ``aval`` is returned).
    """
    if axis is None:
        return aval
    shape = aval.shape[:axis] + aval.shape[axis + 1 :]
    return jax.core.ShapedArray(shape, aval.dtype, weak_type=aval.weak_type)


def format_sizes(sizes: Sequence[tuple[int, str]]) -> str:
    """``"where: size; ..."`` for an error message about disagreeing mapped sizes.

    Args:
        sizes: ``(size, where)`` pairs, one per mapped value.
    """
    return "; ".join(f"{where}: {size}" for size, where in sizes)


def check_out_axes(out_axes: Any, out_shapes: Any, name: str) -> None:
    """Reject an ``out_axes`` entry that is out of range for the output it places.

    ``out_shapes`` holds the per-lane output shapes; a mapped output has one more
    dimension, so its axis must lie in ``[-(ndim + 1), ndim]``. A structure that
    does not match is left for the mapping primitive to report.

    Args:
        out_axes: the user's ``out_axes`` (a pytree prefix of the outputs).
        out_shapes: the per-lane outputs' shapes (``jax.ShapeDtypeStruct`` leaves).
        name: the transformation's name, for the error message.

    Raises:
        ValueError: an axis is not an int or is out of range for its output.
    """
    pairs: list[Any] = []
    try:
        jax.tree_util.tree_map_with_path(
            lambda at, ax, sub: pairs.append((at, ax, sub)), out_axes, out_shapes, is_leaf=lambda x: x is None
        )
    except ValueError:
        return
    for prefix, axis, sub in pairs:
        if axis is None:
            continue
        for rest, leaf in jax.tree.leaves_with_path(sub):
            path = tuple(prefix) + tuple(rest)
            ndim = len(getattr(leaf, "shape", ())) + 1
            if not isinstance(axis, int) or isinstance(axis, bool) or not -ndim <= axis < ndim:
                where = f"output{jax.tree_util.keystr(path)}" if path else "the output"
                raise ValueError(
                    f"{name}: out_axes={out_axes!r} places {where} (per-lane shape "
                    f"{tuple(leaf.shape)}) on axis {axis!r}, but the mapped value has {ndim} "
                    f"dimension(s). Use an axis in [{-ndim}, {ndim - 1}] in out_axes."
                )


def check_state_in_out_axes(name: str, label: str, in_axis: Any, out_axis: Any, ndim: int) -> None:
    """Reject a state read mapped on one axis and written back mapped on another.

    ``in_axis`` is the (non-negative) axis from ``state_in_axes``; ``out_axis``
    the entry from ``state_out_axes``; ``ndim`` the dimensions of the state's value.
    Such a state would come back transposed, and change layout on every call.

    Args:
        name: the transformation's name, for the error message.
        label: the state's description (its path or name), for the error message.
        in_axis: the axis the state is read on, or ``None``.
        out_axis: the axis it is written back on, or ``None``.
        ndim: the number of dimensions of the state's value.

    Raises:
        BatchAxisError: the two axes differ.
    """
    if not isinstance(in_axis, int) or not isinstance(out_axis, int):
        return
    if in_axis % ndim != out_axis % ndim:
        raise BatchAxisError(
            f"{name}: {label} is mapped on axis {in_axis} by state_in_axes but on axis "
            f"{out_axis} by state_out_axes, so it would come back with its axes reordered. "
            "Give it the same axis in state_in_axes and state_out_axes."
        )
