"""Build the `ranklog.stack` Ansible collection from the working tree and install it from the tarball.

The deploy tests check the tarball's contents and lint/syntax-check the installed copy; the container
test rolls the cluster out from the installed copy (ANSIBLE_COLLECTIONS_PATH), so what is tested is
what an operator gets from `ansible-galaxy collection install`, not the source tree.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
NAMESPACE, NAME = GALAXY["namespace"], GALAXY["name"]
BIN = Path(sys.executable).parent


def _galaxy(*args: str, cwd: Path) -> str:
    proc = subprocess.run([str(BIN / "ansible-galaxy"), "collection", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"ansible-galaxy collection {args[0]} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc.stdout


def build(out_dir: Path) -> Path:
    """`ansible-galaxy collection build` of the repository into out_dir; returns the tarball."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _galaxy("build", "--force", "--output-path", str(out_dir), str(REPO), cwd=out_dir)
    return out_dir / f"{NAMESPACE}-{NAME}-{GALAXY['version']}.tar.gz"


def install(tarball: Path, collections_path: Path) -> Path:
    """`ansible-galaxy collection install` of the tarball (offline: it has no dependencies to fetch).

    Returns the collections path to put in ANSIBLE_COLLECTIONS_PATH.
    """
    _galaxy("install", "--offline", "--force", "-p", str(collections_path), str(tarball), cwd=tarball.parent)
    return collections_path


def installed_root(collections_path: Path) -> Path:
    """Where the installed collection's files are (roles/, playbooks/, dashboards/generated/)."""
    return collections_path / "ansible_collections" / NAMESPACE / NAME
