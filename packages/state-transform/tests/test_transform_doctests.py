"""Run every docstring example of state_transform (module docstrings, functions, classes)."""

import doctest
import importlib
import pkgutil
import typing

import pytest

import state_transform

# Docstring examples are documentation: checked once per `hatch run test`, at the
# newest JAX (the lowest-JAX run deselects `docs`; the behaviour they show is
# covered at both ends by the unit tests).
pytestmark = pytest.mark.docs

MODULES = [
    "state_transform",
    *sorted(f"state_transform.{info.name}" for info in pkgutil.iter_modules(state_transform.__path__)),
]


# Type variables defined in our modules report them as their __module__ but carry the
# typing module's docstring (whose examples, from Python 3.12 on, are not ours to run).
_TYPE_VARIABLES = (typing.TypeVar, typing.ParamSpec, typing.TypeVarTuple)


def _examples(module):
    finder = doctest.DocTestFinder(exclude_empty=True)
    seen = set()
    for name in dir(module):
        obj = getattr(module, name)
        if id(obj) in seen or not getattr(obj, "__module__", "").startswith("state_transform"):
            continue
        if isinstance(obj, _TYPE_VARIABLES):
            continue
        seen.add(id(obj))
        # Classes report the public package as their module, so find their tests directly.
        yield from finder.find(obj, name=f"{module.__name__}.{name}", globs={})
    yield from finder.find(module, name=module.__name__)


def test_every_public_name_has_a_docstring_example():
    missing = [
        name
        for name in state_transform.__all__
        if name != "__version__" and ">>>" not in (getattr(state_transform, name).__doc__ or "")
    ]
    assert missing == []


def test_doctests_of_every_module(doctest_runner):
    runner = doctest_runner()
    attempted = 0
    failed = {}
    for name in MODULES:
        module = importlib.import_module(name)
        for test in _examples(module):
            if not test.examples:
                continue
            result = runner.run(test, out=lambda s: None)
            attempted += result.attempted
            if result.failed:
                failed[test.name] = result.failed
    assert failed == {}
    assert attempted >= 15
