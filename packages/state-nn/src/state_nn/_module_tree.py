"""The submodule and parameter queries of ``Module`` (PyTorch's names), and the walks they share."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any

import state_core
from state_core import State, StateDict
from state_core.engine import graph_children

if TYPE_CHECKING:
    from ._module import Module

__all__ = ["ModuleTree"]

Path = tuple[Hashable, ...]


def _walk_modules(root: ModuleTree) -> list[tuple[Path, Any]]:
    """Every Module reachable from ``root`` (pre-order, deduplicated by identity).

    Iterative (an explicit stack of child iterators) so that a chain of thousands
    of nested modules does not hit Python's recursion limit.
    """
    found: list[tuple[Path, Any]] = []
    seen: set[int] = set()
    pending: list[Iterator[tuple[Path, Any]]] = [iter((((), root),))]
    while pending:
        item = next(pending[-1], None)
        if item is None:
            pending.pop()
            continue
        path, obj = item
        if not isinstance(obj, (ModuleTree, list, tuple, dict)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, ModuleTree):
            found.append((path, obj))
        pending.append(graph_children(obj, path))
    return found


def _direct_children(root: ModuleTree) -> list[tuple[Path, Any]]:
    """``(path, module)`` for the Modules directly held by ``root``.

    Attributes are followed into lists, tuples and dicts but not into other
    Modules; each child is listed once (first path), in definition order.
    """
    found: list[tuple[Path, Any]] = []
    seen: set[int] = {id(root)}
    # A stack of iterators keeps the walk iterative and in definition order.
    stack = [graph_children(root, ())]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        path, value = item
        if id(value) in seen:
            continue
        if isinstance(value, ModuleTree):
            seen.add(id(value))
            found.append((path, value))
        elif isinstance(value, (list, tuple, dict)):
            seen.add(id(value))
            stack.append(graph_children(value, path))
    return found


class ModuleTree:
    """What ``Module`` answers about its tree: submodules, children, parameters.

    A base class of ``Module`` (which documents these methods); the walks are
    iterative, so a chain of thousands of nested modules does not hit Python's
    recursion limit.
    """

    # Provided by Module.
    states: Callable[..., Any]

    def named_modules(self, include_self: bool = True) -> dict[Path, Module]:
        """``path -> Module`` for this module (path ``()``) and every submodule.

        Submodules are found in attributes, in definition order, and inside lists,
        tuples and dicts; a module reachable by several paths appears once.
        ``include_self=False`` leaves this module (path ``()``) out.

        Args:
            include_self: False leaves this module (path ``()``) out.

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
            >>> list(Tree().named_modules(include_self=False))
            [('left',), ('more', 0), ('more', 1, 'x')]
        """
        found = dict(_walk_modules(self))
        if not include_self:
            del found[()]
        return found

    def modules(self, include_self: bool = True) -> list[Module]:
        """This module and every submodule, in the order of ``named_modules``.

        ``include_self=False`` leaves this module out.

        Args:
            include_self: False leaves this module out.

        Example:
            >>> import state_nn
            >>> class Leaf(state_nn.Module):
            ...     pass
            >>> class Pair(state_nn.Module):
            ...     def __init__(self):
            ...         self.a, self.b = Leaf(), Leaf()
            >>> [type(m).__name__ for m in Pair().modules()]
            ['Pair', 'Leaf', 'Leaf']
            >>> len(Pair().modules(include_self=False))
            2
        """
        return list(self.named_modules(include_self).values())

    def named_children(self) -> dict[Path, Module]:
        """``path -> Module`` for the direct submodules (not their own submodules).

        A child held in a list or dict of this module counts as direct; its path
        goes through the container.

        Example:
            >>> import state_nn
            >>> class Leaf(state_nn.Module):
            ...     pass
            >>> class Tree(state_nn.Module):
            ...     def __init__(self):
            ...         self.left = Leaf()
            ...         self.blocks = [Leaf(), Leaf()]
            ...         self.left.inner = Leaf()
            >>> list(Tree().named_children())
            [('left',), ('blocks', 0), ('blocks', 1)]
        """
        return dict(_direct_children(self))

    def children(self) -> list[Module]:
        """The direct submodules, in the order of ``named_children``.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> net = state_nn.Sequential(state_nn.Linear(2, 3), state_nn.Dropout(0.1))
            >>> [type(m).__name__ for m in net.children()]
            ['Linear', 'Dropout']
        """
        return [m for _, m in _direct_children(self)]

    def named_parameters(self, recurse: bool = True) -> StateDict:
        """``path -> ParamState`` for the trainable states (``states(ParamState)``).

        ``recurse=False`` keeps only the ones this module holds itself (directly
        or in a ``Param`` it holds), not those of its other submodules.

        Args:
            recurse: False keeps only the parameters this module holds itself.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn
            >>> class Net(state_nn.Module):
            ...     def __init__(self):
            ...         self.scale = state_core.ParamState(jnp.ones(()))
            ...         self.fc = state_nn.Linear(2, 1)
            >>> list(Net().named_parameters())
            [('scale',), ('fc', 'weight'), ('fc', 'bias')]
            >>> list(Net().named_parameters(recurse=False))
            [('scale',)]
        """
        from ._param import Param

        params = self.states(state_core.ParamState)
        if recurse:
            return params
        # A Param held by this module is one of its own parameters (a Param is a
        # Module only to carry its transform), so its value stays; other
        # submodules' parameters are left out.
        below = {
            id(s)
            for child in self.children()
            if not isinstance(child, Param)
            for s in child.states(state_core.ParamState).values()
        }
        return StateDict((p, s) for p, s in params.items() if id(s) not in below)

    def parameters(self, recurse: bool = True) -> list[State[Any]]:
        """The ``ParamState`` objects of ``named_parameters(recurse)``, in the same order.

        Args:
            recurse: False keeps only the parameters this module holds itself.

        Example:
            >>> import state_nn
            >>> [p.value.shape for p in state_nn.Linear(3, 2).parameters()]
            [(3, 2), (2,)]
        """
        return list(self.named_parameters(recurse).values())

    def named_param_modules(self) -> dict[Path, Module]:
        """``path -> Param`` for every ``Param`` in this module (itself included).

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> class Cell(state_nn.Module):
            ...     def __init__(self):
            ...         self.tau = state_nn.Param(jnp.ones(2), t=state_nn.SoftplusT())
            >>> list(Cell().named_param_modules())
            [('tau',)]
        """
        from ._param import Param

        return {path: m for path, m in _walk_modules(self) if isinstance(m, Param)}

    def param_modules(self) -> list[Module]:
        """The ``Param`` modules of ``named_param_modules()``, in the same order.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> len(state_nn.Sequential(state_nn.Param(jnp.ones(1)), state_nn.Param(jnp.ones(2))).param_modules())
            2
        """
        return list(self.named_param_modules().values())
