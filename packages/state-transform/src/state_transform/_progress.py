"""Progress bars for compiled loops: a throttled ``jax.debug.callback`` driving tqdm."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["ProgressBar", "as_progress_bar"]

_INSTALL_HINT = (
    "progress_bar needs the optional dependency tqdm; install it with "
    "`pip install 'state-transform[progress]'` (or `pip install tqdm`), or drop progress_bar."
)


class ProgressBar:
    """How a loop reports progress: refresh interval, description and tqdm options.

    Pass ``progress_bar=True`` (defaults), an ``int`` (refresh every that many
    steps) or a ``ProgressBar`` to ``for_loop``, ``scan`` or ``fori_loop``. The
    bar is driven from inside the compiled loop by an ordered
    ``jax.debug.callback`` that fires only every ``freq`` steps, so a long loop
    pays for a few dozen host calls, not one per step.

    The label may follow the loop: ``desc=(format, fn)`` calls ``fn`` inside the
    loop, at every refresh, with ``{'i': step, 'carry': carry, 'y': y}`` (the
    0-based step, the loop carry after the step -- None for ``for_loop`` -- and the
    step's output); ``fn`` returns a dict of arrays, and the label becomes
    ``format.format(**that dict)`` (0-d arrays are formatted as Python numbers).

    Args:
        freq: steps between refreshes; ``None`` refreshes about ``count`` times per loop.
        desc: the bar's label: a string, or a ``(format string, fn)`` pair as above.
        count: the number of refreshes per loop when ``freq`` is ``None`` (``None``: 20).
        **tqdm_kwargs: passed to ``tqdm.tqdm`` (``leave``, ``file``, ``ncols``, ...).

    Raises:
        TypeError: ``desc`` is neither a string nor a ``(str, callable)`` pair.
        ValueError: ``desc`` is a sequence of another length; a bad ``freq`` / ``count``.

    Example:
        >>> import io
        >>> import jax.numpy as jnp
        >>> from state_core import State
        >>> from state_transform import ProgressBar, for_loop
        >>> v = State(jnp.zeros(()))
        >>> def step(t):
        ...     v.value = v.value + t
        ...     return v.value
        >>> out = io.StringIO()
        >>> ys = for_loop(step, jnp.arange(100.), progress_bar=ProgressBar(freq=10, file=out))
        >>> float(v.value), '100/100' in out.getvalue()
        (4950.0, True)

        A label computed from the loop:

        >>> bar = ProgressBar(freq=50, file=out, desc=('t={i} v={v:.0f}', lambda d: {'i': d['i'], 'v': d['y']}))
        >>> ys = for_loop(step, jnp.arange(100.), progress_bar=bar)
        >>> import jax; jax.effects_barrier()
        >>> 't=99 v=9900' in out.getvalue()
        True
    """

    __module__ = "state_transform"

    def __init__(
        self,
        freq: int | None = None,
        desc: str | tuple[str, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
        count: int | None = 20,
        **tqdm_kwargs: Any,
    ) -> None:
        count = 20 if count is None else count
        if freq is not None and (not isinstance(freq, int) or isinstance(freq, bool) or freq < 1):
            raise ValueError(f"ProgressBar: freq must be a positive int or None, got {freq!r}.")
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"ProgressBar: count must be a positive int, got {count!r}.")
        self.freq = freq
        self.desc = _check_desc(desc)
        self.count = count
        self.tqdm_kwargs = tqdm_kwargs

    def interval(self, length: int) -> int:
        """Steps between two refreshes for a loop of ``length`` steps.

        Args:
            length: the number of steps of the loop the bar follows.

        Returns:
            ``freq`` when it was given, else ``length // count`` (at least 1).

        Example:
            >>> from state_transform import ProgressBar
            >>> ProgressBar().interval(1000), ProgressBar(count=4).interval(10), ProgressBar(freq=7).interval(1000)
            (50, 2, 7)
        """
        if self.freq is not None:
            return self.freq
        return max(1, length // self.count)

    def _key(self) -> tuple[Any, ...]:
        return (self.freq, self.desc, self.count, tuple(sorted((k, _keyed(v)) for k, v in self.tqdm_kwargs.items())))

    # Equal bars (same settings) share a loop's compiled program: ``progress_bar=True``
    # in every call of a loop builds a new, equal ProgressBar.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProgressBar) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"ProgressBar(freq={self.freq}, desc={self.desc!r})"


def _check_desc(desc: Any) -> Any:
    """``desc`` as stored: None, a string, or a ``(format, fn)`` tuple."""
    if desc is None or isinstance(desc, str):
        return desc
    if not isinstance(desc, (tuple, list)):
        raise TypeError(
            f"ProgressBar: desc must be a string or a (format string, function) pair, got {type(desc).__name__}."
        )
    if len(desc) != 2:
        raise ValueError(f"ProgressBar: desc must be a (format string, function) pair, got {len(desc)} item(s).")
    fmt, fn = desc
    if not isinstance(fmt, str):
        raise TypeError(f"ProgressBar: the first item of desc must be a format string, got {type(fmt).__name__}.")
    if not callable(fn):
        raise TypeError(f"ProgressBar: the second item of desc must be a function, got {type(fn).__name__}.")
    return (fmt, fn)


def _keyed(value: Any) -> Any:
    """``value`` if hashable, else its identity (a file object, a list ...)."""
    try:
        hash(value)
    except TypeError:
        return id(value)
    return value


def as_progress_bar(progress_bar: Any, what: str) -> ProgressBar | None:
    """Normalise a ``progress_bar=`` argument (``None``/``False``, ``True``, an int, a ``ProgressBar``).

    Args:
        progress_bar: the loop's argument: ``None`` or ``False`` for no bar,
            ``True`` for the default bar, a positive int for a bar refreshed
            every that many steps, or a ``ProgressBar``.
        what: the loop's name, for the error message.

    Returns:
        The ``ProgressBar`` to use, or ``None`` for no bar.

    Raises:
        TypeError: ``progress_bar`` is none of the above.
    """
    if progress_bar is None or progress_bar is False:
        return None
    if isinstance(progress_bar, ProgressBar):
        return progress_bar
    if progress_bar is True or (isinstance(progress_bar, int) and progress_bar > 0):
        return ProgressBar(freq=None if progress_bar is True else int(progress_bar))
    raise TypeError(
        f"{what}: progress_bar must be True/False/None, a positive int (refresh interval) or a "
        f"ProgressBar, got {progress_bar!r}."
    )


def _tqdm() -> Any:
    try:
        import tqdm.auto as tqdm_auto
    except ImportError:
        raise ImportError(_INSTALL_HINT) from None
    return tqdm_auto.tqdm


class _HostBar:
    """Host side of one loop program: opens a bar on the first report, closes it at the end."""

    def __init__(self, spec: ProgressBar, length: int) -> None:
        self.tqdm = _tqdm()  # fail at trace time, before anything runs
        self.spec = spec
        self.length = length
        self.bar: Any = None
        self.lock = threading.Lock()

    def open_bar(self) -> None:
        """Open the bar if it is not open (the caller holds the lock)."""
        if self.bar is None:
            desc = self.spec.desc if isinstance(self.spec.desc, str) else None
            self.bar = self.tqdm(total=self.length, desc=desc, **self.spec.tqdm_kwargs)

    def report_described(self, done: Any, data: dict[str, Any]) -> None:
        """Set the label from the ``(format, fn)`` description's ``data``, then ``report(done)``."""
        fmt = self.spec.desc[0]
        values = {k: v.item() if np.ndim(v) == 0 else v for k, v in data.items()}
        with self.lock:
            self.open_bar()
            self.bar.set_description(fmt.format(**values), refresh=False)
        self.report(done)

    def report(self, done: Any) -> None:
        done = int(done)
        with self.lock:
            self.open_bar()
            # Under vmap every lane reports the same step: only move forward.
            if done > self.bar.n:
                self.bar.update(done - self.bar.n)
            if done >= self.length:
                self.bar.close()
                self.bar = None


def progress_reporter(spec: ProgressBar, length: int) -> Any:
    """A function ``report(step, carry=None, y=None)`` for use inside a loop body (``step`` counts from 0).

    ``carry`` (the loop carry after the step) and ``y`` (the step's output) feed a
    ``(format, fn)`` description.

    Args:
        spec: the bar's settings.
        length: the loop's number of steps (the bar's total).

    Raises:
        ImportError: tqdm is not installed (raised here, at trace time, before
            the loop runs).
    """
    host = _HostBar(spec, length)
    every = spec.interval(length)
    describe = spec.desc[1] if isinstance(spec.desc, tuple) else None

    def report(step: jax.Array, carry: Any = None, y: Any = None) -> None:
        done = step + 1
        due = jnp.logical_or(done % every == 0, done == length)
        if describe is None:
            jax.lax.cond(due, lambda d: jax.debug.callback(host.report, d, ordered=True), lambda d: None, done)
            return
        data = describe({"i": step, "carry": carry, "y": y})
        if not isinstance(data, dict):
            raise TypeError(
                f"ProgressBar: the desc function must return a dict of format arguments, got {type(data).__name__}."
            )
        jax.lax.cond(
            due,
            lambda d, x: jax.debug.callback(host.report_described, d, x, ordered=True),
            lambda d, x: None,
            done,
            data,
        )

    return report
