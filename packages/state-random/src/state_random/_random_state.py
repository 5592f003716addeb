"""``RandomState``: a ``State`` that holds a JAX PRNG key and draws from it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, TypeVar

import jax
import numpy as np
from jax.typing import ArrayLike

from state_core import State

from ._checks import check_count, check_draw_size, is_key
from ._continuous import ContinuousSamplers
from ._discrete import DiscreteSamplers
from ._special import SpecialSamplers
from ._uniform_normal import UniformNormalSamplers
from ._units import add_unit_support

__all__ = ["RandomState"]

_T = TypeVar("_T")

_ENTROPY = object()  # "seed me with fresh entropy when first needed"
_LOCK = threading.Lock()
_NO_MESH = jax.sharding.AbstractMesh((), ())  # the context of a lazy key's seeding: no mesh axes
_SEED_MIN, _SEED_MAX = -(2**63), 2**63 - 1

# Eager splits are read-modify-write on the key: two threads splitting the same
# state at once could both read K and hand out the same key. A lock per state
# would make RandomState uncopyable (locks cannot be deep-copied or pickled), so
# states share a small pool of locks picked by identity: uncontended acquisition
# costs ~50 ns against the ~10 us of the split itself.
_SPLIT_LOCKS = tuple(threading.Lock() for _ in range(64))

# An eager draw whose result holds at least this many bytes is waited for before its
# stream's key is stored (see ``RandomState._draw``). Results this large are the ones a
# device may fail to allocate; waiting costs them nothing but the overlap of their
# computation with the caller's next Python steps.
_WAIT_BYTES = 2**26

# mypy reads a property through its class as the getter; at run time it is the property.
_STATE_VALUE: property = State.value  # type: ignore[assignment]
_set_state_value: Callable[[State[Any], Any], None] = _STATE_VALUE.fset  # type: ignore[assignment]


@partial(jax.jit, static_argnums=1)
def _split_eager(key: jax.Array, n: int | None) -> tuple[jax.Array, jax.Array]:
    # One compiled dispatch instead of three eager ops (split, two gathers); the
    # same numbers as ``parts = jax.random.split(key, 2)`` -> ``parts[0], parts[1]``.
    parts = jax.random.split(key, 2 if n is None else n + 1)
    return parts[0], (parts[1] if n is None else parts[1:])


def _wait_for(out: Any) -> None:
    """Wait for the concrete arrays of a draw's result (a traced result has nothing to wait for)."""
    jax.block_until_ready([x for x in jax.tree.leaves(out) if not isinstance(x, jax.core.Tracer)])


def _key_at(keys: jax.Array, i: int) -> jax.Array:
    # ``keys[i]`` as the same two operations (slice, squeeze) without NumPy-style
    # indexing's Python, which is most of a draw's cost under an eager ``jax.vmap``.
    return jax.lax.squeeze(jax.lax.slice(keys, (i,), (i + 1,)), (0,))


def _split_lanes_traced(key: Any, num_lanes: int) -> tuple[jax.Array, jax.Array]:
    parts = jax.random.split(key, num_lanes + 1)
    return parts[1:], _key_at(jax.random.split(_key_at(parts, 0), 2), 1)


# One compiled dispatch instead of five eager ops (two splits, three slices): a mapped
# call's first run (and a one-shot ensemble initialisation) splits its keys eagerly.
_split_lanes_compiled = partial(jax.jit, static_argnums=1)(_split_lanes_traced)


def split_lanes(key: Any, num_lanes: int) -> tuple[jax.Array, jax.Array]:
    """The split of a single key for ``num_lanes`` mapped lanes: ``(lane_keys, next_key)``."""
    if isinstance(key, jax.core.Tracer):  # inside a program: its operations, not a nested call
        return _split_lanes_traced(key, num_lanes)
    return _split_lanes_compiled(key, num_lanes)


_ACCEPTED = (
    "None (fresh entropy), an int seed, a typed PRNG key from jax.random.key (a scalar "
    "key or an array of keys), or raw uint32 key data of shape (2,) (or (..., 2)) as "
    "made by jax.random.PRNGKey"
)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_int_scalar_array(x: Any) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and not is_key(x) and np.ndim(x) == 0 and np.issubdtype(np.dtype(dtype), np.integer)


def check_seed(seed: Any, fn: str) -> Any:
    """Validate a seed: ``None`` -> fresh entropy, an int, or a 0-d integer array (may be traced)."""
    if seed is None:
        return _ENTROPY
    if _is_int(seed):
        seed = int(seed)
        if not _SEED_MIN <= seed <= _SEED_MAX:
            raise ValueError(f"{fn}: `seed` must fit in a signed 64-bit integer, got {seed}.")
        return seed
    if _is_int_scalar_array(seed):
        return seed
    raise TypeError(
        f"{fn}: `seed` must be an int (or None for fresh entropy) or a PRNG key, got {type(seed).__name__} {seed!r}."
    )


def entropy_key() -> jax.Array:
    """A fresh threefry key made from 64 bits of operating-system entropy."""
    data = np.frombuffer(os.urandom(8), dtype=np.uint32).copy()
    # JAX's stub says Array, but it takes NumPy data (no device transfer here).
    key: jax.Array = jax.random.wrap_key_data(data)  # type: ignore[arg-type]
    return key


def key_from_seed(seed: Any) -> jax.Array:
    """``jax.random.key(seed)``, or an entropy key for the ``None`` marker of ``check_seed``."""
    if seed is _ENTROPY:
        return entropy_key()
    return jax.random.key(seed)


def as_key(value: Any, fn: str, name: str = "key", allow_batch: bool = True) -> jax.Array:
    """Return ``value`` as a typed key array, wrapping raw ``uint32[..., 2]`` key data.

    With ``allow_batch=False`` only a single (scalar) key is accepted.
    """
    if is_key(value):
        if not allow_batch and value.ndim != 0:
            raise ValueError(f"{fn}: `{name}` must be a single key, got a key array of shape {value.shape}.")
        return value
    dtype = getattr(value, "dtype", None)
    if (
        dtype is not None
        and hasattr(value, "shape")
        and not isinstance(value, (bool, int, float))
        and np.dtype(dtype) == np.uint32
    ):
        shape = tuple(value.shape)
        if len(shape) >= 1 and shape[-1] == 2 and (allow_batch or len(shape) == 1):
            return jax.random.wrap_key_data(value)
        wanted = "(2,) or (..., 2)" if allow_batch else "(2,)"
        raise ValueError(f"{fn}: raw uint32 key data for `{name}` must have shape {wanted}, got shape {shape}.")
    raise TypeError(
        f"{fn}: `{name}` must be a typed PRNG key (jax.random.key) or raw uint32 key data "
        f"(jax.random.PRNGKey), got {type(value).__name__} "
        f"{getattr(value, 'dtype', value)!r}."
    )


def key_from_seed_or_key(value: Any, fn: str, name: str = "seed_or_key") -> jax.Array:
    """The key for any seed form brainstate accepts: None, an int, a typed key or raw key data."""
    if value is None or _is_int(value) or _is_int_scalar_array(value):
        return key_from_seed(check_seed(value, fn))
    if getattr(value, "dtype", None) is not None and not isinstance(value, (bool, float)):
        return as_key(value, fn, name)
    raise TypeError(
        f"{fn}: `{name}` must be an int (or None for fresh entropy) or a PRNG key, got "
        f"{type(value).__name__} {value!r}."
    )


class RandomState(UniformNormalSamplers, ContinuousSamplers, SpecialSamplers, DiscreteSamplers, State[Any]):
    """A ``State`` holding a JAX PRNG key, with NumPy-style samplers as methods.

    Every draw splits the key: ``parts = jax.random.split(K, 2)``, the state keeps
    ``parts[0]`` and the sampler uses ``parts[1]``. All key reads and writes go
    through ``self.value``, so state-aware transformations (``StatefulFunction``,
    ``state_transform.jit``/``vmap2`` ...) trace them like any other state.

    Args:
        seed_or_key: ``None`` (fresh OS entropy), an int seed (the key is
            ``jax.random.key(seed)``), a typed key or key array, or raw ``uint32``
            key data of shape ``(2,)`` / ``(..., 2)`` (wrapped with
            ``jax.random.wrap_key_data``). Anything else is a ``TypeError``
            (wrong-shaped raw data: ``ValueError``).
        name: as for ``state_core.State``.
        tag: as for ``state_core.State``.
        strict: as for ``state_core.State``.
        **metadata: as for ``state_core.State``.

    Keys for ``None`` and int seeds are created lazily, on first use, so creating a
    RandomState (including the module-level ``DEFAULT``) never initialises the JAX
    backend.

    A RandomState may hold an *array* of keys (shape ``(B,)``); drawing from it
    directly is an error, but mapping transforms that declare its axis hand each
    lane one key. Assigning raw ``uint32[..., 2]`` key data to ``value`` (for
    example through ``StateDict.assign_values``) stores the typed key; any other
    value is refused at once.

    Splitting is atomic: threads drawing from one RandomState (such as the shared
    ``DEFAULT``) never receive the same key. The state's next key is stored only
    once a draw has returned, so a draw that raises leaves the key as it was.

    Example:
        >>> import jax
        >>> from state_random import RandomState
        >>> rng = RandomState(0)
        >>> x = rng.normal(size=3)
        >>> parts = jax.random.split(jax.random.key(0), 2)
        >>> bool((x == jax.random.normal(parts[1], (3,))).all())
        True
        >>> bool(rng.value == parts[0])
        True
        >>> rng
        RandomState(
          value=ShapedArray(key<fry>[])
        )
    """

    __module__ = "state_random"

    def __init__(
        self,
        seed_or_key: Any = None,
        name: str | None = None,
        tag: str | Iterable[str] | None = None,
        *,
        strict: bool = False,
        **metadata: Any,
    ) -> None:
        pending: Any = None
        fn = "RandomState"
        if seed_or_key is None:
            pending = _ENTROPY
        elif _is_int(seed_or_key):
            pending = check_seed(seed_or_key, fn)
        elif _is_int_scalar_array(seed_or_key):
            value = jax.random.key(seed_or_key)
        elif hasattr(seed_or_key, "dtype") and not isinstance(seed_or_key, (bool, float)):
            value = as_key(seed_or_key, fn, "seed_or_key")
        else:
            raise TypeError(
                f"{fn}: `seed_or_key` must be {_ACCEPTED}; got {type(seed_or_key).__name__} {seed_or_key!r}."
            )
        super().__init__(None if pending is not None else value, name, tag, strict=strict, **metadata)
        self._backup: Any = None
        if pending is not None:
            # Lazy key: ``_value`` is absent until first read (see ``__getattr__``).
            self.__dict__["_pending"] = pending
            del self.__dict__["_value"]

    # ------------------------------------------------------------------ lazy key
    def __getattr__(self, name: str) -> Any:
        # Only called for attributes that are missing: ``_value`` of a lazy state.
        if name == "_value" and "_pending" in self.__dict__:
            return self._materialize()
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _materialize(self) -> jax.Array:
        d = self.__dict__
        with _LOCK:
            if "_value" not in d:
                # Concrete even when first touched inside a trace (never a tracer), and
                # computed outside any mesh context: inside a shard_map traced under
                # ``jax.set_mesh`` the context's axes are manual, where JAX cannot run
                # the seeding eagerly.
                with jax.ensure_compile_time_eval(), jax.sharding.use_abstract_mesh(_NO_MESH):
                    d["_value"] = key_from_seed(d["_pending"])
            d.pop("_pending", None)
            return d["_value"]

    def _aval_repr(self) -> str:
        if "_value" not in self.__dict__:  # do not create the key just to print it
            return repr(jax.typeof(jax.eval_shape(lambda: jax.random.key(0))))
        return super()._aval_repr()

    # ------------------------------------------------------------------ value
    def _typed(self, value: Any) -> Any:
        # Raw key data would be accepted by State (same pytree structure) and fail
        # at the next draw; convert it here, or refuse it naming this state.
        if is_key(value):
            return value
        return as_key(value, self.describe(), "value")

    def _set_value(self, new_value: Any) -> None:
        _set_state_value(self, self._typed(new_value))

    value = property(
        _STATE_VALUE.fget,
        _set_value,
        doc="The key (a typed key or key array); raw ``uint32[..., 2]`` data is wrapped on assignment.",
    )

    def restore_value(self, value: Any) -> None:
        """Set the key without recording a write; raw ``uint32[..., 2]`` data is wrapped.

        Args:
            value: a typed key or key array, or raw ``uint32[..., 2]`` key data. Anything
                else is refused at once, with a message naming this state.

        Example:
            >>> import jax
            >>> from state_random import RandomState
            >>> rng = RandomState(0)
            >>> rng.restore_value(jax.random.PRNGKey(4))
            >>> bool(rng.value == jax.random.key(4))
            True
        """
        super().restore_value(self._typed(value))

    # ------------------------------------------------------------------ key handling
    def seed(self, seed_or_key: Any = None) -> None:
        """Reset the key: ``jax.random.key(seed)`` for an int, or install a given key.

        Unlike the module-level ``seed``, this does not touch NumPy's generator.

        Args:
            seed_or_key: ``None`` (fresh OS entropy), an int (or a 0-d integer array,
                which may be traced), a typed key or raw ``uint32[2]`` key data. Floats,
                strings and bools are a ``TypeError`` and leave the key unchanged.

        Example:
            >>> from state_random import RandomState
            >>> rng = RandomState()
            >>> rng.seed(7); a = rng.uniform(size=2)
            >>> rng.seed(7); b = rng.uniform(size=2)
            >>> bool((a == b).all())
            True
        """
        self.value = key_from_seed_or_key(seed_or_key, "seed", "seed")

    def get_key(self) -> jax.Array:
        """The current key (a typed key, or a key array), recording a read.

        Example:
            >>> import jax
            >>> from state_random import RandomState
            >>> bool(RandomState(3).get_key() == jax.random.key(3))
            True
        """
        return self.value

    def get_key_data(self) -> jax.Array:
        """The current key as raw ``uint32`` data (``jax.random.key_data``), shape ``(..., 2)``.

        Example:
            >>> from state_random import RandomState
            >>> data = RandomState(11).get_key_data()
            >>> data.shape, data.dtype
            ((2,), dtype('uint32'))
        """
        return jax.random.key_data(self.value)

    def set_key(self, key: ArrayLike | int) -> None:
        """Install ``key``: a typed key / key array, raw ``uint32[..., 2]`` data, or an int seed.

        Args:
            key: the key to install: a typed key or key array, raw ``uint32[..., 2]`` key
                data (wrapped), or an int seed (``jax.random.key(key)``).

        Example:
            >>> import jax
            >>> from state_random import RandomState
            >>> rng = RandomState(0)
            >>> rng.set_key(jax.random.PRNGKey(5))     # raw data is wrapped
            >>> bool(rng.get_key() == jax.random.key(5))
            True
        """
        if key is None:
            raise TypeError("set_key: `key` must be a PRNG key or an int seed, got None; use seed() for entropy.")
        self.value = key_from_seed_or_key(key, "set_key", "key")

    def backup_key(self) -> None:
        """Remember the current key so that ``restore_key()`` can return to it.

        Example:
            >>> from state_random import RandomState
            >>> rng = RandomState(0)
            >>> rng.backup_key()
            >>> a = rng.normal(size=2)
            >>> rng.restore_key()
            >>> bool((rng.normal(size=2) == a).all())
            True
        """
        if getattr(self, "_backup", None) is not None:
            raise ValueError(
                f"backup_key: {self.describe()} already holds a backed-up key; call "
                "restore_key() before backing up again."
            )
        self._backup = self.value

    def restore_key(self) -> None:
        """Return to the key saved by ``backup_key()`` (or ``split_key(backup=True)``).

        Example:
            >>> from state_random import RandomState
            >>> rng = RandomState(1)
            >>> k = rng.split_key(backup=True)
            >>> rng.restore_key()
            >>> bool(rng.split_key() == k)
            True
        """
        if getattr(self, "_backup", None) is None:
            raise ValueError(
                f"restore_key: {self.describe()} has no backed-up key; call backup_key() "
                "(or split_key(backup=True)) first."
            )
        self.value, self._backup = self._backup, None

    def split_key(self, n: int | None = None, backup: bool = False) -> jax.Array:
        """Advance the state and return one new key (``n=None``) or ``n`` new keys.

        ``parts = jax.random.split(K, 2)``: the state keeps ``parts[0]``, ``parts[1]``
        is returned; with ``n``: ``parts = split(K, n + 1)``, the state keeps
        ``parts[0]`` and ``parts[1:]`` is returned. The split is atomic across threads.

        Args:
            n: how many keys to return, an int ``>= 1`` (a key array of shape ``(n,)``);
                None: one key.
            backup: first save the current key for ``restore_key()``.

        Example:
            >>> import jax
            >>> from state_random import RandomState
            >>> rng = RandomState(0)
            >>> k = rng.split_key()
            >>> parts = jax.random.split(jax.random.key(0))
            >>> bool(k == parts[1]), bool(rng.value == parts[0])
            (True, True)
            >>> rng.split_key(3).shape
            (3,)
        """
        nbytes = 0
        if n is not None:
            n = check_count(n, "n", "split_key", minimum=1)
            nbytes = check_draw_size((n + 1, 2), np.uint32, "split_key", "`n`")
        if backup and getattr(self, "_backup", None) is not None:
            self.backup_key()  # raises: a backup is pending
        with _SPLIT_LOCKS[(id(self) >> 4) & 63]:
            key, keep, out = self._next_keys(n)
            if nbytes >= _WAIT_BYTES:
                _wait_for(out)  # as in _draw: a split that cannot be allocated fails here
            if backup:
                self._backup = key
            _set_state_value(self, keep)
        return out

    def _next_keys(self, n: int | None) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(K, keep, out)``: the current key, the key the state goes on with and the new key(s).

        Nothing is stored; the caller holds this state's split lock until it stores ``keep``.
        """
        key = self.value
        if key.ndim != 0:
            raise ValueError(
                f"split_key: {self.describe()} holds an array of keys of shape {key.shape}, "
                "not a single key. Draw inside a mapping transform that declares its axis "
                "(e.g. vmap2 with state_in_axes), or set a single key with set_key()."
            )
        if isinstance(key, jax.core.Tracer):
            parts = jax.random.split(key, 2 if n is None else n + 1)
            return key, _key_at(parts, 0), (_key_at(parts, 1) if n is None else parts[1:])
        keep, out = _split_eager(key, n)
        return key, keep, out

    def split_keys(self, n: int, backup: bool = False) -> jax.Array:
        """``n`` new keys (shape ``(n,)``); same as ``split_key(n, backup)``.

        Args:
            n: how many keys to return, an int ``>= 1``.
            backup: first save the current key for ``restore_key()``.

        Example:
            >>> from state_random import RandomState
            >>> RandomState(0).split_keys(4).shape
            (4,)
        """
        return self.split_key(check_count(n, "n", "split_keys", minimum=1), backup)

    def self_assign_multi_keys(self, n: int, backup: bool = True) -> None:
        """Replace the key by ``n`` keys split from it (shape ``(n,)``), for a mapping to hand out.

        Drawing directly from a state holding several keys is an error; a mapping
        transform that declares the state's axis gives each lane one.

        Args:
            n: how many keys, an int ``>= 1``.
            backup: save the single key for ``restore_key()`` (the default, as in
                brainstate).

        Example:
            >>> from state_random import RandomState
            >>> rng = RandomState(0)
            >>> rng.self_assign_multi_keys(4)
            >>> rng.value.shape
            (4,)
            >>> rng.restore_key(); rng.value.shape
            ()
        """
        n = check_count(n, "n", "self_assign_multi_keys", minimum=1)
        nbytes = check_draw_size((n, 2), np.uint32, "self_assign_multi_keys", "`n`")
        if backup and getattr(self, "_backup", None) is not None:
            self.backup_key()  # raises: a backup is pending
        with _SPLIT_LOCKS[(id(self) >> 4) & 63]:
            key = self.value
            if key.ndim != 0:
                raise ValueError(
                    f"self_assign_multi_keys: {self.describe()} already holds {key.shape[0]} keys; "
                    "restore_key() or set_key() a single key first."
                )
            keys = jax.random.split(key, n)
            if nbytes >= _WAIT_BYTES:
                _wait_for(keys)  # as in _draw: keys that cannot be allocated fail here
            if backup:
                self._backup = key
            _set_state_value(self, keys)

    def clone(self) -> RandomState:
        """An independent RandomState that starts from the same key.

        Example:
            >>> from state_random import RandomState
            >>> a = RandomState(1); b = a.clone()
            >>> bool((a.normal(size=2) == b.normal(size=2)).all())
            True
        """
        return RandomState(self.value)

    # ------------------------------------------------------------------ engine protocol
    def splits_across_lanes(self, value: Any) -> bool:
        """True for a single key: a mapping transformation gives every lane its own key.

        An array of keys (a user who pre-split) is mapped like any other state, by
        its declared axis.

        Args:
            value: the state's current value.

        Example:
            >>> import jax
            >>> from state_random import RandomState
            >>> rng = RandomState(0)
            >>> rng.splits_across_lanes(rng.value), rng.splits_across_lanes(jax.random.split(rng.value, 3))
            (True, False)
        """
        return is_key(value) and getattr(value, "ndim", None) == 0

    def split_across_lanes(self, value: Any, num_lanes: int) -> tuple[Any, Any]:
        """``(lane_keys, next_key)``: ``P = split(K, num_lanes + 1)``, lane ``i`` gets ``P[1 + i]``
        and the state continues with ``split(P[0], 2)[1]`` (see ``split_for_lanes``).

        Args:
            value: a single key (may be traced).
            num_lanes: the number of lanes.

        Example:
            >>> import jax
            >>> from state_random import RandomState
            >>> rng = RandomState(42)
            >>> lanes, nxt = rng.split_across_lanes(rng.value, 4)
            >>> lanes.shape, bool((lanes == jax.random.split(jax.random.key(42), 5)[1:]).all())
            ((4,), True)
        """
        return split_lanes(value, num_lanes)

    def handout_lock(self) -> Any:
        """The lock that makes every read-modify-write of this key atomic (eager draws and
        transformations alike), so two threads never draw with the same key.

        Example:
            >>> from state_random import RandomState
            >>> rng = RandomState(0)
            >>> rng.handout_lock() is rng.handout_lock()
            True
        """
        return _SPLIT_LOCKS[(id(self) >> 4) & 63]

    def _draw(self, key: Any, fn: str, shape: tuple[int, ...], dtype: Any, sample: Callable[[jax.Array], _T], /) -> _T:
        # Every sampler calls this last, after validating its arguments.
        nbytes = check_draw_size(shape, dtype, fn)
        if key is not None:
            return sample(
                jax.random.key(check_seed(key, fn)) if _is_int(key) else as_key(key, fn, "key", allow_batch=False)
            )
        with _SPLIT_LOCKS[(id(self) >> 4) & 63]:
            _, keep, use = self._next_keys(None)
            out = sample(use)
            if nbytes >= _WAIT_BYTES:
                # JAX dispatches eager work asynchronously: a result that cannot be
                # allocated (out of memory) raises only when it is used, after the key
                # would have moved. Waiting for large results, the ones that may fail,
                # raises here instead; small ones are not waited for (no cost).
                _wait_for(out)
            # Stored only once the draw is done: a draw that raises (out of memory,
            # an error while tracing) leaves the key where it was.
            _set_state_value(self, keep)
        return out


# Sampler methods are written once, on mixins; show them as RandomState methods.
for _name in dir(RandomState):
    _fn = getattr(RandomState, _name)
    if (
        not _name.startswith("_")
        and callable(_fn)
        and getattr(_fn, "__qualname__", "").split(".")[0].endswith("Samplers")
    ):
        _fn.__qualname__ = f"RandomState.{_name}"
del _name, _fn

# Quantities (brainunit) as sampler arguments, as brainstate's samplers take them.
add_unit_support(RandomState)
