"""``StatefulMapping``: the typed wrapper ``vmap2`` and ``pmap2`` return, over a ``MappingStrategy``."""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, Generic

import jax

from state_core import State, StatefulFunction

from ._mapping import MappingStrategy
from ._typing import P, R

__all__ = ["StatefulMapping"]


class StatefulMapping(StatefulFunction, Generic[P, R]):
    """Map a function that reads and writes States over an axis, with a cached compiled program.

    This is the strategy behind ``vmap2`` and ``pmap2``. On the first call with a
    new argument signature it traces ``fun`` once at per-lane shapes, discovers
    the states it touches, decides each state's mapped axis, and builds
    ``mapping_fn(pure_fn, in_axes=..., out_axes=..., axis_name=..., axis_size=...)``
    (wrapped in ``jax.jit`` unless ``mapping_fn`` already compiles, as ``jax.pmap``
    does). Later calls with the same signature only gather the state values, run
    that cached program once and write the results back. A mapping built again for
    every call (``vmap2(f)(x)`` in a loop) finds the program of the first one.

    Args:
        fun: the function (or Module, or bound method) to map.
        in_axes: as in ``jax.vmap``: an int, None, or a tuple with one entry per
            positional argument. Keyword arguments follow ``keyword_axis``.
        out_axes: as in ``jax.vmap``, for the return value.
        state_in_axes: which states are mapped on the way in: ``{axis: filter}``
            (``axis`` may be None = broadcast), a single filter (= ``{0: filter}``),
            a State, a list of States, None, or rules already parsed
            (``parse_state_rules``). The first matching entry wins. States no
            entry claims are broadcast. Only the parsed rules are kept;
            ``state_in_axes`` / ``state_out_axes`` read them back as a dict.
        state_out_axes: the same, for the new values of written states (and of
            states the function creates).
        unexpected_out_state_mapping: what to do with a written state that no
            ``state_out_axes`` entry covers and whose new value differs across
            lanes: ``'auto'`` (the default, as in brainstate) or ``'ignore'``
            (stack it silently), ``'warn'`` (warn, then stack it) or ``'raise'``
            (error naming the state). A stacked state goes out on the axis it came
            in on, else on axis 0, and later calls feed its stacked value per lane,
            so it keeps its shape. Under ``'auto'`` only, a state that no rule
            names, that the function reads and writes per lane and whose leading
            size is already the mapped size is a per-lane buffer: it is fed one
            slice per lane from the first call on (the function is traced once
            more to learn this), so it keeps its shape instead of gaining a second
            axis. A written state whose new value is the same on every lane is
            written back as is.
        static_argnums: positions of arguments that are compile-time constants.
        static_argnames: names of arguments that are compile-time constants.
        axis_size: the size of the mapped axis when no argument or state gives it.
        axis_name: the name of the mapped axis, for collectives such as ``psum``.
        name: a label for messages.
        mapping_fn: the mapping primitive (``jax.vmap`` by default, or ``jax.pmap``
            or any function with that calling convention).
        mapping_kwargs: extra keyword arguments for ``mapping_fn``.
        keyword_axis: the axis every keyword argument is mapped over: 0 (the
            default, as in ``jax.vmap``) or None to pass keyword arguments
            unmapped, the same value to every lane (``state_nn.Map`` does this).
        donate_states: update the states the function writes in place when nothing
            but the State refers to the old value (the default); ``False`` always
            allocates new buffers.
        cache_size: how many call signatures to keep compiled, as in
            ``StatefulFunction`` (default 64, shared with equal mappings of the same
            function; a mapping with its own size keeps its programs to itself).
        donate_argnums: positional arguments whose buffers ``mapping_fn`` may reuse,
            passed to it as its ``donate_argnums`` (only for a mapping function that
            takes them, such as ``jax.pmap``; ``pmap2`` passes its own).
        max_axis_size: returns the largest mapped size allowed, asked at each trace
            (``pmap2`` passes its device count); a larger size raises ``ValueError``.
            None (the default): no limit.
        transform: how messages name this transformation and its calls
            (``StatefulMapping: ...``, ``StatefulMapping(step): ...``; ``vmap2`` and
            ``pmap2`` pass their own names).
        strategy: a ``MappingStrategy`` (or a subclass's) built already, holding every
            option above but ``name`` and ``cache_size``, which are then not given
            beside it.

    States that the function reads, that no rule claims and that split across
    lanes (a ``state_random.RandomState`` holding a single key) give each lane its
    own value, split inside the compiled program; afterwards the state holds a
    fresh key. States the function creates come out with a mapped axis when their
    value differs across lanes (or as ``state_out_axes`` says).

    Example:
        >>> import jax.numpy as jnp
        >>> from state_core import ShortTermState
        >>> from state_core.filter import OfType
        >>> from state_transform import StatefulMapping
        >>> count = ShortTermState(jnp.zeros(3))
        >>> def bump(x):
        ...     count.value = count.value + x
        ...     return count.value
        >>> f = StatefulMapping(bump, state_in_axes={0: OfType(ShortTermState)},
        ...                     state_out_axes={0: OfType(ShortTermState)})
        >>> f(jnp.array([1., 2., 3.]))
        Array([1., 2., 3.], dtype=float32)
        >>> count.value
        Array([1., 2., 3.], dtype=float32)
    """

    __module__ = "state_transform"
    strategy: MappingStrategy

    def __init__(
        self,
        fun: Callable[P, R],
        in_axes: Any = 0,
        out_axes: Any = 0,
        state_in_axes: Any = None,
        state_out_axes: Any = None,
        unexpected_out_state_mapping: str = "auto",
        static_argnums: int | Iterable[int] = (),
        static_argnames: str | Iterable[str] = (),
        axis_size: int | None = None,
        axis_name: Hashable | None = None,
        name: str | None = None,
        mapping_fn: Callable[..., Any] = jax.vmap,
        mapping_kwargs: dict[str, Any] | None = None,
        *,
        keyword_axis: int | None = 0,
        donate_states: bool = True,
        cache_size: int | None = None,
        donate_argnums: int | Iterable[int] = (),
        max_axis_size: Callable[[], int] | None = None,
        transform: str = "StatefulMapping",
        strategy: MappingStrategy | None = None,
    ) -> None:
        if isinstance(fun, State):
            raise TypeError("StatefulMapping maps a callable, not a State; read the state inside a function.")
        if strategy is None:
            nums: Any = static_argnums  # (the strategy normalizes both, and names a bad one)
            names: Any = static_argnames
            strategy = MappingStrategy(
                static_argnums=nums,
                static_argnames=names,
                donate_states=donate_states,
                in_axes=in_axes,
                out_axes=out_axes,
                in_rules=state_in_axes,
                out_rules=state_out_axes,
                unexpected_out_state_mapping=unexpected_out_state_mapping,
                axis_size=axis_size,
                axis_name=axis_name,
                mapping_fn=mapping_fn,
                mapping_kwargs=mapping_kwargs or {},
                keyword_axis=keyword_axis,
                donate_argnums=donate_argnums,
                max_axis_size=max_axis_size,
                transform=transform,
            )
        else:
            given = (
                in_axes,
                out_axes,
                state_in_axes,
                state_out_axes,
                unexpected_out_state_mapping,
                static_argnums,
                static_argnames,
                axis_size,
                axis_name,
                mapping_fn,
                mapping_kwargs,
                keyword_axis,
                donate_states,
                donate_argnums,
                max_axis_size,
                transform,
            )
            # (Left at their defaults the options are the very default objects: one C-level pass
            # settles the common case, a vmap2 built inline at every step.)
            if not all(map(operator.is_, given, _DEFAULTS)) and any(
                not _is_default(value, default) for value, default in zip(given, _DEFAULTS, strict=True)
            ):
                raise TypeError(
                    "StatefulMapping: give the mapping options to the strategy (its fields), not beside strategy=."
                )
            if not isinstance(strategy, MappingStrategy):
                raise TypeError(f"StatefulMapping: strategy must be a MappingStrategy, got {type(strategy).__name__}.")
        super().__init__(fun, name=name, cache_size=cache_size, strategy=strategy)

    if TYPE_CHECKING:  # the call takes what `fun` takes; the result is `fun`'s, mapped

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    @property
    def origin_fun(self) -> Callable[..., Any]:
        """The function (or Module, or bound method) mapped."""
        return self.fun

    @property
    def in_axes(self) -> Any:
        """The mapped axis of each positional argument, as given."""
        return self.strategy.in_axes

    @property
    def out_axes(self) -> Any:
        """Where the mapped axis goes in the return value, as given."""
        return self.strategy.out_axes

    @property
    def state_in_axes(self) -> dict[Any, Any]:
        """``{axis: filter}``: the ``state_in_axes`` rules, in priority order (the first match wins)."""
        return self.strategy.in_rules.as_dict()

    @property
    def state_out_axes(self) -> dict[Any, Any]:
        """``{axis: filter}``: the ``state_out_axes`` rules, in priority order (the first match wins)."""
        return self.strategy.out_rules.as_dict()

    @property
    def unexpected_out_state_mapping(self) -> str:
        """What happens to an undeclared written state that differs across lanes (``'auto'`` ...)."""
        return self.strategy.unexpected_out_state_mapping

    @property
    def axis_size(self) -> int | None:
        """The mapped size given for when no argument or state gives it (None: not given)."""
        return self.strategy.axis_size

    @property
    def axis_name(self) -> Hashable | None:
        """The name of the mapped axis, for collectives (None: unnamed)."""
        return self.strategy.axis_name

    @property
    def mapping_fn(self) -> Callable[..., Any]:
        """The mapping primitive (``jax.vmap``, ``jax.pmap`` or one with their calling convention)."""
        return self.strategy.mapping_fn

    @property
    def mapping_kwargs(self) -> dict[str, Any]:
        """The extra keyword arguments ``mapping_fn`` is called with."""
        return dict(self.strategy.mapping_kwargs)

    @property
    def keyword_axis(self) -> int | None:
        """The axis every keyword argument is mapped over (None: passed unmapped to every lane)."""
        return self.strategy.keyword_axis

    # ------------------------------------------------------------------ introspection
    def get_jaxpr_by_cache(self, key: Hashable) -> Any:
        """The MAPPED program traced for ``key``: batched arguments first, then the state values.

        Its outputs are the mapped return value and the new values of the written
        states (per-lane jaxpr: ``get_traced_call(key).closed_jaxpr``).

        Args:
            key: the cache key of a call already traced (``get_arg_cache_key``).

        Raises:
            ValueError: no program is cached for ``key``.

        Example:
            >>> import jax.numpy as jnp
            >>> from state_core import State
            >>> from state_transform import vmap2
            >>> s = State(jnp.array(1.0))
            >>> f = vmap2(lambda x: x + s.value)
            >>> x = jnp.array([1.0, 2.0])
            >>> _ = f(x)
            >>> str(f.get_jaxpr_by_cache(f.get_arg_cache_key(x))).startswith('{ lambda ; a:f32[2] b:f32[].')
            True
        """
        entry = self._entry(key)
        trace, info = entry.trace, entry.info
        program, _ = self.strategy.mapped_program(trace, info)
        n_dyn = len(info.arg_avals)
        state_defs = [jax.tree.structure(s._value) for s in trace.in_states]
        state_avals = [
            jax.core.ShapedArray(shape, dtype, weak_type=weak)
            for sigs in trace.in_state_avals
            for shape, dtype, weak in sigs
        ]

        def mapped(*flat: Any) -> tuple[Any, list[Any]]:
            values = []
            i = n_dyn
            for treedef in state_defs:
                n = treedef.num_leaves  # type: ignore[attr-defined]  # jaxlib PyTreeDef stub not found
                values.append(jax.tree.unflatten(treedef, flat[i : i + n]))
                i += n
            rw, ro = trace.split_values(values)
            return program(rw, ro, *flat[:n_dyn])

        return jax.make_jaxpr(mapped)(*info.arg_avals, *state_avals)

    def __repr__(self) -> str:
        return (
            f"StatefulMapping({self.name}, in_axes={self.in_axes!r}, out_axes={self.out_axes!r}, "
            f"state_in_axes={self.state_in_axes!r}, state_out_axes={self.state_out_axes!r}, "
            f"axis_name={self.axis_name!r}, axis_size={self.axis_size!r})"
        )


# The defaults of StatefulMapping's options, in the order its __init__ checks them beside strategy=.
_DEFAULTS = (0, 0, None, None, "auto", (), (), None, None, jax.vmap, None, 0, True, (), None, "StatefulMapping")


def _is_default(value: Any, default: Any) -> bool:
    """Whether an option was left at its default (compared without asking arrays for truth)."""
    return value is default or (type(value) is type(default) and value == default)
