"""Type variables of state_nn's generic classes; they matter to type checkers only.

``Map[Cell]`` knows the type of the module it maps, so ``ensemble.module.v``
type-checks as ``Cell``'s attribute. Type checkers read the ``TYPE_CHECKING``
branch, where the variable defaults to ``Module`` (PEP 696): a bare ``Map`` in
an annotation means ``Map[Module]``. ``typing_extensions`` (bundled with every
type checker) gives that default on Python 3.11; at run time the plain
``typing`` variable is used, so it is not a dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._module import Module

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    M = TypeVar("M", bound=Module, covariant=True, default=Module)
else:
    from typing import TypeVar

    M = TypeVar("M", bound=Module, covariant=True)

__all__ = ["M"]
