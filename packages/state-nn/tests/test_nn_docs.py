"""Run the docstring examples of every public name (classes and their methods)."""

import doctest
import inspect

import pytest

import state_nn

# Docstring examples are documentation: checked once per `hatch run test`, at the
# newest JAX (the lowest-JAX run deselects `docs`; the behaviour they show is
# covered at both ends by the unit tests).
pytestmark = pytest.mark.docs

_PUBLIC = [state_nn] + [getattr(state_nn, name) for name in state_nn.__all__ if name != "__version__"]


def _private_bases(obj):
    if not inspect.isclass(obj):
        return []
    public = {id(o) for o in _PUBLIC}
    bases = obj.__mro__[1:]
    shown = {id(b) for pb in bases if id(pb) in public for b in pb.__mro__}
    return [b for b in bases if b.__module__.startswith("state_nn") and id(b) not in public and id(b) not in shown]


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = []
    for obj in _PUBLIC:
        name = getattr(obj, "__name__", repr(obj))
        # module=False: also look at methods defined in the private modules.
        tests.extend(
            t for t in finder.find(obj, f"state_nn.{name}" if obj is not state_nn else "state_nn", module=False)
        )
        # Methods a public class gets from a private base (Module's tree queries), unless
        # a public base already shows them.
        for base in _private_bases(obj):
            tests.extend(finder.find(base, f"state_nn.{name}", module=False))
    return sorted({t.name: t for t in tests if t.examples}.values(), key=lambda t: t.name)


DOCTESTS = _doctests()


def test_every_public_name_has_an_example():
    names = {t.name for t in DOCTESTS}
    for obj in _PUBLIC[1:]:
        assert f"state_nn.{obj.__name__}" in names, f"{obj.__name__} has no docstring example"
        for attr, member in vars(obj).items():
            if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                continue
            assert (member.__doc__ or "").strip(), f"{obj.__name__}.{attr} has no docstring"


@pytest.mark.parametrize("test", DOCTESTS, ids=[t.name for t in DOCTESTS])
def test_docstring_example(test, doctest_runner):
    runner = doctest_runner()
    test.globs = dict(test.globs)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{test.name}: {result.failed} example(s) failed"
