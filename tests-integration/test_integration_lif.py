"""The LIF example runs end to end (small sizes) and its compiled loop matches eager stepping."""

import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from numpy.testing import assert_allclose

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "lif_population.py"


def _load():
    spec = importlib.util.spec_from_file_location("lif_population", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lif_example_writes_raster_png(tmp_path, capsys):
    lif = _load()
    result = lif.main(["--neurons", "40", "--steps", "400", "--out", str(tmp_path)])
    png = pathlib.Path(result["png"])
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["spikes"].shape == (400, 40)
    assert 5.0 < result["rate_hz"] < 200.0  # driven above threshold: fires, but not every step
    out = capsys.readouterr()
    assert "40 neurons x 400 steps" in out.out
    assert "400/400" in out.err  # the progress bar ran to the end


def test_for_loop_matches_eager_steps_of_the_module():
    lif = _load()
    # no coupling: one spike flipped by an ulp cannot spread through the network
    looped, eager = lif.LIFPopulation(40, seed=3, coupling=0.0), lif.LIFPopulation(40, seed=3, coupling=0.0)
    for pop in (looped, eager):  # start near threshold so that a short run spikes
        pop.v.value = jnp.linspace(-60.0, -50.5, 40)
    spikes = lif.simulate(looped, 40, progress=False)
    times = jnp.arange(40) * eager.dt  # the same float32 times simulate() uses
    expected = [np.asarray(eager.update(times[k], 14.0)) for k in range(40)]
    expected = np.stack(expected)
    # The noise is bit-exact; fused arithmetic may move a potential by an ulp near threshold.
    assert (spikes != expected).mean() < 0.01
    assert spikes.sum() > 0
    assert_allclose(looped.v.value, eager.v.value, atol=1e-3)
    np.testing.assert_array_equal(
        np.asarray(jax.random.key_data(looped.rng.value)), np.asarray(jax.random.key_data(eager.rng.value))
    )


GUIDE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "guides" / "simulation-loops.md"


def test_simulation_loops_guide_blocks_run(capsys):
    import re

    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    assert len(blocks) >= 8
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(GUIDE), "exec"), namespace)
    printed = capsys.readouterr().out
    # what the guide says its prints show
    for claim in ["(500,) (100,)", "[ 0.  1.  3.  6. 10.]", "(16, 200)", "7 128.0", "45.0", "True"]:
        assert claim in printed
    # States made inside a body: a local scratch state and module, and a kept one refused
    assert "[3.    4.5   5.25  5.625] 18.375" in printed
    assert "for_loop: the body creates State 'last' and keeps it at path 'last' of the Recor" in printed
    assert int(namespace["spikes"].value) == 2
