"""Regenerate scenarios by running their generators (``make scenarios``): all, or the names given.

Each ``tests/scenarios/<name>/gen/generate.py`` runs the real tool with its fault and rewrites
``out/``, ``truth.json`` and ``README.md``. Generators run one at a time (they start real jobs).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parents[1]


def main(names: list[str], root: Path = ROOT) -> int:
    generators = sorted(root.glob("*/gen/generate.py"))
    if names:
        generators = [g for g in generators if g.parents[1].name in names]
        missing = set(names) - {g.parents[1].name for g in generators}
        if missing:
            print(f"no such entry in {root.name}: {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "exporters"),
                                                         os.environ.get("PYTHONPATH", "")])}
    failed = []
    for gen in generators:
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(gen)], env=env, cwd=REPO)
        print(f"{gen.parents[1].name}: {'ok' if done.returncode == 0 else 'FAILED'} "
              f"({time.monotonic() - started:.0f} s)", flush=True)
        if done.returncode != 0:
            failed.append(gen.parents[1].name)
    if failed:
        print(f"generators failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
