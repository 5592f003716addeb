"""Type variables of the transformations' signatures; they matter to type checkers only.

A transformed function is typed by the function it wraps: ``jit(f)`` is a
``JittedFunction[P, R]`` whose call takes ``f``'s parameters ``P`` and returns
``f``'s return type ``R`` (JAX returns arrays where ``f`` returns Python
scalars, as ``jax.jit`` does; the checker sees ``f``'s annotation).

Type checkers read the ``TYPE_CHECKING`` branch, where ``P`` and ``R`` have
defaults (PEP 696): a bare ``JittedFunction`` or ``StatefulMapping`` in an
annotation means ``JittedFunction[..., Any]``, so code that names the classes
without parameters stays valid under ``mypy --strict``. ``typing_extensions``
(bundled with every type checker) gives those defaults on Python 3.11; at run
time the plain ``typing`` variables are used, so it is not a dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import ParamSpec, TypeVar

    P = ParamSpec("P", default=...)
    R = TypeVar("R", covariant=True, default=Any)
else:
    from typing import ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R", covariant=True)

#: The parameters of a bound method after its first (``self``), and its return type.
Q = ParamSpec("Q")
S = TypeVar("S")
#: The instance a method decorator is bound to.
T = TypeVar("T")
#: A loop's carry, the slices it loops over and what each step returns (as ``jax.lax.scan``).
C = TypeVar("C")
X = TypeVar("X")
Y = TypeVar("Y")

__all__ = ["P", "R", "Q", "S", "T", "C", "X", "Y"]
