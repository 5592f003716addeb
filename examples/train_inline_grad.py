"""Train a small MLP classifier, building the gradient function inline in every step.

Follows the structure of brainstate's ``docs/tutorials/core/07_training_and_metrics.ipynb``:
three Gaussian clusters drawn from the seeded global random stream and
standardised, a two-layer ``Module`` of ``Linear`` layers with ``relu``, and a
training step that calls ``grad(loss_fn, grad_states=params, return_value=True)``
inline, so that every step (every trace, under ``jit``) builds a new gradient
transformation, as brainstate programs usually do. The optimiser is optax's
Adam, its state kept in a ``State``; the mini-batches are reshuffled every
epoch with ``permutation``. The layers get their initial values as arrays
(He-normal weights drawn from the seeded stream, zero biases) rather than from
the layers' default initialisers, which differ between the two libraries.

This is a brainstate program with its imports renamed. The marked import block
is the only part that differs from the brainstate original, line for line:

    from brainstate import ParamState, State
        -> from state_core import ParamState, State
    from brainstate.nn import Linear, Module, log_softmax, relu
        -> from state_nn import Linear, Module, log_softmax, relu
    from brainstate.random import permutation, randn, seed
        -> from state_random import permutation, randn, seed
    from brainstate.transform import grad, jit
        -> from state_transform import grad, jit

Both print the same losses and accuracy: bit for bit under ``jit``; run eagerly
(``--no-jit``) a loss may differ in the last bit, because brainstate evaluates
each step's gradient operation by operation, while the gradients built inline
here share one cache of traced programs and run one compiled XLA program from
the second step on (whose fused arithmetic rounds differently). Checked against
brainstate 0.5.4 by ``tests-integration/test_integration_brainstate_examples.py``.
In this repository: ``hatch run py examples/train_inline_grad.py [--no-jit]``.
"""

import sys

import jax.numpy as jnp
import optax

# ---- renamed imports (brainstate -> state_*), see the module docstring ----
from state_core import ParamState, State
from state_nn import Linear, Module, log_softmax, relu
from state_random import permutation, randn, seed
from state_transform import grad, jit

# ---- end of renamed imports ----

DIM, N_CLASSES = 8, 3


class MLP(Module):
    """``Linear -> relu -> Linear``, one logit per class."""

    def __init__(self, din, dhidden, dout):
        super().__init__()
        self.fc1 = Linear(din, dhidden, w_init=randn(din, dhidden) * (2.0 / din) ** 0.5, b_init=jnp.zeros(dhidden))
        self.fc2 = Linear(dhidden, dout, w_init=randn(dhidden, dout) * (2.0 / dhidden) ** 0.5, b_init=jnp.zeros(dout))

    def update(self, x):
        return self.fc2(relu(self.fc1(x)))


def make_blobs(centers, n_per):
    """``n_per`` points around each centre, with their class labels."""
    xs = [randn(n_per, DIM) + centers[c] for c in range(N_CLASSES)]
    ys = [jnp.full((n_per,), c, dtype=jnp.int32) for c in range(N_CLASSES)]
    return jnp.concatenate(xs), jnp.concatenate(ys)


def main(hidden=32, epochs=15, batch_size=32, n_per_class=200, lr=1e-2, use_jit=True, seed_value=42):
    """Train and evaluate; print and return the losses and the test accuracy."""
    seed(seed_value)
    centers = randn(N_CLASSES, DIM) * 2.0
    x_train, y_train = make_blobs(centers, n_per_class)
    x_test, y_test = make_blobs(centers, n_per_class // 4)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std

    model = MLP(DIM, hidden, N_CLASSES)
    params = model.states(ParamState)
    optimizer = optax.adam(lr)
    opt_state = State(optimizer.init(params.to_dict_values()))

    def loss_fn(x, y):
        logits = model(x)
        return -jnp.mean(jnp.take_along_axis(log_softmax(logits), y[:, None], axis=1))

    def train_step(x, y):
        # a new gradient transformation each step: nothing is cached by hand
        grads, loss = grad(loss_fn, grad_states=params, return_value=True)(x, y)
        updates, opt_state.value = optimizer.update(grads, opt_state.value)
        params.assign_dict_values(optax.apply_updates(params.to_dict_values(), updates))
        return loss

    if use_jit:
        train_step = jit(train_step)

    epoch_losses = []
    for epoch in range(epochs):
        order = permutation(len(x_train))
        losses = []
        for start in range(0, len(x_train), batch_size):
            idx = order[start : start + batch_size]
            losses.append(train_step(x_train[idx], y_train[idx]))
        epoch_losses.append(float(jnp.mean(jnp.stack(losses))))
        print(f"epoch {epoch:2d} | train loss {epoch_losses[-1]!r}")

    test_loss = float(loss_fn(x_test, y_test))
    test_accuracy = float(jnp.mean(jnp.argmax(model(x_test), axis=1) == y_test))
    print(f"test loss {test_loss!r} | test accuracy {test_accuracy!r}")
    return {'epoch_losses': epoch_losses, 'test_loss': test_loss, 'test_accuracy': test_accuracy}


if __name__ == '__main__':
    main(use_jit='--no-jit' not in sys.argv[1:])
