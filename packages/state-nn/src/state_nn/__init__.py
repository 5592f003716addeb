"""state_nn: stateful modules, ensembles (``Map``), parameters and a few layers built on the state stack.

``Module`` is a container of ``state_core`` States and sub-Modules; ``Map`` runs a
Module as an ensemble of members with ``state_transform.vmap2`` or ``pmap2``;
``Linear``, ``Dropout`` and ``Sequential`` are ready layers; ``Param`` is a
parameter with a transform (``ClipT``, ``SoftplusT``) and a regulariser
(``L1Reg``, ``L2Reg``). ``Dynamics`` is the base class of neuron and synapse
models, stepped with ``exp_euler_step`` and the ``dt`` of ``state_core.environ``.

Example:
    >>> import jax.numpy as jnp
    >>> import state_core, state_nn
    >>> class Scale(state_nn.Module):
    ...     def init_state(self):
    ...         self.factor = state_core.ParamState(jnp.ones(()))
    ...     def update(self, x):
    ...         return self.factor.value * x
    >>> ensemble = state_nn.Map(Scale(), init_map_size=3)
    >>> ensemble.init_all_states()
    >>> ensemble(jnp.array([1., 2., 3.]))
    Array([1., 2., 3.], dtype=float32)
"""

from . import checkpoint
from .__about__ import __version__
from ._collective import init_all_states, reset_all_states
from ._dynamics import (
    Dynamics,
    Prefetch,
    not_receive_update_input,
    not_receive_update_output,
    receive_update_input,
    receive_update_output,
)
from ._exp_euler import exp_euler_step
from ._layers import Dropout, Linear
from ._map import Map
from ._module import Module
from ._param import Const, Param
from ._regularization import L1Reg, L2Reg, Regularization
from ._sequential import ElementWiseBlock, Sequential
from ._transform import ClipT, IdentityT, SoftplusT, Transform

__all__ = [
    "__version__",
    "Module",
    "Map",
    "Linear",
    "Dropout",
    "Sequential",
    "ElementWiseBlock",
    "Param",
    "Const",
    "Transform",
    "IdentityT",
    "ClipT",
    "SoftplusT",
    "Regularization",
    "L1Reg",
    "L2Reg",
    "Dynamics",
    "Prefetch",
    "exp_euler_step",
    "receive_update_output",
    "not_receive_update_output",
    "receive_update_input",
    "not_receive_update_input",
    "init_all_states",
    "reset_all_states",
    "checkpoint",
]
