"""Seed 000 (pmap2 tutorial, non-random parts) and the pmap examples of seed 004 (jax.pmap reference).

Every example is run with this project's names and its printed output asserted.
``brainstate.nn.Module`` subclasses of the seeds are plain Python classes holding
their states as attributes (the transforms walk an object's attributes for paths).
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core.filter import OfType
from state_transform import StatefulMapping, pmap2

N_DEV = 8


class Affine:
    """Seed 000's ``Affine(brainstate.nn.Module)`` as a plain object."""

    def __init__(self, size):
        self.weight = state_core.ParamState(jnp.ones((size,)))

    def __call__(self, delta):
        self.weight.value = self.weight.value + delta
        return self.weight.value


def test_eight_cpu_devices_configured():
    # "local device count: 8"
    assert jax.local_device_count() == N_DEV


# ---------------------------------------------------------------- seed 000 §1
def test_seed000_core_arguments_affine_update():
    model = Affine(size=jax.local_device_count())
    axis_name = "devices"
    pmapped_update = pmap2(
        model,
        axis_name=axis_name,
        in_axes=0,
        out_axes=0,
        state_in_axes={0: OfType(state_core.ParamState)},
        state_out_axes={0: OfType(state_core.ParamState)},
    )
    per_device_delta = jnp.arange(jax.local_device_count() * 4.0).reshape(jax.local_device_count(), 4)
    updated = pmapped_update(per_device_delta)
    assert updated.shape == (8, 4)
    expected = np.arange(1.0, 33.0).reshape(8, 4)
    assert_allclose(np.asarray(model.weight.value), expected)
    assert_allclose(np.asarray(updated), expected)
    assert model.weight.value.shape == (8, 4)
    assert model.weight.value.dtype == jnp.float32


def test_seed000_axis_size_and_devices_pairwise_update():
    logical_devices = jax.devices()[:2]
    model = Affine(size=len(logical_devices))
    pairwise_update = pmap2(
        model,
        axis_name="pair",
        in_axes=0,
        out_axes=0,
        devices=logical_devices,
        state_in_axes={0: OfType(state_core.ParamState)},
        state_out_axes={0: OfType(state_core.ParamState)},
    )
    deltas = jnp.stack([jnp.ones((4,)), -jnp.ones((4,))], axis=0)
    pairwise_update(deltas)
    assert_allclose(np.asarray(model.weight.value), [[2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0]])


def test_seed000_add_with_scale_decorator_in_axes_none():
    @pmap2(axis_name="devices", in_axes=(0, None), out_axes=0)
    def add_with_scale(delta, scale):
        return delta + scale

    out = add_with_scale(jnp.arange(jax.local_device_count()), 0.5)
    # Array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5], dtype=float32, weak_type=True)
    assert_allclose(np.asarray(out), [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5])
    assert out.dtype == jnp.float32
    assert out.weak_type is True
    assert isinstance(add_with_scale, StatefulMapping)


def test_seed000_sample_shared_key_in_axes_none():
    per_device_scales = jnp.linspace(1.0, 2.0, jax.local_device_count())
    shared_key = jax.random.PRNGKey(0)

    @pmap2(axis_name="devices", in_axes=(None, 0), out_axes=0)
    def sample_shared(key, scale):
        return jax.random.normal(key, ()) * scale

    out = sample_shared(shared_key, per_device_scales)
    expected = [1.6226422, 1.8544483, 2.0862544, 2.3180604, 2.5498662, 2.7816722, 3.0134785, 3.2452843]
    assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_seed000_relationship_to_stateful_mapping_attributes():
    model = Affine(size=2)
    model.weight.value = jnp.ones((2, 4))  # as left by the pairwise example
    parallel_mapping = pmap2(
        model,
        axis_name="devices",
        in_axes=0,
        out_axes=0,
        state_in_axes={0: OfType(state_core.ParamState)},
        state_out_axes={0: OfType(state_core.ParamState)},
    )
    # <class 'brainstate.transform.StatefulMapping'>
    assert type(parallel_mapping) is StatefulMapping
    assert f"{type(parallel_mapping).__module__}.{type(parallel_mapping).__name__}" == (
        "state_transform.StatefulMapping"
    )
    assert str(type(parallel_mapping)) == "<class 'state_transform.StatefulMapping'>"
    # origin fun: the model itself, whose weight prints as ParamState(value=ShapedArray(float32[2,4]))
    assert parallel_mapping.origin_fun is model
    assert repr(model.weight) == "ParamState(\n  value=ShapedArray(float32[2,4])\n)"
    # state_in_axes: {0: OfType(<class 'brainstate.ParamState'>)}
    assert parallel_mapping.state_in_axes == {0: OfType(state_core.ParamState)}
    assert repr(parallel_mapping.state_in_axes) == "{0: OfType(<class 'state_core.ParamState'>)}"
    assert parallel_mapping.state_out_axes == {0: OfType(state_core.ParamState)}
    assert parallel_mapping.axis_name == "devices"
    assert parallel_mapping.in_axes == 0
    assert parallel_mapping.out_axes == 0


@pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")
def test_seed000_custom_mapping_fn_pmap_with_donation():
    model = Affine(size=jax.local_device_count())
    custom_pmap = StatefulMapping(
        model,
        in_axes=0,
        out_axes=0,
        state_in_axes={0: OfType(state_core.ParamState)},
        state_out_axes={0: OfType(state_core.ParamState)},
        axis_name="devices",
        mapping_fn=lambda fun, *a, **kw: jax.pmap(fun, *a, donate_argnums=(0,), **kw),
    )
    custom_pmap(jnp.ones((jax.local_device_count(), 4)))
    w = model.weight.value
    assert w.shape == (8, 4)
    assert w.dtype == jnp.float32
    assert_allclose(np.asarray(w), np.full((8, 4), 2.0))
    # a second call reuses the program (the donated state buffers were replaced by outputs)
    custom_pmap(jnp.ones((jax.local_device_count(), 4)))
    assert_allclose(np.asarray(model.weight.value), np.full((8, 4), 3.0))


# ---------------------------------------------------------------- seed 004 (jax.pmap reference)
def test_seed004_square_map_over_leading_axis():
    out = pmap2(lambda x: x**2)(jnp.arange(8))
    assert_allclose(np.asarray(out), [0, 1, 4, 9, 16, 25, 36, 49])


def test_seed004_leading_dimension_smaller_than_device_count():
    x = jnp.arange(3 * 2 * 2.0).reshape((3, 2, 2))
    y = jnp.arange(3 * 2 * 2.0).reshape((3, 2, 2)) ** 2
    out = pmap2(jnp.dot)(x, y)
    expected = [
        [[4.0, 9.0], [12.0, 29.0]],
        [[244.0, 345.0], [348.0, 493.0]],
        [[1412.0, 1737.0], [1740.0, 2141.0]],
    ]
    assert_allclose(np.asarray(out), expected)


def test_seed004_more_lanes_than_devices_is_an_error():
    with pytest.raises(ValueError, match=r"(?s)9.*8") as info:
        pmap2(lambda x: x**2)(jnp.arange(9))
    msg = str(info.value)
    assert "9" in msg and "8" in msg


def test_seed004_in_axes_none_broadcast_and_tuple_output():
    x, y = jnp.arange(2.0), 4.0
    out = pmap2(lambda x, y: (x + y, y * 2.0), in_axes=(0, None))(x, y)
    assert isinstance(out, tuple) and len(out) == 2
    assert_allclose(np.asarray(out[0]), [4.0, 5.0])
    assert_allclose(np.asarray(out[1]), [8.0, 8.0])


def test_seed004_psum_collective():
    f = lambda x: x / jax.lax.psum(x, axis_name="i")
    out = pmap2(f, axis_name="i")(jnp.arange(4.0))
    assert_allclose(np.asarray(out), [0.0, 0.16666667, 0.33333334, 0.5], rtol=1e-6)
    assert_allclose(float(out.sum()), 1.0, rtol=1e-6)


def test_seed004_nested_pmap_rows_cols():
    @partial(pmap2, axis_name="rows")
    @partial(pmap2, axis_name="cols")
    def normalize(x):
        row_normed = x / jax.lax.psum(x, "rows")
        col_normed = x / jax.lax.psum(x, "cols")
        doubly_normed = x / jax.lax.psum(x, ("rows", "cols"))
        return row_normed, col_normed, doubly_normed

    x = jnp.arange(8.0).reshape((4, 2))
    row_normed, col_normed, doubly_normed = normalize(x)
    assert_allclose(np.asarray(row_normed.sum(0)), [1.0, 1.0], rtol=1e-6)
    assert_allclose(np.asarray(col_normed.sum(1)), [1.0, 1.0, 1.0, 1.0], rtol=1e-6)
    assert_allclose(float(doubly_normed.sum((0, 1))), 1.0, rtol=1e-6)


def test_seed004_psum_over_all_devices_single_process_analogue():
    # The multi-process example, on one process with 8 devices: x + psum(x) over arange(8).
    f = lambda x: x + jax.lax.psum(x, axis_name="i")
    out = pmap2(f, axis_name="i")(jnp.arange(8))
    assert_allclose(np.asarray(out), np.arange(8) + 28)


def test_seed004_explicit_devices_subsets():
    @partial(pmap2, axis_name="i", devices=jax.devices()[:6])
    def f1(x):
        return x / jax.lax.psum(x, axis_name="i")

    @partial(pmap2, axis_name="i", devices=jax.devices()[-2:])
    def f2(x):
        return jax.lax.psum(x**2, axis_name="i")

    out1 = f1(jnp.arange(6.0))
    assert_allclose(np.asarray(out1), [0.0, 0.06666667, 0.13333333, 0.2, 0.26666667, 0.33333333], rtol=1e-6)
    out2 = f2(jnp.array([2.0, 3.0]))
    assert_allclose(np.asarray(out2), [13.0, 13.0])
    assert {d for d in out2.devices()} <= set(jax.devices()[-2:])


def test_seed004_devices_given_wrong_lane_count_is_an_error():
    f = pmap2(lambda x: x * 2, devices=jax.devices()[:2])
    with pytest.raises(ValueError, match=r"(?s)3.*2"):
        f(jnp.arange(3.0))
