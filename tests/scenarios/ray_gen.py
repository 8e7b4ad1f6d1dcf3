"""Run one Ray scenario's driver for real and keep what Ray wrote (used by ``ray_*/gen/generate.py``).

The driver (``<scenario>/gen/driver.py``) starts a fresh local Ray instance itself —
``ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[1])`` — runs its fault and
exits. Its console (stdout and stderr through one pipe, as a terminal shows them, ANSI colours
included) goes to ``out/<host>/driver-console.log``; the session's ``logs/`` folder is copied to
``out/<host>/session_<…>/logs/``, ``<host>`` being this machine's name (the hostname Ray's raylet
reports, so both triage paths can be judged against it).

Kept small, never edited: the session's sockets, port files and ``session_latest`` link are not
logs and are not copied; a log file over :data:`MAX_FILE_BYTES` would be left out and named in the
README (none has been in these runs: a session's logs are ~200 KB). Every copied file's bytes are
exactly what Ray wrote.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILE_BYTES = 2 * 1024 * 1024
DRIVER_TIMEOUT_S = 120
CONSOLE = "driver-console.log"


@dataclass
class RayRun:
    host: str
    exit_code: int
    dropped: list[str] = field(default_factory=list)

    def commands(self) -> list[str]:
        return [f"[host {self.host}] python gen/driver.py <temp dir>   # exit code {self.exit_code}"]

    def doc(self, text: str) -> str:
        """The generator's docstring plus what was copied from the session and what was not."""
        dropped = "; ".join(self.dropped) if self.dropped else "no log file (none was over the size limit)"
        return (f"{text.strip()}\n\nCopied from the Ray session: its `logs/` folder, byte for byte, and the "
                f"driver's console (`{CONSOLE}`). Left out: the session's sockets and port files (not logs), "
                f"and {dropped}.")


def run(scenario: Path, python: str = sys.executable, timeout: float = DRIVER_TIMEOUT_S) -> RayRun:
    """Run ``scenario/gen/driver.py`` and replace ``scenario/out`` with what it wrote (the driver may take
    `timeout` seconds: Ray Train's controller and worker group take a minute to start on 2 busy cores)."""
    scenario = scenario.resolve()
    host = socket.gethostname()
    # Ray's unix sockets live under the temp dir: keep its path short (108-byte socket path limit).
    temp = Path(tempfile.mkdtemp(prefix="rlray-", dir="/tmp"))
    out = scenario / "out"
    try:
        shutil.rmtree(out, ignore_errors=True)
        (out / host).mkdir(parents=True)
        with open(out / host / CONSOLE, "wb") as console:
            proc = subprocess.Popen([python, str(scenario / "gen" / "driver.py"), str(temp)], stdout=console,
                                    stderr=subprocess.STDOUT, cwd=scenario / "gen")
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.terminate()  # Ray's own processes follow their driver down
                proc.wait(timeout=30)
                raise RuntimeError(f"{scenario.name}: the driver ran over {timeout}s") from None
        return RayRun(host, code, _copy_session_logs(temp, out / host))
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _copy_session_logs(temp: Path, node_dir: Path) -> list[str]:
    sessions = sorted(p for p in temp.glob("session_*") if p.is_dir() and not p.is_symlink())
    if not sessions:
        raise RuntimeError(f"Ray wrote no session under {temp}")
    dropped = []
    for session in sessions:
        for path in sorted((session / "logs").rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            rel = path.relative_to(temp)
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                dropped.append(f"`{rel}` ({size} bytes)")
                continue
            target = node_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return dropped
