"""Pins state-transform's internal mesh helpers (state_transform._meshes).

These were the examples of the helpers' docstrings; the helpers are not public, so
what they do is pinned here instead of in their documentation.
"""

import jax
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from state_transform._meshes import (
    annotation_mesh_guard,
    check_context_mesh,
    explicit_axes,
    explicit_sharding,
    mesh_text,
)


def _mesh(*types, names=("x",)):
    return jax.make_mesh((1,) * len(types), names, axis_types=types)


def test_explicit_axes_names_only_the_explicit_axes():
    assert sorted(explicit_axes(_mesh(AxisType.Explicit, AxisType.Auto, names=("a", "b")))) == ["a"]
    assert not explicit_axes(_mesh(AxisType.Auto))


def test_explicit_sharding_drops_the_auto_axes_of_the_spec():
    mesh = _mesh(AxisType.Explicit, AxisType.Auto, names=("a", "b"))
    sharding = explicit_sharding(mesh, P("a", "b"), explicit_axes(mesh))
    assert sharding.spec == P("a", None)
    assert sharding.mesh is mesh


def test_mesh_text_gives_axis_sizes_and_types():
    assert mesh_text(_mesh(AxisType.Auto)) == "{'x': 1} (axis types Auto)"
    assert mesh_text(_mesh(AxisType.Explicit, AxisType.Auto, names=("a", "b"))) == (
        "{'a': 1, 'b': 1} (axis types Explicit, Auto)"
    )


def test_check_context_mesh_refuses_another_mesh_set_with_set_mesh():
    mesh = _mesh(AxisType.Explicit)
    check_context_mesh(mesh, "f")  # no mesh set
    with jax.set_mesh(mesh):
        check_context_mesh(mesh, "f")
    with (
        jax.set_mesh(_mesh(AxisType.Auto)),
        pytest.raises(
            ValueError, match=r"^f runs on the mesh \{'x': 1\} \(axis types Explicit\), but it was called under "
        ),
    ):
        check_context_mesh(mesh, "f")


def test_annotation_mesh_guard_refuses_a_state_annotated_on_another_mesh():
    sharding = NamedSharding(_mesh(AxisType.Auto), P("x"))
    check = annotation_mesh_guard([("w", sharding, sharding)], "jit(f)")
    check()
    with (
        jax.set_mesh(_mesh(AxisType.Explicit)),
        pytest.raises(
            ValueError,
            match=r"^jit\(f\): w is annotated with a NamedSharding on the mesh \{'x': 1\} \(axis types Auto\), but it ",
        ),
    ):
        check()
    assert annotation_mesh_guard([], "jit(f)") is None
