"""``brainstate._compatible_import``: brainstate's imports of JAX names, with JAX's public spellings."""

from jax.core import Tracer
from jax.extend.core import (
    ClosedJaxpr,
    DropVar,
    Jaxpr,
    JaxprEqn,
    Literal,
    Primitive,
    Var,
    jaxpr_as_fun,
    new_jaxpr_eqn,
)

__all__ = [
    'ClosedJaxpr',
    'DropVar',
    'Jaxpr',
    'JaxprEqn',
    'Literal',
    'Primitive',
    'Tracer',
    'Var',
    'jaxpr_as_fun',
    'new_jaxpr_eqn',
]
