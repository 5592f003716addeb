"""``Module``: the base class of everything in ``state_nn``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Self, overload

import numpy as np

import state_core
from state_core import StateDict
from state_core.engine import graph_children
from state_core.filter import FilterLike, to_predicate
from state_core.graph import Node

from ._module_display import ModuleDisplay
from ._module_tree import ModuleTree, Path, _direct_children

__all__ = ["Module"]


def _hook_order(root: Module, hook_owner: str, exclude: Callable[[Path, Any], bool] | None = None) -> list[Module]:
    """Post-order (children before parents) list of the modules whose hooks run.

    A submodule that overrides ``hook_owner`` (``init_all_states`` /
    ``reset_all_states``), such as ``Map``, is treated as one unit: it is listed
    but not entered, and the caller runs its own ``hook_owner`` instead.
    ``exclude(path, module)`` leaves a module out (its own submodules are still
    visited, and may be excluded by the same predicate).
    """
    order: list[Module] = []
    seen: set[int] = {id(root)}
    base = getattr(Module, hook_owner)
    # Each frame is (object, its path, its child iterator); a Module is listed when its
    # frame is popped, i.e. after all its children: post-order without recursion.
    pending: list[tuple[Any, Path, Iterator[tuple[Path, Any]]]] = [(root, (), graph_children(root, ()))]
    while pending:
        owner, owner_path, children = pending[-1]
        item = next(children, None)
        if item is None:
            pending.pop()
            if isinstance(owner, Module) and not (exclude is not None and exclude(owner_path, owner)):
                order.append(owner)
            continue
        path, obj = item
        if not isinstance(obj, (Module, list, tuple, dict)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Module) and getattr(type(obj), hook_owner) is not base:
            # A self-contained unit (e.g. Map): listed, not entered.
            if exclude is None or not exclude(path, obj):
                order.append(obj)
        else:
            pending.append((obj, path, graph_children(obj, path)))
    return order


def _node_predicate(node_to_exclude: Any) -> Callable[[Path, Any], bool] | None:
    """``node_to_exclude`` as a ``(path, module) -> bool`` predicate (``None`` when nothing is excluded).

    Module objects (alone or in a tuple / list) match by identity; anything else
    is a state filter (a class, a ``state_core.filter`` Filter, a
    ``(path, module) -> bool`` function, ...), applied to ``(path, module)``.
    """
    if node_to_exclude is None:
        return None
    items = node_to_exclude if isinstance(node_to_exclude, (tuple, list)) else (node_to_exclude,)
    targets = {id(m) for m in items if isinstance(m, Module)}
    others = [f for f in items if not isinstance(f, Module)]
    rest = to_predicate(tuple(others)) if others else None

    def excluded(path: Path, module: Any) -> bool:
        return id(module) in targets or (rest is not None and bool(rest(path, module)))

    return excluded


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _format_size(size: Any, what: str, module: Any) -> tuple[int, ...] | None:
    """``in_size`` / ``out_size`` as a tuple of ints (an int, NumPy integer or 0-d integer array: a 1-tuple)."""
    if size is None:
        return None
    if isinstance(size, np.ndarray) and size.ndim == 0 and np.issubdtype(size.dtype, np.integer):
        size = int(size)  # a size computed with NumPy, e.g. np.prod(shape)
    if _is_int(size):
        dims: tuple[Any, ...] = (size,)
    elif isinstance(size, (tuple, list)) and all(_is_int(d) for d in size):
        dims = tuple(size)
    else:
        raise TypeError(
            f"{type(module).__name__}.{what} must be an int or a tuple of ints, got {type(size).__name__} {size!r}."
        )
    if any(d < 0 for d in dims):
        raise ValueError(f"{type(module).__name__}.{what} must not contain negative sizes, got {size!r}.")
    return tuple(int(d) for d in dims)


class Module(ModuleTree, ModuleDisplay, Node):
    """Base class of stateful models: a container of States and sub-Modules.

    Subclasses assign ``State`` objects and other ``Module`` objects as attributes
    (directly, or inside lists, tuples and dicts) and implement ``update``;
    calling a module calls ``update``. Parameters usually go in ``__init__``;
    states whose shape depends on the run (batch size, hidden state) are created
    in the ``init_state`` hook and reset in ``reset_state``.
    ``init_all_states`` / ``reset_all_states`` run those hooks on every submodule,
    children before parents.

    Calling ``Module.__init__`` from a subclass is optional: a Module keeps no
    bookkeeping of its own, everything is discovered from its attributes.

    Args:
        name: an optional name (a ``str``), shown first in the module's repr.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> class Affine(state_nn.Module):
        ...     def __init__(self, n_in, n_out):
        ...         super().__init__()
        ...         self.weight = state_core.ParamState(jnp.ones((n_in, n_out)))
        ...     def update(self, x):
        ...         return x @ self.weight.value
        >>> model = Affine(2, 4)
        >>> model(jnp.ones(2))
        Array([2., 2., 2., 2.], dtype=float32)
        >>> model
        Affine(
          weight=ParamState(
            value=ShapedArray(float32[2,4])
          )
        )
        >>> list(model.states())
        [('weight',)]
    """

    __module__ = "state_nn"

    # Class-level defaults, so a subclass that never calls ``Module.__init__``
    # still has a name and sizes.
    _name: str | None = None
    _in_size: tuple[int, ...] | None = None
    _out_size: tuple[int, ...] | None = None
    # Modules start in training mode, as in PyTorch and flax.nnx; see ``train``.
    _training: bool = True
    # NumPy then defers ``array >> module`` to ``Module.__rrshift__`` instead of
    # applying it element by element.
    __array_ufunc__ = None

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            self.name = name

    # ------------------------------------------------------------------ name and sizes
    @property
    def name(self) -> str | None:
        """The module's name (a ``str``), or ``None`` if it has none; shown first in its repr.

        Example:
            >>> import state_nn
            >>> state_nn.Module(name='encoder').name
            'encoder'
            >>> state_nn.Module().name is None
            True
        """
        return self._name

    @name.setter
    def name(self, name: str | None) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"Module name must be a str or None, got {type(name).__name__} {name!r}.")
        self._name = name

    @property
    def in_size(self) -> tuple[int, ...] | None:
        """The input feature shape as a tuple of ints, or ``None`` if unknown.

        Assigning an int or a sequence of ints stores a tuple; ``Sequential``
        uses the sizes to check that consecutive layers fit.

        Example:
            >>> import state_nn
            >>> m = state_nn.Module()
            >>> m.in_size = 3
            >>> m.in_size
            (3,)
        """
        return self._in_size

    @in_size.setter
    def in_size(self, size: Any) -> None:
        self._in_size = _format_size(size, "in_size", self)

    @property
    def out_size(self) -> tuple[int, ...] | None:
        """The output feature shape as a tuple of ints, or ``None`` if unknown.

        Example:
            >>> import state_nn
            >>> state_nn.Linear(3, 2).out_size
            (2,)
        """
        return self._out_size

    @out_size.setter
    def out_size(self, size: Any) -> None:
        self._out_size = _format_size(size, "out_size", self)

    # ------------------------------------------------------------------ calling
    def update(self, *args: Any, **kwargs: Any) -> Any:
        """The module's computation; ``module(*args, **kwargs)`` calls it. Override it.

        Args:
            *args: the positional arguments of the call ``module(*args, **kwargs)``.
            **kwargs: its keyword arguments.

        Example:
            >>> import state_nn
            >>> class Double(state_nn.Module):
            ...     def update(self, x):
            ...         return 2 * x
            >>> Double()(3)
            6
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not implement update(); define "
            f"`def update(self, ...)` in the subclass (calling the module calls update)."
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.update(*args, **kwargs)

    def __rshift__(self, other: Any) -> Any:
        """``a >> b`` is ``Sequential(a, b)``: ``b`` is applied to the output of ``a``."""
        if not callable(other):
            return NotImplemented
        from ._sequential import Sequential

        return Sequential._compose(self, other)

    def __rrshift__(self, other: Any) -> Any:
        """``f >> module`` composes a function first; ``x >> module`` (data) calls ``module(x)``."""
        if callable(other):
            from ._sequential import Sequential

            return Sequential._compose(other, self)
        return self(other)

    # ------------------------------------------------------------------ states
    # No filter or one filter: one StateDict; several: a tuple with one StateDict per filter.
    @overload
    def states(self, *, include_self: bool = True) -> StateDict: ...
    @overload
    def states(self, first: FilterLike, /, *, include_self: bool = True) -> StateDict: ...
    @overload
    def states(
        self, first: FilterLike, second: FilterLike, /, *, include_self: bool = True
    ) -> tuple[StateDict, StateDict]: ...
    @overload
    def states(
        self, first: FilterLike, second: FilterLike, third: FilterLike, /, *, include_self: bool = True
    ) -> tuple[StateDict, StateDict, StateDict]: ...
    @overload
    def states(self, *filters: FilterLike, include_self: bool = True) -> StateDict | tuple[StateDict, ...]: ...

    def states(self, *filters: FilterLike, include_self: bool = True) -> StateDict | tuple[StateDict, ...]:
        """The module's states as a ``state_core.StateDict`` (``path -> State``).

        Paths are tuples of attribute names, list indices and dict keys from this
        module; a state reachable by several paths appears once. With no filter,
        every state; with one filter, the states it matches; with several, a tuple
        with one ``StateDict`` per filter, each state going to the first filter that
        matches it (unmatched states are dropped; end with ``...`` for "the rest").
        ``include_self=False`` leaves out the states this module holds itself
        (in its attributes, lists and dicts) and keeps those of its submodules.

        Args:
            *filters: filters (anything ``state_core.filter.to_predicate`` accepts); none: every state.
            include_self: False leaves out the states this module holds itself and keeps its submodules'.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn
            >>> class Net(state_nn.Module):
            ...     def __init__(self):
            ...         self.w = state_core.ParamState(jnp.ones(2))
            ...         self.h = state_core.HiddenState(jnp.zeros(2))
            >>> net = Net()
            >>> list(net.states(state_core.ParamState))
            [('w',)]
            >>> params, rest = net.states(state_core.ParamState, ...)
            >>> list(params), list(rest)
            ([('w',)], [('h',)])
            >>> class Outer(state_nn.Module):
            ...     def __init__(self):
            ...         self.scale = state_core.ParamState(jnp.ones(()))
            ...         self.net = Net()
            >>> list(Outer().states(include_self=False))
            [('net', 'w'), ('net', 'h')]
        """
        collected = state_core.collect_states(self)
        if not include_self:
            owned: set[int] = set()
            for _, child in _direct_children(self):
                owned.update(id(s) for s in state_core.collect_states(child).values())
            collected = StateDict((p, s) for p, s in collected.items() if id(s) in owned)
        if not filters:
            return collected
        if len(filters) == 1:
            return collected.filter(filters[0])
        return collected.split(*filters)

    def reg_loss(self) -> Any:
        """The sum of ``reg_loss()`` over every ``Param`` in this module (0.0 if none).

        Add it to the training loss to apply the parameters' regularisers.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> class Net(state_nn.Module):
            ...     def __init__(self):
            ...         self.a = state_nn.Param(jnp.array([1., -2.]), reg=state_nn.L1Reg(0.5))
            ...         self.b = state_nn.Param(jnp.array([3.]), reg=state_nn.L2Reg(0.1))
            >>> Net().reg_loss()
            Array(2.4, dtype=float32)
        """
        total: Any = 0.0
        for param in self.param_modules():
            total = total + param.reg_loss()
        return total

    # ------------------------------------------------------------------ hooks
    def init_state(self, *args: Any, **kwargs: Any) -> None:
        """Hook: create this module's run-time states (default: nothing).

        ``init_all_states(*args, **kwargs)`` calls it with its own arguments on
        every submodule, so accept (and ignore) what you do not use.

        Args:
            *args: the positional arguments given to ``init_all_states``.
            **kwargs: the keyword arguments given to ``init_all_states``.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn
            >>> class Cell(state_nn.Module):
            ...     def init_state(self, batch_size=1, **kwargs):
            ...         self.h = state_core.HiddenState(jnp.zeros((batch_size, 3)))
            >>> cell = Cell()
            >>> cell.init_all_states(batch_size=2)
            >>> cell.h.value.shape
            (2, 3)
        """

    def reset_state(self, *args: Any, **kwargs: Any) -> None:
        """Hook: reset this module's run-time states (default: nothing).

        Args:
            *args: the positional arguments given to ``reset_all_states``.
            **kwargs: the keyword arguments given to ``reset_all_states``.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn
            >>> class Counter(state_nn.Module):
            ...     def __init__(self):
            ...         self.n = state_core.ShortTermState(jnp.ones(()))
            ...     def reset_state(self, *args, **kwargs):
            ...         self.n.value = jnp.zeros(())
            >>> c = Counter()
            >>> c.reset_all_states()
            >>> c.n.value
            Array(0., dtype=float32)
        """

    def init_all_states(self, *args: Any, node_to_exclude: Any = None, **kwargs: Any) -> None:
        """Call ``init_state(*args, **kwargs)`` on every submodule and then on this module.

        The order is post-order (children before their parents) and each module's
        hook runs at most once, even if the module is reachable by several paths.
        A submodule with its own ``init_all_states`` (such as ``Map``) is handed
        the call as a whole (``node_to_exclude`` included).

        Args:
            *args: passed to every ``init_state``.
            node_to_exclude: modules whose hook is skipped: a Module (or a tuple
                of them), a class, a ``state_core.filter`` Filter or a
                ``(path, module) -> bool`` function; paths are those of
                ``named_modules()``. The submodules of an excluded module still
                run theirs unless the filter matches them too.
            **kwargs: passed to every ``init_state``.

        Example:
            >>> import state_nn
            >>> calls = []
            >>> class Node(state_nn.Module):
            ...     def __init__(self, label, *kids):
            ...         self.label, self.kids = label, list(kids)
            ...     def init_state(self, *args, **kwargs):
            ...         calls.append(self.label)
            >>> tree = Node('root', Node('a', Node('a1')), Node('b'))
            >>> tree.init_all_states()
            >>> calls
            ['a1', 'a', 'b', 'root']
            >>> calls.clear()
            >>> tree.init_all_states(node_to_exclude=tree.kids[0])
            >>> calls
            ['a1', 'b', 'root']
        """
        self._run_hooks("init_all_states", "init_state", args, kwargs, node_to_exclude)

    def reset_all_states(self, *args: Any, node_to_exclude: Any = None, **kwargs: Any) -> None:
        """Call ``reset_state(*args, **kwargs)`` on every submodule, children before parents.

        Args:
            *args: passed to every ``reset_state`` hook.
            node_to_exclude: modules to skip, as in ``init_all_states``.
            **kwargs: passed to every ``reset_state`` hook.

        Example:
            >>> import state_nn
            >>> calls = []
            >>> class Node(state_nn.Module):
            ...     def __init__(self, label, *kids):
            ...         self.label, self.kids = label, list(kids)
            ...     def reset_state(self, *args, **kwargs):
            ...         calls.append(self.label)
            >>> Node('root', Node('a'), Node('b')).reset_all_states()
            >>> calls
            ['a', 'b', 'root']
        """
        self._run_hooks("reset_all_states", "reset_state", args, kwargs, node_to_exclude)

    def _run_hooks(
        self, owner: str, hook: str, args: tuple[Any, ...], kwargs: dict[Any, Any], node_to_exclude: Any
    ) -> None:
        base = getattr(Module, owner)
        exclude = _node_predicate(node_to_exclude)
        # A self-contained submodule (Map) applies the same exclusion to its own members.
        unit_kwargs = kwargs if node_to_exclude is None else {**kwargs, "node_to_exclude": node_to_exclude}
        for module in _hook_order(self, owner, exclude):
            if module is not self and getattr(type(module), owner) is not base:
                getattr(module, owner)(*args, **unit_kwargs)
            else:
                getattr(module, hook)(*args, **kwargs)

    # ------------------------------------------------------------------ training mode
    @property
    def training(self) -> bool:
        """Whether this module is in training mode (``True`` for a new module).

        Layers that behave differently in training and evaluation (``Dropout``)
        read it; so can your own modules. ``train()`` / ``eval()`` set it on a
        whole model; assigning it sets it on this module only.

        Example:
            >>> import state_nn
            >>> drop = state_nn.Dropout(0.5)
            >>> drop.training
            True
            >>> drop.training = False
            >>> drop.deterministic
            True
        """
        return self._training

    @training.setter
    def training(self, mode: bool) -> None:
        _set_training([self], mode)

    def train(self, mode: bool = True) -> Self:
        """Set training mode (``mode=True``) or evaluation mode on this module and every submodule.

        As in PyTorch: it walks the whole tree (submodules in attributes, lists
        and dicts, the member module of a ``Map``), sets each module's
        ``training``, and returns ``self``, so ``model.eval()(x)`` works.
        Compiled functions (``state_transform.jit``, ``Map``, ...) traced in the
        other mode are traced again at their next call, because the mode is
        baked into a compiled program; switch between phases, not every step.

        Args:
            mode: ``True`` for training, ``False`` for evaluation.

        Returns:
            This module.

        Raises:
            TypeError: if ``mode`` is not a bool.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> net = state_nn.Sequential(state_nn.Linear(2, 2), state_nn.Dropout(0.5))
            >>> net.eval() is net
            True
            >>> [m.training for m in net.modules()]
            [False, False, False]
            >>> net[1].deterministic
            True
            >>> net.train()[1].deterministic
            False
        """
        _set_training(self.modules(), mode)
        return self

    def eval(self) -> Self:
        """Set evaluation mode on this module and every submodule: ``train(False)``; returns ``self``.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> drop = state_nn.Dropout(0.9)
            >>> drop.eval()(jnp.ones(3))
            Array([1., 1., 1.], dtype=float32)
        """
        return self.train(False)


def _set_training(modules: Iterable[Module], mode: Any) -> None:
    """Set ``training`` on ``modules``; forget compiled programs if any module changed mode."""
    if not isinstance(mode, (bool, np.bool_)):
        raise TypeError(
            f"The training mode must be a bool (True: training, False: evaluation), got {type(mode).__name__} {mode!r}."
        )
    mode = bool(mode)
    changed = False
    for module in modules:
        if module._training is not mode:
            module._training = mode
            changed = True
    if changed:
        # Compiled programs took the old mode as a Python constant.
        state_core.clear_caches()
