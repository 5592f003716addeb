"""Loops inside and around jit, vmap2, pmap2, shard_map and grad."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

import state_random
from state_core import HiddenState, ParamState, State
from state_core.filter import OfType
from state_transform import cond, for_loop, fori_loop, grad, jit, pmap2, scan, shard_map, vmap2, while_loop

HIDDEN = OfType(HiddenState)


class Population:
    """A tiny leaky neuron population with noisy input (one member of an ensemble)."""

    def __init__(self, n, seed=0):
        self.v = HiddenState(jnp.zeros(n), name="v")
        self.tau = State(jnp.float32(10.0), name="tau")
        self.rng = state_random.RandomState(seed)

    def update(self, t):
        noise = self.rng.normal(size=self.v.value.shape)
        self.v.value = self.v.value + (-self.v.value + 1.0 + 0.1 * noise) / self.tau.value
        return self.v.value.mean() + 0.0 * t


def test_vmap2_of_for_loop_over_an_ensemble():
    pop = Population(5)
    pop.v.value = jnp.zeros((4, 5))  # 4 ensemble members
    traces = []

    def step(t):
        traces.append(1)
        return pop.update(t)

    sim = vmap2(
        lambda ts: for_loop(step, ts), in_axes=None, axis_size=4, state_in_axes={0: HIDDEN}, state_out_axes={0: HIDDEN}
    )
    ys = sim(jnp.arange(20.0))
    assert ys.shape == (4, 20)
    assert pop.v.value.shape == (4, 5)
    # members got different noise (per-lane keys), all relax towards 1
    assert len({float(x) for x in ys[:, -1]}) == 4
    assert_allclose(ys[:, -1], 1 - 0.9**20, atol=0.05)
    ys2 = sim(jnp.arange(20.0))
    assert len(traces) == 1
    assert ys2.shape == (4, 20)


def test_for_loop_inside_vmap2_matches_a_python_loop_per_lane():
    h = State(jnp.zeros(3), name="h")

    def step(x):
        h.value = h.value * 0.5 + x
        return h.value.sum()

    f = vmap2(
        lambda xs: for_loop(step, xs), in_axes=1, state_in_axes={0: OfType(State)}, state_out_axes={0: OfType(State)}
    )
    h.value = jnp.zeros((2, 3))
    xs = jnp.arange(8.0).reshape(4, 2)
    ys = f(xs)
    for lane in range(2):
        hv = np.zeros(3)
        for t in range(4):
            hv = hv * 0.5 + float(xs[t, lane])
            assert_allclose(ys[lane, t], hv.sum(), rtol=1e-6)
        assert_allclose(h.value[lane], hv, rtol=1e-6)


def test_vmap2_inside_for_loop():
    h = State(jnp.zeros(4), name="h")

    def step(x):
        return vmap2(lambda a: a * 2, in_axes=0)(x + h.value)

    def body(t):
        h.value = h.value + 1
        return step(jnp.full(4, t))

    ys = for_loop(body, jnp.arange(3.0))
    assert_allclose(ys, [[2.0] * 4, [6.0] * 4, [10.0] * 4])


def test_grad_through_for_loop_wrt_state():
    w = ParamState(jnp.array(0.5), name="w")
    x = State(jnp.array(1.0), name="x")

    def loss():
        def step(t):
            x.value = x.value * w.value + t
            return x.value

        return for_loop(step, jnp.arange(3.0)).sum()

    g, value = grad(loss, grad_states=w, return_value=True)()

    def pure(wv):
        def body(c, t):
            c = c * wv + t
            return c, c

        return jax.lax.scan(body, 1.0, jnp.arange(3.0))[1].sum()

    assert_allclose(value, pure(0.5), rtol=1e-6)
    assert_allclose(g, jax.grad(pure)(0.5), rtol=1e-6)
    assert_allclose(x.value, 1.0 * 0.5**3 + 0 * 0.25 + 1 * 0.5 + 2, rtol=1e-6)


def test_loop_inside_grad_inside_jit_and_loop_of_grad():
    w = ParamState(jnp.array(2.0), name="w")

    def loss(x):
        return fori_loop(0, 3, lambda i, c: c * w.value, x)

    g = jit(grad(loss, grad_states=w))
    assert_allclose(g(1.0), 3 * 2.0**2)

    def train(t):
        gw = grad(lambda: w.value**2, grad_states=w)()
        w.value = w.value - 0.25 * gw
        return w.value

    ys = for_loop(train, jnp.arange(3))
    assert_allclose(ys, [1.0, 0.5, 0.25])


def test_pmap2_of_for_loop():
    n = 4
    s = State(jnp.zeros(n), name="s")

    def sim(x):
        def step(t):
            s.value = s.value + x * t
            return s.value

        return for_loop(step, jnp.arange(3.0))[-1]

    f = pmap2(sim, axis_name="i", state_in_axes={0: OfType(State)}, state_out_axes={0: OfType(State)})
    out = f(jnp.arange(float(n)))
    assert_allclose(out, np.arange(n) * 3.0)
    assert_allclose(s.value, np.arange(n) * 3.0)


def test_shard_map_of_scan():
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    acc = State(jnp.zeros(()), name="acc")

    def per_shard(xs):
        def step(c, x):
            acc.value = acc.value + x.sum()
            return c + 1, None

        c, _ = scan(step, 0, xs)
        return jnp.full((1,), c)

    f = shard_map(per_shard, mesh, in_specs=(P("x"),), out_specs=P("x"), state_out_specs={acc: P()}, check_vma=False)
    data = jnp.ones((jax.device_count(), 3))
    out = f(data)
    assert_allclose(out, np.ones(jax.device_count()) * 1)
    assert_allclose(acc.value, 3.0)


def test_while_loop_inside_jit_with_state_limit():
    x = State(jnp.array(1.0), name="x")
    limit = State(jnp.array(50.0), name="limit")

    @jit
    def run():
        return while_loop(lambda n: x.value < limit.value, lambda n: _double(x, n), 0)

    assert int(run()) == 6
    assert_allclose(x.value, 64.0)
    limit.value = jnp.array(1000.0)
    assert int(run()) == 4
    assert_allclose(x.value, 1024.0)


def _double(x, n):
    x.value = x.value * 2
    return n + 1


# ---------------------------------------------------------------- write-only states
def test_write_only_state_in_vmap2_of_for_loop():
    v = HiddenState(jnp.zeros((3, 4)), name="v")
    spike = State(jnp.zeros((3, 4), bool), name="spike")  # written, never read

    def step(t):
        v.value = v.value + t
        spike.value = v.value > 2.5
        return spike.value.sum()

    states = OfType(State)
    sim = vmap2(
        lambda ts: for_loop(step, ts), in_axes=None, axis_size=3, state_in_axes={0: states}, state_out_axes={0: states}
    )
    counts = sim(jnp.arange(4.0))
    assert_allclose(counts, np.tile([0, 0, 4, 4], (3, 1)))
    assert spike.value.shape == (3, 4) and bool(spike.value.all())


def test_branch_only_write_passes_current_value_under_jit():
    last = State(jnp.array(-1.0), name="last_spike")  # written in one branch, never read

    def fire(t):
        last.value = t

    @jit
    def step(p, t):
        cond(p, fire, lambda t: None, t)

    step(True, 3.0)
    assert_allclose(last.value, 3.0)
    last.value = jnp.array(7.0)
    step(False, 5.0)
    assert_allclose(last.value, 7.0)  # the untaken branch keeps today's value, not a traced-in constant

    # inside a loop body: the state keeps the time of the last firing
    last.value = jnp.array(-1.0)
    for_loop(lambda t: cond(t % 3 == 0, fire, lambda t: None, t), jnp.arange(8.0))
    assert_allclose(last.value, 6.0)


def test_while_loop_zero_iterations_keeps_write_only_state_under_jit():
    out = State(jnp.array(42.0), name="out")

    def body(n):
        out.value = n * 1.0
        return n + 1

    run = jit(lambda start: while_loop(lambda n: n < 3, body, start))
    run(0)
    assert_allclose(out.value, 2.0)
    out.value = jnp.array(42.0)
    run(5)
    assert_allclose(out.value, 42.0)


def test_jit_and_vmap2_called_inside_loop_bodies():
    h = State(jnp.zeros(2), name="h")
    inner = jit(lambda x: _add_to(h, x))
    ys = for_loop(inner, jnp.ones((3, 2)))
    assert_allclose(ys, [[1, 1], [2, 2], [3, 3]])
    assert_allclose(h.value, [3.0, 3.0])


def _add_to(state, x):
    state.value = state.value + x
    return state.value


def test_concurrent_loops_from_threads():
    import threading

    states = [State(jnp.zeros(()), name=f"s{k}") for k in range(4)]
    results = {}

    def body_for(k):
        def step(x):
            states[k].value = states[k].value + x
            return states[k].value

        return step

    def worker(k):
        step = body_for(k)
        for _ in range(3):
            results[k] = for_loop(step, jnp.arange(4.0) * (k + 1))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        assert_allclose(states[k].value, 3 * 6.0 * (k + 1))
        assert not isinstance(states[k].value, jax.core.Tracer)


def test_local_states_of_loop_bodies_inside_jit_vmap2_and_grad():
    acc = State(jnp.zeros(()), name="acc")
    traces = []

    def body(x):
        traces.append(1)
        sq = HiddenState(x)
        sq.value = sq.value**2
        acc.value = acc.value + sq.value

    @jit
    def total(xs):
        for_loop(body, xs)
        return acc.value

    assert_allclose(total(jnp.arange(4.0)), 14.0)
    assert_allclose(total(jnp.arange(4.0)), 28.0)
    assert len(traces) == 1
    assert_allclose(acc.value, 28.0)

    def lane(xs):  # one loop per lane; its local state holds per-lane values
        def step(c, x):
            tmp = State(c * 0.5 + x)
            return tmp.value, tmp.value

        return scan(step, jnp.float32(0.0), xs)[1]

    xs = jnp.arange(8.0).reshape(2, 4)
    ref = jax.vmap(lambda v: jax.lax.scan(lambda c, x: (c * 0.5 + x, c * 0.5 + x), jnp.float32(0.0), v)[1])(xs)
    assert_allclose(vmap2(lane)(xs), ref, rtol=1e-6)

    w = ParamState(jnp.float32(2.0), name="w")

    def loss(x):
        def step(c, xi):
            scaled = HiddenState(c * w.value)  # depends on the carry and on the differentiated state
            return scaled.value + xi, None

        return scan(step, x, jnp.arange(3.0))[0]

    (g_w,) = grad(loss, grad_states=[w])(jnp.float32(1.0))
    ref = jax.grad(lambda v: jax.lax.scan(lambda c, xi: (c * v + xi, None), 1.0, jnp.arange(3.0))[0])(2.0)
    assert_allclose(g_w, ref, rtol=1e-6)
    assert_allclose(w.value, 2.0)
