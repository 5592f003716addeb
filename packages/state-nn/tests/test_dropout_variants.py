"""brainstate's dropout variants: Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout, DropoutFixed."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_nn
import state_random
import state_transform
from state_core import environ

# The masks' values and statistics: the newest end only. Dropout's use of the random
# stream under jit, vmap2 and Map is checked at both ends by test_nn_layers.py.
pytestmark = pytest.mark.numerics

SELU_SATURATION = -1.7580993408473766  # brainstate's alpha


def _expected_scaled(seed, prob, x, mask_shape):
    """What a keep-probability dropout gives with the mask ``state_random`` draws after ``seed(seed)``."""
    state_random.seed(seed)
    keep = np.asarray(state_random.bernoulli(prob, mask_shape))
    return np.where(keep, np.asarray(x) / prob, 0.0), keep


# ---------------------------------------------------------------------- Dropout1d / 2d / 3d
@pytest.mark.parametrize(
    ("cls", "shape", "mask_shape"),
    [
        (state_nn.Dropout1d, (4, 6, 5), (4, 1, 5)),
        (state_nn.Dropout2d, (4, 3, 3, 5), (4, 1, 1, 5)),
        (state_nn.Dropout3d, (4, 2, 3, 2, 5), (4, 1, 1, 1, 5)),
        (state_nn.Dropout2d, (3, 3, 5), (1, 1, 5)),  # unbatched
    ],
)
def test_channel_dropout_values_match_a_per_channel_mask(cls, shape, mask_shape):
    x = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape).astype(np.float32)
    expected, keep = _expected_scaled(7, 0.6, x, mask_shape)
    state_random.seed(7)
    y = np.asarray(cls(prob=0.6)(x))
    assert_allclose(y, expected, rtol=1e-6)
    assert 0 < keep.sum() < keep.size  # both kept and dropped channels occur


def test_channel_dropout_drops_whole_channels_independently_per_batch_entry():
    state_random.seed(0)
    y = np.asarray(state_nn.Dropout2d(prob=0.5)(jnp.ones((16, 4, 4, 6))))
    dropped, kept = (y == 0).all(axis=(1, 2)), (y == 2.0).all(axis=(1, 2))  # (batch, channels)
    assert (dropped | kept).all()
    assert not (dropped == dropped[0]).all()  # the pattern differs between batch entries


def test_channel_axis_counts_in_the_unbatched_layout():
    state_random.seed(1)
    # Channels first: axis 0 of an unbatched (C, L) input, axis 1 of a batched (N, C, L) one.
    y = np.asarray(state_nn.Dropout1d(prob=0.5, channel_axis=0)(jnp.ones((6, 10))))
    assert (y == y[:, :1]).all() and set(np.unique(y)) == {0.0, 2.0}
    y = np.asarray(state_nn.Dropout1d(prob=0.5, channel_axis=0)(jnp.ones((8, 6, 10))))
    assert (y == y[:, :, :1]).all()
    assert not (y == y[:1]).all()  # one mask per batch entry
    # A negative axis counts from the end in both layouts.
    y = np.asarray(state_nn.Dropout1d(prob=0.5, channel_axis=-2)(jnp.ones((8, 6, 10))))
    assert (y == y[:, :, :1]).all()


# ---------------------------------------------------------------------- switching off
VARIANTS = [
    (lambda: state_nn.Dropout1d(prob=0.5), (2, 5, 3)),
    (lambda: state_nn.Dropout2d(prob=0.5), (2, 4, 4, 3)),
    (lambda: state_nn.Dropout3d(prob=0.5), (2, 2, 2, 2, 3)),
    (lambda: state_nn.AlphaDropout(prob=0.5), (8, 5)),
    (lambda: state_nn.FeatureAlphaDropout(prob=0.5), (8, 4, 3)),
]


@pytest.mark.parametrize(("make", "shape"), VARIANTS)
def test_identity_when_not_training(make, shape):
    x = np.linspace(-2.0, 2.0, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    layer = make()
    with environ.context(fit=False):
        assert_array_equal(layer(x), x)
    assert_array_equal(layer(x, deterministic=True), x)
    assert_array_equal(layer.eval()(x), x)
    assert layer.deterministic
    state_random.seed(0)
    with environ.context(fit=True):
        assert_array_equal(layer(x), x)  # fit=True does not override eval mode, as for Dropout
        assert not np.array_equal(np.asarray(layer.train()(x)), x)
    assert_array_equal(type(layer)(prob=1.0)(x), x)


def test_fit_flag_must_be_a_python_bool():
    with environ.context(fit=jnp.array(True)), pytest.raises(TypeError, match="AlphaDropout: environ's `fit` flag"):
        state_nn.AlphaDropout()(jnp.ones(3))


# ---------------------------------------------------------------------- AlphaDropout / FeatureAlphaDropout
@pytest.mark.parametrize("prob", [0.2, 0.5, 0.8])
def test_alpha_dropout_affine_constants(prob):
    q = 1.0 - prob
    a = (prob * (1 + q * SELU_SATURATION**2)) ** -0.5
    for layer in (state_nn.AlphaDropout(prob=prob), state_nn.FeatureAlphaDropout(prob=prob)):
        assert_allclose(layer.alpha, SELU_SATURATION, rtol=1e-15)
        assert_allclose(layer.a, a, rtol=1e-12)
        assert_allclose(layer.b, -a * q * SELU_SATURATION, rtol=1e-12)


def test_alpha_dropout_values():
    x = np.linspace(-3.0, 3.0, 40, dtype=np.float32)
    layer = state_nn.AlphaDropout(prob=0.7)
    state_random.seed(4)
    keep = np.asarray(state_random.bernoulli(0.7, x.shape))
    state_random.seed(4)
    y = np.asarray(layer(x))
    dropped = SELU_SATURATION * layer.a + layer.b
    assert_allclose(y, np.where(keep, x * layer.a + layer.b, dropped), rtol=1e-5, atol=1e-6)
    assert_allclose(y[~keep], dropped, rtol=1e-6)
    assert 0 < keep.sum() < keep.size


@pytest.mark.parametrize("prob", [0.5, 0.8])
def test_alpha_dropout_keeps_mean_and_variance_of_a_standard_normal_input(prob):
    state_random.seed(0)
    x = state_random.normal(size=200_000)
    y = np.asarray(state_nn.AlphaDropout(prob=prob)(x))
    assert abs(y.mean()) < 0.01
    assert abs(y.std() - 1.0) < 0.01


def test_alpha_dropout_keeps_a_float_dtype_and_promotes_integers():
    assert state_nn.AlphaDropout()(jnp.ones(4, jnp.bfloat16)).dtype == jnp.bfloat16
    assert jnp.issubdtype(state_nn.AlphaDropout()(jnp.arange(4)).dtype, jnp.floating)


def test_feature_alpha_dropout_drops_whole_channels():
    layer = state_nn.FeatureAlphaDropout(prob=0.5, channel_axis=1)
    x = np.asarray(state_random.normal(size=(6, 8, 5, 5)))
    state_random.seed(3)
    keep = np.asarray(state_random.bernoulli(0.5, (6, 8, 1, 1)))
    state_random.seed(3)
    y = np.asarray(layer(x))
    dropped = SELU_SATURATION * layer.a + layer.b
    assert_allclose(y, np.where(keep, x * layer.a + layer.b, dropped), rtol=1e-5, atol=1e-6)
    assert 0 < keep.sum() < keep.size
    # Channels last (the default) on a larger input: mean and variance are kept approximately.
    state_random.seed(0)
    y = np.asarray(state_nn.FeatureAlphaDropout(prob=0.8)(state_random.normal(size=(64, 50, 32))))
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1.0) < 0.05


# ---------------------------------------------------------------------- DropoutFixed
def test_dropout_fixed_reuses_its_mask_until_redrawn():
    state_random.seed(0)
    layer = state_nn.DropoutFixed(in_size=(3, 4), prob=0.5)
    layer.init_state(batch_size=5)
    mask = np.asarray(layer.mask.value)
    assert mask.shape == (5, 3, 4) and 0 < mask.sum() < mask.size
    for scale in (1.0, 2.0, 3.0):
        x = scale * np.ones((5, 3, 4), np.float32)
        assert_allclose(np.asarray(layer(x)), np.where(mask, x / 0.5, 0.0))
    layer.reset_state()
    redrawn = np.asarray(layer.mask.value)
    assert redrawn.shape == mask.shape and not np.array_equal(redrawn, mask)
    layer.init_state(batch_size=2)
    assert layer.mask.value.shape == (2, 3, 4)
    layer.reset_state(batch_size=3)
    assert layer.mask.value.shape == (3, 3, 4)


def test_dropout_fixed_unbatched_mask_and_model_hooks():
    state_random.seed(2)
    net = state_nn.Sequential(state_nn.Linear(3, 6), state_nn.DropoutFixed(6, prob=0.5))
    assert net.out_size == (6,)
    net.init_all_states()
    assert net[1].mask.value.shape == (6,)
    before = np.asarray(net[1].mask.value)
    net.reset_all_states()
    assert net[1].mask.value.shape == (6,) and not np.array_equal(np.asarray(net[1].mask.value), before)


def test_dropout_fixed_prob_one_and_not_training():
    layer = state_nn.DropoutFixed(2, prob=1.0)
    x = jnp.array([1.0, -2.0])
    with environ.context(fit=False):
        assert_array_equal(state_nn.DropoutFixed(2)(x), x)  # no mask needed when not training
    layer.init_state()
    assert_array_equal(layer(x), x)
    assert bool(layer.mask.value.all())


def test_dropout_fixed_errors():
    layer = state_nn.DropoutFixed(in_size=(3,), prob=0.5)
    with pytest.raises(ValueError, match=r"no mask for the input of shape \(4, 3\) yet; call init_state\(batch_size=4"):
        layer(jnp.ones((4, 3)))
    layer.init_state(batch_size=2)
    with pytest.raises(ValueError, match=r"the input has shape \(4, 3\) but the mask was drawn for shape \(2, 3\)"):
        layer(jnp.ones((4, 3)))
    with pytest.raises(ValueError, match="batch_size must be a positive int or None, got 0"):
        layer.init_state(batch_size=0)
    with pytest.raises(TypeError, match=r"in_size .* is required"):
        state_nn.DropoutFixed(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- argument errors
@pytest.mark.parametrize("cls", [state_nn.Dropout2d, state_nn.AlphaDropout, state_nn.FeatureAlphaDropout])
def test_prob_errors(cls):
    name = cls.__name__
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=rf"{name}: prob is the keep probability and must be in \(0, 1\]"):
            cls(prob=bad)
    with pytest.raises(TypeError, match=rf"{name}: prob \(the keep probability\) must be a float .*got str '0.5'"):
        cls(prob="0.5")
    assert cls(prob=np.float32(0.25)).prob == 0.25


def test_channel_axis_and_rank_errors():
    with pytest.raises(ValueError, match=r"Dropout2d: channel_axis .* must be in \[-3, 2\]; got 3"):
        state_nn.Dropout2d(channel_axis=3)
    with pytest.raises(TypeError, match=r"Dropout1d: channel_axis must be an int, got float 1\.0"):
        state_nn.Dropout1d(channel_axis=1.0)  # type: ignore[arg-type]
    layer = state_nn.Dropout1d(prob=0.5)
    with pytest.raises(ValueError, match=r"Dropout1d: expected an input of 2 axes .* got shape \(2, 3, 4, 5\)"):
        layer(jnp.ones((2, 3, 4, 5)))
    with environ.context(fit=False), pytest.raises(ValueError, match="got shape"):
        layer(jnp.ones(3))  # the rank is checked in evaluation too
    with pytest.raises(ValueError, match="FeatureAlphaDropout: channel_axis=0 is the batch axis"):
        state_nn.FeatureAlphaDropout(channel_axis=0)
    with pytest.raises(ValueError, match=r"expected a batched input .* got shape \(5,\)"):
        state_nn.FeatureAlphaDropout()(jnp.ones(5))
    with pytest.raises(ValueError, match=r"channel_axis=3\): the input of shape \(2, 3, 4\) has no such channel axis"):
        state_nn.FeatureAlphaDropout(channel_axis=3)(jnp.ones((2, 3, 4)))


# ---------------------------------------------------------------------- under transforms
def test_variants_under_jit_and_for_loop():
    drop = state_nn.Dropout2d(prob=0.5)
    f = state_transform.jit(drop)
    x = jnp.ones((4, 3, 3, 6))
    state_random.seed(5)
    expected, _ = _expected_scaled(5, 0.5, x, (4, 1, 1, 6))
    state_random.seed(5)
    first = f(x)
    assert_allclose(np.asarray(first), expected)
    assert not jnp.array_equal(f(x), first)  # a fresh mask at every call

    # DropoutFixed's mask is a State: the same at every step of a compiled loop.
    state_random.seed(6)
    fixed = state_nn.DropoutFixed(5, prob=0.5)
    fixed.init_state(batch_size=2)
    ys = state_transform.for_loop(fixed, jnp.arange(1.0, 4.0)[:, None, None] * jnp.ones((3, 2, 5)))
    mask = np.asarray(fixed.mask.value)
    for t in range(3):
        assert_allclose(np.asarray(ys[t]), np.where(mask, (t + 1) / 0.5, 0.0))


def test_variants_under_vmap2_and_map_draw_per_lane_masks():
    state_random.seed(0)
    out = np.asarray(state_transform.vmap2(state_nn.Dropout1d(prob=0.5))(jnp.ones((6, 5, 3))))  # lanes of (L, C)
    assert (out == out[:, :1, :]).all()
    assert len({tuple(row) for row in out[:, 0, :].tolist()}) > 1

    class Member(state_nn.Module):
        def __init__(self):
            self.drop = state_nn.DropoutFixed(16, prob=0.5)

        def update(self, x):
            return self.drop(x)

    ensemble = state_nn.Map(Member(), 3, in_axes=None)
    ensemble.init_all_states()
    first = np.asarray(ensemble(jnp.ones(16)))
    assert len({tuple(row) for row in first.tolist()}) == 3  # one mask per member
    assert_array_equal(np.asarray(ensemble(jnp.ones(16))), first)  # kept across calls
