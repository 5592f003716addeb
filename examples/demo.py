"""Train an ensemble of small stochastic networks, one member per CPU device.

All four layers of the stack at work:

* state_core      -- ParamState / LongTermState hold weights and optimiser state;
* state_random    -- each member draws its own bootstrap sample and dropout masks;
* state_transform -- ``grad`` differentiates with respect to the member's
                     ParamStates, ``vmap2`` evaluates the trained ensemble on a grid;
* state_nn        -- ``Map(behavior='pmap')`` places one member on each of the
                     8 devices; ``Linear`` / ``Dropout`` build the members;
                     ``state_nn.checkpoint`` saves the ensemble half-way and
                     resumes from the checkpoint, bit for bit.

The task: regress y = sin(3x) + noise from 256 noisy samples. Each member sees
its own bootstrap resample every step, so the ensemble's spread is an honest
uncertainty estimate. Half-way, the run is checkpointed (weights, Adam state
and the random stream); after the last step the checkpoint is restored and the
second half is trained again, which reproduces every loss exactly.

    hatch run demo            # writes examples/out/ensemble.png and examples/out/checkpoint/
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import jax

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from tqdm import tqdm  # noqa: E402

import state_random  # noqa: E402
from state_core import LongTermState, ParamState  # noqa: E402
from state_nn import Dropout, Linear, Map, Module, checkpoint  # noqa: E402
from state_transform import grad, vmap2  # noqa: E402

MEMBERS = jax.local_device_count()
HIDDEN = 32
STEPS = 400
SAMPLES = 256
RESUME_AT = STEPS // 2
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
CHECKPOINT_DIR = os.path.join(OUT_DIR, "checkpoint")

optimizer = optax.adam(1e-2)


class Member(Module):
    """One ensemble member: a 1-32-32-1 tanh network with dropout, and its own Adam state."""

    def init_state(self) -> None:
        # Created here (not in __init__) so that Map makes one independent copy per member.
        self.hidden = Linear(1, HIDDEN)
        self.dropout = Dropout(0.1)
        self.middle = Linear(HIDDEN, HIDDEN)
        self.out = Linear(HIDDEN, 1)
        self.opt_state = LongTermState(optimizer.init(self.states(ParamState).to_values()))

    def predict(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
        h = jnp.tanh(self.hidden(x))
        h = self.dropout(h, deterministic=deterministic)
        h = jnp.tanh(self.middle(h))
        return self.out(h)

    def loss(self, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((self.predict(x, deterministic=False) - y) ** 2)

    def train_step(self, x: jax.Array, y: jax.Array) -> jax.Array:
        # A fresh bootstrap resample for this member (its own random stream).
        idx = state_random.randint(0, x.shape[0], size=(x.shape[0],))
        xb, yb = x[idx], y[idx]
        params = self.states(ParamState)  # a StateDict: path -> ParamState
        grads, loss = grad(self.loss, grad_states=params, return_value=True)(xb, yb)
        values = params.to_values()
        updates, self.opt_state.value = optimizer.update(grads, self.opt_state.value, values)
        params.assign_values(optax.apply_updates(values, updates))
        return loss


def make_data(seed: int) -> tuple[jax.Array, jax.Array]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, size=(SAMPLES, 1)).astype(np.float32)
    y = np.sin(3 * x) + 0.1 * rng.normal(size=x.shape).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


def main() -> int:
    print(f"jax {jax.__version__}: {jax.device_count()} CPU devices, {MEMBERS} ensemble members")
    state_random.seed(0)
    x, y = make_data(0)

    template = Member()  # the Map copies it; `template.predict` below runs on each copy's states
    ensemble = Map(template, init_map_size=MEMBERS, behavior="pmap", axis_name="member")
    ensemble.init_all_states()
    train = ensemble.map("train_step", in_axes=(None, None))

    per_step: list[np.ndarray] = []
    step_times = []
    for step in tqdm(range(STEPS), desc="training", unit="step", file=sys.stdout, mininterval=1.0):
        if step == RESUME_AT:
            # Weights, Adam state and the random stream (state_random.DEFAULT) in one directory.
            checkpoint.save(CHECKPOINT_DIR, ensemble, metadata={"step": step}, overwrite=True)
        start = time.perf_counter()
        loss = jax.block_until_ready(train(x, y))
        step_times.append(time.perf_counter() - start)
        per_step.append(np.asarray(loss))
    losses = np.stack(per_step)  # (steps, members)
    final_weights = ensemble.states(ParamState).to_values()

    print(
        f"\ntime per step: {statistics.median(step_times[5:]) * 1e3:.2f} ms "
        f"(first step, including tracing and compilation: {step_times[0] * 1e3:.0f} ms)"
    )
    print("per-member training loss (first step -> last 20 steps' mean):")
    for member in range(MEMBERS):
        print(f"  member {member}: {losses[0, member]:.4f} -> {losses[-20:, member].mean():.4f}")

    # Evaluate every member on a grid: vmap2 over the members' states, no dropout.
    grid = jnp.linspace(-1.5, 1.5, 200)[:, None]
    groups = ensemble.dict_vmap_states
    assert groups is not None  # init_all_states() made them
    member_states = groups[0]
    evaluate = vmap2(
        lambda g: template.predict(g, deterministic=True),
        in_axes=None,
        state_in_axes={0: member_states},
        axis_size=MEMBERS,
    )
    preds = np.asarray(evaluate(grid))[..., 0]  # (members, grid)
    truth = np.sin(3 * np.asarray(grid)[:, 0])
    mean = preds.mean(0)
    rmse = float(np.sqrt(np.mean((mean - truth) ** 2)))
    print(f"ensemble-mean RMSE against sin(3x) on the grid: {rmse:.4f}")
    print(f"ensemble spread (mean std across members): {float(preds.std(0).mean()):.4f}")

    resume_check(ensemble, train, x, y, losses, final_weights)

    path = save_plot(losses, np.asarray(grid)[:, 0], preds, truth, x, y)
    print(f"plot written to {path}")
    return 0


def resume_check(ensemble, train, x, y, losses, final_weights) -> None:
    """Restore the half-way checkpoint and train the second half again: it must match exactly."""
    state_random.seed(12345)  # as if in a new process: the random stream is elsewhere
    step = checkpoint.restore(CHECKPOINT_DIR, ensemble)["step"]
    resumed = np.stack([np.asarray(train(x, y)) for _ in range(step, STEPS)])
    weights = ensemble.states(ParamState).to_values()
    same = np.array_equal(resumed, losses[step:]) and all(
        np.array_equal(weights[path], value) for path, value in final_weights.items()
    )
    print(
        f"checkpoint saved at step {step} to {os.path.relpath(CHECKPOINT_DIR)}; resumed and trained "
        f"steps {step}..{STEPS - 1} again: losses and weights "
        + ("match the uninterrupted run bit for bit" if same else "DIFFER from the uninterrupted run")
    )
    if not same:
        raise SystemExit("resumed training diverged from the uninterrupted run")


def save_plot(losses, grid, preds, truth, x, y) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(OUT_DIR, exist_ok=True)
    fig, (ax_loss, ax_fit) = plt.subplots(1, 2, figsize=(11, 4))
    for member in range(losses.shape[1]):
        ax_loss.plot(losses[:, member], lw=0.8, label=f"member {member}")
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("training loss (MSE, bootstrap batch)")
    ax_loss.set_title("Loss curves, one member per device")
    ax_loss.legend(fontsize=7, ncol=2)
    ax_fit.scatter(np.asarray(x)[:, 0], np.asarray(y)[:, 0], s=6, c="0.6", label="data")
    for member in range(preds.shape[0]):
        ax_fit.plot(grid, preds[member], lw=0.7, alpha=0.7)
    ax_fit.plot(grid, preds.mean(0), c="k", lw=2, label="ensemble mean")
    ax_fit.plot(grid, truth, c="r", ls="--", lw=1, label="sin(3x)")
    ax_fit.set_title("Trained ensemble")
    ax_fit.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(OUT_DIR, "ensemble.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit(main())
