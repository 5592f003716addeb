"""The one parser of state rules, for every transformation that lets the user place states.

``vmap2`` / ``pmap2`` / ``Map`` / the ``*_new_states`` take ``{axis: filter}``,
``shard_map`` takes ``{State or filter: PartitionSpec}``, brainstate's ``vmap``
takes ``{axis: {name: State}}``: three spellings (``RuleSyntax``) of one meaning,
read by ``parse_state_rules`` into one frozen ``StateRules`` (the first rule that
selects a state gives its value). A bad rule gets the same message from every
transformation, behind that transformation's name and the argument's.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterator
from typing import Any

import jax
from jax.sharding import PartitionSpec

from state_core import State
from state_core.engine import StateRules
from state_core.filter import Filter, to_predicate

__all__ = ["RuleSyntax", "AXES", "SPECS", "DECLARED_STATES", "parse_state_rules", "rule_filter"]


@dataclasses.dataclass(frozen=True)
class RuleSyntax:
    """How one kind of argument spells its state rules.

    Args:
        forms: the forms the argument takes, for messages.
        values: what a rule's value may be, for messages.
        to_value: the canonical value of a rule (raises ``TypeError`` for a bad one).
        fix: how to write a good rule, for messages.
        value_error: the error a bad value raises.
        keyed_by_filter: ``{filter: value}`` (``shard_map``) instead of ``{value: filter}``.
        bare_is_value: a spec that is not a dict is one value for every state
            (``shard_map``'s single PartitionSpec); otherwise it is a filter on value 0.
        declared_states: brainstate's form: the rules hold States only, given as
            ``{axis: {name: State}}`` or as a State / pytree of States (axis 0).
    """

    forms: str
    values: str
    to_value: Callable[[Any], Any]
    fix: str
    value_error: type[Exception] = ValueError
    keyed_by_filter: bool = False
    bare_is_value: bool = False
    declared_states: bool = False


def _axis(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(value)
    return operator.index(value)


def _spec(value: Any) -> PartitionSpec:
    if not isinstance(value, PartitionSpec):
        raise TypeError(value)
    return value


AXES = RuleSyntax(
    forms="None, a dict {axis: filter}, a filter, a State or a list of States",
    values="ints (the mapped axis) or None (not mapped)",
    to_value=_axis,
    fix="Write {0: filter} to map the states a filter selects on axis 0, or {None: filter} to keep them whole.",
)
"""``{axis: filter}`` (a bare filter maps on axis 0): vmap2, pmap2, Map, the ``*_new_states``."""

SPECS = RuleSyntax(
    forms="None, a PartitionSpec, or a dict {State or filter: PartitionSpec}",
    values="a PartitionSpec",
    to_value=_spec,
    fix="Write {state or filter: P(...)}, e.g. {state: P('x')}, or P() to replicate.",
    value_error=TypeError,
    keyed_by_filter=True,
    bare_is_value=True,
)
"""``{State or filter: PartitionSpec}`` (one spec for every state): shard_map."""

DECLARED_STATES = RuleSyntax(
    forms="{axis: {name: State}}, a State, or a list/dict of States",
    values="ints (the mapped axis)",
    to_value=_axis,
    fix="Declare each State under the axis it is mapped on.",
    declared_states=True,
)
"""brainstate's ``{axis: {name: State}}`` (a State or pytree of States: axis 0): vmap's in_states / out_states."""


def rule_filter(filter_like: Any, what: str, who: str, entry: str | None = None) -> Filter:
    """``to_predicate(filter_like)``, with a message naming the transformation, the argument and the entry.

    Args:
        filter_like: what the user gave as a filter.
        what: the argument's name (``'state_in_axes'``).
        who: the transformation's name, the message's prefix (``'vmap2'``).
        entry: which entry of the argument it is (``'axis 0'``), or None for the whole argument.

    Raises:
        TypeError: ``filter_like`` is not a filter.
    """
    try:
        return to_predicate(filter_like)
    except TypeError as err:
        where = what if entry is None else f"{what}, the entry for {entry}"
        raise TypeError(f"{who}: {where}: {err}") from None


def parse_state_rules(spec: Any, what: str, who: str, syntax: RuleSyntax = AXES) -> StateRules[Any]:
    """The rules a user's ``spec`` gives, in priority order (``StateRules`` pass through unchanged).

    Args:
        spec: the argument as the user gave it: None (no rules), a dict, or a bare
            filter / value, as ``syntax`` spells it.
        what: the argument's name, for messages (``'state_in_axes'``).
        who: the transformation's name, every message's prefix (``'vmap2'``).
        syntax: ``AXES`` (the default), ``SPECS`` or ``DECLARED_STATES``.

    Raises:
        ValueError: a value (an axis) is not one ``syntax`` accepts.
        TypeError: a filter is not a filter, a spec is not a PartitionSpec, or
            ``spec`` has none of the forms ``syntax`` takes.

    Example:
        >>> from state_core import ParamState
        >>> from state_transform.engine import parse_state_rules
        >>> parse_state_rules({0: ParamState, None: ...}, 'state_in_axes', 'vmap2').as_dict()
        {0: OfType(<class 'state_core.ParamState'>), None: Everything()}
        >>> parse_state_rules({'zero': ParamState}, 'state_in_axes', 'vmap2')
        Traceback (most recent call last):
            ...
        ValueError: vmap2: state_in_axes keys must be ints (the mapped axis) or None (not mapped), got 'zero'. ...
    """
    if isinstance(spec, StateRules):
        return spec
    if spec is None:
        return StateRules()
    if syntax.declared_states:
        return StateRules(_declared_entries(spec, what, who, syntax))
    if not isinstance(spec, dict):
        return _bare_rules(spec, what, who, syntax)
    rules = []
    for key, item in spec.items():
        value, filter_like = (item, key) if syntax.keyed_by_filter else (key, item)
        value = _value(value, key, what, who, syntax)
        rules.append((value, rule_filter(filter_like, what, who, _entry(value, syntax))))
    return StateRules(rules)


def _shown(x: Any) -> str:
    """``x`` for a message: a State by its description, lists and tuples item by item."""
    if isinstance(x, State):
        return x.describe()
    if isinstance(x, (list, tuple)):
        items = ", ".join(map(_shown, x))
        return f"[{items}]" if isinstance(x, list) else f"({items}{',' if len(x) == 1 else ''})"
    return repr(x)


def _entry(value: Any, syntax: RuleSyntax) -> str:
    return f"{value!r}" if syntax.keyed_by_filter else f"axis {value!r}"


def _value(value: Any, key: Any, what: str, who: str, syntax: RuleSyntax) -> Any:
    try:
        return syntax.to_value(value)
    except TypeError:
        if syntax.keyed_by_filter:
            message = f"{who}: {what}: the spec for {_shown(key)} must be {syntax.values}, got {value!r}. {syntax.fix}"
        else:
            message = f"{who}: {what} keys must be {syntax.values}, got {value!r}. {syntax.fix}"
        raise syntax.value_error(message) from None


def _bare_rules(spec: Any, what: str, who: str, syntax: RuleSyntax) -> StateRules[Any]:
    """The rules of a spec that is not a dict: one value for every state, or one filter on value 0."""
    try:
        if syntax.bare_is_value:
            return StateRules([(syntax.to_value(spec), True)])
        return StateRules([(0, to_predicate(spec))])
    except TypeError as err:
        detail = "" if syntax.bare_is_value else f" {err}"
        raise TypeError(f"{who}: {what} must be {syntax.forms}; got {_shown(spec)}.{detail}") from None


def _declared_entries(spec: Any, what: str, who: str, syntax: RuleSyntax) -> Iterator[tuple[Any, State[Any]]]:
    """``(axis, State)`` per declared State: from ``{axis: {name: State}}``, or a State / pytree of States (axis 0)."""
    grouped = (
        isinstance(spec, dict)
        and spec
        and all(isinstance(k, int) and not isinstance(k, bool) for k in spec)
        and all(isinstance(v, dict) for v in spec.values())
    )
    groups = spec.items() if grouped else [(0, spec)]
    for axis, group in groups:
        for state in jax.tree.leaves(group, is_leaf=lambda x: isinstance(x, State)):
            if not isinstance(state, State):
                raise TypeError(
                    f"{who}: {what} must hold States ({syntax.forms}), but the entry for axis {axis} "
                    f"holds a {type(state).__name__}. {syntax.fix}"
                )
            yield axis, state
