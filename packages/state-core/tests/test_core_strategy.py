"""A strategy is a frozen value the pipeline takes: equal strategies share programs, decisions are kept on success."""

import dataclasses
import gc
import weakref

import jax.numpy as jnp
import numpy as np
import pytest

from state_core import State, StatefulFunction
from state_core.engine import IdentityRef, Strategy, TraceContext


def _counting(state):
    traces = []

    def step(x):
        traces.append(1)
        state.value = state.value + x
        return state.value

    return step, traces


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scaled(Strategy):
    """Multiplies the output by ``factor`` (a field: part of what the program computes)."""

    factor: float = 1.0

    def compile(self, trace, info, name):
        program = super().compile(trace, info, name)
        run, factor = program.run, self.factor

        def scaled(rw, ro, *leaves):
            out, new_values = run(rw, ro, *leaves)
            return out * factor, new_values

        return dataclasses.replace(program, run=scaled, donating=None, eager=None)


def test_equal_strategies_share_programs_and_different_ones_do_not():
    s = State(jnp.zeros(2), name="s")
    step, traces = _counting(s)
    x = jnp.ones(2)
    np.testing.assert_allclose(StatefulFunction(step, strategy=Scaled(factor=2.0))(x), [2.0, 2.0])
    np.testing.assert_allclose(StatefulFunction(step, strategy=Scaled(factor=2.0))(x), [4.0, 4.0])
    assert len(traces) == 1  # a new object with an equal strategy found the program
    np.testing.assert_allclose(StatefulFunction(step, strategy=Scaled(factor=3.0))(x), [9.0, 9.0])
    assert len(traces) == 2  # another factor: another program
    np.testing.assert_allclose(s.value, [3.0, 3.0])


def test_a_strategy_is_frozen_and_normalises_its_statics():
    strategy = Strategy(static_argnums=1, static_argnames="n")
    assert strategy == Strategy(static_argnums=(1,), static_argnames=("n",))
    assert hash(strategy) == hash(Strategy(static_argnums=(1,), static_argnames=("n",)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        strategy.donate_states = False  # type: ignore[misc]
    f = StatefulFunction(lambda x, n: x * n, strategy=strategy)
    assert f.static_argnums == (1,) and f.static_argnames == ("n",) and f.donate_states is True
    np.testing.assert_allclose(f(jnp.ones(2), 3), [3.0, 3.0])


def test_options_beside_a_strategy_are_refused():
    with pytest.raises(TypeError, match="give static_argnums, static_argnames and donate_states to the strategy"):
        StatefulFunction(lambda x: x, static_argnums=0, strategy=Strategy())
    with pytest.raises(TypeError, match=r"strategy must be a state_core\.engine\.Strategy, got dict"):
        StatefulFunction(lambda x: x, strategy={"static_argnums": 0})  # type: ignore[arg-type]


def test_a_strategy_without_identity_keeps_its_programs_to_itself():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Private(Strategy):
        def identity(self):
            return None

    s = State(jnp.zeros(()), name="s")
    step, traces = _counting(s)
    StatefulFunction(step, strategy=Private())(1.0)
    StatefulFunction(step, strategy=Private())(1.0)
    assert len(traces) == 2
    np.testing.assert_allclose(s.value, 2.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Remembering(Strategy):
    """Records in ``ctx.learn`` how many times it analysed; refuses a matrix argument."""

    def analyze(self, ctx, trace, dyn_args, dyn_kwargs):
        seen = ctx.recall("analysed") or 0
        ctx.learn["analysed"] = seen + 1
        if dyn_args[0].ndim == 2:
            raise ValueError(f"{ctx.name}: matrix input")
        return seen


def test_what_a_trace_learns_is_kept_only_when_it_succeeds():
    f = StatefulFunction(lambda x: x + 1, strategy=Remembering(), cache_size=8)
    f(jnp.ones(2))
    assert f.learned == {"analysed": 1}
    with pytest.raises(ValueError, match="<lambda>: matrix input"):
        f(jnp.ones((2, 2)))
    assert f.learned == {"analysed": 1}  # the failed trace's decision is dropped
    f(jnp.ones(3))
    assert f.learned == {"analysed": 2}  # a later trace reads the kept one
    assert f.get_traced_call() is not None


def test_trace_context_recall_prefers_this_trace():
    ctx = TraceContext(fun=abs, name="abs", learned={"k": "old", "other": 1})
    ctx.learn["k"] = "new"
    assert (ctx.recall("k"), ctx.recall("other"), ctx.recall("missing")) == ("new", 1, None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Offset(Strategy):
    """Adds the value ``by`` held when compiled: a field ``identity`` keys without being told."""

    by: State = dataclasses.field(default=None, compare=True)  # type: ignore[assignment]
    tag: object = dataclasses.field(default=None, metadata={"key": IdentityRef})

    def compile(self, trace, info, name):
        program = super().compile(trace, info, name)
        run, by = program.run, float(self.by.value)

        def shifted(rw, ro, *leaves):
            out, new_values = run(rw, ro, *leaves)
            return out + by, new_values

        return dataclasses.replace(program, run=shifted, donating=None, eager=None)


def test_every_compared_field_is_in_the_identity_and_states_are_held_weakly():
    one, two = State(1.0, name="one"), State(2.0, name="two")
    traced = []

    def f(x):
        traced.append(1)
        return x * 10

    assert StatefulFunction(f, strategy=Offset(by=one))(1.0) == 11.0
    assert StatefulFunction(f, strategy=Offset(by=one))(1.0) == 11.0
    assert len(traced) == 1  # the same State: the program is shared
    assert StatefulFunction(f, strategy=Offset(by=two))(1.0) == 12.0
    assert len(traced) == 2  # another State in the field: another program

    identity = Offset(by=one).identity()
    held = weakref.ref(one)
    del one
    gc.collect()
    assert held() is None  # the key names the State without keeping it alive
    assert identity != Offset(by=State(1.0)).identity()


def test_a_field_keyed_by_its_metadata_compares_by_identity():
    a, b = [1], [1]  # equal contents, two objects
    assert Offset(tag=a).identity() == Offset(tag=a).identity()
    assert Offset(tag=a).identity() != Offset(tag=b).identity()
    assert Strategy(static_argnums=1).identity() != Strategy(static_argnums=2).identity()


def test_a_slotted_strategy_keys_its_fields_too():
    @dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
    class Slotted(Strategy):
        width: int = 1

    assert Slotted(width=2).identity() == Slotted(width=2).identity()
    assert Slotted(width=2).identity() != Slotted(width=3).identity()


def test_a_strategy_computes_its_identity_once(monkeypatch):
    strategy = Strategy(static_argnums=1)
    first = strategy.identity()
    monkeypatch.setattr(Strategy, "_keyed_fields", (("static_argnums", lambda value: pytest.fail("keyed again")),))
    assert strategy.identity() is first
    with pytest.raises(pytest.fail.Exception, match="keyed again"):
        dataclasses.replace(strategy).identity()  # a new value is keyed anew
