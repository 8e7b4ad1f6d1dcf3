"""A log writer process for agent tests: ranklog JSON lines at a steady rate, with real rotation.

    python -m tests.agent.writer PATH --lines N [--rate R] [--rotate rename|copytruncate] [--every K] [--gzip]

Each line is one ranklog record whose ``seq`` is its number (0…N-1) and whose ``msg`` is
``line <seq>``, so a test can check by content that every line arrived exactly once. Rotation
works the way logrotate does it: ``rename`` shifts ``PATH.1`` → ``PATH.2`` … and renames ``PATH`` to
``PATH.1`` before reopening ``PATH``; ``copytruncate`` copies ``PATH`` to ``PATH.1`` and truncates
``PATH`` in place (the writer keeps its descriptor, opened with O_APPEND). With ``--gzip`` the rotated
``PATH.2`` is compressed to ``PATH.2.gz`` (the agent must not read it again).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import time


def line(seq: int, rank: int = 0) -> bytes:
    ts = time.time_ns()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts // 10**9)) + f".{ts // 1000 % 10**6:06d}Z"
    record = {"ts": stamp, "level": "INFO", "msg": f"line {seq}", "logger": "writer", "rank": rank, "job": "jw",
              "seq": seq, "pad": "x" * (seq % 50)}
    return (json.dumps(record, separators=(",", ":")) + "\n").encode()


def rotate_rename(path: str, keep: int, compress: bool) -> None:
    for index in range(keep, 0, -1):
        older = f"{path}.{index}"
        if os.path.exists(older):
            os.replace(older, f"{path}.{index + 1}")
    os.replace(path, f"{path}.1")
    if compress and os.path.exists(f"{path}.2"):
        with open(f"{path}.2", "rb") as src, gzip.open(f"{path}.2.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.unlink(f"{path}.2")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--lines", type=int, required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--rate", type=float, default=0, help="lines per second (0 = as fast as possible)")
    parser.add_argument("--rotate", choices=("rename", "copytruncate"))
    parser.add_argument("--every", type=int, default=0, help="rotate after this many lines")
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--keep", type=int, default=5)
    args = parser.parse_args()
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    fd = os.open(args.path, flags, 0o644)
    started = time.monotonic()
    for offset in range(args.lines):
        seq = args.start + offset
        os.write(fd, line(seq))
        if args.rotate and args.every and (offset + 1) % args.every == 0:
            if args.rotate == "rename":
                os.close(fd)
                rotate_rename(args.path, args.keep, args.gzip)
                fd = os.open(args.path, flags, 0o644)
            else:
                shutil.copyfile(args.path, f"{args.path}.1")
                os.truncate(args.path, 0)
        if args.rate:
            ahead = (offset + 1) / args.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    os.close(fd)


if __name__ == "__main__":
    main()
