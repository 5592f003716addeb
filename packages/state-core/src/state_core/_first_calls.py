"""Whether a new signature's first call runs op by op instead of compiling (off by default).

A first call of a new signature costs a trace and an XLA compile; run op by op,
it costs what an eager ``jax.vmap`` run costs (each operation dispatched on its
own), and the signature compiles at its second call. The switch is read when a
signature is traced: its program then keeps an op-by-op form for its first run.

Off by default because the two forms may round differently: XLA fuses the
operations of a compiled program and may reorder a reduction or evaluate a
fused transcendental differently, so a first call run op by op can differ from
later calls of the same signature in the last bits. With the switch off, every
call of a signature gives bit-identical results for identical inputs.
"""

from __future__ import annotations

import contextlib

from ._switch import Switch

__all__ = ["set_eager_first_calls", "eager_first_calls", "eager_first_calls_enabled"]


_SWITCH = Switch(False, "eager_first_calls")


def set_eager_first_calls(enabled: bool) -> None:
    """Run the first call of every new signature op by op, for the whole process (default: off).

    Applies to ``StatefulFunction`` and the mappings built on it (``vmap2``,
    ``Map``, the legacy ``vmap``) when their program runs on one device and has no
    loop or branch (those would compile anyway). ``jit``, ``pmap2`` and
    ``shard_map`` always compile; ``grad`` and the one-shot ``*_new_states``
    initialisations run their first call op by op already. A signature traced
    while the switch is on runs its first call op by op and compiles at its
    second; the results of the two may differ in the last bits (see
    ``eager_first_calls_enabled``).

    Args:
        enabled: ``True`` for op-by-op first calls, ``False`` to compile at once.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction, set_eager_first_calls
        >>> s = State(jnp.zeros(3))
        >>> def step(x):
        ...     s.value = s.value + x
        ...     return s.value.sum()
        >>> set_eager_first_calls(True)
        >>> float(StatefulFunction(step)(jnp.ones(3)))     # no XLA compile of the program
        3.0
        >>> set_eager_first_calls(False)
    """
    _SWITCH.set(enabled)


def eager_first_calls(enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Inside the block (this thread only), signatures traced run their first call op by op (or not).

    Args:
        enabled: ``True`` for op-by-op first calls, ``False`` to compile at once.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import State, StatefulFunction, eager_first_calls
        >>> w = State(jnp.ones(2))
        >>> with eager_first_calls(True):     # an interactive session: no compile on first use
        ...     out = StatefulFunction(lambda x: (w.value * x).sum())(jnp.arange(2.0))
        >>> out
        Array(1., dtype=float32)
    """
    return _SWITCH.block(enabled)


def eager_first_calls_enabled() -> bool:
    """Whether a signature traced here and now runs its first call op by op.

    Op by op and compiled, a program may round differently: XLA fuses the
    operations of a compiled program (and may reorder a reduction or evaluate a
    fused ``exp`` / ``tanh`` differently), so with the switch on a signature's
    first result can differ from its later ones in the last bits. With it off
    (the default), every call of a signature is bit-identical for identical inputs.

    Example:
        >>> from state_core import eager_first_calls, eager_first_calls_enabled
        >>> eager_first_calls_enabled()
        False
        >>> with eager_first_calls(True):
        ...     eager_first_calls_enabled()
        True
    """
    return _SWITCH.on()
