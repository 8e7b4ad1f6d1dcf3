"""``ranklog context``: print a fresh trace context for ``export RANKLOG_TRACE_CONTEXT=$(ranklog context)``.

The format is described in :mod:`ranklog.log.context` (``trace_id=<id>,span_id=<16 hex>``).
"""

from __future__ import annotations

import argparse


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Print a new trace context (for RANKLOG_TRACE_CONTEXT). By default a new random "
                               "trace id; --inherit continues the current RANKLOG_TRACE_CONTEXT with a new span.")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--trace-id", "--trace_id", help="use this trace id (e.g. train_20251013_001)")
    group.add_argument("--inherit", action="store_true",
                       help="keep the trace of the current RANKLOG_TRACE_CONTEXT (new span id)")
    return parser


def main(args: argparse.Namespace) -> int:
    import os

    from ..errors import UserError
    from ..log import context

    if args.inherit:
        current = context.parse(os.environ.get(context.ENV_VAR))
        if current is None:
            raise UserError(f"--inherit: {context.ENV_VAR} is not set or not a valid context")
        print(current.child().encode())
        return 0
    if args.trace_id is not None and not args.trace_id.strip():
        raise UserError("--trace-id must not be empty")
    print(context.new_context(args.trace_id))
    return 0
