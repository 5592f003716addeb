"""A few ready layers: ``Linear``, ``Dropout`` and ``Sequential``."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import state_random
from state_core import ParamState

from ._module import Module, _render

__all__ = ["Linear", "Dropout", "Sequential"]

Initializer = Callable[..., Any]


def _initial_value(init: Initializer | Any, shape: tuple[int, ...], dtype: Any, what: str) -> jax.Array:
    """``init(key, shape, dtype)`` with a key from ``state_random``, or a given array."""
    if callable(init):
        value = init(state_random.split_key(), shape, dtype)
    else:
        value = jnp.asarray(init, dtype=dtype)
    if tuple(jnp.shape(value)) != tuple(shape):
        raise ValueError(f"{what} must have shape {shape}, got {tuple(jnp.shape(value))}.")
    return value


def _check_size(value: Any, name: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"Linear: {name} must be a positive int, got {value!r}.")
    return int(value)


class Linear(Module):
    """A dense layer ``y = x @ weight + bias`` with ``weight`` of shape ``(in_size, out_size)``.

    Parameters are ``ParamState`` objects created in ``__init__``. ``w_init`` and
    ``b_init`` are JAX-style initialisers ``init(key, shape, dtype)`` (for example
    from ``jax.nn.initializers``), called with a fresh key drawn from
    ``state_random``'s default stream (so ``state_random.seed`` makes them
    reproducible, and under ``Map.init_all_states`` every member gets its own
    draw), or arrays of the right shape.

    Args:
        in_size, out_size: the input and output feature sizes.
        w_init: weight initialiser; default LeCun normal
            (``jax.nn.initializers.lecun_normal()``).
        b_init: bias initialiser; default zeros.
        use_bias: whether to add a bias (``bias`` is ``None`` otherwise).
        dtype: the parameters' dtype (default float32).

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> layer = state_nn.Linear(3, 2, w_init=jnp.ones((3, 2)))
        >>> layer(jnp.array([1., 2., 3.]))
        Array([6., 6.], dtype=float32)
        >>> layer
        Linear(
          weight=ParamState(
            value=ShapedArray(float32[3,2])
          ),
          bias=ParamState(
            value=ShapedArray(float32[2])
          )
        )
    """

    __module__ = "state_nn"

    def __init__(
        self,
        in_size: int,
        out_size: int,
        w_init: Initializer | Any = None,
        b_init: Initializer | Any = None,
        use_bias: bool = True,
        dtype: Any = jnp.float32,
    ) -> None:
        super().__init__()
        self.in_size = _check_size(in_size, "in_size")
        self.out_size = _check_size(out_size, "out_size")
        if w_init is None:
            w_init = jax.nn.initializers.lecun_normal()
        if b_init is None:
            b_init = jax.nn.initializers.zeros
        self.weight = ParamState(
            _initial_value(w_init, (self.in_size, self.out_size), dtype, "Linear: w_init's weight")
        )
        self.bias = (
            ParamState(_initial_value(b_init, (self.out_size,), dtype, "Linear: b_init's bias"))
            if use_bias
            else None
        )

    def update(self, x: Any) -> jax.Array:
        """``x @ weight + bias`` for ``x`` of shape ``(..., in_size)``.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> layer = state_nn.Linear(2, 1, w_init=jnp.ones((2, 1)), b_init=jnp.ones(1))
            >>> layer.update(jnp.array([[1., 2.], [3., 4.]]))
            Array([[4.],
                   [8.]], dtype=float32)
        """
        x = jnp.asarray(x)
        if x.ndim == 0 or x.shape[-1] != self.in_size:
            raise ValueError(
                f"Linear({self.in_size}, {self.out_size}) expects inputs whose last axis has size "
                f"{self.in_size}, got shape {x.shape}."
            )
        y = x @ self.weight.value
        if self.bias is not None:
            y = y + self.bias.value
        return y


class Dropout(Module):
    """Randomly zero inputs with probability ``rate`` and scale the rest by ``1 / (1 - rate)``.

    The keep mask is drawn with ``state_random.bernoulli`` from the default random
    stream, so it is reproducible after ``state_random.seed`` and differs per
    member under ``Map``. In deterministic (evaluation) mode the input is returned
    unchanged.

    Args:
        rate: the drop probability, in ``[0, 1)``.
        deterministic: start in evaluation mode (no dropout). Switch with the
            ``deterministic`` attribute, ``train()`` / ``eval()``, or per call with
            ``update(x, deterministic=...)`` (a Python bool).

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn, state_random
        >>> state_random.seed(0)
        >>> drop = state_nn.Dropout(0.5)
        >>> y = drop(jnp.ones(6))
        >>> sorted(set(y.tolist())) in ([0.0, 2.0], [0.0], [2.0])
        True
        >>> drop.eval()(jnp.ones(3))
        Array([1., 1., 1.], dtype=float32)
    """

    __module__ = "state_nn"

    def __init__(self, rate: float, deterministic: bool = False) -> None:
        super().__init__()
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout: rate must be a float in [0, 1), got {rate!r}.")
        self.rate = float(rate)
        self.deterministic = bool(deterministic)

    def train(self) -> "Dropout":
        """Switch to training mode (dropout active); returns ``self``."""
        self.deterministic = False
        return self

    def eval(self) -> "Dropout":
        """Switch to evaluation mode (identity); returns ``self``."""
        self.deterministic = True
        return self

    def update(self, x: Any, deterministic: bool | None = None) -> jax.Array:
        """Apply dropout to ``x`` (identity when deterministic or ``rate == 0``).

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> state_nn.Dropout(0.3).update(jnp.ones(2), deterministic=True)
            Array([1., 1.], dtype=float32)
        """
        x = jnp.asarray(x)
        if deterministic is None:
            deterministic = self.deterministic
        if not isinstance(deterministic, (bool, np.bool_)):
            raise TypeError(
                "Dropout: deterministic must be a Python bool (it selects the program), got "
                f"{type(deterministic).__name__}."
            )
        if deterministic or self.rate == 0.0:
            return x
        keep_prob = 1.0 - self.rate
        keep = state_random.bernoulli(keep_prob, x.shape)
        return jnp.where(keep, x / keep_prob, jnp.zeros_like(x))


class Sequential(Module):
    """Apply layers one after another: ``Sequential(a, b, c)(x) == c(b(a(x)))``.

    Layers may be Modules or plain functions (such as ``jax.nn.relu``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import state_nn
        >>> net = state_nn.Sequential(
        ...     state_nn.Linear(2, 3, w_init=jnp.ones((2, 3))),
        ...     jax.nn.relu,
        ...     state_nn.Linear(3, 1, w_init=jnp.ones((3, 1))),
        ... )
        >>> net(jnp.array([1., -2.]))
        Array([0.], dtype=float32)
        >>> len(net), list(net.states())
        (3, [('layers', 0, 'weight'), ('layers', 0, 'bias'), ('layers', 2, 'weight'), ('layers', 2, 'bias')])
    """

    __module__ = "state_nn"

    def __init__(self, *layers: Callable[..., Any]) -> None:
        super().__init__()
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise TypeError(f"Sequential: layer {i} is a {type(layer).__name__}, which is not callable.")
        self.layers = list(layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, index: int) -> Callable[..., Any]:
        return self.layers[index]

    def update(self, x: Any) -> Any:
        """Feed ``x`` through every layer in order.

        Example:
            >>> import state_nn
            >>> state_nn.Sequential(lambda x: x + 1, lambda x: x * 10)(1)
            20
        """
        for layer in self.layers:
            x = layer(x)
        return x

    def _repr_fields(self) -> list[tuple[str, str]]:
        entries = []
        for layer in self.layers:
            if isinstance(layer, Module):
                entries.append(_render(layer))
            else:
                entries.append(getattr(layer, "__name__", type(layer).__name__))
        if not entries:
            return [("layers", "[]")]
        body = ",\n".join("  " + e.replace("\n", "\n  ") for e in entries)
        return [("layers", f"[\n{body}\n]")]
