"""Train a tensor-parallel two-layer MLP whose weights are sharded by annotation.

The 8 CPU devices form a 2-D mesh ``('data', 'model')`` of 2 x 4. The batch is
split over ``'data'``; the weights are split over ``'model'`` Megatron-style:

* the first layer is column-parallel: ``w1`` is ``P(None, 'model')`` (each device
  holds a quarter of the hidden units), and so is its bias ``b1: P('model')``;
* the second layer is row-parallel: ``w2`` is ``P('model', None)`` (each device
  holds the rows for its hidden units); the output bias is replicated.

The model only *annotates* its ParamStates (``ParamState(value, sharding=P(...))``).
``state_transform.jit`` turns the annotations into the compiled program's input
and output shardings, so the weights stay split across the devices from step to
step and XLA's partitioner inserts the one all-reduce the row-parallel layer
needs. A hand-written pure-JAX ``jax.jit`` with the same shardings trains the
same network from the same initial values; both give the same losses and weights.

    hatch run py examples/tensor_parallel_mlp.py
"""

from __future__ import annotations

import jax

# Expose 8 virtual CPU devices; must run before the JAX backend initialises.
jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from state_core import ParamState, shard_states  # noqa: E402
from state_nn import Module  # noqa: E402
from state_transform import grad, jit  # noqa: E402

D_IN, D_HIDDEN, D_OUT, BATCH = 8, 32, 4, 64
STEPS, LEARNING_RATE = 10, 0.1

# The layout of every parameter, shared by our model and the pure-JAX reference.
SPECS = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}
BATCH_SPEC = P("data", None)


def make_mesh() -> Mesh:
    """A 2 x 4 mesh of the 8 devices; Auto axes let XLA's partitioner (GSPMD) place the rest."""
    return jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))


def init_params(seed: int = 0) -> dict[str, jax.Array]:
    """Initial weights (plain arrays on one device), the same for both versions."""
    k1, k2 = jax.random.split(jax.random.key(seed))
    return {
        "w1": jax.random.normal(k1, (D_IN, D_HIDDEN)) / np.sqrt(D_IN),
        "b1": jnp.zeros(D_HIDDEN),
        "w2": jax.random.normal(k2, (D_HIDDEN, D_OUT)) / np.sqrt(D_HIDDEN),
        "b2": jnp.zeros(D_OUT),
    }


def make_batch(mesh: Mesh, seed: int = 1) -> tuple[jax.Array, jax.Array]:
    """A regression batch ``y = sin(x @ a)``, split over the ``'data'`` axis."""
    kx, ka = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(kx, (BATCH, D_IN))
    y = jnp.sin(x @ jax.random.normal(ka, (D_IN, D_OUT)))
    batch = NamedSharding(mesh, BATCH_SPEC)
    return jax.device_put(x, batch), jax.device_put(y, batch)


def forward(params: dict, x: jax.Array) -> jax.Array:
    """The MLP's math, written once for both versions."""
    hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"] + params["b2"]


# ---------------------------------------------------------------------- ours: annotated States
class TensorParallelMLP(Module):
    """Two dense layers whose ParamStates carry their sharding as an annotation."""

    def __init__(self, params: dict) -> None:
        super().__init__()
        self.w1 = ParamState(params["w1"], name="w1", sharding=SPECS["w1"])
        self.b1 = ParamState(params["b1"], name="b1", sharding=SPECS["b1"])
        self.w2 = ParamState(params["w2"], name="w2", sharding=SPECS["w2"])
        self.b2 = ParamState(params["b2"], name="b2", sharding=SPECS["b2"])

    def __call__(self, x: jax.Array) -> jax.Array:
        values = {name: getattr(self, name).value for name in SPECS}
        return forward(values, x)


def train_ours(mesh: Mesh, params: dict, x: jax.Array, y: jax.Array, steps: int = STEPS) -> tuple[list, dict, Module]:
    """Train with ``state_transform.jit`` + ``grad``; returns (losses, final weights, model)."""
    model = TensorParallelMLP(params)
    weights = model.states(ParamState)

    def loss_fn(x, y):
        return jnp.mean((model(x) - y) ** 2)

    @jit
    def train_step(x, y):
        grads, loss = grad(loss_fn, grad_states=weights, return_value=True)(x, y)
        for path, g in grads.items():
            weights[path].value = weights[path].value - LEARNING_RATE * g
        return loss

    losses = []
    with jax.set_mesh(mesh):  # the mesh the PartitionSpec annotations refer to
        shard_states(weights)  # optional: place the weights now rather than at the first call
        for _ in range(steps):
            losses.append(float(train_step(x, y)))
    final = {path[-1]: state.value for path, state in weights.items()}
    return losses, final, model


# ---------------------------------------------------------------------- reference: pure JAX
def train_pure(mesh: Mesh, params: dict, x: jax.Array, y: jax.Array, steps: int = STEPS) -> tuple[list, dict]:
    """The same training by hand: weights threaded through a ``jax.jit`` with explicit shardings."""
    param_shardings = {name: NamedSharding(mesh, spec) for name, spec in SPECS.items()}
    batch = NamedSharding(mesh, BATCH_SPEC)

    def loss_fn(params, x, y):
        return jnp.mean((forward(params, x) - y) ** 2)

    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return {k: params[k] - LEARNING_RATE * grads[k] for k in params}, loss

    compiled = jax.jit(
        step,
        in_shardings=(param_shardings, batch, batch),
        out_shardings=(param_shardings, NamedSharding(mesh, P())),
    )
    params = jax.device_put(params, param_shardings)
    losses = []
    for _ in range(steps):
        params, loss = compiled(params, x, y)
        losses.append(float(loss))
    return losses, params


def main() -> None:
    mesh = make_mesh()
    params = init_params()
    x, y = make_batch(mesh)
    ours, ours_params, model = train_ours(mesh, params, x, y)
    pure, pure_params = train_pure(mesh, params, x, y)
    spec = x.sharding.spec if isinstance(x.sharding, NamedSharding) else x.sharding
    print(f"mesh: {dict(mesh.shape)}; batch {x.shape} sharded {spec}")
    print("step   ours        pure JAX")
    for i, (a, b) in enumerate(zip(ours, pure, strict=True)):
        print(f"{i:4d}   {a:.6f}    {b:.6f}")
    print("weight shardings after training:")
    for name in SPECS:
        value = getattr(model, name).value
        shard_shape = value.addressable_shards[0].data.shape
        print(f"  {name}: shape {value.shape}, spec {value.sharding.spec}, per-device shard {shard_shape}")
    loss_gap = max(abs(a - b) for a, b in zip(ours, pure, strict=True))
    weight_gap = max(float(jnp.max(jnp.abs(ours_params[k] - pure_params[k]))) for k in SPECS)
    agree = np.allclose(ours, pure, rtol=1e-6, atol=1e-7) and weight_gap <= 1e-6
    print(f"largest loss difference {loss_gap:.2e}, largest weight difference {weight_gap:.2e}: ", end="")
    print("ours and pure JAX agree" if agree else "MISMATCH")


if __name__ == "__main__":
    main()
