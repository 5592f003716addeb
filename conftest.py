"""Shared by every test directory: how docstring examples compare the numbers XLA computes;
a fixture that restores Python's default recursion limit; fixtures that count calls and XLA
compiles; a State whose store can be interrupted; the ``integration`` marker.

The policy for recorded numbers. A docstring example shows what a function prints,
and for floating-point results that is what one jaxlib's compiler computes: XLA
may fuse, reorder or vectorise an operation differently from one release to the
next, which moves a float32 result by a few units in the last place (ulp); jaxlib
0.12, for example, computes ``standardize``'s example 4 ulp away from 0.10. Such a
change is not a change of behaviour, so examples are compared with a written-down
bound instead of character for character:

* the text around the numbers must match exactly (with ``ELLIPSIS`` and
  ``NORMALIZE_WHITESPACE``), and so must every integer;
* each floating-point number may differ by ``DOCTEST_FLOAT32_ULPS`` float32 ulps of
  its magnitude, plus half a unit in the last digit the example prints (the
  printed value is already rounded there);
* the spaces NumPy pads numbers with do not count (a wider number widens its
  column).

16 ulps (a relative 1.9e-6) covers a reordered sum of up to 16 terms, the longest
any example shows, and is far below any difference that would change what an
example teaches. Simulations recorded against brainstate follow their own rule,
written beside their numbers (``tests-integration/test_integration_brainstate_examples.py``).
"""

from __future__ import annotations

import contextlib
import doctest
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import jax
import numpy as np
import pytest

DOCTEST_FLOAT32_ULPS = 16
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

# A number as NumPy and JAX print it: 3, -1.5, 2., .5, 1e-05, -3.2e+10 (nan/inf are text).
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
_PADDED_NUMBER = re.compile(rf"\s*{_NUMBER.pattern}\s*")
_FLOAT32_EPS = float(np.finfo(np.float32).eps)


def _last_digit_unit(text: str) -> float:
    """One unit in the last digit printed: "1.2247" -> 1e-4, "2." -> 1, "1e-05" -> 1e-05."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def numbers_close(want: str, got: str) -> bool:
    """True if the printed numbers ``want`` and ``got`` agree within the policy above."""
    is_float = any(c in want for c in ".eE") or any(c in got for c in ".eE")
    if not is_float:
        return want.lstrip("+") == got.lstrip("+")
    expected, actual = float(want), float(got)
    bound = DOCTEST_FLOAT32_ULPS * _FLOAT32_EPS * max(abs(expected), abs(actual)) + _last_digit_unit(want) / 2
    return abs(expected - actual) <= bound


class Float32OutputChecker(doctest.OutputChecker):
    """Doctest's checker, with floating-point numbers compared within ``DOCTEST_FLOAT32_ULPS``."""

    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        if super().check_output(want, got, optionflags):
            return True
        wanted, found = _NUMBER.findall(want), _NUMBER.findall(got)
        if not wanted or len(wanted) != len(found):
            return False
        # The text around the numbers decides with doctest's own rules ...
        if not super().check_output(_PADDED_NUMBER.sub(" 0 ", want), _PADDED_NUMBER.sub(" 0 ", got), optionflags):
            return False
        # ... and each number with the bound.
        return all(numbers_close(w, g) for w, g in zip(wanted, found, strict=True))


_INTEGRATION = Path(__file__).resolve().parent / "tests-integration"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests-integration/`` ``integration`` (``hatch run test`` selects by it)."""
    for item in items:
        if _INTEGRATION in item.path.parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def doctest_runner() -> Callable[[], doctest.DocTestRunner]:
    """Makes doctest runners that apply the project's policy for computed numbers."""
    return lambda: doctest.DocTestRunner(checker=Float32OutputChecker(), optionflags=DOCTEST_FLAGS)


@pytest.fixture
def default_recursion_limit() -> Iterator[int]:
    """Python's default recursion limit (1000) for one test, whatever an earlier test set.

    mypy, run in-process by the type-checking tests, raises the limit to 16384 for
    the rest of the process; a test that shows a walk does not recurse needs the
    default back.
    """
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield 1000
    finally:
        sys.setrecursionlimit(previous)


@pytest.fixture
def count_calls(monkeypatch: pytest.MonkeyPatch) -> Callable[[object, str], list[int]]:
    """``count_calls(owner, name)`` wraps ``owner.name`` for the test and returns the list each call appends to."""

    def install(owner: object, name: str) -> list[int]:
        calls: list[int] = []
        original = getattr(owner, name)

        def counted(*args: object, **kwargs: object) -> object:
            calls.append(1)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)
        return calls

    return install


_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
_COMPILES: list[str] = []
_LISTENING = [False]


def _on_jax_event(event: str, duration: float, **kwargs: object) -> None:
    if _LISTENING[0] and event == _BACKEND_COMPILE:
        _COMPILES.append(event)


jax.monitoring.register_event_duration_secs_listener(_on_jax_event)


@pytest.fixture
def count_compiles() -> Callable[[], contextlib.AbstractContextManager[list[str]]]:
    """``with count_compiles() as seen: ...``: ``len(seen)`` is the number of XLA compiles inside the block."""

    @contextlib.contextmanager
    def counting() -> Iterator[list[str]]:
        _COMPILES.clear()
        _LISTENING[0] = True
        try:
            yield _COMPILES
        finally:
            _LISTENING[0] = False

    return counting


@pytest.fixture
def interrupted_state() -> type:
    """A ``State`` subclass whose next store, once ``armed`` is set, stores and then raises ``KeyboardInterrupt``.

    An interrupt that arrives half-way through a write-back: the states stored
    after it must still be stored (all or nothing).
    """
    from state_core import State

    class InterruptedOnce(State):
        armed = False

        @property
        def _value(self) -> object:
            return State._get_private_or_concrete(self)

        @_value.setter
        def _value(self, value: object) -> None:
            State._set_private_or_concrete(self, value)
            if self.armed:
                self.armed = False
                raise KeyboardInterrupt

    return InterruptedOnce
