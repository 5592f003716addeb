"""The simulation environment: ``dt``, ``t``, ``i``, ``fit``, the precision and your own settings.

brainstate's ``brainstate.environ`` under the same names. ``set`` stores global
settings; ``context`` sets values for a ``with`` block (per thread, nestable,
restored on exit); ``get`` reads the innermost value.

Example:
    >>> from state_core import environ
    >>> with environ.context(dt=0.1, t=0.0):
    ...     environ.get_dt(), environ.get('t')
    (0.1, 0.0)
"""

from ._environ import (
    DEFAULT_PRECISION,
    DT,
    FIT,
    HOST_DEVICE_COUNT,
    JIT_ERROR_CHECK,
    PLATFORM,
    PRECISION,
    SUPPORTED_PLATFORMS,
    SUPPORTED_PRECISIONS,
    I,
    T,
    all,
    context,
    get,
    get_dt,
    get_host_device_count,
    get_platform,
    list_registered_behaviors,
    pop,
    register_default_behavior,
    reset,
    set,
    set_host_device_count,
    set_platform,
    unregister_default_behavior,
)
from ._environ_dtypes import dctype, dftype, ditype, dutype, get_precision, set_precision, tolerance
from ._environ_reads import reads_unchanged, record_reads

__all__ = [
    "set",
    "get",
    "all",
    "pop",
    "context",
    "reset",
    "get_dt",
    "set_precision",
    "get_precision",
    "dftype",
    "ditype",
    "dutype",
    "dctype",
    "tolerance",
    "set_platform",
    "get_platform",
    "set_host_device_count",
    "get_host_device_count",
    "register_default_behavior",
    "unregister_default_behavior",
    "list_registered_behaviors",
    "record_reads",
    "reads_unchanged",
    "I",
    "T",
    "DT",
    "PRECISION",
    "PLATFORM",
    "HOST_DEVICE_COUNT",
    "JIT_ERROR_CHECK",
    "FIT",
    "DEFAULT_PRECISION",
    "SUPPORTED_PLATFORMS",
    "SUPPORTED_PRECISIONS",
]
