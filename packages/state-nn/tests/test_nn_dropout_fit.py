"""``Dropout`` honours ``state_core.environ``'s ``fit`` flag as brainstate's does."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_array_equal

import state_nn
import state_random
from state_core import environ


def _dropped(layer, **kwargs):
    state_random.seed(0)
    y = layer(jnp.ones(64), **kwargs)
    return bool((y == 0).any())


def test_fit_false_makes_dropout_the_identity():
    layer = state_nn.Dropout(0.5)
    with environ.context(fit=False):
        assert_array_equal(layer(jnp.ones(64)), jnp.ones(64))
    with environ.context(fit=True):
        assert _dropped(layer)
    assert _dropped(layer)  # unset: the layer's own (training) mode


def test_fit_true_does_not_override_eval_mode_and_the_call_argument_wins():
    layer = state_nn.Dropout(0.5, deterministic=True)
    with environ.context(fit=True):
        assert not _dropped(layer)
    with environ.context(fit=False):
        assert _dropped(layer.update, deterministic=False)
    environ.set(fit=False)
    try:
        assert not _dropped(state_nn.Dropout(0.5))
    finally:
        environ.pop("fit")


def test_fit_must_be_a_python_bool():
    with (
        environ.context(fit=jnp.array(True)),
        pytest.raises(TypeError, match="environ's `fit` flag must be a Python bool, got ArrayImpl"),
    ):
        state_nn.Dropout(0.5)(jnp.ones(3))


def test_broadcast_dims_share_one_mask_value_along_those_dimensions():
    state_random.seed(3)
    drop = state_nn.Dropout(0.5, broadcast_dims=(0,))
    y = np.asarray(drop(jnp.ones((6, 8))))
    assert (y == y[0]).all()  # every row gets the same mask
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.0 in y and 2.0 in y
    y = np.asarray(state_nn.Dropout(0.5, broadcast_dims=-1)(jnp.ones((5, 7))))
    assert (y == y[:, :1]).all()  # one value per row
    with pytest.raises(ValueError, match=r"broadcast_dims contains 2, but the input has shape \(5, 7\)"):
        state_nn.Dropout(0.5, broadcast_dims=(2,))(jnp.ones((5, 7)))
    with pytest.raises(TypeError, match="broadcast_dims must be ints"):
        state_nn.Dropout(0.5, broadcast_dims=(0.5,))
