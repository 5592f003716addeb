"""Every public name (functions, the class and its methods) has a passing doctest example."""

from __future__ import annotations

import doctest
import inspect

import pytest

import state_random
from state_random import RandomState

# Docstring examples are documentation: checked once per `hatch run test`, at the
# newest JAX (the lowest-JAX run deselects `docs`; the behaviour they show is
# covered at both ends by the unit tests).
pytestmark = pytest.mark.docs


def _public_objects():
    objs = [(n, getattr(state_random, n)) for n in state_random.__all__ if n not in ("__version__", "DEFAULT")]
    objs += [
        (f"RandomState.{n}", m) for n, m in vars(RandomState).items() if inspect.isfunction(m) and not n.startswith("_")
    ]
    objs.append(("state_random", state_random))
    return objs


@pytest.fixture(autouse=True)
def _keep_default_key():
    saved = state_random.DEFAULT._value
    yield
    state_random.DEFAULT.restore_value(saved)


@pytest.mark.parametrize("name,obj", _public_objects(), ids=[n for n, _ in _public_objects()])
def test_docstring_example_runs(name, obj, doctest_runner):
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    assert tests and tests[0].examples, f"{name} has no doctest example"
    runner = doctest_runner()
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} doctest example(s) failed"
