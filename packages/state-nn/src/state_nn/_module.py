"""``Module``: the base class of everything in ``state_nn``."""

from __future__ import annotations

import threading
from typing import Any, Hashable, Iterator

import state_core
from state_core import State, StateDict
from state_core.filter import FilterLike

__all__ = ["Module"]

Path = tuple[Hashable, ...]

_REPR_GUARD = threading.local()


def _module_children(obj: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    """``(path, value)`` for the direct attributes / items of a Module or container."""
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        items = getattr(obj, "__dict__", {}).items()
    for key, value in items:
        yield path + (key,), value


def _walk_modules(root: "Module") -> list[tuple[Path, "Module"]]:
    """Every Module reachable from ``root`` (pre-order, deduplicated by identity).

    Iterative (an explicit stack of child iterators) so that a chain of thousands
    of nested modules does not hit Python's recursion limit.
    """
    found: list[tuple[Path, Module]] = []
    seen: set[int] = set()
    pending: list[Iterator[tuple[Path, Any]]] = [iter((((), root),))]
    while pending:
        item = next(pending[-1], None)
        if item is None:
            pending.pop()
            continue
        path, obj = item
        if not isinstance(obj, (Module, list, tuple, dict)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Module):
            found.append((path, obj))
        pending.append(_module_children(obj, path))
    return found


def _hook_order(root: "Module", hook_owner: str) -> list["Module"]:
    """Post-order (children before parents) list of the modules whose hooks run.

    A submodule that overrides ``hook_owner`` (``init_all_states`` /
    ``reset_all_states``), such as ``Map``, is treated as one unit: it is listed
    but not entered, and the caller runs its own ``hook_owner`` instead.
    """
    order: list[Module] = []
    seen: set[int] = {id(root)}
    base = getattr(Module, hook_owner)
    # Each frame is (object, its child iterator); a Module is listed when its
    # frame is popped, i.e. after all its children: post-order without recursion.
    pending: list[tuple[Any, Iterator[tuple[Path, Any]]]] = [(root, _module_children(root, ()))]
    while pending:
        owner, children = pending[-1]
        item = next(children, None)
        if item is None:
            pending.pop()
            if isinstance(owner, Module):
                order.append(owner)
            continue
        obj = item[1]
        if not isinstance(obj, (Module, list, tuple, dict)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Module) and getattr(type(obj), hook_owner) is not base:
            order.append(obj)  # a self-contained unit (e.g. Map): listed, not entered
        else:
            pending.append((obj, _module_children(obj, ())))
    return order


def _contains_shown(value: Any, depth: int = 0) -> bool:
    if isinstance(value, (State, Module)):
        return True
    if depth < 8 and isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return any(_contains_shown(v, depth + 1) for v in items)
    return False


def _render(value: Any) -> str:
    """Render a State, a Module, or a container of them (other items are left out)."""
    if isinstance(value, (State, Module)):
        return repr(value)
    if isinstance(value, dict):
        entries = [f"{k!r}: {_render(v)}" for k, v in value.items() if _contains_shown(v)]
        open_, close = "{", "}"
    else:
        entries = [_render(v) for v in value if _contains_shown(v)]
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
    if not entries:
        return open_ + close
    body = ",\n".join("  " + e.replace("\n", "\n  ") for e in entries)
    return f"{open_}\n{body}\n{close}"


class Module:
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

    def __init__(self) -> None:
        pass

    # ------------------------------------------------------------------ calling
    def update(self, *args: Any, **kwargs: Any) -> Any:
        """The module's computation; ``module(*args, **kwargs)`` calls it. Override it.

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

    # ------------------------------------------------------------------ states
    def states(self, *filters: FilterLike) -> StateDict | tuple[StateDict, ...]:
        """The module's states as a ``state_core.StateDict`` (``path -> State``).

        Paths are tuples of attribute names, list indices and dict keys from this
        module; a state reachable by several paths appears once. With no filter,
        every state; with one filter, the states it matches; with several, a tuple
        with one ``StateDict`` per filter, each state going to the first filter that
        matches it (unmatched states are dropped; end with ``...`` for "the rest").

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
        """
        collected = state_core.collect_states(self)
        if not filters:
            return collected
        if len(filters) == 1:
            return collected.filter(filters[0])
        return collected.split(*filters)

    # ------------------------------------------------------------------ submodules
    def named_modules(self) -> dict[Path, "Module"]:
        """``path -> Module`` for this module (path ``()``) and every submodule.

        Submodules are found in attributes, in definition order, and inside lists,
        tuples and dicts; a module reachable by several paths appears once.

        Example:
            >>> import state_nn
            >>> class Leaf(state_nn.Module):
            ...     pass
            >>> class Tree(state_nn.Module):
            ...     def __init__(self):
            ...         self.left = Leaf()
            ...         self.more = [Leaf(), {'x': Leaf()}]
            >>> list(Tree().named_modules())
            [(), ('left',), ('more', 0), ('more', 1, 'x')]
        """
        return dict(_walk_modules(self))

    def modules(self) -> list["Module"]:
        """This module and every submodule, in the order of ``named_modules``.

        Example:
            >>> import state_nn
            >>> class Leaf(state_nn.Module):
            ...     pass
            >>> class Pair(state_nn.Module):
            ...     def __init__(self):
            ...         self.a, self.b = Leaf(), Leaf()
            >>> [type(m).__name__ for m in Pair().modules()]
            ['Pair', 'Leaf', 'Leaf']
        """
        return [m for _, m in _walk_modules(self)]

    # ------------------------------------------------------------------ hooks
    def init_state(self, *args: Any, **kwargs: Any) -> None:
        """Hook: create this module's run-time states (default: nothing).

        ``init_all_states(*args, **kwargs)`` calls it with its own arguments on
        every submodule, so accept (and ignore) what you do not use.

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

    def init_all_states(self, *args: Any, **kwargs: Any) -> None:
        """Call ``init_state(*args, **kwargs)`` on every submodule and then on this module.

        The order is post-order (children before their parents) and each module's
        hook runs at most once, even if the module is reachable by several paths.
        A submodule with its own ``init_all_states`` (such as ``Map``) is handed
        the call as a whole.

        Example:
            >>> import state_nn
            >>> calls = []
            >>> class Node(state_nn.Module):
            ...     def __init__(self, name, *children):
            ...         self.name, self.children = name, list(children)
            ...     def init_state(self, *args, **kwargs):
            ...         calls.append(self.name)
            >>> Node('root', Node('a', Node('a1')), Node('b')).init_all_states()
            >>> calls
            ['a1', 'a', 'b', 'root']
        """
        self._run_hooks("init_all_states", "init_state", args, kwargs)

    def reset_all_states(self, *args: Any, **kwargs: Any) -> None:
        """Call ``reset_state(*args, **kwargs)`` on every submodule, children before parents.

        Example:
            >>> import state_nn
            >>> calls = []
            >>> class Node(state_nn.Module):
            ...     def __init__(self, name, *children):
            ...         self.name, self.children = name, list(children)
            ...     def reset_state(self, *args, **kwargs):
            ...         calls.append(self.name)
            >>> Node('root', Node('a'), Node('b')).reset_all_states()
            >>> calls
            ['a', 'b', 'root']
        """
        self._run_hooks("reset_all_states", "reset_state", args, kwargs)

    def _run_hooks(self, owner: str, hook: str, args: tuple, kwargs: dict) -> None:
        base = getattr(Module, owner)
        for module in _hook_order(self, owner):
            if module is not self and getattr(type(module), owner) is not base:
                getattr(module, owner)(*args, **kwargs)
            else:
                getattr(module, hook)(*args, **kwargs)

    # ------------------------------------------------------------------ repr
    def _repr_fields(self) -> list[tuple[str, str]]:
        fields = []
        for key, value in vars(self).items():
            if isinstance(key, str) and key.startswith("_"):
                continue
            if _contains_shown(value):
                fields.append((str(key), _render(value)))
        return fields

    def __repr__(self) -> str:
        active = getattr(_REPR_GUARD, "ids", None)
        if active is None:
            active = _REPR_GUARD.ids = set()
        if id(self) in active:
            return f"{type(self).__name__}(...)"
        active.add(id(self))
        try:
            return state_core.format_fields(type(self).__name__, self._repr_fields())
        finally:
            active.discard(id(self))
