"""Ready layers: ``Linear`` and ``Dropout``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import state_random
from state_core import ParamState, environ

from ._module import Module, _is_int
from ._sequential import ElementWiseBlock

__all__ = ["Linear", "Dropout"]

Initializer = Callable[..., Any]


def _initial_value(init: Initializer | Any, shape: tuple[int, ...], dtype: Any, what: str) -> jax.Array:
    """``init(key, shape, dtype)`` with a key from ``state_random``, or a given array."""
    value = init(state_random.split_key(), shape, dtype) if callable(init) else jnp.asarray(init, dtype=dtype)
    if tuple(jnp.shape(value)) != tuple(shape):
        raise ValueError(f"{what} must have shape {shape}, got {tuple(jnp.shape(value))}.")
    return value


def _check_size(value: Any, name: str) -> tuple[int, ...]:
    """An int or a non-empty tuple of ints, all positive, as a tuple."""
    dims = (value,) if _is_int(value) else value
    if not isinstance(dims, (tuple, list)) or not dims or not all(_is_int(d) and d >= 1 for d in dims):
        raise ValueError(f"Linear: {name} must be a positive int (or a tuple of them), got {value!r}.")
    return tuple(int(d) for d in dims)


class Linear(Module):
    """A dense layer ``y = x @ weight + bias`` with ``weight`` of shape ``(in_size, out_size)``.

    Parameters are ``ParamState`` objects created in ``__init__``. ``w_init`` and
    ``b_init`` are JAX-style initialisers ``init(key, shape, dtype)`` (for example
    from ``jax.nn.initializers``), called with a fresh key drawn from
    ``state_random``'s default stream (so ``state_random.seed`` makes them
    reproducible, and under ``Map.init_all_states`` every member gets its own
    draw), or arrays of the right shape.

    Args:
        in_size: the input feature size (an int, or a tuple whose last entry is
            the feature size); stored as a tuple.
        out_size: the output feature size, like ``in_size``.
        w_init: weight initialiser; default LeCun normal
            (``jax.nn.initializers.lecun_normal()``).
        b_init: bias initialiser; default zeros.
        use_bias: whether to add a bias (``bias`` is ``None`` otherwise).
        dtype: the parameters' dtype (default float32).
        name: an optional name for the layer.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn
        >>> layer = state_nn.Linear(3, 2, w_init=jnp.ones((3, 2)))
        >>> layer(jnp.array([1., 2., 3.]))
        Array([6., 6.], dtype=float32)
        >>> layer
        Linear(
          in_size=(3,),
          out_size=(2,),
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
        in_size: int | tuple[int, ...],
        out_size: int | tuple[int, ...],
        w_init: Initializer | Any = None,
        b_init: Initializer | Any = None,
        use_bias: bool = True,
        dtype: Any = jnp.float32,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.in_size = _check_size(in_size, "in_size")
        self.out_size = _check_size(out_size, "out_size")
        n_in, n_out = self.in_size[-1], self.out_size[-1]
        if w_init is None:
            w_init = jax.nn.initializers.lecun_normal()
        if b_init is None:
            b_init = jax.nn.initializers.zeros
        self.weight = ParamState(_initial_value(w_init, (n_in, n_out), dtype, "Linear: w_init's weight"))
        self.bias = ParamState(_initial_value(b_init, (n_out,), dtype, "Linear: b_init's bias")) if use_bias else None

    def update(self, x: Any) -> jax.Array:
        """``x @ weight + bias`` for ``x`` of shape ``(..., in_size)``.

        Args:
            x: the input, of shape ``(..., in_size)``.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> layer = state_nn.Linear(2, 1, w_init=jnp.ones((2, 1)), b_init=jnp.ones(1))
            >>> layer.update(jnp.array([[1., 2.], [3., 4.]]))
            Array([[4.],
                   [8.]], dtype=float32)
        """
        x = jnp.asarray(x)
        in_size, out_size = self.in_size, self.out_size
        assert in_size is not None and out_size is not None  # set by __init__; Module declares them optional
        n_in = in_size[-1]
        if x.ndim == 0 or x.shape[-1] != n_in:
            raise ValueError(
                f"Linear({n_in}, {out_size[-1]}) expects inputs whose last axis has size {n_in}, got shape {x.shape}."
            )
        y = x @ self.weight.value
        if self.bias is not None:
            y = y + self.bias.value
        return y


class Dropout(ElementWiseBlock):
    """Randomly zero inputs with probability ``rate`` and scale the rest by ``1 / (1 - rate)``.

    The keep mask is drawn with ``state_random.bernoulli`` from the default random
    stream, so it is reproducible after ``state_random.seed`` and differs per
    member under ``Map``. In deterministic (evaluation) mode the input is returned
    unchanged.

    Args:
        rate: the drop probability, in ``[0, 1)``.
        deterministic: start in evaluation mode (no dropout). Switch a whole
            model with ``train()`` / ``eval()``, this layer with its
            ``deterministic`` (or ``training``) attribute, or one call with
            ``update(x, deterministic=...)`` (a Python bool, which wins over the
            rest). As in brainstate, ``state_core.environ``'s ``fit`` flag also
            switches: under ``environ.context(fit=False)`` the layer is the
            identity; unset or ``True``, the layer's own mode decides.
        name: an optional name for the layer.
        prob: brainstate's spelling, the *keep* probability (``rate = 1 - prob``);
            keyword only, so ``Dropout(0.1)`` always means ``rate=0.1``.
        broadcast_dims: input dimensions along which one mask value is shared
            (e.g. ``(0,)`` drops the same features for every row of a batch);
            negative numbers count from the end.

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
    _repr_attrs: tuple[str, ...] = ("rate", "deterministic")

    def __init__(
        self,
        rate: float | None = None,
        deterministic: bool = False,
        name: str | None = None,
        *,
        prob: float | None = None,
        broadcast_dims: Sequence[int] = (),
    ) -> None:
        super().__init__(name=name)
        dims = (broadcast_dims,) if isinstance(broadcast_dims, int) else tuple(broadcast_dims)
        if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dims):
            raise TypeError(f"Dropout: broadcast_dims must be ints (input dimensions), got {broadcast_dims!r}.")
        self.broadcast_dims = tuple(int(d) for d in dims)
        if prob is not None:
            # brainstate's spelling: the keep probability.
            if rate is not None:
                raise TypeError("Dropout: give rate (drop probability) or prob (keep probability), not both.")
            if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0.0 < prob <= 1.0:
                raise ValueError(f"Dropout: prob (the keep probability) must be in (0, 1], got {prob!r}.")
            rate = 1.0 - prob
        if rate is None:
            raise TypeError("Dropout: missing the drop probability rate, e.g. Dropout(0.1).")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout: rate must be a float in [0, 1), got {rate!r}.")
        if not isinstance(deterministic, (bool, np.bool_)):
            raise TypeError(
                f"Dropout: deterministic must be a bool, got {type(deterministic).__name__} {deterministic!r}."
            )
        self.rate = float(rate)
        # A new layer is in no compiled program yet: set the mode without the cache reset.
        self._training = not deterministic

    @property
    def deterministic(self) -> bool:
        """Evaluation mode: ``True`` returns the input unchanged; the opposite of ``training``.

        Example:
            >>> import state_nn
            >>> drop = state_nn.Dropout(0.5)
            >>> drop.deterministic
            False
            >>> drop.deterministic = True
            >>> drop.training
            False
        """
        return not self.training

    @deterministic.setter
    def deterministic(self, value: bool) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"Dropout: deterministic must be a bool, got {type(value).__name__} {value!r}.")
        self.training = not value

    def update(self, x: Any, deterministic: bool | None = None) -> jax.Array:
        """Apply dropout to ``x`` (identity when deterministic or ``rate == 0``).

        Args:
            x: the input.
            deterministic: True returns ``x`` unchanged; None: the layer's mode (set by the constructor, ``train()`` and
                ``eval()``).

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> state_nn.Dropout(0.3).update(jnp.ones(2), deterministic=True)
            Array([1., 1.], dtype=float32)
        """
        x = jnp.asarray(x)
        if not self._dropping(deterministic):
            return x
        keep_prob = 1.0 - self.rate
        keep = state_random.bernoulli(keep_prob, self._mask_shape(x.shape))
        return jnp.where(keep, x / keep_prob, jnp.zeros_like(x))

    def _dropping(self, deterministic: bool | None) -> bool:
        """Whether this call drops entries: the call's ``deterministic``, else the layer's mode and environ's fit."""
        where = type(self).__name__
        if deterministic is None:
            # brainstate's switch too: `environ.context(fit=False)` evaluates; unset, the layer's mode decides.
            fit = environ.get(environ.FIT, True)
            if not isinstance(fit, (bool, np.bool_)):
                raise TypeError(f"{where}: environ's `fit` flag must be a Python bool, got {type(fit).__name__}.")
            deterministic = self.deterministic or not fit
        if not isinstance(deterministic, (bool, np.bool_)):
            raise TypeError(
                f"{where}: deterministic must be a Python bool (it selects the program), got "
                f"{type(deterministic).__name__}."
            )
        return not deterministic and self.rate > 0.0

    def _mask_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """``shape`` with size 1 along ``broadcast_dims`` (one mask value shared along them)."""
        if not self.broadcast_dims:
            return shape
        shared = set()
        for d in self.broadcast_dims:
            if not -len(shape) <= d < len(shape):
                raise ValueError(
                    f"Dropout: broadcast_dims contains {d}, but the input has shape {shape} ({len(shape)} dimensions)."
                )
            shared.add(d % len(shape))
        return tuple(1 if i in shared else n for i, n in enumerate(shape))
