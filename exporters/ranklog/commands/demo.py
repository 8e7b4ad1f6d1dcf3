"""``ranklog demo``: archive + agents + a simulated 16-rank job whose rank 5 hits a CUDA OOM, then the
triage verdict, queries, the integrity check and the HTML report, in under a minute."""

from __future__ import annotations

import argparse


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Run the whole ranklog pipeline on this machine "
                                     "with a simulated failing 16-rank job on 4 nodes.")
    parser.add_argument("--workdir", help="where logs, the archive and the report go (default: a new temp dir, kept)")
    parser.add_argument("--report", "-o", help="HTML report path (default: <workdir>/report.html)")
    parser.add_argument("--steps", type=int, default=20, help="training steps (default: 20)")
    parser.add_argument("--fail-rank", "--fail_rank", type=int, default=5, help="the rank that hits the OOM (default: 5)")
    parser.add_argument("--fail-step", "--fail_step", type=int, default=12, help="the step it fails at (default: 12)")
    return parser


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ranklog.demo.driver import DemoOptions, run_demo
    from ranklog.errors import UserError

    if not 0 <= args.fail_rank < 16:
        raise UserError("--fail-rank must be a rank of the 16-rank job (0-15)")
    if not 1 <= args.fail_step <= args.steps:
        raise UserError("--fail-step must be between 1 and --steps")
    return run_demo(DemoOptions(workdir=Path(args.workdir) if args.workdir else None,
                                report=Path(args.report) if args.report else None, steps=args.steps,
                                fail_rank=args.fail_rank, fail_step=args.fail_step))
