"""The node and archive images, built in the background while the playbooks run.

The two `docker build`s need only the base image and the wheels, not the cluster, so the session
starts them next to the first `site.yml` run instead of after every Ansible test (they used to add
~55 s of wall time in sequence). Each build writes its own log in the run directory; `tag()` waits
for the build, records how long it took and how long the test had to wait, and raises with the log
tail when it failed.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

from tests.container.docker_env import REPO, DockerError


def build_context(run_dir: Path, wheels: Path) -> Path:
    """A build context laid out like the repository: dist/wheels and images/."""
    context = run_dir / "image-context"
    if not context.exists():
        shutil.copytree(wheels, context / "dist" / "wheels", copy_function=shutil.copy2)
        shutil.copytree(REPO / "images", context / "images")
    return context


class ImageBuild:
    """`docker build` of images/<kind>/Dockerfile on `base_image`, running until `tag()` collects it."""

    def __init__(self, context: Path, kind: str, base_image: str, log_dir: Path) -> None:
        self.kind = kind
        self.image = f"ranklog-{kind}:test"
        self.log = log_dir / f"docker-build-{kind}.log"
        self.started = time.monotonic()
        self.seconds = 0.0
        self.waited = 0.0
        with open(self.log, "wb") as out:
            self._proc = subprocess.Popen(
                ["docker", "build", "-q", "-f", str(context / "images" / kind / "Dockerfile"),
                 "--build-arg", f"BASE_IMAGE={base_image}", "-t", self.image, str(context)],
                stdout=out, stderr=subprocess.STDOUT)
        self._done = threading.Event()
        threading.Thread(target=self._watch, name=f"docker-build-{kind}", daemon=True).start()

    def _watch(self) -> None:
        self._proc.wait()
        self.seconds = time.monotonic() - self.started
        self._done.set()

    def tag(self, timeout: float = 900) -> str:
        """The built image's tag, once the build is done (raises DockerError if it failed)."""
        wait_start = time.monotonic()
        if not self._done.wait(timeout):
            raise DockerError(f"docker build of the {self.kind} image took longer than {timeout:.0f}s ({self.log})")
        self.waited += time.monotonic() - wait_start
        if self._proc.returncode != 0:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise DockerError(f"docker build of the {self.kind} image failed ({self._proc.returncode}):\n{tail}")
        return self.image

    def cancel(self) -> None:
        """Stop a build nobody collected (the daemon cancels it when its client goes away)."""
        if self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=60)
