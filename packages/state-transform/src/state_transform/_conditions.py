"""State-aware conditionals: ``cond``, ``switch`` and ``ifelse``.

Every branch is traced once per signature. The states written by any branch are
outputs of the compiled ``lax.cond`` / ``lax.switch`` (a branch that does not
write one passes its value through); states only read are inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from state_core.engine import jaxpr_evaluator

from ._control_flow import Carry, ControlFlow, check_body, is_concrete, jit_disabled

__all__ = ["cond", "switch", "ifelse"]


class _Branches(ControlFlow):
    """``cond`` / ``switch`` / ``ifelse``: one ``lax.cond`` / ``lax.switch`` over traced branches.

    Called with ``(selector, operands)``. The states any branch writes are outputs
    (a branch that does not write one passes its value through).
    """

    def __init__(self, kind: str, funs: Sequence[Callable[..., Any]], names: Sequence[str], who: str) -> None:
        super().__init__(funs, names, who, (kind, len(funs)))
        self.kind = kind

    def _run(self, selector: Any, operands: tuple[Any, ...]) -> Any:
        traces = [self.trace_body(k, operands) for k in range(len(self.bodies))]
        _check_same_outputs(traces, self.body_names, self.who)
        carry = Carry(traces, traces)
        carried, invariant = carry.read()
        carry.check_avals(traces, self.who)

        def branch(k: int) -> Callable[..., Any]:
            trace = traces[k]
            evaluate, gather = jaxpr_evaluator(trace), carry.inputs_of(trace)

            def fn(states: list[Any], operands: tuple[Any, ...]) -> tuple[Any, list[Any]]:
                out, written, _ = evaluate(gather(states, invariant), jax.tree.leaves((operands, {})))
                return out, carry.outputs(trace, written, states)

            return fn

        fns = [branch(k) for k in range(len(traces))]
        if self.kind == "cond":
            out, states = jax.lax.cond(selector, fns[0], fns[1], carried, operands)
        else:
            if self.kind == "ifelse":
                conds = jnp.stack([jnp.asarray(c, bool).reshape(()) for c in selector])
                selector = jnp.where(conds.any(), jnp.argmax(conds), len(fns) - 1)
            out, states = jax.lax.switch(selector, fns, carried, operands)
        carry.write(states)
        return out


def _check_same_outputs(traces: Sequence[Any], names: Sequence[str], who: str) -> None:
    first = traces[0]
    ref = [(s.shape, s.dtype) for s in jax.tree.leaves(first.out_shapes)]
    for trace, name in zip(traces[1:], names[1:], strict=True):
        got = [(s.shape, s.dtype) for s in jax.tree.leaves(trace.out_shapes)]
        if trace.out_treedef != first.out_treedef or got != ref:
            raise TypeError(
                f"{who}: every branch must return the same structure, shapes and dtypes, but "
                f"{names[0]} returns {first.out_shapes} and {name} returns {trace.out_shapes}."
            )


def _run_branches(
    kind: str,
    selector: Any,
    funs: Sequence[Callable[..., Any]],
    names: Sequence[str],
    operands: tuple[Any, ...],
    who: str,
) -> Any:
    # Plain Python, as JAX's own cond / switch under disable_jit, when Python can read
    # the selector; a traced one (under jax.vmap, say) takes the compiled branches.
    if jit_disabled() and all(map(is_concrete, jax.tree.leaves(selector))):
        for fun, name in zip(funs, names, strict=True):
            check_body(fun, f"{who}: {name}")
        if kind == "cond":
            index = 0 if selector else 1
        elif kind == "switch":
            index = min(max(int(selector), 0), len(funs) - 1)
        else:
            index = next((k for k, c in enumerate(selector) if bool(c)), len(funs) - 1)
        return funs[index](*operands)
    return _Branches(kind, funs, names, who)(selector, operands)


def _check_scalar(x: Any, what: str, who: str) -> None:
    if jnp.ndim(x) != 0:
        raise TypeError(f"{who}: {what} must be a scalar, got an array of shape {jnp.shape(x)}.")


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any) -> Any:
    """``jax.lax.cond`` for branches that read and write States.

    Runs ``true_fun(*operands)`` if ``pred`` is true, else ``false_fun(*operands)``,
    inside one compiled ``lax.cond``. States written by either branch are updated
    (the branch that did not write a state leaves it as it was).

    Args:
        pred: a scalar boolean (or number: nonzero is true), concrete or traced.
        true_fun: the branch run when ``pred`` is true, called as
            ``true_fun(*operands)``.
        false_fun: the branch run otherwise; it must return the same structure,
            shapes and dtypes as ``true_fun``.
        *operands: the arguments given to the chosen branch (pytrees of arrays).

    Returns:
        The chosen branch's output.

    Raises:
        TypeError: ``pred`` is not a scalar, or the branches' outputs differ.
        ValueError: a branch writes a state with a new shape/dtype (the message names it).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import cond
        >>> hits, misses = State(jnp.array(0), name='hits'), State(jnp.array(0), name='misses')
        >>> def hit(x):
        ...     hits.value = hits.value + 1
        ...     return x * 2
        >>> def miss(x):
        ...     misses.value = misses.value + 1
        ...     return -x
        >>> cond(True, hit, miss, 3.0), cond(False, hit, miss, 3.0)
        (Array(6., dtype=float32, weak_type=True), Array(-3., dtype=float32, weak_type=True))
        >>> int(hits.value), int(misses.value)
        (1, 1)
    """
    _check_scalar(pred, "pred", "cond")
    return _run_branches("cond", pred, (true_fun, false_fun), ("true_fun", "false_fun"), operands, "cond")


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """``jax.lax.switch`` for branches that read and write States.

    Runs ``branches[index](*operands)`` (``index`` is clamped to the valid range,
    as in ``jax.lax.switch``); the union of states the branches write is updated.

    Args:
        index: a scalar integer, concrete or traced; below 0 runs the first
            branch, past the end the last.
        branches: a non-empty sequence of functions, each called as
            ``branch(*operands)`` and returning the same structure, shapes and
            dtypes.
        *operands: the arguments given to the chosen branch (pytrees of arrays).

    Returns:
        The chosen branch's output.

    Raises:
        ValueError: ``branches`` is empty.
        TypeError: ``index`` is not a scalar, or the branches' outputs differ.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import switch
        >>> log = State(jnp.zeros(3), name='log')
        >>> def branch(k):
        ...     def f(x):
        ...         log.value = log.value.at[k].add(x)
        ...         return x + k
        ...     return f
        >>> switch(2, [branch(0), branch(1), branch(2)], 1.0)
        Array(3., dtype=float32, weak_type=True)
        >>> log.value
        Array([0., 0., 1.], dtype=float32)
    """
    branches = list(branches)
    if not branches:
        raise ValueError("switch: branches must contain at least one function.")
    _check_scalar(index, "index", "switch")
    names = [f"branches[{k}]" for k in range(len(branches))]
    return _run_branches("switch", index, branches, names, operands, "switch")


def ifelse(
    conditions: Sequence[Any], branches: Sequence[Callable[..., Any]], *operands: Any, check_cond: bool = True
) -> Any:
    """Run the branch of the first true condition; the last branch if none holds.

    ``ifelse([x < 0, x < 1], [neg, small, large], x)`` reads as
    ``if x < 0: neg(x) elif x < 1: small(x) else: large(x)``. Pass as many
    branches as conditions (the last condition then acts as a final ``elif``
    whose branch also runs when nothing holds), or one more (an explicit ``else``).

    With as many branches as conditions and ``check_cond=True`` (brainstate's
    convention: the conditions are mutually exclusive), conditions known at
    trace time must have exactly one true entry, else ``ValueError``.

    Args:
        conditions: scalar booleans, concrete or traced, tested in order.
        branches: one function per condition, optionally plus a final ``else``
            branch; each is called as ``branch(*operands)`` and all return the
            same structure, shapes and dtypes.
        *operands: the arguments given to the chosen branch (pytrees of arrays).
        check_cond: with one branch per condition, check that conditions known
            at trace time have exactly one true entry. Conditions that are
            traced are never checked.

    Returns:
        The chosen branch's output.

    Raises:
        ValueError: the numbers of conditions and branches do not fit, or the
            check above fails.
        TypeError: a condition is not a scalar, or the branches' outputs differ.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_transform import ifelse
        >>> sign = lambda x: ifelse([x < 0, x == 0], [lambda v: -1, lambda v: 0, lambda v: 1], x)
        >>> [int(sign(v)) for v in (-2.0, 0.0, 5.0)]
        [-1, 0, 1]
    """
    conditions, branches = list(conditions), list(branches)
    if not conditions or len(branches) not in (len(conditions), len(conditions) + 1):
        raise ValueError(
            f"ifelse: got {len(conditions)} condition(s) and {len(branches)} branch(es); pass one "
            "branch per condition, optionally plus one final `else` branch."
        )
    for k, c in enumerate(conditions):
        _check_scalar(c, f"conditions[{k}]", "ifelse")
    if check_cond and len(branches) == len(conditions) and all(map(is_concrete, conditions)):
        n_true = sum(bool(c) for c in conditions)
        if n_true != 1:
            raise ValueError(
                f"ifelse: {n_true} of the {len(conditions)} conditions are true, but with one branch "
                "per condition exactly one must hold; add a final `else` branch or pass check_cond=False."
            )
    names = [f"branches[{k}]" for k in range(len(branches))]
    return _run_branches("ifelse", tuple(conditions), branches, names, operands, "ifelse")
