"""Each distribution builds its own wheel and installs with only the layers below it.

The wheels of the four packages are built once (``pip wheel --no-deps``, with the
environment's hatchling). One fresh ``python -m venv`` is made that sees nothing
of this interpreter's site-packages, and the layers' wheels are installed into it
one after another, lowest first: the layer's own wheel by path, the layers below
from the wheel directory (``--find-links``; they are not on the package index) and
everything else (JAX, NumPy) from the index. Every layer requires all the layers
below it, so after installing layer N the venv holds what installing layer N alone
would give: a layer whose code needs something it does not declare fails at its
own step. After each step, with ``PYTHONPATH`` cleared so that the source tree
cannot leak in:

* the venv lists exactly the expected ``state-*`` distributions;
* ``import <name>`` works and resolves to the venv's site-packages, with the
  version of ``__about__.py``; a tiny computation through the layer runs;
* the layers above are not importable.

Then, on Python >= 3.12 (where current flax and brainstate install), the same
venv gets our users' current stack beside the four wheels: ``COEXISTING`` (flax,
brainstate, optax, orbax-checkpoint). The installer must not move JAX, and a small
program uses a flax NNX module inside one of our transforms next to a brainstate
State under brainstate's own ``jit``.

The installer is uv (``uv pip install --python VENV``), the one Hatch installs the
test environments with: it reads the same wheel metadata and resolves against the
same index as pip, and takes JAX from the cache the test environment filled. The
programs run with bytecode writing allowed (the suite may run with
``PYTHONDONTWRITEBYTECODE``), so only the first one compiles JAX's sources. With
both, the test takes ~30 s of CPU against ~55 s with pip. (One venv instead of one
per layer: JAX is installed once.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["state-core", "state-random", "state-transform", "state-nn"]
IMPORT_NAME = {d: d.replace("-", "_") for d in ORDER}
# A layer pulls in itself and every layer below it, nothing else of ours.
EXPECTED = {d: set(ORDER[: i + 1]) for i, d in enumerate(ORDER)}
# Direct dependencies declared in each wheel: every distribution that imports jax declares it.
DIRECT_DEPS = {
    "state-core": {"jax", "numpy"},
    "state-random": {"jax", "numpy", "state-core"},
    "state-transform": {"jax", "state-core", "state-random"},
    "state-nn": {"jax", "numpy", "state-core", "state-random", "state-transform"},
}
OPTIONAL_DEPS = {
    "state-core": ["brainunit<1,>=0.5; extra == 'units'"],
    "state-transform": ["tqdm<5,>=4.60; extra == 'progress'"],
    "state-nn": ["orbax-checkpoint<0.13,>=0.11.17; extra == 'checkpoint'"],
}
SMOKE = {
    "state-core": (
        "import jax.numpy as jnp, state_core\n"
        "w = state_core.ParamState(jnp.ones(3))\n"
        "f = state_core.StatefulFunction(lambda x: (w.value * x).sum())\n"
        "result = float(f(jnp.arange(3.0)))\n",
        3.0,
    ),
    "state-random": (
        "import jax, state_random\n"
        "state_random.seed(42)\n"
        "x = state_random.normal()\n"
        "result = float(x - jax.random.normal(jax.random.split(jax.random.key(42), 2)[1], ()))\n",
        0.0,
    ),
    "state-transform": (
        "import jax.numpy as jnp, state_transform\n"
        "result = float(state_transform.vmap2(lambda x: x ** 2)(jnp.arange(4.0)).sum())\n",
        14.0,
    ),
    "state-nn": (
        "import jax.numpy as jnp, state_nn\n"
        "layer = state_nn.Linear(3, 2, w_init=jnp.ones((3, 2)))\n"
        "result = float(layer(jnp.array([1.0, 2.0, 3.0])).sum())\n",
        12.0,
    ),
}


# The current releases our users run beside us (checked on Python >= 3.12).
COEXISTING = ["flax==0.12.12", "brainstate==0.6.0", "optax", "orbax-checkpoint"]
COEXISTENCE_PROGRAM = """
import json
import jax, jax.numpy as jnp
from flax import nnx
import brainstate
import state_core, state_transform

layer = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
scale = state_core.ShortTermState(jnp.ones(3), name="scale")

@state_transform.jit
def step(x):
    scale.value = scale.value * 2.0
    return layer(x * scale.value).sum()

ours = [float(step(jnp.arange(3.0))), float(step(jnp.arange(3.0)))]
kernel, bias = layer.kernel[...], layer.bias[...]
expected = [float(((jnp.arange(3.0) * s) @ kernel + bias).sum()) for s in (2.0, 4.0)]

counter = brainstate.ShortTermState(jnp.zeros(()))

@brainstate.transform.jit
def bump():
    counter.value = counter.value + 1.0

bump()
bump()
print(json.dumps({"ours": ours, "expected": expected, "scale": scale.value.tolist(),
                  "counter": float(counter.value)}))
"""


# The test environment's own settings that would change what is installed where
# (PYTHONPATH ... UV_PYTHON), make the installer write bytecode this test never reads
# (UV_COMPILE_BYTECODE), or keep each program from writing the bytecode the next one
# reuses (PYTHONDONTWRITEBYTECODE: every program would compile JAX's sources again).
_DROPPED_ENV = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONDONTWRITEBYTECODE",
    "PIP_REQUIRE_VIRTUALENV",
    "VIRTUAL_ENV",
    "UV_COMPILE_BYTECODE",
    "UV_PYTHON",
)


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    env["JAX_PLATFORMS"] = "cpu"
    return env


def _run(cmd: list, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"command failed (exit {proc.returncode}): {' '.join(map(str, cmd))}\n"
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    )
    return proc


def _version(dist: str) -> str:
    about = ROOT / "packages" / dist / "src" / IMPORT_NAME[dist] / "__about__.py"
    match = re.search(r"__version__\s*=\s*[\"']([^\"']+)[\"']", about.read_text())
    assert match, f"no __version__ in {about}"
    return match.group(1)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling", reason="building the wheels offline needs hatchling installed")
    dist = tmp_path_factory.mktemp("wheels") / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(dist),
            *[str(ROOT / "packages" / d) for d in ORDER],
        ],
        cwd=ROOT,
        timeout=180,
    )
    return dist


def _wheel_for(wheelhouse: Path, dist: str) -> Path:
    found = sorted(wheelhouse.glob(f"{IMPORT_NAME[dist]}-*.whl"))
    assert len(found) == 1, f"expected one wheel for {dist} in {wheelhouse}, found {[p.name for p in found]}"
    return found[0]


@pytest.mark.parametrize("dist", ORDER)
def test_wheel_contents_and_metadata(wheelhouse, dist):
    wheel = _wheel_for(wheelhouse, dist)
    name = IMPORT_NAME[dist]
    assert wheel.name.startswith(f"{name}-{_version(dist)}-py3-none-any"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata_path = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(metadata_path).decode()
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {name}, f"{wheel.name} ships other top-level entries: {sorted(top_level)}"
    assert f"{name}/__init__.py" in names and f"{name}/__about__.py" in names
    assert not any("/tests/" in n or n.startswith("tests/") for n in names), "tests shipped in the wheel"
    # (The suite's own processes write bytecode next to the sources it builds from.)
    assert not any(n.endswith(".pyc") or "__pycache__" in n for n in names), "bytecode shipped in the wheel"
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    # Optional extras (state-nn[checkpoint] -> orbax-checkpoint) are not direct dependencies.
    extras = sorted(r for r in requires if "extra ==" in r)
    assert extras == OPTIONAL_DEPS.get(dist, []), f"{dist} optional Requires-Dist: {extras}"
    requires = [r for r in requires if "extra ==" not in r]
    dep_names = {re.split(r"[\s<>=!~;\[(]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requires}
    assert dep_names == DIRECT_DEPS[dist], f"{dist} Requires-Dist: {requires}"
    # What a package index shows: licence (with the file), authors, a README fit for it.
    assert "License-Expression: MIT" in metadata, f"{dist}: no MIT licence expression"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), f"{dist}: LICENSE not in the wheel"
    assert re.search(r"^Author(-email)?: .+", metadata, re.M), f"{dist}: no author in the metadata"
    assert "Requires-Python: >=3.11" in metadata
    assert "pip install packages/" not in metadata, f"{dist}: its README tells index readers to install a path"
    assert f"pip install {dist}" in metadata, f"{dist}: its README does not say how to install it"
    for r in requires:
        if r.startswith(("state-", "jax")):
            # Bounded ranges, between our own packages and on JAX (e.g. >=0.1,<0.2).
            assert "<" in r and ">=" in r, f"{dist}: unbounded requirement {r!r}"


def test_layers_install_one_after_another_with_only_the_layers_below(wheelhouse, tmp_path):
    venv = tmp_path / "venv"
    # A plain venv: nothing of this interpreter's packages is visible. No pip in it
    # (uv installs from outside; seeding pip would take ~5 s for nothing).
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    assert py.exists()
    for dist in ORDER:
        _install_and_check(py, venv, wheelhouse, dist, tmp_path)
    if sys.version_info >= (3, 12):
        _install_beside_the_current_stack(py, wheelhouse, tmp_path)


def _uv_pip(command: str, py: Path, *args: str) -> list[str]:
    """``uv pip COMMAND ARGS`` aimed at the venv whose interpreter is ``py``."""
    return [sys.executable, "-m", "uv", "pip", command, "--quiet", "--python", str(py), *args]


def _install(py: Path, wheelhouse: Path, cwd: Path, *requirements: str) -> None:
    _run(_uv_pip("install", py, "--find-links", str(wheelhouse), *requirements), cwd=cwd)


def _installed_versions(py: Path, cwd: Path) -> dict[str, str]:
    listed = json.loads(_run(_uv_pip("list", py, "--format=json"), cwd=cwd).stdout)
    return {p["name"].lower().replace("_", "-"): p["version"] for p in listed}


def _install_beside_the_current_stack(py: Path, wheelhouse: Path, cwd: Path) -> None:
    before = _installed_versions(py, cwd)
    # On Python >= 3.12 the index serves JAX 0.12, the newest our range admits: the wheels must take it.
    assert before["jax"].split(".")[:2] == ["0", "12"], f"our wheels installed jax {before['jax']}, not 0.12"
    _install(py, wheelhouse, cwd, *COEXISTING)
    after = _installed_versions(py, cwd)
    for name in ("jax", "jaxlib", *ORDER):
        assert after[name] == before[name], f"installing {COEXISTING} moved {name} from {before[name]} to {after[name]}"
    for requirement in COEXISTING:
        name, _, pinned = requirement.partition("==")
        assert name in after and (not pinned or after[name] == pinned), (
            f"{requirement}: the installer gave {after.get(name)}"
        )
    info = json.loads(_run([str(py), "-c", COEXISTENCE_PROGRAM], cwd=cwd).stdout.strip().splitlines()[-1])
    assert info["ours"] == pytest.approx(info["expected"], rel=1e-6)
    assert info["scale"] == [4.0, 4.0, 4.0]
    assert info["counter"] == 2.0


def _install_and_check(py: Path, venv: Path, wheelhouse: Path, dist: str, cwd: Path) -> None:
    # The layer's own wheel by path (so nothing on the index can stand in for it);
    # the layers below from the wheel directory; JAX and NumPy from the index.
    _install(py, wheelhouse, cwd, str(_wheel_for(wheelhouse, dist)))

    ours = {d: v for d, v in _installed_versions(py, cwd).items() if d.startswith("state")}
    assert set(ours) == EXPECTED[dist], f"installing {dist} gave {sorted(ours)}; expected {sorted(EXPECTED[dist])}"
    for d, v in ours.items():
        assert v == _version(d), f"{d} installed as {v}, __about__ says {_version(d)}"

    name = IMPORT_NAME[dist]
    code, expected_result = SMOKE[dist]
    above = [IMPORT_NAME[d] for d in ORDER[ORDER.index(dist) + 1 :]]
    script = (
        "import importlib.util, json\n"
        f"import {name}\n"
        f"{code}"
        f"missing = [n for n in {above!r} if importlib.util.find_spec(n) is None]\n"
        f"print(json.dumps({{'file': {name}.__file__, 'version': {name}.__version__, "
        "'result': result, 'missing': missing}))\n"
    )
    out = _run([str(py), "-c", script], cwd=cwd).stdout.strip().splitlines()[-1]
    info = json.loads(out)
    site = Path(info["file"]).resolve()
    assert venv.resolve() in site.parents, f"{name} imported from {site}, not from the venv"
    assert info["version"] == _version(dist)
    assert info["result"] == pytest.approx(expected_result, abs=1e-6), f"{dist}: smoke computation gave {info}"
    assert info["missing"] == above, f"layers above {dist} are importable after installing it: {info}"
