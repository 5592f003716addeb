"""Module-level samplers are generated from the RandomState methods: one definition each."""

from __future__ import annotations

import inspect
import pydoc

import pytest
from numpy.testing import assert_array_equal

import state_random as sr
from state_random import RandomState

_NOT_METHODS = {
    "__version__",
    "RandomState",
    "DEFAULT",
    "seed",
    "seed_context",
    "default_rng",
    "clone_rng",
    "split_for_lanes",
    "is_single_key",
    "is_random_state",
}
BOUND = [n for n in sr.__all__ if n not in _NOT_METHODS]


@pytest.fixture(autouse=True)
def _keep_default_key():
    saved = sr.DEFAULT._value
    yield
    sr.DEFAULT.restore_value(saved)


def test_every_public_sampler_method_has_a_module_function_and_back():
    methods = {
        n
        for n, m in inspect.getmembers(RandomState, inspect.isfunction)
        if not n.startswith("_")
        and m.__qualname__.startswith("RandomState.")
        and n not in ("seed", "clone", "backup_key", "restore_value")
        # the State protocol engines use (one key per mapped lane, atomic hand-out)
        and n not in ("splits_across_lanes", "split_across_lanes", "handout_lock")
    }
    assert methods == set(BOUND)
    assert len(BOUND) >= 60


@pytest.mark.parametrize("name", BOUND)
def test_module_function_keeps_signature_and_docstring(name):
    fn, method = getattr(sr, name), getattr(RandomState, name)
    assert inspect.isfunction(fn) and fn.__module__ == "state_random" and fn.__name__ == name
    params = list(inspect.signature(method).parameters.values())[1:]
    assert inspect.signature(fn) == inspect.signature(method).replace(parameters=params)
    summary = inspect.cleandoc(method.__doc__).split("\n\n")[0]
    assert fn.__doc__.startswith(summary)
    assert f"``DEFAULT.{name}(...)``" in fn.__doc__
    assert "Example:" in fn.__doc__
    assert name in pydoc.render_doc(fn)
    # Generated, not written again: every module sampler runs the same code object.
    assert fn.__code__ is sr.normal.__code__
    assert method.__qualname__ == f"RandomState.{name}"


@pytest.mark.parametrize(
    "name,args",
    [
        ("normal", (1.0, 2.0, 3)),
        ("uniform", (0.0, 5.0, (2, 2))),
        ("randint", (0, 9, 4)),
        ("gamma", (2.0, 1.0, 3)),
        ("choice", (5, 3)),
        ("zipf", (3.0, 4)),
        ("triangular", (0.0, 0.2, 1.0, 3)),
    ],
)
def test_module_function_is_bit_exact_with_the_method_on_default(name, args):
    sr.seed(123)
    a = getattr(sr, name)(*args)
    sr.seed(123)
    b = getattr(sr.DEFAULT, name)(*args)
    assert_array_equal(a, b)
    assert_array_equal(b, getattr(RandomState(123), name)(*args))
