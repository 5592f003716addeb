"""The exception classes of the state stack, under one base class users can catch."""

from __future__ import annotations

__all__ = ["StateError", "StateLeakError", "BatchAxisError"]


class StateError(Exception):
    """Base class of the errors raised by the state libraries for misuse of states.

    Catch it to handle every state-specific error at once; each subclass also
    derives from the built-in type that fits it (``BatchAxisError`` is a
    ``ValueError``), so code that catches built-in types keeps working.

    Example:
        >>> from state_core import StateError, StateLeakError, BatchAxisError
        >>> issubclass(StateLeakError, StateError), issubclass(BatchAxisError, ValueError)
        (True, True)
    """

    __module__ = "state_core"


class StateLeakError(StateError, RuntimeError):
    """A traced value escaped from the transformation that produced it.

    Example:
        >>> from state_core import StateLeakError
        >>> issubclass(StateLeakError, RuntimeError)
        True
    """

    __module__ = "state_core"


class BatchAxisError(StateError, ValueError):
    """A state's batch axis conflicts with how a mapping transformation maps it.

    Raised, for example, when a state written inside a mapped function is not
    declared as mapped and the mapping's policy for such states is ``'raise'``,
    or when a state is mapped on different axes on the way in and out.

    Example:
        >>> from state_core import BatchAxisError
        >>> try:
        ...     raise BatchAxisError("state 'w' is mapped on axis 0 and 1")
        ... except ValueError as err:
        ...     print(err)
        state 'w' is mapped on axis 0 and 1
    """

    __module__ = "state_core"
