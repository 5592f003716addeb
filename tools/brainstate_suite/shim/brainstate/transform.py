"""``brainstate.transform`` (and ``brainstate.compile`` / ``brainstate.augment``) -> ``state_transform``.

``StatefulFunction`` and ``make_jaxpr`` live in ``state_core`` here; brainstate's
spellings (``StatefulFunction(return_only_write=...)``, ``in_new_state_probe``) in
each layer's ``compat`` module.
"""

from state_core import make_jaxpr  # noqa: F401  (re-exported)
from state_core.compat import StatefulFunction  # noqa: F401  (re-exported)
from state_transform import *  # noqa: F403
from state_transform import GradFunction, jacrev
from state_transform.compat import in_new_state_probe  # noqa: F401  (re-exported)

#: brainstate defines ``jacobian = jacrev``.
jacobian = jacrev
#: the class of the object ``grad`` / ``vector_grad`` / ``jacrev`` ... return.
GradientTransform = GradFunction
