"""``grad``: gradients with respect to arguments and/or States."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar, Generic, Literal, NamedTuple, TypeVar, overload

import jax
import jax.numpy as jnp
import numpy as np

from state_core import State, StateDict, StatefulFunction, states_of_callable
from state_core.engine import (
    IdentityRef,
    Program,
    Strategy,
    Trace,
    TraceContext,
    api_boundary,
    is_eager,
    jaxpr_evaluator,
    merger,
    named,
    shape_structs,
    state_label,
    user_stacklevel,
)

from ._diff_base import normalize_argnums
from ._typing import P, Q, R

__all__ = ["grad", "GradFunction", "GradStrategy"]

# A GradFunction[P, R] takes the function's parameters P; R is what its call returns:
# grads, (grads, loss), (grads, aux) or (grads, loss, aux). The loss and aux types come
# from the function's return type (`_L`, `_A`: its `(loss, aux)` pair with has_aux=True).
_L = TypeVar("_L")
_A = TypeVar("_A")


def _is_state(x: Any) -> bool:
    return isinstance(x, State)


def _entry_label(state: State[Any], key: tuple[Any, ...], in_state_dict: bool) -> str:
    """Name ``state`` by its entry in ``grad_states`` (a StateDict key is the state's path)."""
    kind = type(state).__name__
    if in_state_dict and len(key) == 1 and isinstance(getattr(key[0], "key", None), tuple):
        return f"{kind} at path {'.'.join(map(str, key[0].key))!r}"
    if key:
        return f"{kind} {jax.tree_util.keystr(key)}"
    return state.describe()


def _has_nan(tree: Any) -> Any:
    """A traced bool: whether any floating leaf of ``tree`` holds a NaN or an infinity."""
    flags = [
        ~jnp.isfinite(leaf).all()
        for leaf in jax.tree.leaves(tree)
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)
    ]
    return jnp.any(jnp.stack(flags)) if flags else jnp.bool_(False)


def _nan_check(labels: tuple[str, ...], who: str) -> Callable[[Any], None]:
    """``raise_if_nan(found)``: raise ``FloatingPointError`` naming what holds a NaN or Inf.

    Args:
        labels: what each flag the program computes names (the loss, each entry of
            ``grad_states``, each differentiated argument).
        who: how the message names the gradient (``grad(loss)``).
    """

    def raise_if_nan(found: Any) -> None:
        bad = [label for label, flag in zip(labels, np.asarray(found), strict=True) if flag]
        if bad:
            raise FloatingPointError(
                f"{who}: NaN or Inf in {', '.join(dict.fromkeys(bad))}; no state was written. To find the "
                "operation that produced it, run with jax.config.update('jax_debug_nans', True)."
            )

    return raise_if_nan


def _assemble(
    state_treedef: Any,
    argnums: int | tuple[int, ...] | None,
    return_value: bool,
    has_aux: bool,
    state_grads: list[Any],
    arg_grads: tuple[Any, ...],
    loss: Any,
    aux: Any,
) -> Any:
    """What a gradient call returns: grads, then the loss and aux when asked for.

    Args:
        state_treedef: the structure of ``grad_states`` (None: no state gradients).
        argnums: the differentiated argument position(s), or None.
        return_value: append the loss.
        has_aux: append aux.
        state_grads: one gradient per entry of ``grad_states``.
        arg_grads: one gradient per differentiated argument.
        loss: the function's value.
        aux: its auxiliary output (None without ``has_aux``).
    """
    state_part = None if state_treedef is None else jax.tree.unflatten(state_treedef, state_grads)
    if argnums is None:
        grads = state_part
    else:
        arg_part = arg_grads[0] if isinstance(argnums, int) else tuple(arg_grads)
        grads = arg_part if state_treedef is None else (state_part, arg_part)
    if return_value and has_aux:
        return grads, loss, aux
    if return_value:
        return grads, loss
    if has_aux:
        return grads, aux
    return grads


def _checked_by(raise_if_nan: Callable[[Any], None]) -> Callable[[Any], Any]:
    """A ``Program.check``: raise on the output's NaN flags, hand on the result without them."""

    def check(out: Any) -> Any:
        result, found = out
        raise_if_nan(found)
        return result

    return check


class GradFunction(StatefulFunction, Generic[P, R]):
    """The callable ``grad`` returns; see ``grad`` for the calling convention.

    Args:
        fun: returns a scalar loss (or ``(loss, aux)`` with ``has_aux=True``); it
            may read and write States.
        grad_states: a State, or a list/tuple/dict of States, to differentiate
            with respect to; the state gradients mirror this structure (a plain
            dict for a ``StateDict``). None (the default): arguments only.
        argnums: positional argument(s) to differentiate with respect to: an int
            or a sequence of ints. None means 0 when ``grad_states`` is None, and
            no argument otherwise.
        has_aux: ``fun`` returns ``(loss, aux)``; ``aux`` is passed through
            undifferentiated.
        return_value: also return the loss.
        debug_nan: refuse a call whose loss or gradients hold a NaN or Inf
            (``FloatingPointError``, nothing written); see ``grad``.

    Raises:
        TypeError: ``grad_states`` holds something that is not a State, or a state
            whose value is not floating-point (at the first call).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import GradFunction
        >>> w = ParamState(jnp.array(3.0))
        >>> grads, loss = GradFunction(lambda: w.value ** 2, grad_states=[w], return_value=True)()
        >>> grads, loss
        ([Array(6., dtype=float32, weak_type=True)], Array(9., dtype=float32, weak_type=True))
    """

    __module__ = "state_transform"

    strategy: GradStrategy

    def __init__(
        self,
        fun: Callable[P, Any],
        grad_states: Any = None,
        argnums: int | Sequence[int] | None = None,
        has_aux: bool = False,
        return_value: bool = False,
        debug_nan: bool = False,
    ) -> None:
        name = getattr(fun, "__name__", None)
        if argnums is None and grad_states is None:
            argnums = 0
        strategy = GradStrategy(
            grad_states=grad_states,
            argnums=normalize_argnums(argnums, f"grad({name or type(fun).__name__})"),
            has_aux=has_aux,
            return_value=return_value,
            debug_nan=debug_nan,
        )
        super().__init__(fun, name=name, strategy=strategy)
        functools.update_wrapper(self, fun, updated=())

    @property
    def grad_states(self) -> Any:
        """The States (or tree of States) differentiated, as given."""
        return self.strategy.grad_states

    @property
    def argnums(self) -> int | tuple[int, ...] | None:
        """The differentiated argument position(s), or None for states only."""
        return self.strategy.argnums

    @property
    def has_aux(self) -> bool:
        """Whether the function returns ``(loss, aux)``."""
        return self.strategy.has_aux

    @property
    def return_value(self) -> bool:
        """Whether the call also returns the loss."""
        return self.strategy.return_value

    @property
    def debug_nan(self) -> bool:
        """Whether a call whose loss or gradients hold a NaN or Inf is refused."""
        return self.strategy.debug_nan

    @api_boundary
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        result = super().__call__(*args, **kwargs)
        if not self.strategy.returns_state_dict:
            return result
        # Gradients of Module.states() come back as a plain path -> array dict (in the
        # states' order), the form optax and friends expect. Converted here, outside
        # the compiled program, because JAX would sort a plain dict's mixed-type keys.
        return jax.tree.map(
            lambda x: dict(x) if isinstance(x, StateDict) else x,
            result,
            is_leaf=lambda x: isinstance(x, StateDict),
        )


class GradInfo(NamedTuple):
    """What a gradient's strategy decides about one trace.

    Attributes:
        grad_index: per entry of ``grad_states``, its position among the states the
            traced function reads (None: never read, its gradient is zero).
        arg_tuple: the differentiated argument positions.
        nan_labels: with ``debug_nan``, what each NaN flag of the program names (the
            loss, each entry of ``grad_states``, each differentiated argument).
    """

    grad_index: tuple[int | None, ...]
    arg_tuple: tuple[int, ...]
    nan_labels: tuple[str, ...] | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class GradStrategy(Strategy[TraceContext]):
    """How ``grad`` traces and compiles: the traced program differentiated with ``jax.grad``.

    Args:
        grad_states: the States (or a tree of them) to differentiate with respect to.
        argnums: the differentiated argument position(s), or None.
        has_aux: the function returns ``(loss, aux)``.
        return_value: the call also returns the loss.
        debug_nan: refuse results that hold a NaN or Inf.
        transform: ``"grad"`` (see ``Strategy``).
    """

    # A gradient built inline in an eager training loop runs op by op on its first
    # call, like jax.grad; a reused one is compiled from its second call on.
    eager_first_call: ClassVar[bool] = True

    grad_states: Any = dataclasses.field(default=None, compare=False)
    argnums: int | tuple[int, ...] | None = None
    has_aux: bool = False
    return_value: bool = False
    debug_nan: bool = False
    transform: str = dataclasses.field(default="grad", compare=False)
    grad_treedef: Any = dataclasses.field(init=False, compare=False)
    grad_state_list: tuple[State[Any], ...] = dataclasses.field(init=False, compare=False)
    # Where each entry sits in grad_states: names a state the function's objects do not hold.
    grad_state_keys: tuple[Any, ...] = dataclasses.field(init=False, compare=False)
    returns_state_dict: bool = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        keyed, treedef = jax.tree_util.tree_flatten_with_path(self.grad_states, is_leaf=_is_state)
        for _, s in keyed:
            if not isinstance(s, State):
                raise TypeError(
                    f"grad: grad_states must be a State or a list/tuple/dict of States, but it contains a "
                    f"{type(s).__name__}."
                )
        object.__setattr__(self, "grad_treedef", treedef)
        object.__setattr__(self, "grad_state_list", tuple(s for _, s in keyed))
        object.__setattr__(self, "grad_state_keys", tuple(key for key, _ in keyed))
        object.__setattr__(self, "returns_state_dict", isinstance(self.grad_states, StateDict))

    def identity(self) -> Hashable | None:
        """The compared options, and the ``grad_states`` named weakly (a dropped model is freed)."""
        states = tuple(IdentityRef(s) for s in self.grad_state_list)
        return (super().identity(), self.grad_treedef, states, self.returns_state_dict)

    def analyze(
        self, ctx: TraceContext, trace: Trace, dyn_args: tuple[Any, ...], dyn_kwargs: dict[str, Any]
    ) -> GradInfo:
        """Check ``has_aux``, ``argnums`` and ``grad_states`` against the trace; find each state's input."""
        returned = trace.out_shapes
        if self.has_aux and not (isinstance(returned, (tuple, list)) and len(returned) == 2):
            got = f"a {type(returned).__name__}"
            if hasattr(returned, "shape"):
                got = f"a single array of shape {tuple(returned.shape)}"
            raise TypeError(
                f"{self.call_name(ctx.name)}: has_aux=True needs the function to return a (value, aux) pair, but it "
                f"returned {got}. Return `loss, aux`, or drop has_aux=True."
            )
        in_index = {id(s): k for k, s in enumerate(trace.in_states)}
        grad_index = tuple(in_index.get(id(s)) for s in self.grad_state_list)
        found: list[dict[int, Any]] = []

        def paths() -> dict[int, Any]:
            # Paths cost a walk of the function's objects: only when a message needs them.
            if not found:
                found.append(states_of_callable(ctx.fun).paths_by_state())
            return found[0]

        self._check_grad_states(grad_index, paths, ctx.name)
        argnums = self.argnums
        arg_tuple = () if argnums is None else ((argnums,) if isinstance(argnums, int) else tuple(argnums))
        n_args = trace.n_args
        for i in arg_tuple:
            if not -n_args <= i < n_args:
                raise ValueError(
                    f"{self.call_name(ctx.name)}: argnums contains {i}, but the function was called with {n_args} "
                    "positional argument(s)."
                )
        nan_labels = None
        if self.debug_nan:
            nan_labels = (
                f"the value of {ctx.name}",
                *(f"the gradient of {self._grad_state_label(k, paths())}" for k in range(len(self.grad_state_list))),
                *(f"the gradient of argument {i}" for i in arg_tuple),
            )
        return GradInfo(grad_index, arg_tuple, nan_labels)

    def compile(self, trace: Trace, info: GradInfo, name: str) -> Program:
        """``jax.grad`` of the traced program with respect to the states and arguments, compiled with ``jax.jit``."""
        evaluate = jaxpr_evaluator(trace, self.call_name(name))
        grad_index, arg_tuple = info.grad_index, info.arg_tuple
        # A state listed twice in grad_states is differentiated once; every entry
        # that names it receives that full gradient.
        unique = list(dict.fromkeys(k for k in grad_index if k is not None))
        slot = {k: j for j, k in enumerate(unique)}
        zeros = [shape_structs(s._value) for s in self.grad_state_list]
        has_aux = self.has_aux
        dyn_treedef = trace.dyn_treedef
        merge = merger(trace)
        # (the program keeps these plain values, not the strategy and its States)
        assemble = functools.partial(
            _assemble,
            self.grad_treedef if self.grad_states is not None else None,
            self.argnums,
            self.return_value,
            self.has_aux,
        )

        def program(rw: list[Any], ro: list[Any], *dyn_leaves: Any) -> tuple[Any, list[Any]]:
            state_values = merge(rw, ro)
            dyn_args, dyn_kwargs = jax.tree.unflatten(dyn_treedef, dyn_leaves)
            grad_values = [state_values[k] for k in unique]
            diff_args = tuple(dyn_args[i] for i in arg_tuple)

            def objective(g_values: list[Any], d_args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
                values = list(state_values)
                for k, v in zip(unique, g_values, strict=True):
                    values[k] = v
                args = list(dyn_args)
                for i, a in zip(arg_tuple, d_args, strict=True):
                    args[i] = a
                out, written, created = evaluate(values, jax.tree.leaves((tuple(args), dyn_kwargs)))
                loss, aux = out if has_aux else (out, None)
                return loss, (loss, aux, written + created)

            (g_states, g_args), (loss, aux, new_values) = jax.grad(objective, argnums=(0, 1), has_aux=True)(
                grad_values, diff_args
            )
            state_grads = [
                g_states[slot[k]] if k is not None else jax.tree.map(lambda z: jnp.zeros(z.shape, z.dtype), zero)
                for k, zero in zip(grad_index, zeros, strict=True)
            ]
            result = assemble(state_grads, g_args, loss, aux)
            if raise_if_nan is None:
                return result, new_values
            found = jnp.stack([_has_nan(loss), *map(_has_nan, state_grads), *map(_has_nan, g_args)])
            if nested:
                jax.debug.callback(raise_if_nan, found)
                return result, new_values
            return (result, found), new_values

        named(program, f"grad_{name}")
        # Inside another transformation the output is traced: the check becomes a callback.
        nested = not is_eager()
        raise_if_nan = None if info.nan_labels is None else _nan_check(info.nan_labels, self.call_name(name))
        return Program(
            run=jax.jit(program),
            write_back=trace.write_states,
            eager=program,
            check=None if raise_if_nan is None or nested else _checked_by(raise_if_nan),
            **({} if self.debug_nan else self.donating(jax.jit, program, trace)),
        )

    def _grad_state_label(self, k: int, paths: dict[int, Any]) -> str:
        """How messages name entry ``k`` of ``grad_states``.

        Args:
            k: the entry's position in the flattened ``grad_states``.
            paths: the paths of the states the function's objects hold, by ``id``.
        """
        state = self.grad_state_list[k]
        path = paths.get(id(state))
        if path or state.name:
            return state_label(state, path)
        return _entry_label(state, self.grad_state_keys[k], self.returns_state_dict)

    def _check_grad_states(
        self, grad_index: tuple[int | None, ...], paths: Callable[[], dict[int, Any]], name: str
    ) -> None:
        """Refuse states without gradients; warn about states the function never reads.

        Args:
            grad_index: per entry of ``grad_states``, its position among the states
                the traced function read, or None when it did not read it.
            paths: the paths of the states the function's objects hold (walked on demand).
            name: how messages name the function.
        """
        for k, state in enumerate(self.grad_state_list):
            for leaf in jax.tree.leaves(state._value):
                dtype = jnp.result_type(leaf)
                if not jnp.issubdtype(dtype, jnp.inexact):
                    raise TypeError(
                        f"{self.call_name(name)}: grad_states includes {self._grad_state_label(k, paths())}, "
                        f"whose value has dtype {dtype}; gradients exist only for floating-point and complex values. "
                        "Store it as a float (e.g. jnp.asarray(value, jnp.float32)) or leave it out "
                        "of grad_states."
                    )
        unread = [k for k, index in enumerate(grad_index) if index is None]
        if unread:
            names = ", ".join(self._grad_state_label(k, paths()) for k in unread[:3]) + (
                f" and {len(unread) - 3} more" if len(unread) > 3 else ""
            )
            warnings.warn(
                f"{self.call_name(name)}: {names} in grad_states {'is' if len(unread) == 1 else 'are'} never "
                f"read by {name}, so {'its gradient is' if len(unread) == 1 else 'their gradients are'} "
                "zero. Pass the states the function reads (after re-creating parameters, e.g. with "
                "init_all_states, collect them again).",
                UserWarning,
                stacklevel=user_stacklevel(),
            )


# The overloads give each calling convention its own return type: a decorator
# factory without ``fun``; with it, a GradFunction taking ``fun``'s parameters whose
# call returns grads, (grads, loss), (grads, aux) or (grads, loss, aux) by has_aux /
# return_value (when they are not literals, the last overload: an untyped result).
@overload
def grad(
    fun: None = None,
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    has_aux: bool = False,
    return_value: bool = False,
    debug_nan: bool = False,
) -> Callable[[Callable[Q, Any]], GradFunction[Q, Any]]: ...
@overload
def grad(
    fun: Callable[P, Any],
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    has_aux: Literal[False] = False,
    return_value: Literal[False] = False,
    debug_nan: bool = False,
) -> GradFunction[P, Any]: ...
@overload
def grad(
    fun: Callable[P, _L],
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    has_aux: Literal[False] = False,
    *,
    return_value: Literal[True],
    debug_nan: bool = False,
) -> GradFunction[P, tuple[Any, _L]]: ...
@overload
def grad(
    fun: Callable[P, tuple[_L, _A]],
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    *,
    has_aux: Literal[True],
    return_value: Literal[False] = False,
    debug_nan: bool = False,
) -> GradFunction[P, tuple[Any, _A]]: ...
@overload
def grad(
    fun: Callable[P, tuple[_L, _A]],
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    *,
    has_aux: Literal[True],
    return_value: Literal[True],
    debug_nan: bool = False,
) -> GradFunction[P, tuple[Any, _L, _A]]: ...
@overload
def grad(
    fun: Callable[P, Any],
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    has_aux: bool = False,
    return_value: bool = False,
    debug_nan: bool = False,
) -> GradFunction[P, Any]: ...


def grad(
    fun: Callable[..., Any] | None = None,
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    has_aux: bool = False,
    return_value: bool = False,
    debug_nan: bool = False,
) -> GradFunction[..., Any] | Callable[[Callable[..., Any]], GradFunction[..., Any]]:
    """Differentiate a scalar-valued ``fun`` with respect to States and/or arguments.

    Args:
        fun: returns a scalar loss (or ``(loss, aux)`` with ``has_aux=True``); it
            may read and write States. ``None`` returns a decorator that takes the
            function.
        grad_states: a State, or a list/tuple/dict of States (e.g. ``module.states(ParamState)``),
            to differentiate with respect to; the state gradients mirror this structure
            (a plain dict for a ``StateDict``).
        argnums: positional argument(s) to differentiate with respect to. Defaults to
            0 when ``grad_states`` is None, and to none otherwise.
        has_aux: ``fun`` returns ``(loss, aux)``.
        return_value: also return the loss.
        debug_nan: check every call's loss and gradients for NaN and Inf (as
            brainstate's ``debug_nan``); a call that produces one raises
            ``FloatingPointError`` naming the gradients that hold it, and no state is
            written. Costs a reduction over the gradients and
            turns off in-place updates for this function; inside another
            transformation the check runs as a JAX callback.

    Returns:
        A function returning ``grads`` — the state gradients, the argument gradients,
        or ``(state_grads, arg_grads)`` when both are requested — followed by
        ``loss`` (if ``return_value``) and ``aux`` (if ``has_aux``):
        ``grads``, ``(grads, aux)``, ``(grads, loss)`` or ``(grads, loss, aux)``.
        States that ``fun`` writes (e.g. running statistics) are updated.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import grad
        >>> w = ParamState(jnp.array([1., 2.]))
        >>> loss = lambda x: jnp.sum(w.value * x)
        >>> grad(loss, grad_states=w)(jnp.array([3., 4.]))
        Array([3., 4.], dtype=float32)
        >>> grad(lambda x: jnp.sum(x ** 2))(jnp.array([1., 2.]))
        Array([2., 4.], dtype=float32)
    """
    if fun is None:

        def decorate(f: Callable[..., Any]) -> GradFunction[..., Any]:
            return GradFunction(f, grad_states, argnums, has_aux, return_value, debug_nan)

        return decorate
    return GradFunction(fun, grad_states, argnums, has_aux, return_value, debug_nan)
