"""Run every docstring example of state_core."""

import doctest
import importlib
import pkgutil

import pytest

import state_core

# Docstring examples are documentation: checked once per `hatch run test`, at the
# newest JAX (the lowest-JAX run deselects `docs`; the behaviour they show is
# covered at both ends by the unit tests).
pytestmark = pytest.mark.docs

MODULES = ["state_core", *sorted(f"state_core.{info.name}" for info in pkgutil.iter_modules(state_core.__path__))]


def test_module_list_is_complete():
    for name in [
        "_state",
        "_trace",
        "_filter",
        "filter",
        "_collection",
        "_stateful_function",
        "_jax_internals",
        "_context",
        "_pretty",
    ]:
        assert f"state_core.{name}" in MODULES


def test_doctests_of_every_module(doctest_runner):
    failures, attempted = {}, 0
    finder = doctest.DocTestFinder()
    for name in MODULES:
        module = importlib.import_module(name)
        runner = doctest_runner()
        for test in finder.find(module, name):
            runner.run(test, out=lambda s: None)
        result = runner.summarize(verbose=False)
        attempted += result.attempted
        if result.failed:
            failures[name] = result.failed
    assert failures == {}
    assert attempted >= 50  # the package documents its API with examples
