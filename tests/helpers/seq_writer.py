"""A log writer for fault tests: ranklog JSON lines with a per-process `seq`, at a set rate, rotating.

Run as a process (``python -m tests.helpers.seq_writer --dir D --rate 50000 --seconds 20 --rotate rename``);
it prints one JSON summary line at the end: ``{"written": N, "host": …, "pid": …, "job": …, "files": […]}``.
Every line it wrote carries ``seq`` 1..N, so the archive can be checked for lost and duplicated
records without trusting the agent's own counters.

Rotation modes (``--rotate``), each every ``--rotate-every`` seconds:
- ``rename``: the active file is renamed to ``<name>.1`` (older ones shift) and a new one started;
- ``copytruncate``: the file is copied to ``<name>.1`` and truncated in place (logrotate's mode —
  lines written between the copy and the truncate are lost by design, so the writer pauses writing
  while it rotates, as a careful application would; the agent must not lose or repeat anything);
- ``copytruncate-olddir``: like ``copytruncate`` but the copy goes to ``old/`` beside the file's
  directory (logrotate's ``olddir``), so the agent finds no copy to finish the old generation from:
  whatever it had not read at the truncate is lost, and must be reported;
- ``gzip``: like ``rename`` and the rotated file is then compressed to ``<name>.1.gz``;
- ``delete``: like ``rename`` and the rotated file is deleted right away (data loss the agent must
  count in ``ranklog_agent_lost_bytes_total`` when it had not shipped it yet);
- ``none``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import time
from pathlib import Path

from ranklog.record import format_ts


def _rotate(path: Path, mode: str, keep: int) -> None:
    for index in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{index}")
        if older.exists():
            older.rename(path.with_name(f"{path.name}.{index + 1}"))
    rotated = path.with_name(f"{path.name}.1")
    if mode.startswith("copytruncate"):
        if mode == "copytruncate-olddir":
            rotated = path.parent.parent / "old" / f"{path.name}.{time.monotonic_ns()}"
            rotated.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, rotated)
        with open(path, "r+b") as handle:
            handle.truncate(0)
        return
    path.rename(rotated)
    if mode == "gzip":
        with open(rotated, "rb") as src, gzip.open(f"{rotated}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        rotated.unlink()
    elif mode == "delete":
        rotated.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--rate", type=float, default=10_000, help="lines per second")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--lines", type=int, default=0, help="stop after this many lines (0: by time)")
    parser.add_argument("--rotate", choices=("none", "rename", "copytruncate", "copytruncate-olddir", "gzip", "delete"), default="none")
    parser.add_argument("--rotate-every", type=float, default=1.0)
    parser.add_argument("--first-rotation", type=float, default=None,
                        help="seconds before the first rotation (default: --rotate-every)")
    parser.add_argument("--keep", type=int, default=50)
    parser.add_argument("--host", default=socket.gethostname())
    parser.add_argument("--job", default="reliability")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--skew", type=float, default=0.0, help="seconds added to every timestamp (clock skew)")
    parser.add_argument("--level", default="INFO")
    args = parser.parse_args(argv)

    pid = os.getpid()
    directory = args.dir / args.job / args.host
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"rank-{args.rank}.pid-{pid}.0000.jsonl"
    head = {"level": args.level, "logger": "seq_writer", "host": args.host, "ip": "127.0.0.1", "pid": pid,
            "rank": args.rank, "local_rank": args.rank, "job": args.job}
    head_json = json.dumps(head, separators=(",", ":"))[1:-1]
    skew_ns = int(args.skew * 1e9)
    seq = 0
    batch = max(1, int(args.rate / 200))  # write in slices of 5 ms worth of lines
    start = time.monotonic()
    next_rotation = start + (args.rotate_every if args.first_rotation is None else args.first_rotation)
    handle = open(path, "ab", buffering=1 << 20)  # noqa: SIM115 - reopened on rotation
    try:
        while True:
            now = time.monotonic()
            if (args.lines and seq >= args.lines) or (not args.lines and now - start >= args.seconds):
                break
            if args.rotate != "none" and now >= next_rotation:
                handle.close()
                _rotate(path, args.rotate, args.keep)
                handle = open(path, "ab", buffering=1 << 20)  # noqa: SIM115
                next_rotation = now + args.rotate_every
            due = int((now - start) * args.rate) + batch
            if args.lines:
                due = min(due, args.lines)
            chunk = []
            ts = format_ts(time.time_ns() + skew_ns)
            while seq < due:
                seq += 1
                chunk.append(f'{{"ts":"{ts}",{head_json},"seq":{seq},"msg":"step {seq} loss={seq % 97 / 10:.2f}"}}')
            if chunk:
                handle.write(("\n".join(chunk) + "\n").encode())
                handle.flush()
            else:
                time.sleep(0.002)
    finally:
        handle.close()
    print(json.dumps({"written": seq, "host": args.host, "pid": pid, "job": args.job, "rank": args.rank}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
