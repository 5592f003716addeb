"""brainstate's private module paths, resolved to the public names of their package.

brainstate's tests often import a public name through the private module that
defines it: ``from brainstate.random._state import RandomState``,
``from brainstate._error import BatchAxisError``. Such a path names the same
thing as ``brainstate.random.RandomState``, so here ``brainstate.<pkg>._<mod>``
is a module whose attributes are those of the shim's ``brainstate.<pkg>``.
A private helper that brainstate's package does not export
(``brainstate.random._state._size2shape``) is not found there, so the tests
that need it still fail: only names are resolved, no behaviour is added.

Which paths are brainstate modules: ``run.py`` lists the modules of the
brainstate release it extracted the tests from in the file named by
``BRAINSTATE_SUITE_MODULES``; without that file every private path is taken for
a module.

Modules with names of their own: ``brainstate._compatible_import``
(brainstate's collection of JAX internals, with JAX's public spellings) and,
inside ``brainstate._state``, ``TRACE_CONTEXT`` (``_trace_context.py``, the
test-harness idiom brainstate's test classes open a state trace with).
"""

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types

_OWN_MODULES = {'brainstate._compatible_import', 'brainstate._testing', 'brainstate._trace_context'}
# Names a private module has here beyond its package's: (module, name) -> (shim module, name).
_EXTRA_NAMES = {('brainstate._state', 'TRACE_CONTEXT'): ('brainstate._trace_context', 'TRACE_CONTEXT')}


def _brainstate_modules():
    path = os.environ.get('BRAINSTATE_SUITE_MODULES')
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding='utf-8') as f:
        return {line.strip() for line in f if line.strip()}


MODULES = _brainstate_modules()


def is_brainstate_module(fullname):
    """Whether ``fullname`` is a module of the brainstate release under test (unknown: any private path)."""
    return fullname in MODULES if MODULES is not None else _is_private_path(fullname)


def _is_private_path(fullname):
    parts = fullname.split('.')
    return parts[0] == 'brainstate' and len(parts) >= 2 and parts[-1].startswith('_') and not parts[-1].startswith('__')


class PrivatePathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``brainstate[.<pkg>]._<private>`` as an alias of ``brainstate[.<pkg>]``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in _OWN_MODULES or not _is_private_path(fullname) or not is_brainstate_module(fullname):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        public = spec.name.rsplit('.', 1)[0]
        while _is_private_path(public):  # brainstate.transform._ir._x -> brainstate.transform
            public = public.rsplit('.', 1)[0]
        target = importlib.import_module(public)
        module = types.ModuleType(spec.name)
        module.__path__ = []

        extra = {name: source for (mod, name), source in _EXTRA_NAMES.items() if mod == spec.name}

        def __getattr__(attr):
            if attr.startswith('__') and attr.endswith('__'):
                raise AttributeError(attr)
            if attr in extra:
                source, name = extra[attr]
                return getattr(importlib.import_module(source), name)
            return getattr(target, attr)

        module.__getattr__ = __getattr__
        return module

    def exec_module(self, module):
        pass


def install(package_modules):
    """Make the shim's modules packages (so private sub-paths reach the finder) and add the finder."""
    for module in package_modules:
        if not hasattr(module, '__path__'):
            module.__path__ = []
    if not any(isinstance(f, PrivatePathFinder) for f in sys.meta_path):
        sys.meta_path.append(PrivatePathFinder())
