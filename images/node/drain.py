"""Wait until the node agent has shipped every byte of the job's log files (the image's exit path).

The agent's `ranklog_agent_backlog_bytes` counts bytes written to tracked files and not yet
acknowledged by the archive. Drained means: the agent tracks at least as many files as the log
directory holds and the backlog has read zero twice, one poll apart. Exit 0 when drained, 1 on
timeout or when the agent died (the container then exits anyway; the files stay on disk).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import urllib.request
from pathlib import Path

SAMPLE = re.compile(r"^(ranklog_agent_backlog_bytes|ranklog_agent_files_tracked)(?:\{[^}]*\})? (\S+)$", re.M)


def agent_gauges(metrics_url: str) -> dict[str, float]:
    with urllib.request.urlopen(metrics_url, timeout=2) as response:
        text = response.read().decode()
    gauges: dict[str, float] = {}
    for name, value in SAMPLE.findall(text):
        gauges[name] = gauges.get(name, 0.0) + float(value)
    return gauges


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", required=True, help="HOST:PORT of the agent's /metrics")
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--agent-pid", type=int, required=True)
    args = parser.parse_args()
    host, port = args.metrics.rsplit(":", 1)
    url = f"http://{'127.0.0.1' if host in ('', '0.0.0.0') else host}:{port}/metrics"
    files = sum(1 for path in Path(args.log_dir).rglob("*") if path.is_file())
    deadline = time.monotonic() + args.timeout
    zero_seen = 0
    while time.monotonic() < deadline:
        try:
            os.kill(args.agent_pid, 0)
        except ProcessLookupError:
            print("ranklog-entrypoint: the agent exited before shipping everything", file=sys.stderr)
            return 1
        try:
            gauges = agent_gauges(url)
        except OSError:
            gauges = {}
        drained = (gauges.get("ranklog_agent_backlog_bytes") == 0
                   and gauges.get("ranklog_agent_files_tracked", 0) >= files)
        zero_seen = zero_seen + 1 if drained else 0
        if zero_seen >= 2:
            return 0
        time.sleep(0.5)
    print(f"ranklog-entrypoint: logs not fully shipped after {args.timeout:.0f}s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
