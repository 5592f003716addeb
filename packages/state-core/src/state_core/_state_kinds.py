"""The kinds of ``State``: short-term, long-term, parameter and hidden states."""

from __future__ import annotations

from typing import TypeVar

import jax
import numpy as np

from ._state import State

__all__ = ["ShortTermState", "LongTermState", "ParamState", "HiddenState", "NonBatchState"]

T = TypeVar("T")


class ShortTermState(State[T]):
    """A state that is reset between episodes or trials (e.g. a neuron's membrane potential).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ShortTermState
        >>> v = ShortTermState(jnp.zeros(4), name='v')
        >>> v.value = v.value + 1.0
        >>> v.value
        Array([1., 1., 1., 1.], dtype=float32)
    """

    __module__ = "state_core"


class NonBatchState(ShortTermState[T]):
    """A short-term state that batching initialisers keep as one copy shared by every lane.

    ``state_transform.vmap2_new_states``, ``pmap2_new_states`` and
    ``vmap_new_states`` give every state created during their call a leading
    axis of copies, except a ``NonBatchState``: it keeps its value unbatched (a
    lookup table, a step counter, a setting). Its value must then be the same on
    every lane; one that differs between lanes is an error. Elsewhere it behaves
    as a ``ShortTermState``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import NonBatchState, ShortTermState
        >>> table = NonBatchState(jnp.arange(3.0), name='table')
        >>> isinstance(table, ShortTermState), table.value
        (True, Array([0., 1., 2.], dtype=float32))
    """

    __module__ = "state_core"


class LongTermState(State[T]):
    """A state that persists across episodes (e.g. running averages, counters).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import LongTermState
        >>> steps = LongTermState(jnp.asarray(0), name='steps')
        >>> steps.value = steps.value + 1
        >>> int(steps.value)
        1
    """

    __module__ = "state_core"


class ParamState(LongTermState[T]):
    """A trainable parameter.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> w = ParamState(jnp.ones((2, 3)), name='w')
        >>> w.value.shape
        (2, 3)
    """

    __module__ = "state_core"


class HiddenState(ShortTermState[T]):
    """The hidden state of a recurrent or dynamical system (e.g. an RNN carry).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import HiddenState
        >>> h = HiddenState(jnp.zeros(8), name='h')
        >>> h.value.shape, h.varshape, h.num_state
        ((8,), (8,), 1)
    """

    __module__ = "state_core"

    @property
    def varshape(self) -> tuple[int, ...]:
        """The shape of the hidden variable (shared by every leaf when the value is a pytree).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenState
            >>> HiddenState({'v': jnp.zeros((4, 3)), 'u': jnp.zeros((4, 3))}).varshape
            (4, 3)
        """
        shapes = {tuple(np.shape(leaf)) for leaf in jax.tree.leaves(self._value)}
        if len(shapes) != 1:
            shown = sorted(shapes) if shapes else "no leaves"
            raise ValueError(
                f"{self.describe()} has no single varshape: its leaves have shapes {shown}. "
                "Use one HiddenState per variable shape, or read `value` leaf by leaf."
            )
        return shapes.pop()

    @property
    def num_state(self) -> int:
        """How many hidden variables the state holds (its number of leaves).

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import HiddenState
            >>> HiddenState((jnp.zeros(2), jnp.zeros(2))).num_state
            2
        """
        return len(jax.tree.leaves(self._value))
