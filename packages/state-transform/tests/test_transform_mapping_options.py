"""The mapping strategy's options that used to be subclasses: lanes on a mesh, one-shot initialisation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, Mesh
from numpy.testing import assert_allclose

from state_core import BatchAxisError, NonBatchState, ParamState, State, catch_new_states
from state_core.engine import StateRules
from state_transform import StatefulMapping, vmap2
from state_transform.engine import LanesOnMesh, MappingStrategy


def _mesh(n=4, name="lanes", kind=AxisType.Auto):
    return Mesh(np.array(jax.devices()[:n]), (name,), axis_types=(kind,))


def _accumulator():
    total = State(jnp.zeros(8), name="total")

    def add(x):
        total.value = total.value + x
        return (total.value * 2.0).sum()

    return total, add


@pytest.mark.parametrize("kind", [AxisType.Auto, AxisType.Explicit])
def test_lanes_on_a_mesh_compute_what_vmap2_computes_and_stay_split(kind):
    total, add = _accumulator()
    reference_total, reference_add = _accumulator()
    layout = LanesOnMesh(_mesh(kind=kind), ("lanes",))
    sharded = StatefulMapping(add, strategy=MappingStrategy(lanes_on=layout, in_rules={0: State}))
    plain = vmap2(reference_add, state_in_axes={0: State})
    x = jnp.arange(8.0)
    for _ in range(2):  # the second call's inputs are the first one's placed outputs
        out = sharded(x)
        expected = plain(x)
        assert_allclose(np.asarray(out), np.asarray(expected))
        assert_allclose(np.asarray(total.value), np.asarray(reference_total.value))
    assert_allclose(np.asarray(total.value), 2 * np.arange(8.0))
    assert total.value.sharding.spec == jax.sharding.PartitionSpec("lanes")
    assert {d.id for d in total.value.sharding.device_set} == {0, 1, 2, 3}
    assert out.sharding.spec == jax.sharding.PartitionSpec("lanes")


def test_equal_layouts_share_one_program():
    traces = []
    scale = State(jnp.ones(()), name="scale")

    def f(x):
        traces.append(1)
        return x * scale.value

    mesh = _mesh()
    first = StatefulMapping(f, strategy=MappingStrategy(lanes_on=LanesOnMesh(mesh, ("lanes",))))
    second = StatefulMapping(f, strategy=MappingStrategy(lanes_on=LanesOnMesh(mesh, ("lanes",))))
    assert LanesOnMesh(mesh, ("lanes",)) == LanesOnMesh(mesh, ("lanes",))
    assert_allclose(np.asarray(first(jnp.arange(4.0))), np.arange(4.0))
    assert_allclose(np.asarray(second(jnp.arange(4.0))), np.arange(4.0))
    assert len(traces) == 1


def test_lanes_that_do_not_split_evenly_are_refused_and_no_state_changes():
    total, add = _accumulator()
    sharded = StatefulMapping(
        add, strategy=MappingStrategy(lanes_on=LanesOnMesh(_mesh(n=3), ("lanes",)), in_rules={0: State})
    )
    with pytest.raises(
        ValueError, match=r"mapped axis has size 8, which does not split evenly over mesh axes \('lanes',\) \(3 device"
    ):
        sharded(jnp.arange(8.0))
    assert_allclose(np.asarray(total.value), np.zeros(8))


def test_lanes_on_mesh_checks_its_arguments():
    with pytest.raises(TypeError, match=r"mesh must be a jax\.sharding\.Mesh, got tuple"):
        LanesOnMesh((4,), ("lanes",))  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"axes=\('rows',\) must name one or more axes of the mesh, whose axes are \('lanes',\)"
    ):
        LanesOnMesh(_mesh(), ("rows",))
    layout = LanesOnMesh(_mesh(), ("lanes",))
    with pytest.raises(
        ValueError, match=r"lanes_on places the lanes of a jax\.vmap program .* takes mapping_fn=jax\.vmap"
    ):
        MappingStrategy(lanes_on=layout, mapping_fn=jax.pmap)
    with pytest.raises(ValueError, match="no mapping_kwargs"):
        MappingStrategy(lanes_on=layout, mapping_kwargs={"spmd_axis_name": "lanes"})
    assert repr(layout) == "LanesOnMesh(mesh={'lanes': 4}, axes=('lanes',))"


class _Net:
    def __init__(self):
        self.w = None
        self.shared = None

    def init(self):
        self.w = ParamState(jax.random.normal(jax.random.key(0), (3,)) + 1.0)
        self.shared = NonBatchState(jnp.zeros(()))


def _initialise(strategy, net, caught):
    def init():
        with catch_new_states() as catcher:
            net.init()
        caught.extend(catcher.get_states())

    mapping = StatefulMapping(init, strategy=strategy)
    mapping()
    return mapping


def test_new_state_rules_put_created_states_on_their_axes_and_run_the_first_call_op_by_op():
    net, caught = _Net(), []
    rules = StateRules([(None, NonBatchState)])
    strategy = MappingStrategy(axis_size=4, new_state_rules=rules, created_in=net, in_axes=())
    mapping = _initialise(strategy, net, caught)
    info = mapping._entry(None).info
    axes = dict(zip(mapping.get_traced_call().created_states, info.created_axes, strict=True))
    assert axes == {net.w: 0, net.shared: None}
    assert mapping._entry(None).program.eager is not None
    # Without the option the created NonBatchState, same on every lane, is not stacked either,
    # and the first call compiles.
    plain = _initialise(MappingStrategy(axis_size=4, in_axes=()), _Net(), [])
    assert plain._entry(None).program.eager is None


def test_new_state_rules_refuse_a_shared_state_that_varies():
    class Drawn:
        def init(self):
            lane = jax.lax.axis_index("i")
            self.s = NonBatchState(jnp.float32(1.0) * lane)

    net = Drawn()
    rules = StateRules([(None, NonBatchState)])
    strategy = MappingStrategy(axis_size=2, axis_name="i", new_state_rules=rules, created_in=net, in_axes=())
    with pytest.raises(BatchAxisError, match=r"kept as one shared copy .* its initial value differs between copies"):
        StatefulMapping(net.init, strategy=strategy)()


def test_the_object_a_one_shot_init_fills_is_part_of_the_program_key():
    rules = StateRules([(None, NonBatchState)])
    a, b = _Net(), _Net()
    key_a = MappingStrategy(axis_size=2, new_state_rules=rules, created_in=a).identity()
    key_b = MappingStrategy(axis_size=2, new_state_rules=rules, created_in=b).identity()
    assert key_a != key_b
    assert key_a == MappingStrategy(axis_size=2, new_state_rules=rules, created_in=a).identity()


@pytest.mark.parametrize(
    "option",
    [{"in_axes": 1}, {"axis_size": 4}, {"state_in_axes": {0: State}}, {"in_axes": np.array([0])}, {"axis_name": "i"}],
    ids=["in_axes", "axis_size", "state_in_axes", "array in_axes", "axis_name"],
)
def test_options_beside_a_strategy_are_refused(option):
    with pytest.raises(
        TypeError, match=r"give the mapping options to the strategy \(its fields\), not beside strategy="
    ):
        StatefulMapping(lambda x: x, strategy=MappingStrategy(), **option)


def test_options_left_at_their_defaults_beside_a_strategy_are_accepted():
    strategy = MappingStrategy(in_axes=1)
    spelled_out = StatefulMapping(lambda x: x * 2, in_axes=0, out_axes=0, axis_size=None, strategy=strategy)
    assert spelled_out.strategy is strategy
    # (the strategy maps axis 1, as its own option says; the output has the mapped axis first)
    assert_allclose(np.asarray(spelled_out(jnp.ones((2, 3)))), 2 * np.ones((3, 2)))
