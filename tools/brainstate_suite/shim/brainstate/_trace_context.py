"""``brainstate._state.TRACE_CONTEXT``, as brainstate's tests use it: a test-harness adapter.

brainstate's test classes open a state trace around every test with
``TRACE_CONTEXT.state_stack.append(StateTraceStack())`` in ``setUp`` and
``TRACE_CONTEXT.state_stack.pop()`` in ``tearDown``.  That idiom is the test
harness, not the behaviour under test (160 tests of RandomState and State use
it), so the shim spells it with our public API: ``append`` enters the stack
(``with StateTraceStack():`` opened by hand), ``pop`` leaves the innermost one,
``len`` is ``state_core.active_trace_stacks()``.  Nothing else of brainstate's
trace context is provided: indexing the stack list, ``get_trace_stack_level``
and the rest fail.
"""

import threading

from state_core import active_trace_stacks

_opened = threading.local()


class _StateStackView:
    def _stack(self):
        if not hasattr(_opened, 'stack'):
            _opened.stack = []
        return _opened.stack

    def append(self, trace_stack):
        trace_stack.__enter__()
        self._stack().append(trace_stack)

    def pop(self):
        trace_stack = self._stack().pop()
        trace_stack.__exit__(None, None, None)
        return trace_stack

    def __len__(self):
        return active_trace_stacks()


class _TraceContext:
    state_stack = _StateStackView()


TRACE_CONTEXT = _TraceContext()


def harness_depth():
    """How many blocks this thread opened through ``append`` and has not popped (suite harness only)."""
    return len(TRACE_CONTEXT.state_stack._stack())


def harness_forget(depth):
    """Forget the blocks opened through ``append`` beyond ``depth``: the harness has closed them."""
    del TRACE_CONTEXT.state_stack._stack()[depth:]
