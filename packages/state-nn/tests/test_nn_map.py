"""Map: state axes routing and overrides, caching, errors, pmap, randomness, nesting."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import state_core
import state_nn
import state_random
from state_core.filter import OfType, PathContains, WithTag
from state_nn import Map


class Weighted(state_nn.Module):
    """Per-member weight (created in init_state) and a bias created in __init__."""

    def __init__(self, n_members=4):
        self.bias = state_core.ParamState(jnp.arange(float(n_members)))
        self.calls = 0

    def init_state(self, size=3):
        self.w = state_core.ParamState(state_random.normal(size=size))

    def update(self, x):
        self.calls += 1
        return (x * self.w.value).sum() + self.bias.value.sum()


# ---------------------------------------------------------------------- construction errors
def test_invalid_behavior():
    with pytest.raises(ValueError, match="behavior must be 'vmap', 'pmap' or 'shard', got 'jit'"):
        Map(Weighted(), 4, behavior="jit")


@pytest.mark.parametrize(
    "size, exc", [(2.5, TypeError), ("4", TypeError), (True, TypeError), (0, ValueError), (-3, ValueError)]
)
def test_invalid_init_map_size(size, exc):
    with pytest.raises(exc, match="init_map_size"):
        Map(Weighted(), size)


def test_pmap_more_members_than_devices():
    with pytest.raises(ValueError, match=r"init_map_size=9 members.*only 8 local device"):
        Map(Weighted(), 9, behavior="pmap")


def test_map_needs_a_module_and_keyword_init():
    with pytest.raises(TypeError, match="Module"):
        Map(lambda x: x, 2)
    ens = Map(Weighted(), 2)
    with pytest.raises(TypeError, match="keyword arguments only"):
        ens.init_all_states(3)


def test_calls_before_init_all_states():
    ens = Map(Weighted(), 4)
    assert ens.dict_vmap_states is None
    with pytest.raises(ValueError, match=r"call `init_all_states\(...\)` on the Map first"):
        ens.update(jnp.ones((4, 3)))
    with pytest.raises(ValueError, match="init_all_states"):
        ens(jnp.ones((4, 3)))
    with pytest.raises(ValueError, match="init_all_states"):
        ens.map("update")
    with pytest.raises(ValueError, match="init_all_states"):
        ens.reset_all_states()


def test_unknown_method_and_bad_fn():
    ens = Map(Weighted(), 4)
    ens.init_all_states()
    with pytest.raises(AttributeError, match="'forward'"):
        ens.map("forward")
    with pytest.raises(TypeError, match="method name"):
        ens.map(42)


def test_argument_errors_at_call_time():
    ens = Map(Weighted(), 4, in_axes=(0, None))
    ens.init_all_states()
    with pytest.raises(ValueError, match="in_axes has 2 entries but 1 positional"):
        ens(jnp.ones((4, 3)))
    plain = Map(Weighted(), 4)
    plain.init_all_states()
    with pytest.raises(ValueError, match="inconsistent sizes"):
        plain(jnp.ones((5, 3)))


@pytest.mark.parametrize("behavior", ["vmap", "pmap"])
def test_keyword_arguments_are_shared_by_every_member(behavior):
    class Scaled(state_nn.Module):
        def init_state(self):
            self.w = state_core.ParamState(jnp.full(4, 2.0))

        def update(self, x, scale=1.0):
            return x * self.w.value * scale

    ens = Map(Scaled(), 4, behavior=behavior)
    ens.init_all_states()
    x = jnp.arange(16.0).reshape(4, 4)
    # scale has as many entries as there are members, yet it is passed whole to
    # each member (mapped, member i would get the scalar scale[i]).
    scale = jnp.array([1.0, 10.0, 100.0, 1000.0])
    out = ens(x, scale=scale)
    np.testing.assert_allclose(np.asarray(out), np.asarray(x) * 2.0 * np.asarray(scale))
    out = ens.map("update", in_axes=None)(jnp.ones(4), scale=scale)
    np.testing.assert_allclose(np.asarray(out), np.tile(2.0 * np.asarray(scale), (4, 1)))


# ---------------------------------------------------------------------- state axes
def test_init_state_axes_routes_a_state_to_shared_none():
    class M(state_nn.Module):
        def init_state(self):
            self.w = state_core.ParamState(jnp.arange(3.0))
            self.shared = state_core.State(jnp.full(3, 10.0))

        def update(self):
            return self.w.value + self.shared.value

    module = M()
    ens = Map(module, 4, init_state_axes={None: PathContains("shared")})
    ens.init_all_states()
    assert module.w.value.shape == (4, 3)
    assert module.shared.value.shape == (3,)
    assert ens.dict_vmap_states == {0: [module.w], None: [module.shared]}
    out = ens()
    assert jnp.array_equal(out, jnp.tile(jnp.arange(3.0) + 10.0, (4, 1)))
    assert module.shared.value.shape == (3,)


def test_init_state_axes_shared_random_state_is_an_error():
    class M(state_nn.Module):
        def init_state(self):
            self.noise = state_core.State(state_random.normal(size=2))

    ens = Map(M(), 3, init_state_axes={None: ...})
    with pytest.raises(ValueError, match="shared"):
        ens.init_all_states()


def test_init_state_axes_other_axis_and_state_tag():
    class M(state_nn.Module):
        def init_state(self):
            self.w = state_core.ParamState(jnp.ones(3))

        def update(self):
            return self.w.value.sum()

    module = M()
    ens = Map(module, 4, init_state_axes={1: OfType(state_core.ParamState)}, state_tag="ensemble")
    ens.init_all_states()
    assert module.w.value.shape == (3, 4)
    assert "ensemble" in module.w.tags
    assert ens.dict_vmap_states == {1: [module.w]}
    assert jnp.array_equal(ens(), jnp.full((4,), 3.0))


def test_preexisting_states_are_shared_unless_call_state_axes_maps_them():
    ens = Map(Weighted(), 4, in_axes=None)
    ens.init_all_states()
    x = jnp.zeros(3)
    # bias (created in __init__) is broadcast: every member sees the whole vector
    assert jnp.array_equal(ens(x), jnp.full((4,), 6.0))
    mapped = Map(Weighted(), 4, in_axes=None, call_state_axes={0: PathContains("bias")})
    mapped.init_all_states()
    assert jnp.array_equal(mapped(x), jnp.arange(4.0))
    # the member state w is still mapped per member
    mapped.module.w.value = jnp.ones((4, 3)) * jnp.arange(4.0)[:, None]
    assert jnp.array_equal(mapped(jnp.ones(3)), jnp.arange(4.0) * 3 + jnp.arange(4.0))


def test_user_state_axes_take_priority_over_member_states():
    class M(state_nn.Module):
        def init_state(self):
            self.w = state_core.ParamState(jnp.ones(3))

        def update(self):
            return self.w.value.sum()

        def total(self):
            return self.w.value.sum()

    module = M()
    ens = Map(module, 4, call_state_axes={None: PathContains("w")})
    ens.init_all_states()
    # w is claimed as shared by the user entry: each member sees all 4x3 values
    assert jnp.array_equal(ens(), jnp.full((4,), 12.0))
    # map() without state_axes uses the call_state_axes; with state_axes it overrides them
    assert jnp.array_equal(ens.map("total")(), jnp.full((4,), 12.0))
    assert jnp.array_equal(ens.map("total", state_axes={0: WithTag("nothing")})(), jnp.full((4,), 3.0))


def test_member_state_writes_stay_per_member():
    class Acc(state_nn.Module):
        def init_state(self):
            self.total = state_core.ShortTermState(jnp.zeros(()))

        def update(self, x):
            self.total.value = self.total.value + x
            return self.total.value

    module = Acc()
    ens = Map(module, 3)
    ens.init_all_states()
    ens(jnp.array([1.0, 2.0, 3.0]))
    out = ens(jnp.array([1.0, 2.0, 3.0]))
    assert jnp.array_equal(out, jnp.array([2.0, 4.0, 6.0]))
    assert jnp.array_equal(module.total.value, jnp.array([2.0, 4.0, 6.0]))


def test_collectives_with_axis_name():
    class Mean(state_nn.Module):
        def init_state(self):
            self.v = state_core.State(jnp.zeros(()))

        def update(self, x):
            self.v.value = x
            return jax.lax.pmean(x, "members")

        def centered(self, x):
            return x - jax.lax.pmean(x, "other")

    ens = Map(Mean(), 4, axis_name="members")
    ens.init_all_states()
    assert jnp.array_equal(ens(jnp.arange(4.0)), jnp.full((4,), 1.5))
    assert jnp.array_equal(ens.map("centered", axis_name="other")(jnp.arange(4.0)), jnp.arange(4.0) - 1.5)


# ---------------------------------------------------------------------- caching
def test_update_mapping_built_once_and_traced_once():
    module = Weighted()
    ens = Map(module, 4)
    ens.init_all_states()
    caller = ens._cache.update
    x = jnp.ones((4, 3))
    results = [ens(x) for _ in range(5)]
    assert module.calls == 1  # the user's update ran once (to trace), never per call
    assert ens._cache.update is caller
    assert len(caller.mapping._cache) == 1
    assert all(jnp.array_equal(r, results[0]) for r in results)
    ens(jnp.ones((4, 3), dtype=jnp.int32))  # a new signature traces once more
    assert module.calls == 2


def test_repeated_update_keys_the_argument_without_flattening(monkeypatch):
    import state_core._call_signature as sf_module

    ens = Map(Weighted(), 4)
    ens.init_all_states()
    x = jnp.ones((4, 3))
    first = ens(x)
    flattened = []
    original = sf_module._tree_flatten
    monkeypatch.setattr(sf_module, "_tree_flatten", lambda *a: flattened.append(1) or original(*a))
    np.testing.assert_allclose(np.asarray(ens(x)), np.asarray(first))
    assert flattened == []


def test_map_callers_are_cached_per_key():
    counter = {"n": 0}

    def fn(module, x):
        counter["n"] += 1
        return x * module.w.value

    ens = Map(Weighted(), 4)
    ens.init_all_states()
    first = ens.map(fn)
    assert ens.map(fn) is first
    assert ens.map(fn, in_axes=0, out_axes=0) is first
    for _ in range(4):
        ens.map(fn)(jnp.ones((4, 3)))
    assert counter["n"] == 1
    assert ens.map(fn, out_axes=1) is not first
    assert ens.map("update") is ens.map("update")
    assert ens.map(fn, state_axes={0: OfType(state_core.ParamState)}) is ens.map(
        fn, state_axes={0: OfType(state_core.ParamState)}
    )


def test_init_all_states_again_rebuilds():
    module = Weighted()
    ens = Map(module, 4)
    ens.init_all_states(size=3)
    old_caller = ens._cache.update
    old_map = ens.map("update")
    ens.init_all_states(size=2)
    assert module.w.value.shape == (4, 2)
    assert ens._cache.update is not old_caller
    assert ens.map("update") is not old_map
    assert ens(jnp.ones((4, 2))).shape == (4,)


# ---------------------------------------------------------------------- randomness
def test_random_init_differs_per_member_and_is_reproducible():
    state_random.seed(0)
    a = Map(Weighted(), 4)
    a.init_all_states()
    state_random.seed(0)
    b = Map(Weighted(), 4)
    b.init_all_states()
    w = a.module.w.value
    assert w.shape == (4, 3)
    assert len({tuple(row.tolist()) for row in w}) == 4
    assert jnp.array_equal(w, b.module.w.value)


def test_random_draws_in_update_split_per_member():
    class Noisy(state_nn.Module):
        def init_state(self):
            self.scale = state_core.ParamState(jnp.ones(()))

        def update(self):
            return self.scale.value * state_random.normal(size=())

    ens = Map(Noisy(), 4)
    ens.init_all_states()
    state_random.seed(1)
    first = ens()
    second = ens()
    assert len(set(first.tolist())) == 4
    assert not jnp.array_equal(first, second)
    state_random.seed(1)
    assert jnp.array_equal(ens(), first)


# ---------------------------------------------------------------------- pmap
def test_pmap_matches_vmap():
    state_random.seed(7)
    v = Map(Weighted(8), 8)
    v.init_all_states()
    state_random.seed(7)
    p = Map(Weighted(8), 8, behavior="pmap", axis_name="d")
    p.init_all_states()
    assert jnp.array_equal(v.module.w.value, p.module.w.value)
    x = jnp.arange(24.0).reshape(8, 3)
    assert jnp.allclose(v(x), p(x))
    assert len(p.module.w.value.sharding.device_set) == 8
    assert jnp.allclose(v.map("update", in_axes=None)(x[0]), p.map("update", in_axes=None)(x[0]))


def test_pmap_fewer_members_and_writes():
    class Acc(state_nn.Module):
        def init_state(self):
            self.total = state_core.ShortTermState(jnp.zeros(2))

        def update(self, x):
            self.total.value = self.total.value + x
            return jax.lax.psum(self.total.value, "dev")

    module = Acc()
    ens = Map(module, 2, behavior="pmap", axis_name="dev")
    ens.init_all_states()
    out = ens(jnp.array([[1.0, 2.0], [3.0, 4.0]]))
    assert jnp.array_equal(out, jnp.array([[4.0, 6.0], [4.0, 6.0]]))
    assert jnp.array_equal(module.total.value, jnp.array([[1.0, 2.0], [3.0, 4.0]]))
    ens.reset_all_states()


# ---------------------------------------------------------------------- reset and nesting
def test_reset_all_states_runs_per_member_with_static_args():
    class Cell(state_nn.Module):
        def init_state(self, batch=1):
            self.h = state_core.HiddenState(jnp.zeros(batch))

        def reset_state(self, batch=1, value=0.0):
            self.h.value = jnp.full((batch,), value)

        def update(self, x):
            self.h.value = self.h.value + x
            return self.h.value

    module = Cell()
    ens = Map(module, 3)
    ens.init_all_states(batch=2)
    ens(jnp.ones((3, 2)))
    ens.reset_all_states(batch=4, value=2.0)
    assert jnp.array_equal(module.h.value, jnp.full((3, 4), 2.0))
    ens.reset_all_states(5)
    assert jnp.array_equal(module.h.value, jnp.zeros((3, 5)))


def test_map_inside_a_module_tree():
    inits = []

    class Member(state_nn.Module):
        def init_state(self, size=2):
            inits.append(size)
            self.w = state_core.ParamState(jnp.ones(size))

        def update(self, x):
            return x * self.w.value

    class Net(state_nn.Module):
        def __init__(self):
            self.ens = Map(Member(), 5)
            self.scale = state_core.ParamState(jnp.full((), 2.0))

        def update(self, x):
            return self.scale.value * self.ens(x)

    net = Net()
    net.init_all_states(size=3)
    assert inits == [3]  # traced once under the mapping, never called unmapped
    assert net.ens.module.w.value.shape == (5, 3)
    assert list(net.named_modules()) == [(), ("ens",), ("ens", "module")]
    assert list(net.states()) == [("ens", "module", "w"), ("scale",)]
    assert jnp.array_equal(net(jnp.ones((5, 3))), jnp.full((5, 3), 2.0))
    assert repr(net).startswith("Net(\n  ens=Map(\n    module=Member(\n      w=ParamState(")


def test_map_states_and_named_modules():
    module = Weighted()
    ens = Map(module, 4)
    ens.init_all_states()
    assert list(ens.states()) == [("module", "bias"), ("module", "w")]
    assert list(ens.states(state_core.ParamState)) == [("module", "bias"), ("module", "w")]
    assert ens.modules() == [ens, module]


def test_pmap_without_axis_name_without_member_states_and_under_jit():
    import state_transform

    class Plain(state_nn.Module):
        def __init__(self):
            self.w = state_core.ParamState(jnp.full(3, 2.0))  # shared, not a member state

        def update(self, x):
            return x * self.w.value

    ens = Map(Plain(), 4, behavior="pmap", in_axes=None)
    ens.init_all_states()
    assert ens.dict_vmap_states == {}
    assert jnp.array_equal(ens(jnp.ones(3)), jnp.full((4, 3), 2.0))
    f = state_transform.jit(lambda x: ens(x) + 1)
    assert jnp.array_equal(f(jnp.ones(3)), jnp.full((4, 3), 3.0))
    ens.reset_all_states()


def test_map_composes_with_jit_and_vmap2():
    import state_transform

    class Acc(state_nn.Module):
        def init_state(self):
            self.total = state_core.ShortTermState(jnp.zeros(()))

        def update(self, x):
            self.total.value = self.total.value + x
            return self.total.value

    ens = Map(Acc(), 3)
    ens.init_all_states()
    f = state_transform.jit(lambda x: ens(x) * 2)
    assert jnp.array_equal(f(jnp.ones(3)), jnp.full(3, 2.0))
    assert jnp.array_equal(f(jnp.ones(3)), jnp.full(3, 4.0))
    assert jnp.array_equal(ens.module.total.value, jnp.full(3, 2.0))
    peek = lambda m, x: m.total.value + x
    g = state_transform.vmap2(lambda x: ens.map(peek)(x), in_axes=0)
    assert jnp.array_equal(g(jnp.ones((2, 3))), jnp.full((2, 3), 3.0))


def test_call_state_axes_are_user_entries_first_then_member_groups():
    module = Weighted()
    user = {None: PathContains("bias"), 0: OfType(state_core.LongTermState)}
    ens = Map(module, 4, call_state_axes=user)
    ens.init_all_states()
    axes = ens._cache.update.mapping.state_in_axes
    assert list(axes) == [None, 0]
    assert axes[None] == PathContains("bias")
    assert axes == ens._cache.update.mapping.state_out_axes
    # the member group for axis 0 is merged into the user's axis-0 entry
    assert axes[0]((), module.w) and axes[0]((), state_core.LongTermState(0.0))
    assert not axes[0]((), state_core.State(0.0))


@pytest.mark.parametrize("behavior", ["vmap", "pmap"])
def test_member_random_states_hold_one_key_per_member(behavior):
    class Noisy(state_nn.Module):
        def init_state(self):
            self.rng = state_random.RandomState(state_random.split_key())

        def update(self):
            return self.rng.normal(size=())

    state_random.seed(0)
    ens = Map(Noisy(), 4, behavior=behavior)
    ens.init_all_states()
    assert ens.module.rng.value.shape == (4,)
    first, second = ens(), ens()
    assert len(set(first.tolist())) == 4 and not jnp.array_equal(first, second)
    state_random.seed(0)
    other = Map(Noisy(), 4)
    other.init_all_states()
    assert jnp.array_equal(other(), first)  # vmap and pmap give the same streams
