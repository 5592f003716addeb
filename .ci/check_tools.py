"""Stop early, with a message that says why, when the tools are too old for this repository.

Run first by `hatch run test`.  Hatch older than 1.16 does not know
`workspace.members` and silently installs none of our packages (the suite then
fails with "No module named 'state_random'"); Python older than 3.11 cannot
install JAX 0.10.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

MIN_PYTHON = (3, 11)
MIN_HATCH = "1.16"
PACKAGES = ("state_core", "state_random", "state_transform", "state_nn")


def main() -> int:
    if sys.version_info < MIN_PYTHON:
        print(
            f"error: this repository needs Python >= {'.'.join(map(str, MIN_PYTHON))}; "
            f"the Hatch environment runs Python {sys.version.split()[0]} ({sys.executable}). "
            "Install Python 3.11 or newer and run `hatch env prune` before trying again.",
            file=sys.stderr,
        )
        return 1
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        hatch = shutil.which("hatch")
        version = "unknown"
        if hatch:
            proc = subprocess.run([hatch, "--version"], capture_output=True, text=True, check=False)
            version = proc.stdout.strip() or version
        print(
            f"error: the packages {', '.join(missing)} are not installed in this Hatch environment. "
            f"This repository needs Hatch >= {MIN_HATCH}, which installs the workspace members "
            f"listed in hatch.toml (older Hatch ignores them silently); found: {version}. "
            "Upgrade with `pip install --upgrade 'hatch>=1.16'`, then run `hatch env prune`.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
