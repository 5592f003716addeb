"""The only place where state-core touches JAX internals.

A state read for the first time inside a trace must become a *new input* of the
jaxpr being built, so that the user's function runs exactly once per call
signature and sees a real tracer (not a frozen constant).  JAX has no public
API for adding an input to a trace that is already running; the two calls below
use the trace object that ``jax.extend.core.take_current_trace`` hands out.
``tests/test_core_jax_internals.py`` pins this behaviour so a JAX upgrade that
breaks it fails loudly in one place, and the check at import (below) turns a JAX
that lacks these calls into one clear ``ImportError`` instead of a failure deep
inside the first transformed call.

``ArrayImpl`` (the class of concrete arrays) is imported rather than found with
``type(jnp.zeros(()))`` because creating an array would start the JAX backend at
import time, before users can set ``jax_num_cpu_devices``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import jax
import jax.extend.core as jex_core
import numpy as np


def missing_jax_features() -> list[str]:
    """Name every JAX call that state-core needs and the installed JAX lacks."""
    missing = []
    for name in ("take_current_trace", "jaxprs_in_params"):
        if not hasattr(jex_core, name):
            missing.append(f"jax.extend.core.{name}")
    # find_spec of a submodule imports its parent package, which exists on every JAX.
    if importlib.util.find_spec("jax._src.source_info_util") is None:
        missing.append("jax._src.source_info_util")
    return missing


def supported_jax_range() -> str:
    """The JAX requirement state-core is tested with, as its package metadata declares it.

    Read from the metadata (the single place the range is written) only when needed
    for an error message, so a normal import pays nothing for it.
    """
    try:
        requires = importlib.metadata.requires("state-core") or []
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        requires = []
    for requirement in requires:
        compact = requirement.replace(" ", "")
        if compact.startswith(("jax>", "jax<", "jax=", "jax~", "jax!")):
            # Metadata may list the bounds in any order; show the lower one first.
            bounds = sorted(compact[len("jax") :].split(","), key=lambda b: not b.startswith(">"))
            return "jax" + ",".join(bounds)
    return "jax (see the state-core package metadata)"


def check_jax(version: str, missing: list[str]) -> None:
    """Raise ``ImportError`` naming the JAX version, what it lacks and what to install."""
    if missing:
        wanted = supported_jax_range()
        raise ImportError(
            f"state-core cannot run on JAX {version}: this JAX has no {', '.join(missing)}, "
            f"which state-core needs to add state values to a running trace. "
            f"Supported: {wanted}; install a supported JAX, e.g. pip install '{wanted}'."
        )


check_jax(jax.__version__, missing_jax_features())

# JAX 0.11 folded ``ClosedJaxpr`` into ``Jaxpr``: a jaxpr now carries the values of
# its constants, and ``ClosedJaxpr`` survives only as an alias (invisible to type
# checkers) next to stand-ins for its old constructor and ``.jaxpr`` accessor that JAX
# means to remove. The four helpers below are the only code that knows which JAX this
# is; everything that builds or unpacks a jaxpr goes through them, on JAX 0.10 and 0.12.
_CLOSED_JAXPR: Any = getattr(jex_core, "ClosedJaxpr", jex_core.Jaxpr)
_JAXPR_CARRIES_CONSTS = _CLOSED_JAXPR is jex_core.Jaxpr

# A jaxpr with the values of its constants: ``jax.extend.core.ClosedJaxpr`` on JAX
# 0.10, a ``jax.extend.core.Jaxpr`` from JAX 0.11 on (type checkers can name only one).
ClosedJaxprLike = Any


def open_jaxpr(jaxpr: ClosedJaxprLike) -> jex_core.Jaxpr:
    """The equations of a jaxpr, closed or not: the object with ``invars``, ``outvars`` and ``eqns``.

    Its ``invars`` never include the constants (``constvars`` holds them), on every
    supported JAX. Use it instead of ``closed.jaxpr``, which newer JAX keeps only as a
    legacy alias.

    Args:
        jaxpr: what ``jax.make_jaxpr`` returns, an entry of ``jaxprs_in_params``, or
            a ``Trace``'s ``closed_jaxpr``.

    Example:
        >>> import jax
        >>> from state_core.engine import open_jaxpr
        >>> [eqn.primitive.name for eqn in open_jaxpr(jax.make_jaxpr(lambda x: x * 2 + 1)(1.0)).eqns]
        ['mul', 'add']
    """
    if not _JAXPR_CARRIES_CONSTS and isinstance(jaxpr, _CLOSED_JAXPR):
        return jaxpr.jaxpr
    return jaxpr


def jaxpr_consts(jaxpr: ClosedJaxprLike) -> list[Any]:
    """The values of a jaxpr's constants, in the order of its ``constvars`` (empty for an open jaxpr).

    Args:
        jaxpr: a closed jaxpr (see ``open_jaxpr``) or an open one.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core.engine import jaxpr_consts
        >>> c = jnp.arange(3.0)
        >>> [v.shape for v in jaxpr_consts(jax.make_jaxpr(lambda x: x + c)(c))]
        [(3,)]
    """
    if _JAXPR_CARRIES_CONSTS or isinstance(jaxpr, _CLOSED_JAXPR):
        return list(jaxpr.consts)
    return []


def close_jaxpr(jaxpr: jex_core.Jaxpr, consts: Sequence[Any]) -> ClosedJaxprLike:
    """Attach ``consts`` to ``jaxpr``'s ``constvars``: the inverse of ``open_jaxpr`` / ``jaxpr_consts``.

    The result runs with ``jax.extend.core.jaxpr_as_fun`` and is what ``jax.make_jaxpr``
    would have returned for the same program.

    Args:
        jaxpr: an open jaxpr, e.g. ``open_jaxpr(closed).replace(...)``.
        consts: one value per ``constvars`` entry.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.extend.core import jaxpr_as_fun
        >>> from state_core.engine import close_jaxpr, jaxpr_consts, open_jaxpr
        >>> c = jnp.arange(3.0)
        >>> closed = jax.make_jaxpr(lambda x: x + c)(c)
        >>> body = open_jaxpr(closed)
        >>> jaxpr_as_fun(close_jaxpr(body, [c * 10]))(c)
        [Array([ 0., 11., 22.], dtype=float32)]
    """
    carrier: Any = jaxpr  # JAX 0.10's Jaxpr has no with_consts: type checkers must not insist
    if _JAXPR_CARRIES_CONSTS:
        return carrier.with_consts(list(consts))
    return _CLOSED_JAXPR(carrier, list(consts))


def is_jaxpr(value: Any) -> bool:
    """True for a jaxpr, closed or open, as found among an equation's parameters.

    Args:
        value: any object.

    Example:
        >>> import jax
        >>> from state_core.engine import is_jaxpr
        >>> is_jaxpr(jax.make_jaxpr(lambda x: x)(1.0)), is_jaxpr(1.0)
        (True, False)
    """
    return isinstance(value, (jex_core.Jaxpr, _CLOSED_JAXPR))


try:  # the location has been stable since the "stackless" rewrite of JAX (0.4.36)
    from jax._src import source_info_util as _source_info_util
except ImportError:  # pragma: no cover - exercised only on an incompatible JAX
    _source_info_util = None  # type: ignore[assignment]

try:  # the trace that is current when nothing is being traced
    from jax._src.core import EvalTrace as _EvalTrace
except ImportError:  # pragma: no cover - exercised only on an incompatible JAX
    _EvalTrace = None  # type: ignore[misc, assignment]

# ``TRACE_STATE.value is EVAL_TRACE`` tells "no JAX trace is running" in one identity
# test: ``State.value`` asks it on every read, where the public ``current_trace()``
# (which swaps the trace out and back in) would cost several times as much.
try:  # the thread's current trace as JAX stores it, and the trace of eager execution
    from jax._src.core import eval_trace as EVAL_TRACE
    from jax._src.core import trace_state_strong_ref as TRACE_STATE
except ImportError:  # pragma: no cover - exercised only on an incompatible JAX

    class _PublicTraceState:
        """Stand-in that asks the public API for the current trace (slower, same answers)."""

        @property
        def value(self) -> Any:
            with jex_core.take_current_trace() as trace:
                return trace

    TRACE_STATE = _PublicTraceState()
    EVAL_TRACE = TRACE_STATE.value  # modules are imported eagerly, outside any trace

try:  # set by jax.ensure_compile_time_eval(): values are computed while tracing, on purpose
    from jax._src.config import eager_constant_folding as _eager_constant_folding
except ImportError:  # pragma: no cover - exercised only on an incompatible JAX
    _eager_constant_folding = None  # type: ignore[assignment]

try:  # the tracer of jax.vmap, to tell values that vary across lanes
    from jax._src.interpreters.batching import BatchTracer as _BatchTracer
except ImportError:  # pragma: no cover - exercised only on an incompatible JAX
    _BatchTracer = None  # type: ignore[misc, assignment]
try:  # JAX's traceback filtering: frames of registered paths are hidden from users
    from jax._src import traceback_util as _traceback_util
except ImportError:  # pragma: no cover - exercised only on an incompatible JAX
    _traceback_util = None  # type: ignore[assignment]

try:  # the concrete array class, for a fast exact-type check on hot paths
    from jax._src.array import ArrayImpl
except ImportError:  # pragma: no cover - exercised only on an incompatible JAX

    class ArrayImpl:  # type: ignore[no-redef]
        """The class of JAX's concrete arrays, for exact type checks on hot paths.

        ``type(x) is ArrayImpl`` tells a concrete ``jax.Array`` from tracers and
        other array-likes at the cost of one comparison. This stand-in is used only
        on a JAX without that class: nothing is an instance, so the generic (slower)
        paths run.
        """


# An array's sharding object, read without the ``sharding`` property's Python frame
# (the hot path of every donating call of a one-device program reads one per input).
SHARDING_ATTRIBUTE = "_sharding" if hasattr(ArrayImpl, "_sharding") else "sharding"
_SHARDING_OF = operator.attrgetter(SHARDING_ATTRIBUTE)
_SingleDeviceSharding = jax.sharding.SingleDeviceSharding


def each_on_one_device(*groups: Sequence[Any]) -> bool:
    """True if no array among the values of ``groups`` spans several devices.

    Each value is a concrete array, a plain Python or NumPy value, or a pytree of
    them; anything else (a tracer, an array sharded over devices) gives False.

    Args:
        *groups: sequences of values.
    """
    for group in groups:
        for value in group:
            # A plain array (the common case) is tested here without flattening it
            # as a pytree: this runs on every call of a donating one-device program.
            if type(value) is ArrayImpl:
                if type(_SHARDING_OF(value)) is not _SingleDeviceSharding:
                    return False
            elif not isinstance(value, _PLAIN_VALUES):
                for leaf in jax.tree.leaves(value):
                    if type(leaf) is ArrayImpl:
                        if type(_SHARDING_OF(leaf)) is not _SingleDeviceSharding:
                            return False
                    elif type(leaf) is PRNGKeyArray:
                        if type(leaf.sharding) is not _SingleDeviceSharding:
                            return False
                    elif not isinstance(leaf, _PLAIN_VALUES):
                        return False
    return True


_PLAIN_VALUES = (int, float, complex, bool, np.ndarray, np.generic)


class _PublicFlag:
    """A JAX flag read through ``jax.config`` (the slow, public way), with a ``value`` like JAX's own holders."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def value(self) -> bool:
        return bool(getattr(jax.config, self._name))


_debug_nans: Any
_debug_infs: Any
try:  # JAX's NaN / Inf checking flags, read cheaply on every cached call
    from jax._src.config import debug_infs as _debug_infs
    from jax._src.config import debug_nans as _debug_nans
except ImportError:  # pragma: no cover - exercised only on an incompatible JAX
    _debug_nans, _debug_infs = _PublicFlag("jax_debug_nans"), _PublicFlag("jax_debug_infs")

_get_concrete_mesh: Callable[[], Any] | None
try:  # the mesh set with ``jax.set_mesh``, readable inside a trace (``jax.sharding.get_mesh`` is not)
    from jax._src.mesh import get_concrete_mesh

    _get_concrete_mesh = get_concrete_mesh
except ImportError:  # pragma: no cover - exercised only on an incompatible JAX
    _get_concrete_mesh = None


class _NoKeyClass:
    """Placeholder for the key class on a JAX where it cannot be found: nothing is an
    instance, so the generic (slower) paths are used."""


def _key_class() -> type:
    """The class of typed PRNG keys (their ``.aval`` is rebuilt on every access).

    Looked up by module path at run time: JAX 0.10.0 keeps it in ``jax._src.prng``,
    later releases in ``jax._src.random.prng``, and a static import of either would
    fail the type check at the other end of the supported range.
    """
    for path in ("jax._src.random.prng", "jax._src.prng"):
        try:
            found = getattr(importlib.import_module(path), "PRNGKeyArray", None)
        except ImportError:
            continue
        if isinstance(found, type):
            return found
    return _NoKeyClass  # pragma: no cover - exercised only on an incompatible JAX


PRNGKeyArray: Any = _key_class()


def _key_token_getter() -> Callable[[Any], Any] | None:
    """``key -> (its PRNG implementation, its key data's aval)``, read as plain attributes, or None."""
    fields = getattr(PRNGKeyArray, "__annotations__", {})
    if "_impl" in fields and "_base_array" in fields:
        return operator.attrgetter("_impl", "_base_array.aval")
    return None  # pragma: no cover - exercised only on an incompatible JAX


# What identifies a typed key's signature, read without the ``shape`` / ``dtype``
# properties (several Python frames each): the implementation (the key dtype) and the
# aval of the uint32 key data (JAX shares aval objects, so an identity test usually
# decides). None on a JAX whose keys do not keep these attributes.
KEY_TOKEN: Callable[[Any], Any] | None = _key_token_getter()


__all__ = [
    "open_jaxpr",
    "jaxpr_consts",
    "close_jaxpr",
    "is_jaxpr",
    "current_trace",
    "new_trace_input",
    "is_tracer",
    "mesh_type",
    "is_eager",
    "TRACE_STATE",
    "EVAL_TRACE",
    "in_compile_time_eval",
    "debugging_nans_or_infs",
    "debug_flags",
    "eager_and_not_debugging",
    "is_batched",
    "context_mesh",
    "ArrayImpl",
    "KEY_TOKEN",
    "each_on_one_device",
    "SHARDING_ATTRIBUTE",
    "PRNGKeyArray",
    "hide_library_frames",
    "api_boundary",
]

_Tracer = jax.core.Tracer


def current_trace() -> Any:
    """Return the JAX trace that is active right now (the eval trace when eager)."""
    with jex_core.take_current_trace() as trace:
        return trace


def new_trace_input(trace: Any, aval: Any) -> Any:
    """Create a fresh input tracer of ``aval`` on ``trace`` (a jaxpr-building trace)."""
    new_arg = getattr(trace, "new_arg", None)
    if new_arg is None or _source_info_util is None:
        raise RuntimeError(
            "This version of JAX does not let state-core add inputs to a running trace "
            f"(JAX {jax.__version__}); please report it together with your JAX version."
        )
    return new_arg(aval, _source_info_util.current())


def is_tracer(x: Any) -> bool:
    """True when ``x`` is a JAX tracer (a value that only exists inside a transformation)."""
    return isinstance(x, _Tracer)


def mesh_type(aval: Any) -> Any:
    """The mesh part of a traced value's type, or None when it has none.

    Inside ``shard_map`` (and under explicit sharding) a value's type records its
    sharding over the current abstract mesh and the manual mesh axes it varies
    over (what ``check_vma`` checks). A program traced for one such type is only
    valid for values of that type, so the engine keys its caches by it. The
    varying-axes record is ``manual_axis_type`` on JAX 0.10 (``vma`` before).

    Args:
        aval: the abstract value (``jax.typeof(x)``) of a value or tracer.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core.engine import mesh_type
        >>> mesh_type(jax.typeof(jnp.zeros(2))) is None
        True
    """
    sharding = getattr(aval, "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    mat = getattr(aval, "manual_axis_type", None)
    if mat is not None:
        varying = (mat.varying, mat.unreduced, mat.reduced)
    else:  # older JAX: a frozenset of varying axes
        varying = (getattr(aval, "vma", frozenset()), frozenset(), frozenset())
    if (mesh is None or mesh.empty) and not any(varying):
        return None
    return (sharding, *varying)


def debug_flags() -> tuple[bool, bool]:
    """``(jax_debug_nans, jax_debug_infs)`` as they stand now (set by ``jax.config`` or a context manager)."""
    return bool(_debug_nans.value), bool(_debug_infs.value)


def debugging_nans_or_infs() -> bool:
    """True while ``jax_debug_nans`` or ``jax_debug_infs`` is on (by ``jax.config`` or its context managers)."""
    return bool(_debug_nans.value or _debug_infs.value)


def debug_flag_holders() -> tuple[Any, Any]:
    """The holders of ``jax_debug_nans`` and ``jax_debug_infs``: ``holder.value`` is the flag as it stands now.

    For a call path that reads the flags on every call without a function call of its own.

    Example:
        >>> from state_core._jax_internals import debug_flag_holders
        >>> nans, infs = debug_flag_holders()
        >>> nans.value, infs.value
        (False, False)
    """
    return _debug_nans, _debug_infs


def is_eager() -> bool:
    """True when no JAX transformation is tracing in this thread (plain eager execution).

    Every tracer seen while eager is stale: the transformation that made it has finished.

    Example:
        >>> import jax
        >>> from state_core.engine import is_eager
        >>> seen = []
        >>> _ = jax.jit(lambda x: seen.append(is_eager()) or x)(1.0)
        >>> is_eager(), seen
        (True, [False])
    """
    if TRACE_STATE.value is EVAL_TRACE:  # the common case, in one identity test (every cached call asks)
        return True
    if _EvalTrace is None:  # pragma: no cover - exercised only on an incompatible JAX
        return False  # cannot tell: never call a live tracer stale
    return isinstance(current_trace(), _EvalTrace)


def eager_and_not_debugging() -> bool:
    """``is_eager()`` and not ``debugging_nans_or_infs()``, in one call (every donating call asks both)."""
    if TRACE_STATE.value is not EVAL_TRACE and not is_eager():
        return False
    return not (_debug_nans.value or _debug_infs.value)


def in_compile_time_eval() -> bool:
    """True inside ``jax.ensure_compile_time_eval()``, where a trace computes values on purpose."""
    if _eager_constant_folding is None:  # pragma: no cover - incompatible JAX: cannot tell
        return False  # type: ignore[unreachable]
    return bool(_eager_constant_folding.value)


def context_mesh() -> Any:
    """The concrete mesh set with ``jax.set_mesh``, or ``None`` when none is set.

    Unlike ``jax.sharding.get_mesh`` it also answers while a transformation traces,
    so an annotated state traced inside ``jax.jit`` gets the same sharding as eagerly.
    """
    if _get_concrete_mesh is None:  # pragma: no cover - exercised only on an incompatible JAX
        return jax.sharding.get_mesh() if is_eager() and not jax.sharding.get_mesh().empty else None
    mesh = _get_concrete_mesh()
    return None if mesh is None or mesh.empty else mesh


def is_batched(x: Any) -> bool:
    """Inside ``jax.vmap``: True when ``x`` varies across the lanes of the innermost vmap.

    When JAX's batching internals cannot be inspected, every tracer counts as
    varying (the safe answer).

    Args:
        x: any value or tracer.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from state_core.engine import is_batched
        >>> seen = []
        >>> def add(x, y):
        ...     seen.append((is_batched(x), is_batched(y)))
        ...     return x + y
        >>> _ = jax.vmap(add, in_axes=(0, None))(jnp.ones(3), 2.0)
        >>> seen
        [(True, False)]
    """
    if _BatchTracer is None:  # pragma: no cover - exercised only on an incompatible JAX
        return is_tracer(x)
    return isinstance(x, _BatchTracer) and x._trace is current_trace() and x.batch_dim is not None


def hide_library_frames(module_file: str) -> None:
    """Hide the frames of the package containing ``module_file`` from tracebacks of user errors.

    JAX drops the frames of registered paths from the traceback it shows when an
    exception crosses one of its API boundaries (see ``api_boundary``), so users
    see their own code and not the engine's. ``JAX_TRACEBACK_FILTERING=off``
    shows everything again.

    Args:
        module_file: the ``__file__`` of a module of the package to hide.

    Example:
        A framework hides its own frames once, when it is imported (``state_core``
        does this for itself; registering a package again changes nothing):

        >>> import state_core
        >>> from state_core.engine import hide_library_frames
        >>> hide_library_frames(state_core.__file__)
    """
    if _traceback_util is None:  # pragma: no cover - incompatible JAX: show every frame
        return  # type: ignore[unreachable]  # None only on a JAX the import check rejects
    import os

    path = os.path.dirname(os.path.abspath(module_file))
    if path not in _traceback_util._exclude_paths:
        _traceback_util.register_exclusion(path)


_F = TypeVar("_F", bound=Callable[..., Any])


def api_boundary(fun: _F) -> _F:
    """Mark ``fun`` as a user-facing entry point: tracebacks of errors below it are filtered.

    Args:
        fun: the user-facing function to mark.

    Example:
        >>> from state_core.engine import api_boundary
        >>> @api_boundary
        ... def double(x):
        ...     return x * 2
        >>> double(3)
        6
    """
    if _traceback_util is None:  # pragma: no cover - incompatible JAX
        return fun  # type: ignore[unreachable]  # None only on a JAX the import check rejects
    return _traceback_util.api_boundary(fun)
