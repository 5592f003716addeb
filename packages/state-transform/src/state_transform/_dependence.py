"""Which outputs of a per-lane jaxpr vary across the mapped axis (a forward data-flow pass)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import jax.extend.core as jex_core

from state_core.engine import open_jaxpr

__all__ = ["varying_outputs"]

# Collectives whose result is the same on every lane of the axes they reduce over.
_REDUCING_COLLECTIVES = frozenset(
    {"psum", "pmax", "pmin", "pmean", "all_gather", "psum_invariant", "all_gather_invariant", "psum2"}
)
_CALL_PRIMITIVES = frozenset({"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint"})


def _axes_of(params: dict[Any, Any]) -> tuple[Any, ...]:
    axes = params.get("axes", params.get("axis_name", ()))
    if not isinstance(axes, (tuple, list)):
        axes = (axes,)
    return tuple(axes)


def _mentions_axis_index(jaxpr: Any, axis_name: Hashable) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "axis_index" and axis_name in _axes_of(eqn.params):
            return True
        for sub in jex_core.jaxprs_in_params(eqn.params):
            if _mentions_axis_index(sub, axis_name):
                return True
    return False


def varying_outputs(jaxpr: Any, varying_inputs: Sequence[bool], axis_name: Hashable | None) -> list[bool]:
    """For each output of ``jaxpr``, whether it may differ between lanes.

    ``varying_inputs[i]`` says whether input ``i`` is mapped. Reductions over
    ``axis_name`` make values uniform; ``axis_index`` makes them vary. Nested
    calls are analysed recursively; other higher-order primitives are treated
    conservatively (varying if any input varies, or if they read the lane index).

    Args:
        jaxpr: the per-lane program (a ``jax.extend.core.Jaxpr``, not closed).
        varying_inputs: one flag per input variable of ``jaxpr``.
        axis_name: the mapped axis' name; ``None`` when it has none (then no
            collective or ``axis_index`` can refer to it).

    Returns:
        One flag per output variable: ``False`` only for outputs proved equal
        on every lane.
    """
    varying: set[Any] = {v for v, m in zip(jaxpr.invars, varying_inputs, strict=True) if m}

    def is_varying(atom: Any) -> bool:
        return not isinstance(atom, jex_core.Literal) and atom in varying

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        inputs = [is_varying(v) for v in eqn.invars]
        if name in _REDUCING_COLLECTIVES and axis_name is not None and axis_name in _axes_of(eqn.params):
            outs = [False] * len(eqn.outvars)
        elif name == "axis_index":
            outs = [axis_name is not None and axis_name in _axes_of(eqn.params)] * len(eqn.outvars)
        elif name in _CALL_PRIMITIVES and "jaxpr" in eqn.params:
            sub = eqn.params["jaxpr"]
            sub = open_jaxpr(sub)
            outs = varying_outputs(sub, inputs, axis_name)
        else:
            subs = list(jex_core.jaxprs_in_params(eqn.params))
            lane_dependent = axis_name is not None and any(_mentions_axis_index(s, axis_name) for s in subs)
            outs = [any(inputs) or lane_dependent] * len(eqn.outvars)
        for var, out in zip(eqn.outvars, outs, strict=True):
            if out:
                varying.add(var)
    return [is_varying(v) for v in jaxpr.outvars]
