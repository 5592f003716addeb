"""``Dropout`` honours ``state_core.environ``'s ``fit`` flag as brainstate's does."""

from __future__ import annotations

import jax.numpy as jnp
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
