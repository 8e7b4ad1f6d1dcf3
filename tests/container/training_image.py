"""The training-node image of the container test: base image + torch (CPU) + Ray + bindfs.

The wheels come from pip's cache and the machine's wheel directory (`pip download`, no build),
kept once per requirement set under .cache/train-wheels/<hash>; the image is tagged by the hash of
its Dockerfile, the wheel names and the base image, so a second session reuses it as is.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from tests.container.docker_env import CACHE, REPO, DockerError, docker

DOCKERFILE = Path(__file__).parent / "training" / "Dockerfile"
# torch stays at the CPU build the machines carry on disk (any other pulls GBs of CUDA); Ray at the
# version the project's tests use. cp311 manylinux: Debian bookworm's python3 in the containers.
REQUIREMENTS = ("torch==2.13.0", "ray==2.60.0")
PLATFORM = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
            "--abi", "abi3", "--abi", "none", "--platform", "manylinux_2_28_x86_64",
            "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "linux_x86_64", "--platform", "any"]


def training_wheels() -> Path:
    """torch, Ray and their dependency wheels in a cached directory (downloaded once)."""
    digest = hashlib.sha256(" ".join(REQUIREMENTS).encode()).hexdigest()[:16]
    wheels = CACHE / "train-wheels" / digest
    if (wheels / ".complete").exists():
        return wheels
    wheels.mkdir(parents=True, exist_ok=True)
    python = Path(os.environ.get("RANKLOG_VENV", REPO / ".venv")) / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "download", "-q", "--disable-pip-version-check", *PLATFORM,
                           "-d", str(wheels), *REQUIREMENTS], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise DockerError(f"pip download of {REQUIREMENTS} failed:\n{proc.stderr[-3000:]}")
    (wheels / ".complete").touch()
    return wheels


def build_training_image(base_image: str, log_dir: Path) -> str:
    """The training-node image (built once per content hash; a second call only looks it up)."""
    wheels = training_wheels()
    names = sorted(p.name for p in wheels.glob("*.whl"))
    digest = hashlib.sha256(DOCKERFILE.read_bytes() + "\n".join(names).encode() + base_image.encode()).hexdigest()
    tag = f"ranklog-train:{digest[:16]}"
    if docker("images", "-q", tag):
        return tag
    context = CACHE / "train-context" / digest[:16]
    if not context.exists():
        (context / "wheels").mkdir(parents=True)
        for name in names:
            os.link(wheels / name, context / "wheels" / name)
    log = log_dir / "docker-build-training.log"
    with open(log, "wb") as out:
        proc = subprocess.run(["docker", "build", "-q", "-f", str(DOCKERFILE), "--build-arg", f"BASE_IMAGE={base_image}",
                               "-t", tag, str(context)], stdout=out, stderr=subprocess.STDOUT, timeout=1800)
    if proc.returncode != 0:
        raise DockerError(f"docker build of the training image failed ({proc.returncode}):\n"
                          f"{log.read_text(errors='replace')[-3000:]}")
    return tag
