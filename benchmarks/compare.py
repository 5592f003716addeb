"""Time the reference library (brainstate) and flax.nnx on the same cases as ours.

Neither is a dependency of our packages: install them in a separate environment
(``hatch run bench-compare`` does) and run ``bench.py --compare``. Each library is
timed only if it imports; every time is also given as a ratio to hand-written
pure JAX (its state values donated) measured in the same run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from state_core import ShortTermState
from state_core.filter import OfType
from state_transform import jit, vmap2

N_STATES = 100
BATCH = 16

Case = Callable[[], Any]


def _step_values(values: list, inp: Any) -> tuple[list, Any]:
    new = [v * 0.5 + inp for v in values]
    total = 0.0
    for v in new:
        total = total + v
    return new, total


def pure_cases() -> dict[str, Case]:
    x = jnp.ones((BATCH, 4))
    vm = jax.jit(jax.vmap(_step_values), donate_argnums=0)  # (the old values are dead: donated)
    jt = jax.jit(_step_values, donate_argnums=0)
    box = {
        "v": [jnp.zeros((BATCH, 4)) + i for i in range(N_STATES)],
        "j": [jnp.zeros((BATCH, 4)) + i for i in range(N_STATES)],
    }

    def run_vmap():
        box["v"], out = vm(box["v"], x)
        return out

    def run_jit():
        box["j"], out = jt(box["j"], x)
        return out

    return {"vmap": run_vmap, "jit": run_jit}


def ours_cases() -> dict[str, Case]:
    x = jnp.ones((BATCH, 4))

    def make():
        states = [ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(N_STATES)]

        def step(inp):
            total = 0.0
            for s in states:
                s.value = s.value * 0.5 + inp
                total = total + s.value
            return total

        return step

    vm = vmap2(make(), state_in_axes={0: OfType(ShortTermState)}, state_out_axes={0: OfType(ShortTermState)})
    jt = jit(make())
    return {"vmap": lambda: vm(x), "jit": lambda: jt(x)}


def brainstate_cases() -> dict[str, Case] | None:
    try:
        import brainstate
        from brainstate.util.filter import OfType as BsOfType
    except ImportError:
        return None
    x = jnp.ones((BATCH, 4))

    def make():
        states = [brainstate.ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(N_STATES)]

        def step(inp):
            total = 0.0
            for s in states:
                s.value = s.value * 0.5 + inp
                total = total + s.value
            return total

        return step

    short = BsOfType(brainstate.ShortTermState)
    vm = brainstate.transform.vmap2(make(), state_in_axes={0: short}, state_out_axes={0: short})
    jt = brainstate.transform.jit(make())
    return {"vmap": lambda: vm(x), "jit": lambda: jt(x)}


def nnx_cases() -> dict[str, Case] | None:
    try:
        from flax import nnx
    except ImportError:
        return None
    x = jnp.ones((BATCH, 4))

    class Bank(nnx.Module):
        def __init__(self) -> None:
            self.vs = nnx.List([nnx.Variable(jnp.zeros((BATCH, 4)) + i) for i in range(N_STATES)])

    def step(bank, inp):
        total = 0.0
        for v in bank.vs:
            v[...] = v[...] * 0.5 + inp
            total = total + v[...]
        return total

    jit_bank, vmap_bank = Bank(), Bank()
    jt = nnx.jit(step)
    vm = nnx.vmap(nnx.jit(step), in_axes=(0, 0))
    return {"vmap": lambda: vm(vmap_bank, x), "jit": lambda: jt(jit_bank, x)}


def run(time_per_call: Callable[[Case, int, int], float], calls: int, repeats: int) -> None:
    """Print a table: each library's time per call and its ratio to pure JAX."""
    pure = pure_cases()
    rows = [("state (ours)", ours_cases())]
    for label, make in (("brainstate", brainstate_cases), ("flax.nnx", nnx_cases)):
        cases = make()
        if cases is None:
            print(f"{label}: not installed (hatch run bench-compare installs it in a separate env)")
        else:
            rows.append((label, cases))
    print(f"\n{N_STATES} states of shape ({BATCH}, 4); time per eager call, ratio to pure JAX\n")
    header = f"{'library':<14} {'case':<6} {'time (us)':>11} {'pure JAX (us)':>14} {'ratio':>9}"
    print(header)
    print("-" * len(header))
    for case in ("vmap", "jit"):
        t_pure = time_per_call(pure[case], calls, repeats)
        for label, cases in rows:
            slow = label != "state (ours)"
            t = time_per_call(cases[case], max(3, calls // 20) if slow else calls, repeats)
            print(f"{label:<14} {case:<6} {t * 1e6:>11.1f} {t_pure * 1e6:>14.1f} {t / t_pure:>8.2f}x")


# ---------------------------------------------------------------------- the peers of bench.py's rows
# Each builder returns ``{library: zero-argument callable}`` for the libraries that
# import: the same case as the row of ``bench.py`` of the same name, written as that
# library's users write it (brainstate's API is ours; flax.nnx keeps its Variables on
# a Module and maps it with ``nnx.vmap`` / ``nnx.pmap`` / ``nnx.shard_map``).

Peers = dict[str, Case]


def _brainstate() -> Any:
    try:
        import brainstate
    except ImportError:
        return None
    return brainstate


def _nnx() -> Any:
    try:
        from flax import nnx
    except ImportError:
        return None
    return nnx


def installed() -> list[str]:
    """``'brainstate 0.6.0'``-style names of the peers that import."""
    names = []
    bs, nnx = _brainstate(), _nnx()
    if bs is not None:
        names.append(f"brainstate {bs.__version__}")
    if nnx is not None:
        import flax

        names.append(f"flax {flax.__version__}")
    return names


def _short_filter(bs: Any) -> Any:
    from brainstate.util.filter import OfType as BsOfType

    return BsOfType(bs.ShortTermState)


def _bs_vmap_step(bs: Any, n_states: int) -> tuple[Any, Any]:
    states = [bs.ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(n_states)]

    def step(inp: Any) -> Any:
        total = 0.0
        for s in states:
            s.value = s.value * 0.5 + inp
            total = total + s.value
        return total

    short = _short_filter(bs)
    return step, {"state_in_axes": {0: short}, "state_out_axes": {0: short}}


def _nnx_bank(nnx: Any, n_states: int) -> Any:
    class Bank(nnx.Module):
        def __init__(self) -> None:
            self.vs = nnx.List([nnx.Variable(jnp.zeros((BATCH, 4)) + i) for i in range(n_states)])

    return Bank()


def _nnx_bank_step(bank: Any, inp: Any) -> Any:
    total = 0.0
    for v in bank.vs:
        v[...] = v[...] * 0.5 + inp
        total = total + v[...]
    return total


def _nnx_bank_step_first(bank: Any, inp: Any) -> Any:
    for v in bank.vs:
        v[...] = v[...] * 0.5 + inp
    return bank.vs[0][...]


def peers_vmap_states(n_states: int) -> Peers:
    """``vmap2`` over ``n_states`` states of shape (16, 4), as ``bench.case_vmap_states``."""
    x = jnp.ones((BATCH, 4))
    out: Peers = {}
    bs, nnx = _brainstate(), _nnx()
    if bs is not None:
        step, axes = _bs_vmap_step(bs, n_states)
        fn = bs.transform.vmap2(step, **axes)
        out["brainstate"] = lambda: fn(x)
    if nnx is not None:
        bank = _nnx_bank(nnx, n_states)
        nfn = nnx.vmap(nnx.jit(_nnx_bank_step), in_axes=(0, 0))
        out["flax.nnx"] = lambda: nfn(bank, x)
    return out


def peers_jit_vmap(n_states: int) -> Peers:
    """``jit(vmap2(step))`` over ``n_states`` states, as ``bench.case_jit_vmap``."""
    x = jnp.ones((BATCH, 4))
    out: Peers = {}
    bs, nnx = _brainstate(), _nnx()
    if bs is not None:
        states = [bs.ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(n_states)]

        def step(inp: Any) -> Any:
            for s in states:
                s.value = s.value * 0.5 + inp
            return states[0].value

        short = _short_filter(bs)
        fn = bs.transform.jit(bs.transform.vmap2(step, state_in_axes={0: short}, state_out_axes={0: short}))
        out["brainstate"] = lambda: fn(x)
    if nnx is not None:
        bank = _nnx_bank(nnx, n_states)
        nfn = nnx.jit(nnx.vmap(_nnx_bank_step_first, in_axes=(0, 0)))
        out["flax.nnx"] = lambda: nfn(bank, x)
    return out


def peers_vmap_random() -> Peers:
    """One normal draw per lane, the key split per lane (``vmap2(lambda s: normal(0, s, (4,)))``)."""
    scales = jnp.linspace(1.0, 2.0, BATCH)
    out: Peers = {}
    bs, nnx = _brainstate(), _nnx()
    if bs is not None:
        bs.random.seed(0)
        draw = bs.transform.vmap2(lambda s: bs.random.normal(0.0, s, size=(4,)))
        out["brainstate"] = lambda: draw(scales)
    if nnx is not None:
        rngs = nnx.Rngs(0)

        @nnx.split_rngs(splits=BATCH)
        @nnx.vmap(in_axes=(0, 0))
        @nnx.jit
        def nnx_draw(r: Any, s: Any) -> Any:
            return r.normal((4,)) * s

        out["flax.nnx"] = lambda: nnx_draw(rngs, scales)
    return out


def peers_alternating(kind: str, n_signatures: int) -> Peers:
    """Cycle through ``n_signatures`` batch sizes, as ``bench.case_alternating``."""
    batches = [jnp.ones((BATCH + i, 4)) for i in range(n_signatures)]
    out: Peers = {}
    bs, nnx = _brainstate(), _nnx()

    def cycling(call: Callable[[Any], Any]) -> Case:
        box = {"i": 0}

        def run() -> Any:
            box["i"] = (box["i"] + 1) % n_signatures
            return call(batches[box["i"]])

        return run

    if bs is not None:
        w = bs.ParamState(jnp.linspace(0.0, 1.0, 4))
        h = bs.ShortTermState(jnp.zeros(4))
        if kind == "vmap2":
            fn = bs.transform.vmap2(lambda x: (x * w.value).sum(-1), in_axes=0)
        else:

            def step(x: Any) -> Any:
                h.value = h.value * 0.5 + x.mean(0)
                return (x * w.value).sum(-1) + h.value.sum()

            fn = bs.transform.jit(step)
        out["brainstate"] = cycling(fn)
    if nnx is not None:

        class Model(nnx.Module):
            def __init__(self) -> None:
                self.w = nnx.Param(jnp.linspace(0.0, 1.0, 4))
                self.h = nnx.Variable(jnp.zeros(4))

        model = Model()
        if kind == "vmap2":
            nfn = nnx.vmap(nnx.jit(lambda m, x: (x * m.w[...]).sum(-1)), in_axes=(None, 0))
        else:

            def nnx_step(m: Any, x: Any) -> Any:
                m.h[...] = m.h[...] * 0.5 + x.mean(0)
                return (x * m.w[...]).sum(-1) + m.h[...].sum()

            nfn = nnx.jit(nnx_step)
        out["flax.nnx"] = cycling(lambda x: nfn(model, x))
    return out


def peers_map_update(members: int) -> Peers:
    """An ensemble of ``members`` cells updated in one call (``Map.update``)."""
    x = jnp.ones((members, 4))
    out: Peers = {}
    bs, nnx = _brainstate(), _nnx()
    if bs is not None:

        class Cell(bs.nn.Module):
            def init_state(self) -> None:
                self.v = bs.ShortTermState(jnp.zeros(4))
                self.w = bs.ParamState(jnp.ones(4))

            def update(self, x: Any) -> Any:
                self.v.value = self.v.value * 0.9 + x * self.w.value
                return self.v.value

        ens = bs.nn.Map(Cell(), init_map_size=members)
        ens.init_all_states()
        out["brainstate"] = lambda: ens.update(x)
    if nnx is not None:

        class NnxCell(nnx.Module):
            def __init__(self) -> None:
                self.v = nnx.Variable(jnp.zeros(4))
                self.w = nnx.Param(jnp.ones(4))

            def __call__(self, x: Any) -> Any:
                self.v[...] = self.v[...] * 0.9 + x * self.w[...]
                return self.v[...]

        nnx_ens = nnx.vmap(lambda _: NnxCell(), in_axes=0, out_axes=0)(jnp.arange(members))
        update = nnx.vmap(nnx.jit(lambda m, x: m(x)), in_axes=(0, 0))
        out["flax.nnx"] = lambda: update(nnx_ens, x)
    return out


def peers_map_init(members: int, n_in: int = 16, n_out: int = 16) -> Peers:
    """A new ensemble of ``members`` layers initialised per call (``Map(...).init_all_states()``)."""
    out: Peers = {}
    bs, nnx = _brainstate(), _nnx()
    if bs is not None:

        class Layer(bs.nn.Module):
            def init_state(self) -> None:
                self.w = bs.ParamState(bs.random.normal(0.0, 1.0, size=(n_in, n_out)))
                self.b = bs.ParamState(jnp.zeros(n_out))
                self.h = bs.ShortTermState(jnp.zeros(n_out))

        bs.random.seed(0)

        def bs_init() -> Any:
            layer = Layer()
            bs.nn.Map(layer, init_map_size=members).init_all_states()
            return layer.w.value

        out["brainstate"] = bs_init
    if nnx is not None:

        class NnxLayer(nnx.Module):
            def __init__(self, rngs: Any) -> None:
                self.w = nnx.Param(jax.random.normal(rngs.params(), (n_in, n_out)))
                self.b = nnx.Param(jnp.zeros(n_out))
                self.h = nnx.Variable(jnp.zeros(n_out))

        rngs = nnx.Rngs(0)

        @nnx.split_rngs(splits=members)
        @nnx.vmap(in_axes=0, out_axes=0)
        def create(r: Any) -> Any:
            return NnxLayer(r)

        out["flax.nnx"] = lambda: create(rngs).w[...]
    return out


def peers_pmap() -> Peers:
    """``pmap2`` of a step that updates one state per device."""
    n = jax.local_device_count()
    delta = jnp.ones((n, 4))
    out: Peers = {}
    bs, nnx = _brainstate(), _nnx()
    if bs is not None:
        from brainstate.util.filter import OfType as BsOfType

        w = bs.ParamState(jnp.ones((n, 4)))

        def step(d: Any) -> Any:
            w.value = w.value * 0.5 + d
            return w.value.sum()

        param = BsOfType(bs.ParamState)
        fn = bs.transform.pmap2(step, axis_name="d", state_in_axes={0: param}, state_out_axes={0: param})
        out["brainstate"] = lambda: fn(delta)
    if nnx is not None:

        class W(nnx.Module):
            def __init__(self) -> None:
                self.w = nnx.Param(jnp.ones((n, 4)))

        model = W()

        def nnx_step(m: Any, d: Any) -> Any:
            m.w[...] = m.w[...] * 0.5 + d
            return m.w[...].sum()

        nfn = nnx.pmap(nnx_step, in_axes=(0, 0), axis_name="d")
        out["flax.nnx"] = lambda: nfn(model, delta)
    return out


def peers_shard_map(jitted: bool) -> Peers:
    """``shard_map`` accumulating into a sharded state, with a ``psum`` (``jitted``: inside ``jit``)."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    sharded = NamedSharding(mesh, P("x"))
    data = jax.device_put(jnp.ones(jax.device_count() * 4), sharded)
    out: Peers = {}
    bs, nnx = _brainstate(), _nnx()
    if bs is not None:
        buffer = bs.State(jax.device_put(jnp.zeros(jax.device_count() * 4), sharded))

        def accumulate(d: Any) -> Any:
            buffer.value = buffer.value + d
            return jax.lax.psum(jnp.sum(d, keepdims=True), "x")

        fn = bs.transform.shard_map(
            accumulate,
            mesh,
            in_specs=(P("x"),),
            out_specs=P(),
            state_in_specs={buffer: P("x")},
            state_out_specs={buffer: P("x")},
        )
        if jitted:
            fn = bs.transform.jit(fn)
        out["brainstate"] = lambda: fn(data)
    if nnx is not None:

        class Buffer(nnx.Module):
            def __init__(self) -> None:
                self.b = nnx.Variable(jax.device_put(jnp.zeros(jax.device_count() * 4), sharded))

        model = Buffer()

        def nnx_accumulate(m: Any, d: Any) -> Any:
            m.b[...] = m.b[...] + d
            return jax.lax.psum(jnp.sum(d, keepdims=True), "x")

        spec = nnx.StateSharding({...: P("x")})
        nfn = nnx.shard_map(nnx_accumulate, mesh=mesh, in_specs=(spec, P("x")), out_specs=P())
        if jitted:
            nfn = nnx.jit(nfn)
        out["flax.nnx"] = lambda: nfn(model, data)
    return out
