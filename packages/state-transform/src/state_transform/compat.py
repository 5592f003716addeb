"""brainstate's spellings of the transform layer, kept out of ``state_transform``'s own namespace.

Everything here exists so that a brainstate program ports by renaming its imports
(see the porting page); new code does not need it.
"""

from __future__ import annotations

__all__ = ["in_new_state_probe"]


def in_new_state_probe() -> bool:
    """Whether a ``*_new_states`` call is running a discovery pass of ``init_state``: always False here.

    Libraries whose ``vmap2_new_states`` runs the initialiser twice (once unmapped,
    to discover the states it creates, then mapped) let one-shot side effects
    skip the first pass by asking this. ``vmap2_new_states`` and
    ``pmap2_new_states`` here run the initialiser once, mapped, so there is no
    discovery pass; code guarded by this function runs unchanged.

    Returns:
        False.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import vmap2_new_states
        >>> from state_transform.compat import in_new_state_probe
        >>> passes = []
        >>> class Cell:
        ...     def init_all_states(self):
        ...         passes.append(in_new_state_probe())
        ...         self.w = ParamState(jnp.zeros(2))
        >>> _ = vmap2_new_states(Cell(), {}, axis_size=3)
        >>> passes
        [False]
    """
    return False
