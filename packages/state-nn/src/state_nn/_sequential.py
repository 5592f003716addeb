"""``Sequential`` (layers applied one after another) and the ``ElementWiseBlock`` marker."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ._module import Module, _is_int
from ._module_display import _Label

__all__ = ["ElementWiseBlock", "Sequential"]


class ElementWiseBlock(Module):
    """Base class of layers that act element by element, so their output has their input's shape.

    It adds no behaviour: ``Sequential`` uses it to carry the size of the previous
    layer through such a layer (``Dropout`` is one). Subclass it for your own
    activation-like layers.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import state_nn
        >>> class ReLU(state_nn.ElementWiseBlock):
        ...     def update(self, x):
        ...         return jax.nn.relu(x)
        >>> net = state_nn.Sequential(state_nn.Linear(2, 3), ReLU())
        >>> net.out_size
        (3,)
        >>> ReLU()(jnp.array([-1., 2.]))
        Array([0., 2.], dtype=float32)
    """

    __module__ = "state_nn"


def _check_layer(layer: Any, where: str) -> None:
    if not callable(layer):
        raise TypeError(
            f"Sequential: {where} is a {type(layer).__name__}, which is not callable; give a "
            "Module or a function of one argument."
        )


def _chain_sizes(layers: list[Any]) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """``(in_size, out_size)`` of a chain; raises if two known neighbouring sizes disagree.

    A plain function or an ``ElementWiseBlock`` keeps the size it is given; any
    other Module produces its ``out_size`` (``None`` when unknown).
    """
    first_in = None
    size = None
    for i, layer in enumerate(layers):
        if not isinstance(layer, Module) or isinstance(layer, ElementWiseBlock):
            continue
        if i == 0:
            first_in = layer.in_size
        elif size is not None and layer.in_size is not None and layer.in_size != size:
            raise ValueError(
                f"Sequential: layer {i} ({type(layer).__name__}) expects in_size {layer.in_size}, but "
                f"the layers before it produce out_size {size}; make the sizes match."
            )
        size = layer.out_size
    return first_in, size


class Sequential(Module):
    """Apply layers one after another: ``Sequential(a, b, c)(x) == c(b(a(x)))``.

    Layers may be Modules or plain functions (such as ``jax.nn.relu``). ``a >> b``
    builds ``Sequential(a, b)`` (a ``Sequential`` on the left is extended into a
    new one). ``in_size`` / ``out_size`` are taken from the layers, and
    neighbouring layers whose sizes are both known must agree. Indexing with an
    int gives a layer; a slice or a list of indices gives a new ``Sequential``
    sharing those layers (and their states).

    Args:
        *layers: the layers, in the order they are applied: Modules or plain callables.
        name: an optional name for the module.

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
        >>> net.in_size, net.out_size
        ((2,), (1,))
        >>> head = net[:2]
        >>> type(head).__name__, head.out_size
        ('Sequential', (3,))
        >>> composed = state_nn.Linear(2, 3) >> jax.nn.relu >> state_nn.Linear(3, 4)
        >>> len(composed), composed.out_size
        (3, (4,))
    """

    __module__ = "state_nn"

    def __init__(self, *layers: Callable[..., Any], name: str | None = None) -> None:
        super().__init__(name=name)
        for i, layer in enumerate(layers):
            _check_layer(layer, f"layer {i}")
        layers_list = list(layers)
        self._in_size, self._out_size = _chain_sizes(layers_list)
        self.layers = layers_list

    @classmethod
    def _compose(cls, left: Callable[..., Any], right: Callable[..., Any]) -> Sequential:
        # An unnamed plain Sequential on the left is flattened, so ``a >> b >> c``
        # has three layers rather than nested pairs.
        if type(left) is Sequential and left.name is None:
            return cls(*left.layers, right)
        return cls(left, right)

    def _set_layers(self, layers: list[Any]) -> None:
        # Check the whole new chain before changing anything.
        self._in_size, self._out_size = _chain_sizes(layers)
        self.layers[:] = layers

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Callable[..., Any]]:
        return iter(self.layers)

    def __getitem__(self, index: Any) -> Any:
        if _is_int(index):
            n = len(self.layers)
            if not -n <= index < n:
                raise IndexError(f"Sequential index {index} is out of range for {n} layer(s).")
            return self.layers[index]
        if isinstance(index, slice):
            return Sequential(*self.layers[index])
        if isinstance(index, (list, tuple)) and all(_is_int(i) for i in index):
            return Sequential(*[self[i] for i in index])
        raise TypeError(f"Sequential indices must be an int, a slice or a list of ints, got {type(index).__name__}.")

    def append(self, layer: Callable[..., Any]) -> Sequential:
        """Add ``layer`` at the end; returns ``self``.

        Args:
            layer: a Module or a plain callable.

        Example:
            >>> import jax, jax.numpy as jnp
            >>> import state_nn
            >>> net = state_nn.Sequential(state_nn.Linear(2, 3))
            >>> _ = net.append(jax.nn.relu)
            >>> len(net), net.out_size
            (2, (3,))
        """
        _check_layer(layer, "the appended layer")
        self._set_layers([*self.layers, layer])
        return self

    def extend(self, layers: Iterable[Callable[..., Any]]) -> Sequential:
        """Add every layer of ``layers`` at the end, in order; returns ``self``.

        Args:
            layers: Modules or plain callables, in order.

        Example:
            >>> import jax
            >>> import state_nn
            >>> net = state_nn.Sequential(state_nn.Linear(2, 3))
            >>> _ = net.extend([jax.nn.relu, state_nn.Linear(3, 5)])
            >>> len(net), net.out_size
            (3, (5,))
        """
        new = list(layers)
        for i, layer in enumerate(new):
            _check_layer(layer, f"layer {i} of the extension")
        self._set_layers(self.layers + new)
        return self

    def insert(self, index: int, layer: Callable[..., Any]) -> Sequential:
        """Insert ``layer`` before position ``index`` (as ``list.insert``); returns ``self``.

        Args:
            index: the position to insert before, as in ``list.insert``.
            layer: a Module or a plain callable.

        Example:
            >>> import jax, jax.numpy as jnp
            >>> import state_nn
            >>> net = state_nn.Sequential(state_nn.Linear(2, 3), state_nn.Linear(3, 1))
            >>> _ = net.insert(1, jax.nn.relu)
            >>> [getattr(layer, '__name__', type(layer).__name__) for layer in net]
            ['Linear', 'relu', 'Linear']
        """
        if not _is_int(index):
            raise TypeError(f"Sequential.insert: index must be an int, got {type(index).__name__}.")
        _check_layer(layer, "the inserted layer")
        new = list(self.layers)
        new.insert(index, layer)
        self._set_layers(new)
        return self

    def update(self, x: Any) -> Any:
        """Feed ``x`` through every layer in order.

        Args:
            x: the input of the first layer.

        Example:
            >>> import state_nn
            >>> state_nn.Sequential(lambda x: x + 1, lambda x: x * 10)(1)
            20
        """
        for layer in self.layers:
            x = layer(x)
        return x

    def _display_fields(self) -> list[tuple[str, Any]]:
        # Every layer is shown, in order; a function layer by its name.
        fields = [f for f in super()._display_fields() if f[0] != "layers"]
        layers = [layer if isinstance(layer, Module) else _Label(layer) for layer in self.layers]
        return [*fields, ("layers", layers)]
