"""The global random stream ``DEFAULT`` and the module-level functions that draw from it.

Every sampler is written once, as a ``RandomState`` method; the module-level
function of the same name is made here by ``_on_default``, which keeps the
method's signature (minus ``self``) and docstring, so ``help()``, IDEs and
doctests see a normal function.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

import jax
import numpy as np

from ._checks import is_key
from ._random_state import RandomState, key_from_seed_or_key

__all__ = [
    "DEFAULT",
    "seed",
    "seed_context",
    "default_rng",
    "clone_rng",
    "get_key",
    "get_key_data",
    "set_key",
    "split_key",
    "split_keys",
    "restore_key",
    "self_assign_multi_keys",
]

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT: RandomState = RandomState(None, name="DEFAULT")
"""The global ``RandomState`` behind every module-level sampler.

It is seeded lazily with fresh OS entropy the first time it is used (importing
``state_random`` does not touch the JAX backend); ``seed(s)`` makes it reproducible.

Example:
    >>> import state_random as sr
    >>> sr.seed(0)
    >>> a = sr.normal(size=2)
    >>> sr.seed(0)
    >>> bool((sr.DEFAULT.normal(size=2) == a).all())
    True
"""


def _on_default(method: Callable[Concatenate[RandomState, P], R]) -> Callable[P, R]:
    """The module-level form of a ``RandomState`` method: the same call on ``DEFAULT``."""
    name = method.__name__

    def on_default(*args: P.args, **kwargs: P.kwargs) -> R:
        return method(DEFAULT, *args, **kwargs)

    sig = inspect.signature(method)
    on_default.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])  # type: ignore[attr-defined]
    on_default.__name__ = on_default.__qualname__ = name
    on_default.__module__ = "state_random"
    on_default.__annotations__ = {k: v for k, v in method.__annotations__.items() if k != "self"}
    doc = inspect.cleandoc(method.__doc__ or "")
    summary, _, rest = doc.partition("\n\n")
    note = f"Draws from the global stream ``DEFAULT``: the same as ``DEFAULT.{name}(...)``."
    on_default.__doc__ = f"{summary}\n\n{note}\n\n{rest}" if rest else f"{summary}\n\n{note}"
    return on_default


def _numpy_seed(seed_or_key: Any, key: jax.Array) -> int | None:
    # NumPy is seeded the way brainstate does it: an int seed modulo 2**32, a key by
    # the first word of its data. Traced seeds (inside a transform) leave NumPy alone.
    if isinstance(seed_or_key, jax.core.Tracer) or isinstance(key, jax.core.Tracer):
        return None
    if is_key(seed_or_key) or np.ndim(seed_or_key) >= 1:  # a key, or raw key data
        if key.ndim != 0:
            return None
        return int(np.asarray(jax.random.key_data(key))[0])
    return int(seed_or_key) % 2**32


def seed(seed_or_key: Any = None) -> None:
    """Reseed ``DEFAULT`` and NumPy's global generator (``numpy.random.seed``).

    Args:
        seed_or_key: an int (the key is ``jax.random.key(seed)``; NumPy gets
            ``seed % 2**32``), a typed key or raw ``uint32[2]`` key data (NumPy gets
            the key's first word), or ``None``: fresh OS entropy for ``DEFAULT``,
            NumPy left as it is. A float, string or bool is a ``TypeError`` and
            changes nothing.

    Example:
        >>> import numpy as np
        >>> import state_random as sr
        >>> sr.seed(42)
        >>> a, b = sr.uniform(size=3), np.random.rand()
        >>> sr.seed(42)
        >>> bool((sr.uniform(size=3) == a).all()), np.random.rand() == b
        (True, True)
    """
    key = key_from_seed_or_key(seed_or_key, "seed")
    numpy_seed = None if seed_or_key is None else _numpy_seed(seed_or_key, key)
    DEFAULT.value = key
    if numpy_seed is not None:
        np.random.seed(numpy_seed)


@contextlib.contextmanager
def seed_context(seed_or_key: Any) -> Iterator[None]:
    """Temporarily reseed ``DEFAULT`` and NumPy; both are restored on exit (also on error).

    Args:
        seed_or_key: as for ``seed``: an int, a typed key, raw ``uint32[2]`` key data
            or ``None`` (fresh entropy for ``DEFAULT``, NumPy's state kept).

    Example:
        >>> import state_random as sr
        >>> sr.seed(1)
        >>> before = sr.get_key()
        >>> with sr.seed_context(123):
        ...     x = sr.normal(size=2)
        >>> bool(sr.get_key() == before)
        True
        >>> with sr.seed_context(123):
        ...     bool((sr.normal(size=2) == x).all())
        True
    """
    key = key_from_seed_or_key(seed_or_key, "seed_context")
    numpy_seed = None if seed_or_key is None else _numpy_seed(seed_or_key, key)
    old_key, old_numpy = DEFAULT.value, np.random.get_state()
    DEFAULT.value = key
    if numpy_seed is not None:
        np.random.seed(numpy_seed)
    try:
        yield
    finally:
        DEFAULT.value = old_key
        np.random.set_state(old_numpy)


def default_rng(seed_or_key: Any = None) -> RandomState:
    """``DEFAULT`` itself when ``seed_or_key`` is None, else a new ``RandomState(seed_or_key)``.

    Args:
        seed_or_key: an int seed, a typed key or raw ``uint32[2]`` key data for a new
            stream; None: the global ``DEFAULT``.

    Example:
        >>> import state_random as sr
        >>> sr.default_rng() is sr.DEFAULT
        True
        >>> sr.default_rng(3).uniform(size=2).shape
        (2,)
    """
    return DEFAULT if seed_or_key is None else RandomState(seed_or_key)


def clone_rng(seed_or_key: Any = None, clone: bool = True) -> RandomState:
    """A new RandomState: a clone of ``DEFAULT`` (same key, independent afterwards) or ``RandomState(seed_or_key)``.

    Args:
        seed_or_key: an int seed, a typed key or raw ``uint32[2]`` key data for a new
            stream; None: a clone of ``DEFAULT``.
        clone: with ``seed_or_key`` None, False returns ``DEFAULT`` itself instead of a
            clone.

    Example:
        >>> import state_random as sr
        >>> sr.seed(0)
        >>> rng = sr.clone_rng()
        >>> bool((rng.normal(size=2) == sr.normal(size=2)).all())
        True
    """
    if seed_or_key is None:
        return DEFAULT.clone() if clone else DEFAULT
    return RandomState(seed_or_key)


get_key = _on_default(RandomState.get_key)
get_key_data = _on_default(RandomState.get_key_data)
set_key = _on_default(RandomState.set_key)
split_key = _on_default(RandomState.split_key)
split_keys = _on_default(RandomState.split_keys)
restore_key = _on_default(RandomState.restore_key)
self_assign_multi_keys = _on_default(RandomState.self_assign_multi_keys)

# ---------------------------------------------------------------------- samplers
rand = _on_default(RandomState.rand)
randn = _on_default(RandomState.randn)
random = _on_default(RandomState.random)
random_sample = _on_default(RandomState.random_sample)
ranf = _on_default(RandomState.ranf)
sample = _on_default(RandomState.sample)
uniform = _on_default(RandomState.uniform)
normal = _on_default(RandomState.normal)
standard_normal = _on_default(RandomState.standard_normal)
truncated_normal = _on_default(RandomState.truncated_normal)
lognormal = _on_default(RandomState.lognormal)
multivariate_normal = _on_default(RandomState.multivariate_normal)
rand_like = _on_default(RandomState.rand_like)
randn_like = _on_default(RandomState.randn_like)
exponential = _on_default(RandomState.exponential)
standard_exponential = _on_default(RandomState.standard_exponential)
gamma = _on_default(RandomState.gamma)
standard_gamma = _on_default(RandomState.standard_gamma)
beta = _on_default(RandomState.beta)
chisquare = _on_default(RandomState.chisquare)
t = _on_default(RandomState.t)
standard_t = _on_default(RandomState.standard_t)
pareto = _on_default(RandomState.pareto)
power = _on_default(RandomState.power)
weibull = _on_default(RandomState.weibull)
weibull_min = _on_default(RandomState.weibull_min)
rayleigh = _on_default(RandomState.rayleigh)
maxwell = _on_default(RandomState.maxwell)
loggamma = _on_default(RandomState.loggamma)
laplace = _on_default(RandomState.laplace)
logistic = _on_default(RandomState.logistic)
gumbel = _on_default(RandomState.gumbel)
cauchy = _on_default(RandomState.cauchy)
standard_cauchy = _on_default(RandomState.standard_cauchy)
f = _on_default(RandomState.f)
noncentral_chisquare = _on_default(RandomState.noncentral_chisquare)
noncentral_f = _on_default(RandomState.noncentral_f)
triangular = _on_default(RandomState.triangular)
vonmises = _on_default(RandomState.vonmises)
wald = _on_default(RandomState.wald)
dirichlet = _on_default(RandomState.dirichlet)
orthogonal = _on_default(RandomState.orthogonal)
randint = _on_default(RandomState.randint)
random_integers = _on_default(RandomState.random_integers)
randint_like = _on_default(RandomState.randint_like)
bernoulli = _on_default(RandomState.bernoulli)
binomial = _on_default(RandomState.binomial)
poisson = _on_default(RandomState.poisson)
geometric = _on_default(RandomState.geometric)
negative_binomial = _on_default(RandomState.negative_binomial)
hypergeometric = _on_default(RandomState.hypergeometric)
logseries = _on_default(RandomState.logseries)
zipf = _on_default(RandomState.zipf)
multinomial = _on_default(RandomState.multinomial)
categorical = _on_default(RandomState.categorical)
choice = _on_default(RandomState.choice)
permutation = _on_default(RandomState.permutation)
shuffle = _on_default(RandomState.shuffle)
