"""conftest.py of the brainstate-suite work directory (run.py copies this file there).

* 8 CPU devices for JAX, set before JAX starts (as our own test suites do);
* the harness brainstate's own conftest provides: ``--run-slow`` (tests marked
  ``slow`` are skipped without it) and ``brainstate.random.seed(0)`` before
  every test;
* a per-test time limit (``BRAINSTATE_SUITE_TIMEOUT`` seconds, by SIGALRM)
  when pytest-timeout is not installed;
* a recorder: one JSON line per test phase in ``BRAINSTATE_SUITE_RESULTS``
  (outcome, exception type, first line of its message), one per test module
  that could not be collected, and one when a test starts, so that run.py can
  name the test a crash happened in and resume after it.
"""

import json
import os
import signal
import time

import jax

jax.config.update('jax_num_cpu_devices', 8)

import pytest  # noqa: E402

_RESULTS = os.environ.get('BRAINSTATE_SUITE_RESULTS')
_TIMEOUT = float(os.environ.get('BRAINSTATE_SUITE_TIMEOUT') or 0)
_DONE_FILE = os.environ.get('BRAINSTATE_SUITE_DONE')  # node ids already recorded (a resumed run)
_out = open(_RESULTS, 'a', buffering=1, encoding='utf-8') if _RESULTS else None  # noqa: SIM115


def _emit(**record):
    if _out is not None:
        _out.write(json.dumps(record) + '\n')
        _out.flush()


def _first_line(text, limit=300):
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ''


# --------------------------------------------------------------------------- lenient imports
#
# Off by default.  With BRAINSTATE_SUITE_LENIENT=1 (run.py --lenient-imports) a
# brainstate name or module that the shim does not provide still imports, as a
# placeholder that raises ShimMissingName when called or used in isinstance /
# issubclass (and AttributeError for its attributes).
# A test file whose only problem is one such import at its top then runs, and
# only the tests that use the missing name fail.  ShimMissingName derives from
# BaseException, so `assertRaises(Exception)` / `except Exception` do not catch
# it and a placeholder cannot make a test pass by raising.  No behaviour is added.


class ShimMissingName(BaseException):
    """A brainstate name the shim does not map was used (lenient-import placeholder)."""


class _MissingMeta(type):
    def _fail(cls, *_args, **_kwargs):
        raise ShimMissingName(f'{cls._shim_name} is not provided (lenient-import placeholder)')

    __call__ = _fail
    __instancecheck__ = _fail
    __subclasscheck__ = _fail
    __getitem__ = _fail
    __iter__ = _fail
    __len__ = _fail
    __bool__ = _fail

    def __getattr__(cls, attr):
        # An AttributeError (not ShimMissingName): pytest and inspect probe attributes while collecting.
        raise AttributeError(f'{cls._shim_name}.{attr}: {cls._shim_name} is not provided (lenient-import placeholder)')


def _placeholder(qualname):
    module, _, name = qualname.rpartition('.')
    # Named after the brainstate name it stands for, so that a placeholder that turns up in
    # a message (`32 != <class 'brainstate.environ._INITIAL_PRECISION'>`) says which name
    # was missing; run.py --explain reads that form too.
    return _MissingMeta(name, (), {'_shim_name': qualname, '__module__': module, '__qualname__': name})


def _module_getattr(module_name):
    def __getattr__(attr):
        if attr.startswith('__') and attr.endswith('__'):
            raise AttributeError(attr)
        from brainstate import _private_paths

        if _private_paths.is_brainstate_module(f'{module_name}.{attr}'):
            # `from brainstate.random import _impl`: a brainstate module, which the shim may alias.
            import importlib

            try:
                return importlib.import_module(f'{module_name}.{attr}')
            except ImportError:
                pass
        return _placeholder(f'{module_name}.{attr}')

    return __getattr__


class _LenientFinder:
    """Last on sys.meta_path: any brainstate.* module nothing else finds becomes a placeholder module."""

    def find_spec(self, fullname, path=None, target=None):
        import importlib.machinery

        if fullname.startswith('brainstate.'):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        import types

        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _module_getattr(spec.name)
        return module

    def exec_module(self, module):
        pass


def _install_lenient_imports():
    import contextlib
    import importlib
    import pkgutil
    import sys

    import brainstate

    # Import the shim's own submodules first (brainstate._testing, ...): once a module has a
    # placeholder __getattr__, `from brainstate import _testing` would take the placeholder.
    for info in pkgutil.walk_packages(brainstate.__path__, 'brainstate.'):
        with contextlib.suppress(ImportError):  # brainstate._testing under --no-testing-helpers
            importlib.import_module(info.name)
    sys.meta_path.append(_LenientFinder())
    for name, module in list(sys.modules.items()):
        if name == 'brainstate' or name.startswith('brainstate.'):
            if not hasattr(module, '__path__'):
                module.__path__ = []  # so that brainstate.transform._debug etc. reach the finder
            module.__getattr__ = _module_getattr(name)
    assert brainstate


if os.environ.get('BRAINSTATE_SUITE_LENIENT'):
    _install_lenient_imports()


def pytest_addoption(parser):
    parser.addoption('--run-slow', action='store_true', default=False, help='run tests marked slow')


def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: slow test (skipped unless --run-slow)')


def pytest_collection_modifyitems(config, items):
    if not config.getoption('--run-slow'):
        skip_slow = pytest.mark.skip(reason='need --run-slow option to run')
        for item in items:
            if 'slow' in item.keywords:
                item.add_marker(skip_slow)
    if _DONE_FILE and os.path.exists(_DONE_FILE):
        with open(_DONE_FILE, encoding='utf-8') as f:
            done = {line.rstrip('\n') for line in f}
        keep = [item for item in items if item.nodeid not in done]
        dropped = [item for item in items if item.nodeid in done]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
    _emit(ev='collected', n=len(items))


@pytest.fixture(autouse=True)
def _deterministic_rng():
    import brainstate

    brainstate.random.seed(0)
    yield


# --------------------------------------------------------------------------- test isolation
#
# A test that leaves StateTraceStack blocks open (entered and never exited, or an exit that
# raised) would run every later test of the session inside them, so their outcomes would
# depend on the order of the tests. After each test the harness closes the blocks the test
# left open, innermost first, through their own __exit__, and reports the leak as an error
# in the test's teardown (so the leak is counted, not hidden). It reads the list of active
# blocks from state_core's private context: harness bookkeeping, no library behaviour.


def _open_trace_stacks():
    try:
        from state_core._context import CTX
    except ImportError:  # the private module moved: report leaks, do not close them
        return None
    return CTX.stacks


def _idiom_depth():
    # The blocks opened with brainstate's TRACE_CONTEXT.state_stack.append idiom (the shim's adapter).
    try:
        from brainstate import _trace_context
    except ImportError:
        return None
    return _trace_context.harness_depth()


@pytest.fixture(autouse=True)
def _trace_stack_isolation():
    from state_core import active_trace_stacks

    depth = active_trace_stacks()
    idiom_depth = _idiom_depth()
    yield
    left = active_trace_stacks() - depth
    if left <= 0:
        return
    stacks = _open_trace_stacks()
    closed = 0
    while stacks is not None and len(stacks) > depth:
        top = stacks[-1]
        try:
            top.__exit__(None, None, None)
        except Exception:  # noqa: BLE001  (a block that refuses to close: drop it)
            if stacks and stacks[-1] is top:
                stacks.pop()
        closed += 1
    if idiom_depth is not None:
        from brainstate import _trace_context

        _trace_context.harness_forget(idiom_depth)
    pytest.fail(
        f'the test left {left} StateTraceStack block(s) open; the suite harness closed {closed} '
        'so that later tests start outside any trace',
        pytrace=False,
    )


def pytest_collectreport(report):
    if report.failed:
        longrepr = str(report.longrepr)
        # The exception line of a collection error: the last "E   Type: message" line.
        lines = [ln[1:].strip() for ln in longrepr.splitlines() if ln.startswith('E ')]
        exc = lines[-1] if lines else _first_line(longrepr)
        typename, _, msg = exc.partition(': ')
        if not msg:
            typename, msg = 'CollectionError', exc
        _emit(ev='collect_error', nodeid=report.nodeid, type=typename, msg=msg[:300])


def pytest_runtest_logstart(nodeid, location):
    _emit(ev='start', nodeid=nodeid)


class _SuiteTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _SuiteTimeout(f'test exceeded the suite time limit of {_TIMEOUT:g} s')


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    use_alarm = _TIMEOUT > 0 and hasattr(signal, 'SIGALRM')
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, _TIMEOUT)
    try:
        return (yield)
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    record = {'ev': 'phase', 'nodeid': item.nodeid, 'when': call.when, 'outcome': report.outcome}
    if hasattr(report, 'wasxfail'):
        record['xfail'] = True
    if call.when == 'call':
        record['duration'] = round(call.duration, 3)
    if report.skipped and not hasattr(report, 'wasxfail'):
        longrepr = report.longrepr
        record['msg'] = _first_line(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
    elif report.failed and call.excinfo is not None:
        record['type'] = call.excinfo.typename
        record['msg'] = _first_line(call.excinfo.value)
    elif report.failed:
        record['type'] = 'Failed'
        record['msg'] = _first_line(report.longreprtext)
    _emit(**record)
    return report


def pytest_sessionfinish(session, exitstatus):
    _emit(ev='finished', exitstatus=int(exitstatus), time=time.time())
