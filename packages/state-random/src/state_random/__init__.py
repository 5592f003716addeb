"""state_random: stateful, explicit random-number streams built on state-core.

A ``RandomState`` is a ``state_core.State`` holding a JAX PRNG key. Drawing from
it splits the key and stores the remainder, so state-aware transformations trace
random draws like any other state access. ``DEFAULT`` is the global stream that
the module-level samplers (``normal``, ``uniform``, ``randint`` ...) use.

Key discipline (reproduces published numbers bit for bit): one draw does
``parts = jax.random.split(K, 2)``, keeps ``parts[0]`` and samples with
``parts[1]``; mapping over ``B`` lanes uses ``split_for_lanes``.

Example:
    >>> import jax
    >>> import state_random as sr
    >>> sr.seed(42)
    >>> x = sr.normal(size=2)
    >>> k = jax.random.split(jax.random.key(42), 2)[1]
    >>> bool((x == jax.random.normal(k, (2,))).all())
    True
"""

from .__about__ import __version__
from ._default import (
    DEFAULT,
    bernoulli,
    beta,
    binomial,
    categorical,
    cauchy,
    chisquare,
    choice,
    dirichlet,
    exponential,
    gamma,
    geometric,
    get_key,
    gumbel,
    laplace,
    logistic,
    lognormal,
    multivariate_normal,
    normal,
    pareto,
    permutation,
    poisson,
    rand,
    randint,
    randn,
    random,
    seed,
    seed_context,
    set_key,
    shuffle,
    split_key,
    split_keys,
    standard_normal,
    t,
    truncated_normal,
    uniform,
    weibull,
)
from ._lanes import is_random_state, is_single_key, split_for_lanes
from ._random_state import RandomState

__all__ = [
    "__version__",
    "RandomState",
    "DEFAULT",
    "seed",
    "seed_context",
    "get_key",
    "set_key",
    "split_key",
    "split_keys",
    "split_for_lanes",
    "is_single_key",
    "is_random_state",
    "rand",
    "randn",
    "random",
    "uniform",
    "normal",
    "standard_normal",
    "randint",
    "bernoulli",
    "binomial",
    "choice",
    "permutation",
    "shuffle",
    "truncated_normal",
    "exponential",
    "gamma",
    "beta",
    "poisson",
    "categorical",
    "lognormal",
    "laplace",
    "logistic",
    "gumbel",
    "cauchy",
    "chisquare",
    "dirichlet",
    "multivariate_normal",
    "geometric",
    "pareto",
    "weibull",
    "t",
]
