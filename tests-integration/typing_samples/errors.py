"""Calls a type checker must reject: the wrapped function's parameters and result are kept.

``tests-integration/test_typing.py`` runs ``mypy --strict`` on this file and
expects exactly one error on each line marked ``# error: <code>: <part of the message>``
and no other.
Only type-checked, never run (the calls are wrong on purpose).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from state_core import HiddenState, ParamState
from state_nn import Map, Module
from state_transform import grad, jit, pmap2, remat, scan, value_and_grad, vmap, vmap2

w = ParamState(jnp.array([1.0, 2.0]))
x = jnp.array([3.0, 4.0])


def scale(v: jax.Array, factor: float = 2.0) -> jax.Array:
    return v * w.value * factor


def loss(v: jax.Array) -> jax.Array:
    return jnp.sum(w.value * v)


def loss_aux(v: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    return jnp.sum(w.value * v), {"v": v}


@jit(static_argnums=1)
def power(v: jax.Array, n: int) -> jax.Array:
    return v**n


class Counter:
    @jit
    def add(self, v: jax.Array) -> jax.Array:
        return v

    @remat
    def twice(self, v: jax.Array) -> jax.Array:
        return v * 2


class Cell(Module):
    def init_state(self, *args: object, **kwargs: object) -> None:
        self.hidden = HiddenState(jnp.zeros(3))


def wrong_calls() -> None:
    jit(scale)("not an array")  # error: arg-type: incompatible type "str"; expected "Array"
    jit(scale)(x, factor="big")  # error: arg-type: "factor" to "__call__" of "JittedFunction" has incompatible
    jit(scale)(x, 1.0, 2.0)  # error: call-arg: Too many arguments
    jit(scale, donate_states=False)(x, scaling=2.0)  # error: call-arg: Unexpected keyword argument "scaling"
    power(x, 2.5)  # error: arg-type: type "float"; expected "int"
    Counter().add("not an array")  # error: arg-type: Argument 1 to "__call__" of "JittedFunction" has incompatible
    Counter().twice(x, x)  # error: call-arg: Too many arguments for "__call__" of "RematFunction"
    vmap2(scale)(x, bad=1)  # error: call-arg: Unexpected keyword argument "bad"
    vmap2(in_axes=0)(loss)(1)  # error: arg-type: "StatefulMapping" has incompatible type "int"; expected "Array"
    vmap(loss)(x, x)  # error: call-arg: Too many arguments for "__call__" of "StatefulMapping"
    pmap2(loss)("not an array")  # error: arg-type: "StatefulMapping" has incompatible type "str"; expected "Array"
    remat(scale)("not an array")  # error: arg-type: "RematFunction" has incompatible type "str"; expected "Array"
    grad(loss, grad_states=w)(x, x)  # error: call-arg: Too many arguments for "__call__" of "GradFunction"
    value_and_grad(loss)("not an array")  # error: arg-type: incompatible type "str"; expected "Array"


def wrong_results() -> None:
    n: int = jit(scale)(x)  # error: assignment: expression has type "Array", variable has type "int"
    m: int = vmap2(loss)(x)  # error: assignment: expression has type "Array", variable has type "int"
    _, value = grad(loss, grad_states=w, return_value=True)(x)
    s: str = value  # error: assignment: expression has type "Array", variable has type "str"
    _, aux = grad(loss_aux, grad_states=w, has_aux=True)(x)
    t: int = aux  # error: assignment: expression has type "dict[str, Array]", variable has type "int"
    carry, _ = scan(lambda c, v: (c, v), jnp.zeros(()), x)
    u: str = carry  # error: assignment: expression has type "Array", variable has type "str"
    print(n, m, s, t, u)


def wrong_module() -> None:
    ensemble = Map(Cell(), init_map_size=2)
    print(ensemble.module.missing)  # error: attr-defined: "Cell" has no attribute "missing"
    h: int = ensemble.module.hidden  # error: assignment: expression has type "HiddenState[Array]"
    print(h)
