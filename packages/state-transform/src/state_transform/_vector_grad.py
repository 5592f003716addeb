"""``vector_grad`` (reverse mode, any output) and ``fwd_grad`` (forward-mode estimate) w.r.t. States."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import state_random

from ._diff_base import StateDerivative

__all__ = ["vector_grad", "fwd_grad"]


class _VectorGrad(StateDerivative):
    """The callable ``vector_grad`` returns: the gradient of the sum of ``fun``'s outputs."""

    def __init__(
        self,
        fun: Callable[..., Any],
        grad_states: Any,
        argnums: int | Sequence[int] | None,
        return_value: bool,
        has_aux: bool,
    ) -> None:
        super().__init__(fun, grad_states, argnums, has_aux, return_value, "vector_grad")

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        problem = self.objective(args, kwargs)
        value, pull, (aux, written) = jax.vjp(problem.fn, problem.grad_values, problem.diff_args, has_aux=True)
        g_states, g_args = pull(jax.tree.map(jnp.ones_like, value))
        problem.write(written)
        return self.layout(g_states, g_args, value, aux)


def vector_grad(
    func: Callable[..., Any] | None = None,
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    return_value: bool = False,
    has_aux: bool | None = None,
) -> Any:
    """The gradient of every output element of ``func``, summed: a vector-Jacobian product with ones.

    For an elementwise function ``f(x)`` this is the elementwise derivative
    ``f'(x)``; in general it is ``jax.vjp(f, x)[1](ones_like(f(x)))``. ``func`` may
    return any array or pytree of arrays (not only a scalar, unlike ``grad``). The
    arguments and the result layout are those of ``grad`` (brainstate's order):
    ``grads``, ``(grads, value)``, ``(grads, aux)`` or ``(grads, value, aux)``, with
    ``grads`` the state part, the argument part or ``(state part, argument part)``.
    States that ``func`` writes are updated. Usable as a decorator factory
    (``vector_grad(grad_states=...)``).

    Args:
        func: the function to differentiate.
        grad_states: a State or a list/tuple/dict of States to differentiate with respect to.
        argnums: positional argument(s) to differentiate with respect to (default 0
            when ``grad_states`` is None, none otherwise).
        return_value: also return ``func``'s value.
        has_aux: ``func`` returns ``(value, aux)``; ``aux`` is returned, not differentiated.

    Returns:
        A function with ``func``'s arguments returning the gradients (and value / aux).

    Raises:
        TypeError: ``grad_states`` holds something that is not a State.
        ValueError: ``argnums`` names an argument the call does not have.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import vector_grad
        >>> vector_grad(lambda x: x ** 2)(jnp.array([1., 2., 3.]))
        Array([2., 4., 6.], dtype=float32)
        >>> w = ParamState(jnp.array([1., 2.]))
        >>> g, value = vector_grad(lambda x: w.value * x, grad_states=w, return_value=True)(3.0)
        >>> g, value
        (Array([3., 3.], dtype=float32), Array([3., 6.], dtype=float32))
    """
    aux = bool(has_aux)
    if func is None:
        return functools.partial(
            vector_grad, grad_states=grad_states, argnums=argnums, return_value=return_value, has_aux=aux
        )
    return _VectorGrad(func, grad_states, argnums, return_value, aux)


def _as_key(key: Any) -> jax.Array:
    """A typed PRNG key from an int seed, a typed key or raw ``uint32[2]`` key data."""
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.ndim != 0:
            raise ValueError(f"fwd_grad: key must be a single key, got a key array of shape {key.shape}.")
        return key
    if isinstance(key, (jax.Array, jnp.ndarray)) and key.dtype == jnp.uint32 and key.shape == (2,):
        return jax.random.wrap_key_data(key)
    if isinstance(key, bool):
        raise TypeError("fwd_grad: key must be an int seed or a PRNG key, got a bool.")
    if isinstance(key, (np.ndarray, jax.Array)) and key.size == 1 and jnp.issubdtype(key.dtype, jnp.integer):
        key = key.reshape(())  # a one-element integer array is a seed (np.array([42]), as brainstate accepts)
    try:
        seed = operator.index(key)
    except TypeError:
        raise TypeError(
            f"fwd_grad: key must be an int seed, a typed PRNG key (jax.random.key) or raw uint32[2] "
            f"key data (jax.random.PRNGKey), got {type(key).__name__}."
        ) from None
    return jax.random.key(seed)


class _FwdGrad(StateDerivative):
    """The callable ``fwd_grad`` returns: ``v * (J v)`` for random normal tangents ``v``.

    Called as ``_run(key, *args)``: ``key`` is a typed key array or None (then a
    key is split from ``state_random.DEFAULT`` inside the program, so every call
    draws new tangents).
    """

    def __init__(
        self,
        fun: Callable[..., Any],
        grad_states: Any,
        argnums: int | Sequence[int] | None,
        return_value: bool,
        has_aux: bool,
        tangent_size: int | None,
        drct_der_clip: float | None,
        key: Any,
    ) -> None:
        if tangent_size is not None and (
            isinstance(tangent_size, bool) or not isinstance(tangent_size, int) or tangent_size < 1
        ):
            raise ValueError(f"fwd_grad: tangent_size must be a positive int or None, got {tangent_size!r}.")
        if drct_der_clip is not None and not drct_der_clip > 0:
            raise ValueError(f"fwd_grad: drct_der_clip must be a positive number or None, got {drct_der_clip!r}.")
        options = (tangent_size, None if drct_der_clip is None else float(drct_der_clip))
        super().__init__(fun, grad_states, argnums, has_aux, return_value, "fwd_grad", options)
        self.tangent_size = tangent_size
        self.drct_der_clip = drct_der_clip
        self._key = None if key is None else _as_key(key)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(self._key, *args, **kwargs)

    def _run(self, key: Any, *args: Any, **kwargs: Any) -> Any:
        problem = self.objective(args, kwargs)
        primals = (problem.grad_values, problem.diff_args)
        leaves, treedef = jax.tree.flatten(primals)
        for leaf in leaves:
            if not jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
                raise TypeError(
                    f"fwd_grad: every differentiated value must be floating point, got dtype "
                    f"{jnp.result_type(leaf)}; cast integer or boolean values (or states) to float first."
                )
        if key is None:
            key = state_random.DEFAULT.split_key()
        keys = jax.random.split(key, max(len(leaves), 1))
        lead = () if self.tangent_size is None else (self.tangent_size,)
        tangents = jax.tree.unflatten(
            treedef,
            [jax.random.normal(k, lead + jnp.shape(x), jnp.result_type(x)) for k, x in zip(keys, leaves, strict=False)],
        )

        def directional(t: Any) -> tuple[Any, Any, Any]:
            value, slope, extra = jax.jvp(problem.fn, primals, t, has_aux=True)
            if jnp.ndim(slope) != 0:
                raise ValueError(
                    f"fwd_grad: {self.name} must return a scalar, but its value has shape "
                    f"{jnp.shape(slope)}. Use vector_grad, jacfwd or jacrev for non-scalar outputs."
                )
            if self.drct_der_clip is not None:
                slope = jnp.clip(slope, -self.drct_der_clip, self.drct_der_clip)
            return value, slope, extra

        if self.tangent_size is None:
            value, slope, (aux, written) = directional(tangents)
            estimate = jax.tree.map(lambda v: v * slope, tangents)
        else:
            # The value, aux and writes do not depend on the tangent: take those of the first one.
            values, slopes, extras = jax.vmap(directional)(tangents)
            value, (aux, written) = jax.tree.map(lambda x: x[0], (values, extras))
            estimate = jax.tree.map(
                lambda v: jnp.mean(v * slopes.reshape((-1,) + (1,) * (v.ndim - 1)), axis=0), tangents
            )
        problem.write(written)
        g_states, g_args = estimate
        return self.layout(g_states, g_args, value, aux)


def fwd_grad(
    func: Callable[..., Any] | None = None,
    grad_states: Any = None,
    argnums: int | Sequence[int] | None = None,
    return_value: bool = False,
    has_aux: bool | None = None,
    tangent_size: int | None = None,
    drct_der_clip: float | None = None,
    key: Any = None,
) -> Any:
    """A forward-mode (stochastic) estimate of the gradient of a scalar ``func``.

    For a random normal direction ``v`` over all differentiated values, one
    forward pass gives the directional derivative ``J v``; ``v * (J v)`` is an
    unbiased estimate of the gradient. With ``tangent_size=n`` the estimate is
    averaged over ``n`` directions (one vectorised forward pass). The arguments
    and the result layout are those of ``grad`` / ``vector_grad``. States that
    ``func`` writes are updated.

    Args:
        func: the scalar-valued function.
        grad_states: a State or a list/tuple/dict of States to differentiate with respect to.
        argnums: positional argument(s) to differentiate with respect to (default 0
            when ``grad_states`` is None, none otherwise).
        return_value: also return ``func``'s value.
        has_aux: ``func`` returns ``(value, aux)``.
        tangent_size: None: one direction; an int ``n >= 1``: the mean over ``n`` directions.
        drct_der_clip: clip every directional derivative to ``[-clip, clip]`` first.
        key: an int seed or PRNG key for the directions (the same directions at every
            call); None: a new key from ``state_random.DEFAULT`` at every call.

    Returns:
        A function with ``func``'s arguments returning the estimate (and value / aux).

    Raises:
        ValueError: ``func`` is not scalar-valued, or a bad ``tangent_size`` / ``drct_der_clip``.
        TypeError: a differentiated value is not floating point, or a bad ``key``.

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ParamState
        >>> from state_transform import fwd_grad
        >>> w = ParamState(jnp.array([1., 2.]))
        >>> g = fwd_grad(lambda: jnp.sum(w.value ** 2), grad_states=w, tangent_size=20_000, key=0)()
        >>> bool(jnp.allclose(g, 2 * w.value, atol=0.1))
        True
    """
    aux = bool(has_aux)
    if func is None:
        return functools.partial(
            fwd_grad,
            grad_states=grad_states,
            argnums=argnums,
            return_value=return_value,
            has_aux=aux,
            tangent_size=tangent_size,
            drct_der_clip=drct_der_clip,
            key=key,
        )
    return _FwdGrad(func, grad_states, argnums, return_value, aux, tangent_size, drct_der_clip, key)
