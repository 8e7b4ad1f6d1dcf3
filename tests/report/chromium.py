"""Open a local HTML file in headless Chromium: the DOM after scripts ran, and the console messages."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_CONSOLE = re.compile(r":CONSOLE[:(]")


def dump_dom(page: Path, profile: Path, timeout: float = 90.0) -> tuple[str, list[str]]:
    """(DOM serialised after load, console lines). Networking features are off; file:// only."""
    assert CHROMIUM, "chromium is not installed (Debian package 'chromium')"
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
         "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout, [line for line in out.stderr.splitlines() if _CONSOLE.search(line)]
