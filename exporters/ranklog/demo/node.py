"""One simulated node of the demo job: takes the node's host name, then launches its ranks.

The driver starts this module in a new UTS namespace (``unshare --uts``), so
``socket.gethostname()`` is ``node<i>`` for this process and every rank it launches: the ranklog
logger and ``ranklog run`` stamp that host on their records exactly as on a real node. Each node
logs in one of the supported layouts:

- ``ranklog``:  ``ranklog run -- rank --style logger``  (ranklog JSON via ``get_logger``)
- ``run``:      ``ranklog run -- rank --style print``   (plain ``print`` captured, mixed with get_logger)
- ``torchrun``: stdout/stderr redirected into ``<dir>/<run_id>_<suffix>/attempt_0/<local_rank>/``
- ``ray``:      each rank writes ``session_*/logs/worker-<id>-<job>-<pid>.{out,err}`` (verl console metrics)

Exits with 0 once every rank has exited (whatever their status: failing ranks are the point).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

LAYOUTS = ("ranklog", "run", "torchrun", "ray")
TORCHRUN_SUFFIX = "x7k2p9qa"  # torchrun appends 8 random characters to the run id
RAY_SESSION = "session_2026-12-02_12-00-00_000000_1"


def set_hostname(name: str) -> bool:
    """sethostname(2); works only inside our own UTS namespace (else returns False)."""
    libc = ctypes.CDLL(None, use_errno=True)
    encoded = name.encode()
    return libc.sethostname(encoded, len(encoded)) == 0


def rank_command(args: argparse.Namespace, rank: int, style: str) -> list[str]:
    return [sys.executable, "-m", "ranklog.demo.rank", "--rank", str(rank), "--world", str(args.world),
            "--style", style, "--steps", str(args.steps), "--fail-rank", str(args.fail_rank),
            "--fail-step", str(args.fail_step), "--collective-dir", args.collective_dir,
            "--timeout", str(args.timeout), "--step-time", str(args.step_time)]


def launch(args: argparse.Namespace, rank: int, local_rank: int) -> subprocess.Popen:
    root = Path(args.log_root)
    env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(args.world),
           "LOCAL_WORLD_SIZE": str(args.ranks_per_node), "GROUP_RANK": str(args.node), "RANKLOG_JOB": args.job,
           "TORCHELASTIC_RUN_ID": args.job, "PYTHONUNBUFFERED": "1", "RANKLOG_LOG_DIR": str(root / "ranklog")}
    if args.layout in ("ranklog", "run"):
        style = "logger" if args.layout == "ranklog" else "print"
        cmd = [sys.executable, "-m", "ranklog", "run", "--", *rank_command(args, rank, style)]
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if args.layout == "torchrun":
        directory = root / "torchrun" / f"{args.job}_{TORCHRUN_SUFFIX}" / "attempt_0" / str(local_rank)
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / "stdout.log", "ab") as out, open(directory / "stderr.log", "ab") as err:
            return subprocess.Popen([*rank_command(args, rank, "print"), "--rank-prefix", "--no-logger"], env=env,
                                    stdout=out, stderr=err)
    logs = root / "ray" / RAY_SESSION / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([*rank_command(args, rank, "verl"), "--rank-prefix", "--no-logger", "--ray-logs",
                             str(logs), "--ray-job", args.job],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one node of the ranklog demo job")
    parser.add_argument("--node", type=int, required=True)
    parser.add_argument("--ranks-per-node", type=int, default=4)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--layout", choices=LAYOUTS, required=True)
    parser.add_argument("--log-root", required=True, help="this node's log directory")
    parser.add_argument("--job", required=True)
    parser.add_argument("--collective-dir", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--fail-rank", type=int, default=5)
    parser.add_argument("--fail-step", type=int, default=12)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--step-time", type=float, default=0.1)
    args = parser.parse_args(argv)

    host = f"node{args.node}"
    if not set_hostname(host):
        print(f"{host}: cannot set the host name (not in a UTS namespace); records keep the real one",
              file=sys.stderr)
    procs = [launch(args, args.node * args.ranks_per_node + i, i) for i in range(args.ranks_per_node)]

    def forward(signum: int, _frame: object) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    codes = [proc.wait() for proc in procs]
    print(f"{host}: ranks {args.node * args.ranks_per_node}-{(args.node + 1) * args.ranks_per_node - 1} "
          f"exited with {codes}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
