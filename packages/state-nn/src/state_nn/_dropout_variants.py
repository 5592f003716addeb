"""brainstate's dropout variants: channel dropout, alpha dropout and a fixed mask.

All of them take ``prob``, the *keep* probability, as in brainstate (``Dropout``'s
first argument is the drop ``rate`` instead), and switch off exactly as ``Dropout``
does: ``state_core.environ``'s ``fit=False``, ``eval()`` / ``deterministic`` or the
``deterministic=`` argument of a call. Masks come from ``state_random``'s default
stream, so ``state_random.seed`` reproduces them and the layers run under
``state_transform.jit``, ``vmap2`` and ``for_loop``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

import state_random
from state_core import ShortTermState

from ._layers import Dropout
from ._module import _is_int

__all__ = ["Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "DropoutFixed"]

# The value SELU saturates to for very negative inputs: -scale * alpha of jax.nn.selu.
_SELU_SATURATION = -1.0507009873554805 * 1.6732632423543772


def _check_prob(where: str, prob: Any) -> float:
    """``prob`` (the keep probability) as a float in ``(0, 1]``."""
    if isinstance(prob, bool) or not isinstance(prob, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"{where}: prob (the keep probability) must be a float in (0, 1], got {type(prob).__name__} {prob!r}."
        )
    if not 0.0 < float(prob) <= 1.0:
        raise ValueError(
            f"{where}: prob is the keep probability and must be in (0, 1], got {prob!r}; "
            "to drop a fraction r of the entries pass prob=1 - r."
        )
    return float(prob)


def _scaled(x: jax.Array, keep: jax.Array, prob: float) -> jax.Array:
    """``x / prob`` where ``keep`` is True, 0 elsewhere (``Dropout``'s arithmetic)."""
    return jnp.where(keep, x / prob, jnp.zeros_like(x))


def _check_axis(where: str, channel_axis: Any) -> int:
    if not _is_int(channel_axis):
        raise TypeError(f"{where}: channel_axis must be an int, got {type(channel_axis).__name__} {channel_axis!r}.")
    return int(channel_axis)


class _KeepProbDropout(Dropout):
    """Shared base: a keep probability ``prob`` and ``Dropout``'s switches, plus a mask-applying hook."""

    _repr_attrs: tuple[str, ...] = ("prob", "deterministic")

    def __init__(self, prob: Any, name: str | None, deterministic: bool) -> None:
        super().__init__(prob=_check_prob(type(self).__name__, prob), deterministic=deterministic, name=name)

    @property
    def prob(self) -> float:
        """The keep probability (brainstate's ``prob``), ``1 - rate``.

        Example:
            >>> import state_nn
            >>> state_nn.Dropout2d(prob=0.75).prob
            0.75
        """
        return 1.0 - self.rate

    def update(self, x: Any, deterministic: bool | None = None) -> jax.Array:
        """Apply the layer to ``x`` (the identity when deterministic, under ``fit=False`` or when ``prob == 1``).

        Args:
            x: the input.
            deterministic: ``True`` returns ``x`` unchanged; ``None``: the layer's mode and environ's ``fit`` flag
                decide, as for ``Dropout``.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> state_nn.AlphaDropout(prob=0.5).update(jnp.ones(2), deterministic=True)
            Array([1., 1.], dtype=float32)
        """
        x = jnp.asarray(x)
        mask_shape = self._mask_shape(x.shape)  # checks the input's rank in every mode
        if not self._dropping(deterministic):
            return x
        return self._apply(x, mask_shape)

    def _apply(self, x: jax.Array, mask_shape: tuple[int, ...]) -> jax.Array:
        """Drop entries with a fresh mask of ``mask_shape`` and scale the kept ones by ``1 / prob``."""
        return _scaled(x, state_random.bernoulli(self.prob, mask_shape), self.prob)


class _ChannelDropout(_KeepProbDropout):
    """Dropout of whole channels of inputs with ``_spatial`` spatial axes, a channel axis and an optional batch axis."""

    _spatial: ClassVar[int]
    _repr_attrs = ("prob", "channel_axis", "deterministic")

    def __init__(
        self, prob: float = 0.5, channel_axis: int = -1, name: str | None = None, *, deterministic: bool = False
    ) -> None:
        super().__init__(prob, name, deterministic)
        where, rank = type(self).__name__, self._spatial + 1
        axis = _check_axis(where, channel_axis)
        if not -rank <= axis < rank:
            raise ValueError(
                f"{where}: channel_axis counts in the unbatched input of {rank} axes ({self._spatial} spatial + "
                f"channels), so it must be in [{-rank}, {rank - 1}]; got {axis}."
            )
        self.channel_axis = axis

    def _mask_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """One mask value per (batch entry and) channel: size 1 along the spatial axes."""
        rank = self._spatial + 1
        if len(shape) not in (rank, rank + 1):
            raise ValueError(
                f"{type(self).__name__}: expected an input of {rank} axes ({self._spatial} spatial + channels) or "
                f"{rank + 1} (with a leading batch axis), got shape {shape}; pick Dropout1d / 2d / 3d by the number "
                "of spatial axes, or share a mask along axes of your choice with Dropout(prob=..., broadcast_dims=...)."
            )
        batched = len(shape) == rank + 1
        # A non-negative channel_axis counts in the unbatched layout, so it moves one place right in a batch.
        channel = self.channel_axis + int(batched) if self.channel_axis >= 0 else len(shape) + self.channel_axis
        return tuple(n if i == channel or (batched and i == 0) else 1 for i, n in enumerate(shape))


class Dropout1d(_ChannelDropout):
    """Drop whole channels of 1-D feature maps, ``(length, channels)`` or ``(batch, length, channels)``.

    Every channel is kept with probability ``prob`` or zeroed along its whole
    length, independently per batch entry and per call; kept channels are scaled
    by ``1 / prob``. Use it after 1-D convolutions, whose neighbouring positions
    are too correlated for element-wise dropout to regularise.

    Args:
        prob: the *keep* probability, in ``(0, 1]`` (brainstate's convention; note
            that ``Dropout``'s first argument is the drop rate).
        channel_axis: the channel axis of the unbatched input (default ``-1``,
            channels last); a non-negative axis skips the batch axis of a
            batched input, as in brainstate.
        name: an optional name for the layer.
        deterministic: start in evaluation mode. The layer is the identity under
            ``state_core.environ.context(fit=False)``, after ``eval()`` or for
            ``update(x, deterministic=True)``, exactly as ``Dropout``.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn, state_random
        >>> state_random.seed(0)
        >>> drop = state_nn.Dropout1d(prob=0.5)
        >>> y = drop(jnp.ones((4, 5, 3)))  # (batch, length, channels)
        >>> bool(jnp.isin(y, jnp.array([0.0, 2.0])).all())  # dropped or scaled by 1 / prob
        True
        >>> bool((y == y[:, :1, :]).all())  # one value per batch entry and channel
        True
        >>> drop
        Dropout1d(
          prob=0.5,
          channel_axis=-1,
          deterministic=False
        )
    """

    __module__ = "state_nn"
    _spatial = 1


class Dropout2d(_ChannelDropout):
    """Drop whole channels of 2-D feature maps, ``(H, W, channels)`` or ``(batch, H, W, channels)``.

    Every channel is kept with probability ``prob`` or zeroed over its whole
    ``H x W`` map, independently per batch entry and per call; kept channels are
    scaled by ``1 / prob``. Use it after 2-D convolutions.

    Args:
        prob: the *keep* probability, in ``(0, 1]`` (see ``Dropout1d``).
        channel_axis: the channel axis of the unbatched input (default ``-1``, see ``Dropout1d``).
        name: an optional name for the layer.
        deterministic: start in evaluation mode (see ``Dropout1d``).

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn, state_random
        >>> state_random.seed(0)
        >>> drop = state_nn.Dropout2d(prob=0.5)
        >>> y = drop(jnp.ones((2, 3, 3, 4)))  # (batch, H, W, channels)
        >>> bool((y == y[:, :1, :1, :]).all())  # each (batch entry, channel) map is dropped or kept as a whole
        True
        >>> state_nn.Dropout2d(prob=0.5, channel_axis=0)(jnp.ones((4, 3, 3))).shape  # channels first, unbatched
        (4, 3, 3)
        >>> drop.eval()(jnp.ones((3, 3, 4)))[0, 0]
        Array([1., 1., 1., 1.], dtype=float32)
    """

    __module__ = "state_nn"
    _spatial = 2


class Dropout3d(_ChannelDropout):
    """Drop whole channels of 3-D feature maps, ``(D, H, W, channels)`` or ``(batch, D, H, W, channels)``.

    Every channel is kept with probability ``prob`` or zeroed over its whole
    volume, independently per batch entry and per call; kept channels are scaled
    by ``1 / prob``. Use it after 3-D convolutions.

    Args:
        prob: the *keep* probability, in ``(0, 1]`` (see ``Dropout1d``).
        channel_axis: the channel axis of the unbatched input (default ``-1``, see ``Dropout1d``).
        name: an optional name for the layer.
        deterministic: start in evaluation mode (see ``Dropout1d``).

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn, state_random
        >>> from state_core import environ
        >>> state_random.seed(0)
        >>> drop = state_nn.Dropout3d(prob=0.8)
        >>> y = drop(jnp.ones((2, 2, 2, 2, 3)))  # (batch, D, H, W, channels)
        >>> bool((y == y[:, :1, :1, :1, :]).all())
        True
        >>> with environ.context(fit=False):
        ...     print(drop(jnp.ones((2, 2, 2, 3))).sum())
        24.0
    """

    __module__ = "state_nn"
    _spatial = 3


class AlphaDropout(_KeepProbDropout):
    """Dropout for self-normalising networks (SELU): keeps a standardised input's mean 0 and variance 1.

    Each entry is kept with probability ``prob`` or set to SELU's saturation
    value ``alpha`` (about -1.758), independently per call; then the affine map
    ``a * x + b`` restores zero mean and unit variance for a standardised input:
    ``a = (prob * (1 + (1 - prob) * alpha**2)) ** -0.5`` and
    ``b = -a * (1 - prob) * alpha``. A dropped entry therefore becomes
    ``a * alpha + b``.

    Args:
        prob: the *keep* probability, in ``(0, 1]``, as in brainstate.
        name: an optional name for the layer.
        deterministic: start in evaluation mode (see ``Dropout1d``).

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> import state_nn, state_random
        >>> state_random.seed(0)
        >>> drop = state_nn.AlphaDropout(prob=0.9)
        >>> round(drop.a, 4), round(drop.b, 4)
        (0.9213, 0.162)
        >>> y = drop(jnp.full(1000, 3.0))  # kept: 3 * a + b; dropped: alpha * a + b
        >>> np.unique(np.round(np.asarray(y, dtype=float), 3))
        array([-1.458,  2.926])
    """

    __module__ = "state_nn"

    def __init__(self, prob: float = 0.5, name: str | None = None, *, deterministic: bool = False) -> None:
        super().__init__(prob, name, deterministic)

    @property
    def alpha(self) -> float:
        """The value a dropped entry takes before the affine map: SELU's saturation value ``-scale * alpha``.

        Example:
            >>> import state_nn
            >>> round(state_nn.AlphaDropout().alpha, 6)
            -1.758099
        """
        return _SELU_SATURATION

    @property
    def a(self) -> float:
        """The scale of the affine map, ``(prob * (1 + (1 - prob) * alpha**2)) ** -0.5``.

        Example:
            >>> import state_nn
            >>> round(state_nn.AlphaDropout(prob=0.5).a, 4)
            0.8864
        """
        return float((self.prob * (1.0 + self.rate * self.alpha**2)) ** -0.5)

    @property
    def b(self) -> float:
        """The shift of the affine map, ``-a * (1 - prob) * alpha``.

        Example:
            >>> import state_nn
            >>> round(state_nn.AlphaDropout(prob=0.5).b, 4)
            0.7792
        """
        return -self.a * self.rate * self.alpha

    def _apply(self, x: jax.Array, mask_shape: tuple[int, ...]) -> jax.Array:
        keep = state_random.bernoulli(self.prob, mask_shape)
        # Python floats are weakly typed: a float input keeps its dtype, an integer one becomes float.
        return jnp.where(keep, x, self.alpha) * self.a + self.b


class FeatureAlphaDropout(AlphaDropout):
    """Alpha dropout of whole channels: ``AlphaDropout``'s values, one mask value per (batch entry, channel).

    The input is ``(batch, ..., channels)`` (at least 2 axes): axis 0 is always the
    batch axis and every other axis except ``channel_axis`` shares the mask, as
    in brainstate. A dropped channel takes the value ``a * alpha + b`` everywhere.

    Args:
        prob: the *keep* probability, in ``(0, 1]``, as in brainstate.
        channel_axis: the channel axis of the (batched) input; default ``-1``.
            Unlike ``Dropout1d``..``Dropout3d`` it counts in the full input, batch
            axis included, and cannot be the batch axis 0.
        name: an optional name for the layer.
        deterministic: start in evaluation mode (see ``Dropout1d``).

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn, state_random
        >>> state_random.seed(0)
        >>> drop = state_nn.FeatureAlphaDropout(prob=0.5, channel_axis=1)
        >>> y = drop(jnp.ones((2, 3, 4, 4)))  # (batch, channels, H, W)
        >>> bool((y == y[:, :, :1, :1]).all())
        True
    """

    __module__ = "state_nn"
    _repr_attrs = ("prob", "channel_axis", "deterministic")

    def __init__(
        self, prob: float = 0.5, channel_axis: int = -1, name: str | None = None, *, deterministic: bool = False
    ) -> None:
        super().__init__(prob, name, deterministic=deterministic)
        axis = _check_axis("FeatureAlphaDropout", channel_axis)
        if axis == 0:
            raise ValueError(
                "FeatureAlphaDropout: channel_axis=0 is the batch axis; give the channel axis of the batched "
                "input, e.g. 1 for (batch, channels, ...) or -1 (the default) for (batch, ..., channels)."
            )
        self.channel_axis = axis

    def _mask_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Size 1 except along the batch axis 0 and the channel axis."""
        where = f"FeatureAlphaDropout(channel_axis={self.channel_axis})"
        if len(shape) < 2:
            raise ValueError(f"{where}: expected a batched input (batch, ..., channels) of 2+ axes, got shape {shape}.")
        if not -len(shape) < self.channel_axis < len(shape):
            raise ValueError(
                f"{where}: the input of shape {shape} has no such channel axis apart from the batch axis 0; "
                f"give channel_axis in [1, {len(shape) - 1}] or [{1 - len(shape)}, -1]."
            )
        channel = self.channel_axis % len(shape)
        return tuple(n if i in (0, channel) else 1 for i, n in enumerate(shape))


class DropoutFixed(_KeepProbDropout):
    """Dropout whose mask is drawn once, in ``init_state``, and reused by every call until the next draw.

    Spiking networks run many time steps per training example; the same units
    should be dropped at all of them, so the mask lives in a ``ShortTermState``
    (``mask``) of shape ``(batch_size, *in_size)`` (or ``in_size`` without a
    batch) instead of being redrawn per call. ``init_state`` / ``reset_state``
    (or ``init_all_states`` / ``reset_all_states`` of the model) draw a new one;
    kept entries are scaled by ``1 / prob``.

    Args:
        in_size: the shape of one input without the batch axis (an int or a
            tuple of ints); also the layer's ``out_size``.
        prob: the *keep* probability, in ``(0, 1]``, as in brainstate.
        name: an optional name for the layer.
        deterministic: start in evaluation mode (see ``Dropout1d``).

    Example:
        >>> import jax.numpy as jnp
        >>> import state_nn, state_random
        >>> state_random.seed(0)
        >>> drop = state_nn.DropoutFixed(in_size=4, prob=0.5)
        >>> drop.init_state(batch_size=2)
        >>> drop.mask.value.shape
        (2, 4)
        >>> first, second = drop(jnp.ones((2, 4))), drop(3 * jnp.ones((2, 4)))
        >>> bool((3 * first == second).all())  # the same entries are dropped at every call
        True
    """

    __module__ = "state_nn"

    def __init__(
        self, in_size: int | tuple[int, ...], prob: float = 0.5, name: str | None = None, *, deterministic: bool = False
    ) -> None:
        super().__init__(prob, name, deterministic)
        if in_size is None:
            raise TypeError("DropoutFixed: in_size (the shape of one input without the batch axis) is required.")
        self.in_size = in_size
        self.out_size = in_size

    def _draw(self, batch_size: Any) -> jax.Array:
        """A new keep mask of shape ``(batch_size, *in_size)`` (``in_size`` for ``batch_size=None``)."""
        if batch_size is not None and (not _is_int(batch_size) or batch_size < 1):
            raise ValueError(f"DropoutFixed: batch_size must be a positive int or None, got {batch_size!r}.")
        in_size = self.in_size
        assert in_size is not None  # set by __init__; Module declares it optional
        shape = in_size if batch_size is None else (int(batch_size), *in_size)
        if self.prob == 1.0:
            return jnp.ones(shape, dtype=bool)  # nothing to drop: no random draw
        return state_random.bernoulli(self.prob, shape)

    def init_state(self, batch_size: int | None = None, **kwargs: Any) -> None:
        """Draw the mask into a new ``mask`` State, of shape ``(batch_size, *in_size)`` or ``in_size``.

        Args:
            batch_size: the batch size of the inputs to come; ``None`` for unbatched inputs.
            **kwargs: other ``init_all_states`` arguments (ignored).

        Example:
            >>> import state_nn
            >>> drop = state_nn.DropoutFixed(in_size=(3, 2))
            >>> drop.init_state()
            >>> drop.mask.value.shape
            (3, 2)
        """
        self.mask = ShortTermState(self._draw(batch_size))

    def reset_state(self, batch_size: int | None = None, **kwargs: Any) -> None:
        """Draw a new mask, of the current mask's shape unless ``batch_size`` is given.

        Args:
            batch_size: a new batch size; ``None`` keeps the mask's shape (or, before
                ``init_state``, makes an unbatched mask).
            **kwargs: other ``reset_all_states`` arguments (ignored).

        Example:
            >>> import state_nn, state_random
            >>> state_random.seed(1)
            >>> drop = state_nn.DropoutFixed(in_size=100, prob=0.5)
            >>> drop.init_state(batch_size=2)
            >>> before = drop.mask.value
            >>> drop.reset_state()
            >>> drop.mask.value.shape, bool((drop.mask.value == before).all())
            ((2, 100), False)
        """
        mask = getattr(self, "mask", None)
        if batch_size is None and mask is not None and mask.value.ndim > len(self.in_size or ()):
            batch_size = mask.value.shape[0]
        new = self._draw(batch_size)
        if mask is not None and mask.value.shape == new.shape:
            mask.value = new
        else:
            self.mask = ShortTermState(new)

    def _apply(self, x: jax.Array, mask_shape: tuple[int, ...]) -> jax.Array:
        mask = getattr(self, "mask", None)
        if mask is None:
            raise ValueError(
                f"DropoutFixed: no mask for the input of shape {x.shape} yet; call init_state(batch_size="
                f"{x.shape[0] if x.ndim > len(self.in_size or ()) else None}) (or the model's init_all_states) first."
            )
        if mask.value.shape != x.shape:
            raise ValueError(
                f"DropoutFixed: the input has shape {x.shape} but the mask was drawn for shape {mask.value.shape}; "
                "call init_state(batch_size=...) (or reset_state(batch_size=...)) with the input's batch size."
            )
        return _scaled(x, mask.value, self.prob)
