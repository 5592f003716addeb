"""Sharding annotations on States: the spec/sharding helpers and value placement."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

from state_core import (
    ParamState,
    State,
    collect_states,
    get_named_sharding,
    get_partition_spec,
    shard_states,
)
from state_core._jax_internals import context_mesh
from state_core.engine import annotated_spec, state_sharding


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


class Net:
    def __init__(self):
        self.w1 = ParamState(jnp.arange(32.0).reshape(4, 8), sharding=P(None, "model"))
        self.w2 = ParamState(jnp.ones((8, 4)), sharding=P("model", None))
        self.h = State(jnp.zeros(3))


def test_context_mesh_is_the_set_mesh_even_inside_a_trace(mesh):
    assert context_mesh() is None
    seen = []
    with jax.set_mesh(mesh):
        assert context_mesh() is mesh
        jax.jit(lambda x: seen.append(context_mesh()) or x)(1.0)
    assert seen == [mesh]
    assert context_mesh() is None


def test_get_partition_spec_of_a_state_dict_matches_to_values():
    states = collect_states(Net())
    specs = get_partition_spec(states)
    assert list(specs) == list(states.to_values())
    assert specs == {("w1",): P(None, "model"), ("w2",): P("model", None), ("h",): P()}


def test_get_partition_spec_of_a_state_a_named_sharding_and_a_container(mesh):
    w = ParamState(jnp.ones((4, 8)), sharding=NamedSharding(mesh, P("data")))
    assert get_partition_spec(w) == P("data")
    assert get_partition_spec(State(1.0)) == P()
    assert get_partition_spec({"a": [w, State(1.0)]}) == {"a": [P("data"), P()]}
    assert annotated_spec(State(1.0)) is None


def test_get_partition_spec_rejects_what_is_not_states():
    with pytest.raises(TypeError, match=r"get_partition_spec expects a State, a StateDict"):
        get_partition_spec(object())
    with pytest.raises(TypeError, match=r"expects States in the collection, found a int"):
        get_partition_spec([State(1.0), 3])


def test_bad_annotation_type_names_the_state():
    bad = ParamState(jnp.ones(4), name="w", sharding="model")
    with pytest.raises(TypeError, match=r"ParamState 'w' has sharding='model'; a state's sharding must be"):
        get_partition_spec(bad)


def test_get_named_sharding_uses_the_given_mesh(mesh):
    specs = get_named_sharding(collect_states(Net()), mesh)
    assert specs[("w1",)] == NamedSharding(mesh, P(None, "model"))
    assert specs[("h",)] == NamedSharding(mesh, P())


def test_errors_name_the_state_path_and_spec(mesh):
    class Bad:
        def __init__(self):
            self.w = ParamState(jnp.ones((4, 6)), sharding=P(None, "model"))

    with pytest.raises(
        ValueError, match=r"ParamState at path 'w' is annotated.*dimension 1.*shape \(4, 6\).*size 6.*4 dev"
    ):
        get_named_sharding(collect_states(Bad()), mesh)
    rank = ParamState(jnp.ones(4), name="bias", sharding=P("data", "model"))
    with pytest.raises(ValueError, match=r"ParamState 'bias' is annotated with sharding .* 2 entries.*rank 1"):
        get_named_sharding(rank, mesh)
    axis = ParamState(jnp.ones(4), name="b", sharding=P("x"))
    with pytest.raises(ValueError, match=r"ParamState 'b' .* names mesh axis 'x'.*\('data', 'model'\)"):
        get_named_sharding(axis, mesh)


def test_no_mesh_is_a_clear_error():
    w = ParamState(jnp.ones((4, 8)), name="w", sharding=P(None, "model"))
    with pytest.raises(ValueError, match=r"ParamState 'w' is annotated with sharding .* but no mesh is set.*set_mesh"):
        state_sharding(w)
    with pytest.raises(ValueError, match=r"no mesh is set"):
        shard_states(w)


def test_shard_states_places_values_without_changing_them(mesh):
    net = Net()
    before = np.asarray(net.w1.value)
    shard_states(collect_states(net), mesh)
    assert net.w1.value.sharding == NamedSharding(mesh, P(None, "model"))
    assert [s.data.shape for s in net.w1.value.addressable_shards] == [(4, 2)] * 8
    assert net.w2.value.sharding.spec == P("model", None)
    assert net.h.value.sharding == NamedSharding(mesh, P())  # unannotated: replicated on the mesh
    assert_allclose(np.asarray(net.w1.value), before)


def test_shard_states_uses_the_context_mesh_and_named_shardings(mesh):
    w = ParamState(jnp.ones((8, 4)), sharding=P("data"))
    n = ParamState(jnp.ones((8, 4)), sharding=NamedSharding(mesh, P("model")))
    free = State(jnp.ones(2))
    shard_states([n, free])  # no mesh anywhere: the NamedSharding's own, the rest untouched
    assert n.value.sharding.spec == P("model")
    assert len(free.value.sharding.device_set) == 1
    with jax.set_mesh(mesh):
        shard_states({"w": w})
    assert w.value.sharding == NamedSharding(mesh, P("data"))


def test_shard_states_checks_everything_before_moving_anything(mesh):
    good = ParamState(jnp.ones((4, 8)), sharding=P(None, "model"))
    bad = ParamState(jnp.ones((4, 6)), name="bad", sharding=P(None, "model"))
    original = good.value
    with pytest.raises(ValueError, match=r"ParamState 'bad'"):
        shard_states([good, bad], mesh)
    assert good.value is original
    assert len(good.value.sharding.device_set) == 1
