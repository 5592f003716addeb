"""state_nn: stateful modules, ensembles (``Map``), parameters and a few layers built on the state stack.

``Module`` is a container of ``state_core`` States and sub-Modules; ``Map`` runs a
Module as an ensemble of members with ``state_transform.vmap2`` or ``pmap2``;
``Linear``, ``Dropout`` (with brainstate's variants ``Dropout1d`` / ``2d`` /
``3d``, ``AlphaDropout``, ``FeatureAlphaDropout`` and ``DropoutFixed``) and
``Sequential`` are ready layers; ``Param`` is a parameter with a transform
(``ClipT``, ``SoftplusT``) and a regulariser (``L1Reg``, ``L2Reg``).
``Dynamics`` is the base class of neuron and synapse models, stepped with
``exp_euler_step`` and the ``dt`` of ``state_core.environ``.
brainstate's activation functions (``relu``, ``softmax``, ...), ``clip_grad_norm``
and the function forms ``init_all_states(module, ...)`` /
``reset_all_states(module, ...)`` are here under the same names.

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
from ._activations import (
    celu,
    elu,
    gelu,
    hard_shrink,
    hard_sigmoid,
    hard_silu,
    hard_swish,
    hard_tanh,
    leaky_relu,
    log_sigmoid,
    mish,
    prelu,
    relu,
    relu6,
    rrelu,
    selu,
    sigmoid,
    silu,
    soft_shrink,
    soft_sign,
    softplus,
    sparse_plus,
    sparse_sigmoid,
    squareplus,
    swish,
    tanh,
    tanh_shrink,
)
from ._collective import init_all_states, reset_all_states
from ._dropout_variants import AlphaDropout, Dropout1d, Dropout2d, Dropout3d, DropoutFixed, FeatureAlphaDropout
from ._dynamics import (
    Dynamics,
    Prefetch,
    not_receive_update_input,
    not_receive_update_output,
    receive_update_input,
    receive_update_output,
)
from ._environ_context import EnvironContext
from ._exp_euler import exp_euler_step
from ._functional import glu, log_softmax, logsumexp, one_hot, softmax, softmin, standardize
from ._grad_clip import clip_grad_norm
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
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "AlphaDropout",
    "FeatureAlphaDropout",
    "DropoutFixed",
    "Sequential",
    "ElementWiseBlock",
    "EnvironContext",
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
    "clip_grad_norm",
    # activations and other functions, as in brainstate.nn
    "tanh",
    "relu",
    "squareplus",
    "softplus",
    "soft_sign",
    "sigmoid",
    "silu",
    "swish",
    "log_sigmoid",
    "elu",
    "leaky_relu",
    "hard_tanh",
    "celu",
    "selu",
    "gelu",
    "glu",
    "logsumexp",
    "log_softmax",
    "softmax",
    "standardize",
    "one_hot",
    "relu6",
    "hard_sigmoid",
    "hard_silu",
    "hard_swish",
    "hard_shrink",
    "rrelu",
    "mish",
    "soft_shrink",
    "prelu",
    "tanh_shrink",
    "softmin",
    "sparse_plus",
    "sparse_sigmoid",
    "checkpoint",
]
