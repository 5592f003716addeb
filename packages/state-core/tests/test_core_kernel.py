"""``import state_core`` loads the kernel only; the simulation context plugs in when used."""

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
from numpy.testing import assert_allclose

from state_core import State, StatefulFunction, environ

OUTSIDE_THE_KERNEL = (
    "state_core._environ",
    "state_core._environ_reads",
    "state_core.environ",
    "state_core.units",
    "state_core.graph",
    "state_core._treefy",
    "state_core._hidden_group",
    "state_core._state_hooks",
)


def _loaded_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint(' '.join(m for m in sys.modules if m.startswith('state_core')))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_kernel_loads_no_simulation_module():
    loaded = _loaded_after(
        "import jax.numpy as jnp, state_core, state_core.engine\n"
        "s = state_core.State(jnp.ones(2))\n"
        "state_core.StatefulFunction(lambda x: s.value * x)(2.0)"
    )
    assert "state_core.engine" in loaded
    assert loaded.isdisjoint(OUTSIDE_THE_KERNEL), sorted(loaded & set(OUTSIDE_THE_KERNEL))


def test_the_rest_loads_on_first_use():
    loaded = _loaded_after("import state_core\nstate_core.environ.get_dt\nstate_core.HiddenGroupState")
    assert {"state_core.environ", "state_core._hidden_group"} <= loaded
    assert "state_core.units" in _loaded_after("from state_core import units")


def test_hooks_load_with_the_first_hook_and_run_from_then_on():
    script = (
        "import sys, jax.numpy as jnp, state_core\n"
        "s = state_core.State(jnp.ones(2))\n"
        "s.value = s.value + 1\n"
        "print('state_core._state_hooks' in sys.modules)\n"
        "s.register_hook('write_before', lambda ctx: setattr(ctx, 'transformed_value', ctx.value * 0))\n"
        "s.value = jnp.full(2, 5.0)\n"
        "print('state_core._state_hooks' in sys.modules, [float(v) for v in s.value])\n"
        "print(state_core.HookCancellationError.__mro__[1].__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:3] == ["False", "True [0.0, 0.0]", "StateError"]


def test_environ_keys_programs_through_the_registration_point():
    scale = State(jnp.ones(()))
    traced = []

    def step(x):
        traced.append(1)
        return x * scale.value * environ.get_dt()

    f = StatefulFunction(step)
    with environ.context(dt=0.5):
        assert_allclose(np.asarray(f(2.0)), 1.0)
        assert_allclose(np.asarray(f(2.0)), 1.0)
    with environ.context(dt=0.25):
        assert_allclose(np.asarray(f(2.0)), 0.5)
    assert len(traced) == 2
