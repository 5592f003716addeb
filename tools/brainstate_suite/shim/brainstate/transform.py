"""``brainstate.transform`` (and ``brainstate.compile`` / ``brainstate.augment``) -> ``state_transform``.

``StatefulFunction`` and ``make_jaxpr`` live in ``state_core`` here.
"""

from state_core import StatefulFunction, make_jaxpr  # noqa: F401  (re-exported)
from state_transform import *  # noqa: F403
from state_transform import GradFunction, jacrev

#: brainstate defines ``jacobian = jacrev``.
jacobian = jacrev
#: the class of the object ``grad`` / ``vector_grad`` / ``jacrev`` ... return.
GradientTransform = GradFunction
