"""The container test's Docker side: a running engine, the cached base image, the wheels.

The machine has no Docker engine running, so the harness starts `dockerd` itself when
`docker info` fails (log: .cache/dockerd/dockerd.log) and stops it again at the end of the session
(only the one it started; an engine that was already running is left alone). Images are a cache
and stay. If dockerd cannot start, the error says why and the tests FAIL: a container test that
silently skips would hide a broken rollout.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
DOCKERD_LOG = CACHE / "dockerd" / "dockerd.log"
WHEEL_EXTRAS = "agent,archive,query"


class DockerError(RuntimeError):
    """A docker command failed; the message carries its stderr."""


def docker(*args: str, timeout: float = 300, check: bool = True, input_text: str | None = None) -> str:
    """Run `docker ARGS…` and return its stdout (stripped); raise DockerError on failure."""
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, input=input_text)
    if check and proc.returncode != 0:
        raise DockerError(f"docker {' '.join(args[:3])}… failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout.strip()


def engine_ready() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def start_dockerd(timeout: float = 90.0) -> subprocess.Popen | None:
    """Start dockerd unless an engine already answers; returns the process we started (or None)."""
    if engine_ready():
        return None
    if shutil.which("dockerd") is None:
        raise DockerError("dockerd is not installed (make system installs docker.io)")
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    log = open(DOCKERD_LOG, "ab")  # noqa: SIM115 - lives as long as the daemon, closed in stop_dockerd
    proc = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    proc._ranklog_log = log  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if engine_ready():
            return proc
        time.sleep(0.5)
    stop_dockerd(proc)
    tail = DOCKERD_LOG.read_text(errors="replace").splitlines()[-15:]
    lines = "\n".join(tail)
    raise DockerError(f"dockerd did not come up (exit {proc.returncode}); last log lines:\n{lines}")


def stop_dockerd(proc: subprocess.Popen | None) -> None:
    """Stop the dockerd we started (SIGTERM, then SIGKILL after 30 s)."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    proc._ranklog_log.close()  # type: ignore[attr-defined]


def build_base_image() -> str:
    """The Debian bookworm base image (debootstrap + docker import), built once per content hash."""
    proc = subprocess.run([str(REPO / "images" / "base" / "build.sh")], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise DockerError(f"images/base/build.sh failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _pip(*args: str, cwd: Path = REPO, timeout: float = 900) -> None:
    pip = [str(Path(os.environ.get("RANKLOG_VENV", REPO / ".venv")) / "bin" / "python"), "-m", "pip"]
    proc = subprocess.run([*pip, "--disable-pip-version-check", "-q", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args[:2])} failed:\n{proc.stderr[-3000:]}")


def build_wheels(dest: Path, version: str | None = None) -> Path:
    """`dest` filled with a fresh ranklog wheel and every dependency wheel of the service extras.

    Dependency wheels are downloaded once per pyproject.toml content (.cache/wheels/<hash>); the
    ranklog wheel is rebuilt from the working tree on every run so the nodes run the code under test.
    `version` stamps another version on the ranklog wheel (an upgrade to roll out).
    """
    digest = hashlib.sha256((REPO / "pyproject.toml").read_bytes() + WHEEL_EXTRAS.encode()).hexdigest()[:16]
    deps = CACHE / "wheels" / digest
    if not (deps / ".complete").exists():
        shutil.rmtree(deps, ignore_errors=True)
        deps.mkdir(parents=True)
        _pip("wheel", f".[{WHEEL_EXTRAS}]", "-w", str(deps))
        for built in deps.glob("ranklog-*.whl"):
            built.unlink()
        (deps / ".complete").touch()
    dest.mkdir(parents=True, exist_ok=True)
    for wheel in deps.glob("*.whl"):
        os.link(wheel, dest / wheel.name)
    build_dir = dest.parent / "wheel-build"
    source = build_dir_copy(build_dir)
    if version:
        pyproject = source / "pyproject.toml"
        pyproject.write_text(re.sub(r'(?m)^version = ".*"$', f'version = "{version}"', pyproject.read_text()))
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(dest), str(source))
    return dest


def build_dir_copy(target: Path) -> Path:
    """A copy of the sources a wheel needs, so building never writes into the shared working tree."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, target / name)
    shutil.copytree(REPO / "exporters", target / "exporters",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    return target
