"""``brainstate._testing``: the assertion helpers that brainstate's test files import.

This is test-suite infrastructure, not part of the library under test:
brainstate ships it next to its tests (``from brainstate import _testing``),
and a dozen test files, among them the State and RandomState tests, import it.
It is written here from its documented behaviour, on top of the public names
of this shim only (``brainstate.transform.jit`` / ``grad`` / ``vmap``,
``brainstate.random.seed_context``), so it adds nothing to our packages.

Set ``BRAINSTATE_SUITE_NO_TESTING_HELPERS=1`` (``run.py --no-testing-helpers``)
to leave it out: the files that import it then fail to import.
"""

from __future__ import annotations

import os

if os.environ.get('BRAINSTATE_SUITE_NO_TESTING_HELPERS'):
    raise ImportError('brainstate._testing is switched off (--no-testing-helpers)')

import brainunit as u
import jax
import jax.numpy as jnp

import brainstate

SMALL_BATCH = 4
SMALL_DIM = 16
SMALL_SEQ = 5
DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-6

#: ``with seeded(0): ...`` seeds the default stream for the block.
seeded = brainstate.random.seed_context


def assert_allclose(actual, expected, *, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL, check_dtype=False):
    """Equal shapes, equal physical dimensions, and values close in ``expected``'s unit."""
    shape_a, shape_e = u.math.shape(actual), u.math.shape(expected)
    assert shape_a == shape_e, f'shape mismatch: {shape_a} != {shape_e}'
    assert u.get_dim(actual) == u.get_dim(expected), f'unit mismatch: {u.get_unit(actual)} vs {u.get_unit(expected)}'
    if check_dtype:
        dtype_a = u.get_magnitude(actual).dtype
        dtype_e = u.get_magnitude(expected).dtype
        assert dtype_a == dtype_e, f'dtype mismatch: {dtype_a} != {dtype_e}'
    unit = u.get_unit(expected)
    a = u.Quantity(actual).to_decimal(unit)
    e = u.Quantity(expected).to_decimal(unit)
    assert bool(jnp.allclose(a, e, rtol=rtol, atol=atol)), f'value mismatch beyond rtol={rtol}, atol={atol}'


def _tree_allclose(left, right, *, rtol, atol):
    jax.tree.map(lambda a, b: assert_allclose(a, b, rtol=rtol, atol=atol), left, right)


def assert_jit_equal(fn, *args, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL, **kwargs):
    """``brainstate.transform.jit(fn)`` gives what ``fn`` gives eagerly; returns the jitted result."""
    eager = fn(*args, **kwargs)
    jitted = brainstate.transform.jit(fn)(*args, **kwargs)
    _tree_allclose(eager, jitted, rtol=rtol, atol=atol)
    return jitted


def assert_grad_finite(fn, *args, argnums=0, **kwargs):
    """``brainstate.transform.grad(fn, argnums=...)`` gives finite gradients; returns them."""
    grads = brainstate.transform.grad(fn, argnums=argnums)(*args, **kwargs)
    leaves = jax.tree.leaves(grads)
    assert leaves, 'no gradient leaves were produced'
    for leaf in leaves:
        assert bool(jnp.all(jnp.isfinite(u.get_magnitude(leaf)))), 'non-finite gradient leaf'
    return grads


def assert_vmap_equal(fn, *batched_args, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL, **kwargs):
    """``brainstate.transform.vmap`` over axis 0 of every positional argument equals a Python loop.

    Keyword arguments go to ``fn`` unmapped in both runs.
    """
    mapped = brainstate.transform.vmap(lambda *xs: fn(*xs, **kwargs), in_axes=0)(*batched_args)
    n = u.math.shape(batched_args[0])[0]
    rows = [fn(*(jnp.take(x, i, axis=0) for x in batched_args), **kwargs) for i in range(n)]
    looped = jax.tree.map(lambda *xs: jnp.stack(xs), *rows)
    _tree_allclose(mapped, looped, rtol=rtol, atol=atol)
    return mapped


def assert_transform_compatible(
    fn, *args, transforms=('jit',), grad_argnums=0, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL, **kwargs
):
    """Apply the checks named in ``transforms`` (``'jit'``, ``'grad'``, ``'vmap'``); returns True."""
    if 'jit' in transforms:
        assert_jit_equal(fn, *args, rtol=rtol, atol=atol, **kwargs)
    if 'grad' in transforms:
        assert_grad_finite(fn, *args, argnums=grad_argnums, **kwargs)
    if 'vmap' in transforms:
        assert_vmap_equal(fn, *args, rtol=rtol, atol=atol, **kwargs)
    return True


def assert_pytree_roundtrip(obj, *, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL):
    """Flattening and unflattening ``obj`` gives the same structure and values; returns the copy."""
    leaves, treedef = jax.tree.flatten(obj)
    rebuilt = jax.tree.unflatten(treedef, leaves)
    assert jax.tree.structure(rebuilt) == jax.tree.structure(obj), 'pytree structure changed'
    _tree_allclose(obj, rebuilt, rtol=rtol, atol=atol)
    return rebuilt
