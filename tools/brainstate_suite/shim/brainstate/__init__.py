"""A name shim: ``brainstate`` spelled with this repository's packages.

Used only by ``tools/brainstate_suite/run.py`` to run brainstate's own unit
tests against ``state_core`` / ``state_random`` / ``state_transform`` /
``state_nn``.  It maps brainstate's *public names* to ours and nothing else:
no behaviour is added here, so the pass count measures our packages.

Rules (see ../../README.md):

* a brainstate name is mapped when one of our packages provides the same
  thing, under the same or another name (docs/coming-from-brainstate.md lists
  those names);
* a name that docs/coming-from-brainstate.md says is "not provided" is not
  mapped: the tests that use it fail with AttributeError / ImportError;
* a brainstate private module path (``brainstate._state``,
  ``brainstate.random._state``, ...) resolves to the public names of its package
  (``_private_paths.py``): ``from brainstate.random._state import RandomState`` is
  the public ``RandomState``; a private helper that the package does not export
  is missing.  Two private modules have their own names:
  ``brainstate._testing``, the test suite's own assertion helpers, and
  ``brainstate._compatible_import`` (JAX names, with JAX's public spellings).
"""

# Sub-packages, importable as ``import brainstate.transform`` and as attributes.  Imported
# explicitly: ``from . import environ`` would keep the ``state_core.environ`` that the
# star import above bound to the same name, and never load brainstate/environ.py.
import importlib as _importlib

from state_core import *  # noqa: F403  (State, ParamState, ..., StateTraceStack, catch_new_states, ...)
from state_core import StateDict, StateError, StateLeakError

environ = _importlib.import_module(f'{__name__}.environ')
graph = _importlib.import_module(f'{__name__}.graph')
nn = _importlib.import_module(f'{__name__}.nn')
random = _importlib.import_module(f'{__name__}.random')
transform = _importlib.import_module(f'{__name__}.transform')
util = _importlib.import_module(f'{__name__}.util')
_importlib.import_module(f'{__name__}.util.filter')
_private_paths = _importlib.import_module(f'{__name__}._private_paths')
_private_paths.install([environ, graph, nn, random, transform, util])

# ---------------------------------------------------------------------------
# brainstate names that ours spell differently (docs/coming-from-brainstate.md)
# ---------------------------------------------------------------------------

#: brainstate's name-keyed state dictionary; ours is keyed by attribute paths.
StateDictManager = StateDict
#: "a state used outside the trace that owns its value".
TraceContextError = StateLeakError
#: the base class of the library's errors.
BrainStateError = StateError

# brainstate keeps three deprecated module aliases: ``brainstate.augment`` and
# ``brainstate.compile`` (parts of ``brainstate.transform``) and
# ``brainstate.functional`` (the activation functions of ``brainstate.nn``).
# They are plain aliases here (brainstate's proxies also warn; ours do not).
augment = transform
compile = transform  # brainstate's name (it shadows the builtin here only)
functional = nn

# Not mapped, because our packages do not provide them (docs say so):
# BatchState, TreefyState, FakeState, DelayState, check_state_jax_tracer,
# the hook machinery (HookManager, HookConfig, HookWarning, ...),
# brainstate.mixin, brainstate.typing, brainstate.interop, brainstate.init.
