"""What a type checker sees of state_transform's transformations.

``tests-integration/test_typing.py`` runs ``mypy --strict`` (the repository's
``mypy.ini``) on this file and expects no error, so every ``assert_type`` below
is what mypy infers. The test also imports the module: every call runs, and the
values are checked, so the samples stay true.
"""

from __future__ import annotations

from typing import Any, assert_type

import jax
import jax.numpy as jnp
import numpy as np

from state_core import ParamState, State
from state_transform import (
    GradFunction,
    JittedFunction,
    RematFunction,
    StatefulMapping,
    ValueAndGradFunction,
    checkpoint,
    for_loop,
    fori_loop,
    grad,
    jit,
    map,
    pmap2,
    remat,
    scan,
    shard_map,
    value_and_grad,
    vmap,
    vmap2,
    while_loop,
)

w = ParamState(jnp.array([1.0, 2.0]))
calls = State(jnp.zeros(()))
x = jnp.array([3.0, 4.0])
xs = jnp.ones((3, 2))


def scale(v: jax.Array, factor: float = 2.0) -> jax.Array:
    calls.value = calls.value + 1
    return v * w.value * factor


def loss(v: jax.Array) -> jax.Array:
    return jnp.sum(w.value * v)


def loss_aux(v: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    return jnp.sum(w.value * v), {"v": v}


# ---------------------------------------------------------------- jit
jitted = jit(scale)
assert_type(jitted(x), jax.Array)
assert_type(jitted(x, 3.0), jax.Array)
assert_type(jitted(x, factor=3.0), jax.Array)
assert_type(jit(scale, donate_states=False)(x), jax.Array)
assert_type(jit(scale, static_argnums=1)(x, 3.0), jax.Array)
assert_type(jit(scale, name="scaled", cache_size=4)(x), jax.Array)
assert_type(jit(static_argnums=1)(scale)(x, 3.0), jax.Array)
assert_type(JittedFunction(scale)(x), jax.Array)
np.testing.assert_allclose(jitted(x, factor=3.0), [9.0, 24.0])


@jit
def double(v: jax.Array) -> jax.Array:
    return v * 2


@jit(static_argnums=1, donate_states=False)
def power(v: jax.Array, n: int) -> jax.Array:
    return v**n


assert_type(double(x), jax.Array)
assert_type(power(x, 2), jax.Array)
np.testing.assert_allclose(power(x, 2), [9.0, 16.0])


class Counter:
    """A method decorated with jit (or remat) is typed without ``self`` on an instance."""

    def __init__(self) -> None:
        self.total = State(jnp.zeros(()))

    @jit
    def add(self, v: jax.Array) -> jax.Array:
        self.total.value = self.total.value + v.sum()
        return self.total.value

    @remat
    def twice(self, v: jax.Array) -> jax.Array:
        return v * 2


counter = Counter()
total = counter.add(x)
assert_type(total, jax.Array)
assert_type(counter.twice(x), jax.Array)
np.testing.assert_allclose(total, 7.0)

# Bare class names in annotations still mean "any function": JittedFunction[..., Any].
untyped: JittedFunction = jitted
assert_type(untyped, JittedFunction[..., Any])
any_grad: GradFunction = grad(loss)
assert_type(any_grad, GradFunction[..., Any])

# ---------------------------------------------------------------- vmap2 / pmap2 / vmap
mapped = vmap2(scale, in_axes=(0, None))
assert_type(mapped(xs, 3.0), jax.Array)
assert_type(vmap2(in_axes=0)(loss)(xs), jax.Array)
assert_type(vmap(loss)(xs), jax.Array)
assert_type(vmap()(loss)(xs), jax.Array)
assert_type(StatefulMapping(loss)(xs), jax.Array)
np.testing.assert_allclose(mapped(xs, 3.0), np.tile([3.0, 6.0], (3, 1)))


@vmap2(in_axes=0)
def row_loss(v: jax.Array) -> jax.Array:
    return loss(v)


assert_type(row_loss(xs), jax.Array)

n_devices = jax.local_device_count()
assert_type(pmap2(loss, axis_name="i")(jnp.ones((n_devices, 2))), jax.Array)


@pmap2(axis_name="i")
def device_sum(v: jax.Array) -> jax.Array:
    return jax.lax.psum(v.sum(), "i")


assert_type(device_sum(jnp.ones((n_devices, 2))), jax.Array)
np.testing.assert_allclose(device_sum(jnp.ones((n_devices, 2))), np.full(n_devices, 2.0 * n_devices))


def doubled(v: jax.Array) -> jax.Array:
    return v * 2.0


mesh = jax.make_mesh((n_devices,), ("x",))
sharded = shard_map(doubled, mesh, in_specs=jax.sharding.PartitionSpec("x"), out_specs=jax.sharding.PartitionSpec("x"))
assert_type(sharded(jnp.ones((n_devices, 2))), jax.Array)
np.testing.assert_allclose(sharded(jnp.ones((n_devices, 2))), np.full((n_devices, 2), 2.0))

# Transformations compose; each keeps the parameters and result of what it wraps.
assert_type(jit(vmap2(scale, in_axes=(0, None)))(xs, 2.0), jax.Array)
assert_type(jit(remat(loss))(x), jax.Array)

# ---------------------------------------------------------------- remat / checkpoint
assert_type(remat(scale)(x, factor=1.0), jax.Array)
assert_type(checkpoint(prevent_cse=False)(scale)(x), jax.Array)
assert_type(RematFunction(loss)(x), jax.Array)

# ---------------------------------------------------------------- grad / value_and_grad
# The gradients' structure follows grad_states / argnums at run time: Any. The loss and
# aux parts come from the function's return type.
g = grad(loss, grad_states=w)(x)
assert_type(g, Any)
np.testing.assert_allclose(g, [3.0, 4.0])

g, value = grad(loss, grad_states=w, return_value=True)(x)
assert_type(value, jax.Array)

g, aux = grad(loss_aux, grad_states=w, has_aux=True)(x)
assert_type(aux, dict[str, jax.Array])

g, value, aux = grad(loss_aux, grad_states=w, has_aux=True, return_value=True)(x)
assert_type(value, jax.Array)
assert_type(aux, dict[str, jax.Array])
np.testing.assert_allclose(value, 11.0)
np.testing.assert_allclose(aux["v"], x)

# A has_aux / return_value that is not a literal cannot choose the layout: the call is Any.
with_aux: bool = bool(np.ones(()))
assert_type(grad(loss_aux, grad_states=w, has_aux=with_aux)(x), Any)


@grad(grad_states=w)
def decorated_loss(v: jax.Array) -> jax.Array:
    return loss(v)


assert_type(decorated_loss(x), Any)

value, g = value_and_grad(loss, grad_states=w)(x)
assert_type(value, jax.Array)
(value, aux), g = value_and_grad(loss_aux, grad_states=w, has_aux=True)(x)
assert_type(value, jax.Array)
assert_type(aux, dict[str, jax.Array])
assert_type(value_and_grad(grad_states=w)(loss)(x), tuple[jax.Array, Any])
assert_type(ValueAndGradFunction(loss, grad_states=w)(x), tuple[jax.Array, Any])


# ---------------------------------------------------------------- loops
def step(c: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    return c + v.sum(), c


def body(i: Any, c: jax.Array) -> jax.Array:
    return c + i


carry, ys = scan(step, jnp.zeros(()), xs)
assert_type(carry, jax.Array)
assert_type(ys, jax.Array)
np.testing.assert_allclose(ys, [0.0, 2.0, 4.0])
assert_type(for_loop(loss, xs), jax.Array)
assert_type(map(loss, xs), jax.Array)
assert_type(fori_loop(0, 3, body, jnp.zeros(())), jax.Array)
assert_type(while_loop(lambda c: c < 5, lambda c: c + 1, jnp.zeros(())), jax.Array)
np.testing.assert_allclose(for_loop(loss, xs), [3.0, 3.0, 3.0])
