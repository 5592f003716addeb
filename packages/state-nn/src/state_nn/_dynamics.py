"""``Dynamics``: the base class of neuron and synapse models (brainstate's ``brainstate.nn.Dynamics``)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np

from state_core import State

from ._module import Module

__all__ = [
    "Dynamics",
    "Prefetch",
    "receive_update_output",
    "not_receive_update_output",
    "receive_update_input",
    "not_receive_update_input",
]

T = TypeVar("T")

# Markers set on hook objects by the decorators below (brainstate's attribute names).
_RECEIVES_INPUT = "_receive_update_input"
_SKIPS_OUTPUT = "_not_receive_update_output"


def _population_shape(in_size: Any) -> tuple[int, ...]:
    """``in_size`` as a non-empty tuple of non-negative ints (an int means a 1-tuple)."""
    if isinstance(in_size, (int, np.integer)) and not isinstance(in_size, bool):
        dims: tuple[Any, ...] = (in_size,)
    elif isinstance(in_size, (tuple, list)) and in_size:
        dims = tuple(in_size)
    else:
        raise TypeError(
            f"Dynamics: in_size must be an int or a non-empty tuple of ints (the population's shape), "
            f"got {type(in_size).__name__} {in_size!r}."
        )
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise ValueError(f"Dynamics: in_size must hold non-negative ints, got {in_size!r}.")
    return tuple(int(d) for d in dims)


class Dynamics(Module):
    """Base class of dynamical models: a population of units whose states evolve step by step.

    A subclass creates its states (membrane potential, gating variables ...) with
    the population's shape ``varshape`` in ``init_state(batch_size=None)``, resets
    them in ``reset_state(batch_size=None)``, and advances them by one time step
    in ``update(...)``, usually with ``exp_euler_step`` and the step ``dt`` of
    ``state_core.environ``. Calling the model runs the registered
    *before-update* hooks, then ``update``, then the *after-update* hooks (which
    receive ``update``'s result unless marked ``not_receive_update_output``).

    Inputs can also be registered on the model and summed inside ``update``:
    ``add_current_input`` / ``sum_current_inputs`` (currents) and
    ``add_delta_input`` / ``sum_delta_inputs`` (instantaneous changes). A
    callable input is called with ``sum_*``'s extra arguments at every step; an
    array is used once and then removed.

    Args:
        in_size: the population's shape, an int (``10``) or a tuple of ints
            (``(10, 10)``); stored as a tuple in ``in_size``, ``out_size`` and
            ``varshape``.
        name: an optional name.

    Raises:
        TypeError: if ``in_size`` is neither an int nor a non-empty tuple.
        ValueError: if it holds anything but non-negative ints.

    Example:
        >>> import jax.numpy as jnp
        >>> import state_core, state_nn
        >>> from state_core import environ
        >>> class Leaky(state_nn.Dynamics):
        ...     def __init__(self, n, tau=10.0):
        ...         super().__init__(n)
        ...         self.tau = tau
        ...     def init_state(self, batch_size=None, **kwargs):
        ...         shape = self.varshape if batch_size is None else (batch_size, *self.varshape)
        ...         self.v = state_core.HiddenState(jnp.zeros(shape))
        ...     def update(self, current):
        ...         self.v.value = state_nn.exp_euler_step(lambda v: (-v + current) / self.tau, self.v.value)
        ...         return self.v.value
        >>> cell = Leaky(3)
        >>> cell.init_all_states()
        >>> cell.varshape, cell.out_size
        ((3,), (3,))
        >>> with environ.context(dt=0.1):
        ...     cell(1.0).shape
        (3,)
    """

    __module__ = "state_nn"

    # Class-level defaults: a subclass that skips ``Dynamics.__init__`` still works.
    _before_updates: dict[Hashable, Callable[..., Any]] | None = None
    _after_updates: dict[Hashable, Callable[..., Any]] | None = None
    _current_inputs: dict[str, Any] | None = None
    _delta_inputs: dict[str, Any] | None = None

    def __init__(self, in_size: int | tuple[int, ...], name: str | None = None) -> None:
        super().__init__(name=name)
        self.in_size = _population_shape(in_size)
        self.out_size = self.in_size

    @property
    def varshape(self) -> tuple[int, ...]:
        """The shape of the population's variables: ``in_size``.

        Raises:
            AttributeError: if ``Dynamics.__init__(in_size)`` did not run.

        Example:
            >>> import state_nn
            >>> state_nn.Dynamics((4, 5)).varshape
            (4, 5)
        """
        shape = self.in_size
        if shape is None:
            raise AttributeError(
                f"{type(self).__name__} has no varshape: call super().__init__(in_size) in its __init__."
            )
        return shape

    # ------------------------------------------------------------------ calling
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the before-update hooks, ``update(*args, **kwargs)``, then the after-update hooks."""
        if self._before_updates:
            for hook in self._before_updates.values():
                if getattr(hook, _RECEIVES_INPUT, False):
                    hook(*args, **kwargs)
                else:
                    hook()
        out = self.update(*args, **kwargs)
        if self._after_updates:
            for hook in self._after_updates.values():
                if getattr(hook, _SKIPS_OUTPUT, False):
                    hook()
                else:
                    hook(out)
        return out

    # ------------------------------------------------------------------ hooks
    @property
    def before_updates(self) -> dict[Hashable, Callable[..., Any]] | None:
        """The before-update hooks by key (``None`` while there are none)."""
        return self._before_updates

    @property
    def after_updates(self) -> dict[Hashable, Callable[..., Any]] | None:
        """The after-update hooks by key (``None`` while there are none)."""
        return self._after_updates

    def add_before_update(self, key: Hashable, fun: Callable[..., Any]) -> None:
        """Run ``fun()`` before every ``update`` (``fun(*args, **kwargs)`` if marked ``receive_update_input``).

        Args:
            key: a name for the hook, unique on this model.
            fun: the hook.

        Raises:
            KeyError: if ``key`` is taken.

        Example:
            >>> import state_nn
            >>> class Echo(state_nn.Dynamics):
            ...     def update(self, x):
            ...         return x
            >>> calls = []
            >>> echo = Echo(1)
            >>> echo.add_before_update('log', lambda: calls.append('before'))
            >>> echo.add_after_update('out', calls.append)
            >>> echo(5)
            5
            >>> calls
            ['before', 5]
        """
        if self._before_updates is None:
            self._before_updates = {}
        self._add_hook(self._before_updates, "before", key, fun)

    def add_after_update(self, key: Hashable, fun: Callable[..., Any]) -> None:
        """Run ``fun(output)`` after every ``update`` (``fun()`` if marked ``not_receive_update_output``).

        Args:
            key: a name for the hook, unique on this model.
            fun: the hook.

        Raises:
            KeyError: if ``key`` is taken.

        Example:
            >>> import state_nn
            >>> class Echo(state_nn.Dynamics):
            ...     def update(self, x):
            ...         return x
            >>> seen = []
            >>> echo = Echo(1)
            >>> echo.add_after_update('count', state_nn.not_receive_update_output(lambda: seen.append(1)))
            >>> _ = echo(3), echo(4)
            >>> seen
            [1, 1]
        """
        if self._after_updates is None:
            self._after_updates = {}
        self._add_hook(self._after_updates, "after", key, fun)

    def _add_hook(self, hooks: dict[Hashable, Any], when: str, key: Hashable, fun: Callable[..., Any]) -> None:
        if not callable(fun):
            raise TypeError(f"{type(self).__name__}.add_{when}_update: {key!r} must be callable, got {fun!r}.")
        if key in hooks:
            raise KeyError(f"{type(self).__name__}: an {when}-update hook named {key!r} is already registered.")
        hooks[key] = fun

    def get_before_update(self, key: Hashable) -> Callable[..., Any]:
        """The before-update hook registered as ``key``.

        Args:
            key: the name the hook was registered under (``add_before_update``).

        Raises:
            KeyError: if there is none.

        Example:
            >>> import state_nn
            >>> m = state_nn.Dynamics(1)
            >>> m.add_before_update('a', print)
            >>> m.get_before_update('a') is print, m.has_before_update('b')
            (True, False)
        """
        return self._get_hook(self._before_updates, "before", key)

    def get_after_update(self, key: Hashable) -> Callable[..., Any]:
        """The after-update hook registered as ``key``.

        Args:
            key: the name the hook was registered under (``add_after_update``).

        Raises:
            KeyError: if there is none.

        Example:
            >>> import state_nn
            >>> m = state_nn.Dynamics(1)
            >>> m.add_after_update('a', print)
            >>> m.get_after_update('a') is print, m.has_after_update('a')
            (True, True)
        """
        return self._get_hook(self._after_updates, "after", key)

    def _get_hook(self, hooks: dict[Hashable, Any] | None, when: str, key: Hashable) -> Callable[..., Any]:
        if not hooks or key not in hooks:
            raise KeyError(f"{type(self).__name__}: no {when}-update hook named {key!r}.")
        found: Callable[..., Any] = hooks[key]
        return found

    def has_before_update(self, key: Hashable) -> bool:
        """Whether a before-update hook is registered as ``key``.

        Args:
            key: the name to look up (as given to ``add_before_update``).

        Example:
            >>> import state_nn
            >>> state_nn.Dynamics(1).has_before_update('a')
            False
        """
        return bool(self._before_updates) and key in self._before_updates  # type: ignore[operator]

    def has_after_update(self, key: Hashable) -> bool:
        """Whether an after-update hook is registered as ``key``.

        Args:
            key: the name to look up (as given to ``add_after_update``).

        Example:
            >>> import state_nn
            >>> state_nn.Dynamics(1).has_after_update('a')
            False
        """
        return bool(self._after_updates) and key in self._after_updates  # type: ignore[operator]

    # ------------------------------------------------------------------ inputs
    @property
    def current_inputs(self) -> dict[str, Any] | None:
        """The registered current inputs by key (``None`` while there are none)."""
        return self._current_inputs

    @property
    def delta_inputs(self) -> dict[str, Any] | None:
        """The registered delta inputs by key (``None`` while there are none)."""
        return self._delta_inputs

    def add_current_input(self, key: str, inp: Any, label: str | None = None) -> None:
        """Register a current input: a callable called at each step, or an array used once.

        Args:
            key: a name for the input, unique on this model.
            inp: a callable (called with ``sum_current_inputs``'s extra arguments)
                or a value (added once, then removed).
            label: a group; ``sum_current_inputs(label=...)`` sums only that group.

        Raises:
            ValueError: if ``key`` (within ``label``) is taken by another input.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_nn
            >>> m = state_nn.Dynamics(2)
            >>> m.add_current_input('bias', lambda v: 0.5 * v)
            >>> m.add_current_input('pulse', jnp.ones(2))
            >>> m.sum_current_inputs(0.0, jnp.array([2.0, 4.0]))
            Array([2., 3.], dtype=float32)
            >>> list(m.current_inputs)  # the pulse was used up
            ['bias']
        """
        self._current_inputs = self._add_input(self._current_inputs, "current", key, inp, label)

    def add_delta_input(self, key: str, inp: Any, label: str | None = None) -> None:
        """Register a delta input (an instantaneous change of a variable), like ``add_current_input``.

        Delta inputs are summed by ``sum_delta_inputs``, separately from current
        inputs; a model adds them to a variable directly (a jump of the membrane
        potential), not to the current its equations integrate.

        Args:
            key: a name for the input, unique on this model (within ``label``).
            inp: a callable (called with ``sum_delta_inputs``'s extra arguments
                at every step) or a value (added once, then removed).
            label: a group; ``sum_delta_inputs(label=...)`` sums only that group.
                The input is stored under ``'label // key'``.

        Raises:
            ValueError: if ``key`` (within ``label``) is taken by another input.

        Example:
            >>> import state_nn
            >>> m = state_nn.Dynamics(1)
            >>> m.add_delta_input('kick', 2.0)
            >>> m.sum_delta_inputs(1.0), m.sum_delta_inputs(1.0)
            (3.0, 1.0)
        """
        self._delta_inputs = self._add_input(self._delta_inputs, "delta", key, inp, label)

    def _add_input(
        self, inputs: dict[str, Any] | None, kind: str, key: str, inp: Any, label: str | None
    ) -> dict[str, Any]:
        full_key = _labelled(key, label)
        inputs = {} if inputs is None else inputs
        if full_key in inputs and inputs[full_key] is not inp:
            raise ValueError(f"{type(self).__name__}: a {kind} input named {full_key!r} is already registered.")
        inputs[full_key] = inp
        return inputs

    def get_input(self, key: str) -> Any:
        """The current or delta input registered as ``key`` (with its ``'label // '`` prefix if labelled).

        Args:
            key: the stored name: ``key`` as registered, or ``'label // key'`` for
                an input registered with a ``label``.

        Raises:
            KeyError: if there is none.

        Example:
            >>> import state_nn
            >>> m = state_nn.Dynamics(1)
            >>> m.add_current_input('ext', 1.0, label='AMPA')
            >>> m.get_input('AMPA // ext')
            1.0
        """
        for inputs in (self._current_inputs, self._delta_inputs):
            if inputs is not None and key in inputs:
                return inputs[key]
        raise KeyError(f"{type(self).__name__}: no current or delta input named {key!r}.")

    def sum_current_inputs(self, init: Any, *args: Any, label: str | None = None, **kwargs: Any) -> Any:
        """``init`` plus every current input (callables get ``*args, **kwargs``; values are used once).

        Args:
            init: the value the inputs are added to (for example the external current).
            *args: passed to every callable input (for example the membrane potential).
            label: sum only the inputs registered with this label.
            **kwargs: passed to every callable input.

        Returns:
            The sum.

        Example:
            >>> import state_nn
            >>> m = state_nn.Dynamics(1)
            >>> m.add_current_input('a', 1.0, label='exc')
            >>> m.add_current_input('b', 10.0)
            >>> m.sum_current_inputs(0.0, label='exc'), m.sum_current_inputs(0.0)
            (1.0, 10.0)
        """
        return _sum_inputs(self._current_inputs, init, args, kwargs, label)

    def sum_delta_inputs(self, init: Any, *args: Any, label: str | None = None, **kwargs: Any) -> Any:
        """``init`` plus every delta input, like ``sum_current_inputs``.

        Args:
            init: the value the inputs are added to (for example the change the
                model's own equations produce this step).
            *args: passed to every callable input.
            label: sum only the inputs registered with this label; ``None`` sums
                every delta input.
            **kwargs: passed to every callable input.

        Returns:
            The sum; value inputs are removed once added.

        Example:
            >>> import state_nn
            >>> state_nn.Dynamics(1).sum_delta_inputs(2.0)
            2.0
        """
        return _sum_inputs(self._delta_inputs, init, args, kwargs, label)

    # ------------------------------------------------------------------ references
    def prefetch(self, item: str) -> Prefetch:
        """A reference to this model's attribute ``item``, which may not exist yet (it is looked up when called).

        Lets another model (a synapse, a readout) hold on to a variable that this
        one creates later, in ``init_state``.

        Args:
            item: the attribute's name (for example ``'V'``).

        Returns:
            A ``Prefetch``; calling it gives the attribute's current value.

        Example:
            >>> import jax.numpy as jnp
            >>> import state_core, state_nn
            >>> m = state_nn.Dynamics(2)
            >>> v = m.prefetch('V')
            >>> m.V = state_core.State(jnp.ones(2))
            >>> v()
            Array([1., 1.], dtype=float32)
        """
        return Prefetch(self, item)


def _labelled(key: str, label: str | None) -> str:
    return key if label is None else f"{label} // {key}"


def _sum_inputs(
    inputs: dict[str, Any] | None, init: Any, args: tuple[Any, ...], kwargs: dict[str, Any], label: str | None
) -> Any:
    if not inputs:
        return init
    prefix = None if label is None else f"{label} // "
    for key in tuple(inputs):
        if prefix is not None and not key.startswith(prefix):
            continue
        inp = inputs[key]
        if callable(inp):
            init = init + inp(*args, **kwargs)
        else:
            init = init + inp
            del inputs[key]  # a value is applied once
    return init


class Prefetch:
    """A reference to an attribute of a ``Dynamics`` model, looked up when called (``Dynamics.prefetch``).

    Calling it returns the attribute's value (a State's ``value``).

    Args:
        module: the model.
        item: the attribute's name.

    Example:
        >>> import state_nn
        >>> m = state_nn.Dynamics(1)
        >>> m.gain = 2.0
        >>> state_nn.Prefetch(m, 'gain')()
        2.0
    """

    __module__ = "state_nn"

    def __init__(self, module: Dynamics, item: str) -> None:
        self.module = module
        self.item = item

    def get_item(self) -> Any:
        """The attribute itself (a State stays a State).

        Raises:
            AttributeError: if the model has no such attribute (yet).

        Example:
            >>> import state_core, state_nn
            >>> m = state_nn.Dynamics(1)
            >>> m.V = state_core.State(0.0)
            >>> m.prefetch('V').get_item() is m.V
            True
        """
        if not hasattr(self.module, self.item):
            raise AttributeError(
                f"{type(self.module).__name__} has no attribute {self.item!r} (prefetched); create it, usually in "
                "init_state(), before calling the reference."
            )
        return getattr(self.module, self.item)

    def get_item_value(self) -> Any:
        """The attribute's value: a State's ``value``, anything else as it is.

        Raises:
            AttributeError: if the model has no such attribute (yet).

        Example:
            >>> import state_core, state_nn
            >>> m = state_nn.Dynamics(1)
            >>> m.V = state_core.State(-65.0)
            >>> m.prefetch('V').get_item_value()
            -65.0
        """
        item = self.get_item()
        return item.value if isinstance(item, State) else item

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.get_item_value()

    def __repr__(self) -> str:
        return f"Prefetch({type(self.module).__name__}, {self.item!r})"


def receive_update_output(hook: T) -> T:
    """Mark an after-update hook to be called with ``update``'s output (the default).

    Undoes ``not_receive_update_output``.

    Args:
        hook: the callable to mark (marked in place and returned, so this works
            as a decorator).

    Example:
        >>> import state_nn
        >>> class Echo(state_nn.Dynamics):
        ...     def update(self, x):
        ...         return x
        >>> seen = []
        >>> hook = state_nn.not_receive_update_output(lambda *out: seen.append(out))
        >>> echo = Echo(1)
        >>> echo.add_after_update('log', state_nn.receive_update_output(hook))
        >>> _ = echo(5)
        >>> seen
        [(5,)]
    """
    if hasattr(hook, _SKIPS_OUTPUT):
        delattr(hook, _SKIPS_OUTPUT)
    return hook


def not_receive_update_output(hook: T) -> T:
    """Mark an after-update hook to be called without arguments.

    Args:
        hook: the callable to mark (marked in place and returned, so this works
            as a decorator).

    Example:
        >>> import state_nn
        >>> class Echo(state_nn.Dynamics):
        ...     def update(self, x):
        ...         return x
        >>> ticks = []
        >>> echo = Echo(1)
        >>> echo.add_after_update('tick', state_nn.not_receive_update_output(lambda: ticks.append('tick')))
        >>> _ = echo(5)
        >>> ticks
        ['tick']
    """
    setattr(hook, _SKIPS_OUTPUT, True)
    return hook


def receive_update_input(hook: T) -> T:
    """Mark a before-update hook to be called with ``update``'s arguments.

    Args:
        hook: the callable to mark (marked in place and returned, so this works
            as a decorator); it is then called as ``hook(*args, **kwargs)`` with
            the arguments of the model's call.

    Example:
        >>> import state_nn
        >>> class Echo(state_nn.Dynamics):
        ...     def update(self, x):
        ...         return x
        >>> seen = []
        >>> echo = Echo(1)
        >>> echo.add_before_update('in', state_nn.receive_update_input(lambda x: seen.append(x)))
        >>> _ = echo(7)
        >>> seen
        [7]
    """
    setattr(hook, _RECEIVES_INPUT, True)
    return hook


def not_receive_update_input(hook: T) -> T:
    """Mark a before-update hook to be called without arguments (the default).

    Undoes ``receive_update_input``.

    Args:
        hook: the callable to mark (marked in place and returned, so this works
            as a decorator).

    Example:
        >>> import state_nn
        >>> class Echo(state_nn.Dynamics):
        ...     def update(self, x):
        ...         return x
        >>> seen = []
        >>> hook = state_nn.receive_update_input(lambda *args: seen.append(args))
        >>> echo = Echo(1)
        >>> echo.add_before_update('log', state_nn.not_receive_update_input(hook))
        >>> _ = echo(5)
        >>> seen
        [()]
    """
    if hasattr(hook, _RECEIVES_INPUT):
        delattr(hook, _RECEIVES_INPUT)
    return hook
