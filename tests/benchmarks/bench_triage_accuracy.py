"""Benchmark: is `ranklog triage` right on the real-tool scenarios of tests/scenarios/?

For every scenario (real torchrun / Ray / verl output with a known injected fault, see
tests/scenarios/README.md) it runs triage on the raw folder (``--log_dir``) and through real agents
into a real archive, and prints per path whether status, rank, node, category, step and the decisive
line agree with ``truth.json``; then the totals. Target: every scenario right on both paths.

`--quick`: the raw path only (seconds instead of minutes). `--only NAME…`: those scenarios.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "exporters"))

from tests.scenarios.harness import FIELDS, judge, scenarios, triage_archive, triage_raw  # noqa: E402

MARK = {True: "ok", False: "XX"}


def _row(name: str, path: str, marks: dict[str, bool], summary: str, seconds: float) -> str:
    cells = " | ".join(f"{MARK[marks[f]]:^8}" for f in FIELDS)
    return f"| {name:<32} | {path:<7} | {cells} | {seconds:6.1f} | {summary[:70]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="raw folders only (no agent → archive path)")
    parser.add_argument("--only", nargs="*", default=None, help="scenario names")
    args = parser.parse_args()
    chosen = [s for s in scenarios() if not args.only or s.name in args.only]
    paths = [("raw", triage_raw)] + ([] if args.quick else [("archive", triage_archive)])
    print(f"| {'scenario':<32} | {'path':<7} | " + " | ".join(f"{f:^8}" for f in FIELDS)
          + " | {:>6} | verdict".format("s"))
    totals = {p: {f: 0 for f in FIELDS} for p, _ in paths}
    all_right = {p: 0 for p, _ in paths}
    for scenario in chosen:
        for path, run in paths:
            started = time.perf_counter()
            try:
                result = run(scenario)
                marks, summary = judge(scenario.truth, result), result["verdict"]["summary"]
            except Exception as exc:  # a crash is a wrong answer on every field, shown with its reason
                marks, summary = dict.fromkeys(FIELDS, False), f"ERROR {type(exc).__name__}: {exc}"
            print(_row(scenario.name, path, marks, summary, time.perf_counter() - started), flush=True)
            for f in FIELDS:
                totals[path][f] += marks[f]
            all_right[path] += all(marks.values())
    print()
    n = len(chosen)
    for path, _ in paths:
        per_field = ", ".join(f"{f} {totals[path][f]}/{n}" for f in FIELDS)
        print(f"{path:<7}: {all_right[path]}/{n} scenarios right on every field ({per_field})")
    for path, _ in paths:
        verdict = "PASS" if all_right[path] == n else "FAIL"
        print(f"{verdict} target: every scenario right on the {path} path ({all_right[path]}/{n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
