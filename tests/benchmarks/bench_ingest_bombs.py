"""Benchmark: the archive under ingest bombs, side by side with another revision (issue 40 item 1).

    python tests/benchmarks/bench_ingest_bombs.py [--quick] [--baseline-rev REV] [--costs]

Runs :func:`tests.helpers.bombs.run_scenario` — one token sends the issue's bombs one kind after another
(three 10 GiB gzip bombs at once at the end) while another token posts 10 records every 0.2 s — against
this tree and, with ``--baseline-rev``, against that revision's code (``git archive REV``, run from a
temporary directory with the same interpreter). Each archive runs under an RSS watch that SIGKILLs it
past 2 GiB (and ``RLIMIT_AS`` 16 GiB): a bomb must not take the machine down, and "killed at 2 GiB"
is the baseline's answer when it has no budget.

Printed: each bomb's answers per revision; the archive's peak RSS; the steady token's requests answered
200 within 2 s and its latency p50/p99/worst. Targets (issue 40): peak RSS < 1.5 GiB and the other
token's p99 < 2 s, every bomb answered 413/429.

``--costs`` also measures what decoding costs per record (peak RSS of one decode in a fresh process,
25,000 and 50,000 records per body kind: the difference, so that a first decode's fixed costs cancel)
next to what :mod:`ranklog.archive.ingest_budget` charges for it — the figures its constants come from.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers.bombs import BOMBS, MIB, run_scenario

REPO = Path(__file__).resolve().parents[2]
RSS_TARGET, P99_TARGET = 1536 * MIB, 2.0


def _checkout(rev: str, into: Path) -> str:
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return str(into / "exporters")


def _row(cells: list[str], widths: list[int]) -> str:
    return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)) + " |"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join([_row(header, widths), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *(_row(r, widths) for r in rows)])


_COST_CASES = ("ndjson", "msgpack_empty", "otlp_protobuf", "loki_protobuf")


def _cost_child(case: str, n: int) -> None:
    """In a fresh process: decode one body of `n` records; print its peak RSS growth and the charge."""
    import gc
    import time

    import msgpack

    from ranklog.archive.ingest_budget import IngestBudget
    from ranklog.archive.shippers import dispatch
    from ranklog.archive.shippers.batch import wrap
    from tests.helpers.shipper_bodies import length_delimited, push_request

    line = {"ts": "2026-12-01T10:00:00.123456Z", "level": "INFO", "msg": "step 1 loss=0.123 " + "m" * 60,
            "host": "node-1", "rank": 3, "job": "j1", "logger": "train"}
    if case == "ndjson":
        body, code = "\n".join(json.dumps(line) for _ in range(n)).encode(), 2
    elif case == "msgpack_empty":
        body, code = wrap("", b"\x80" * n), dispatch.MSGPACK
    elif case == "otlp_protobuf":
        record = length_delimited(5, length_delimited(1, line["msg"].encode()))  # body.string_value
        body, code = wrap("", length_delimited(1, length_delimited(2, length_delimited(2, record) * n))), \
            dispatch.OTLP_PROTOBUF
    else:
        import cramjam

        request = push_request('{job="a"}', [(1_700_000_000_000_000_000 + i, line["msg"], {}) for i in range(n)])
        body, code = wrap("", bytes(cramjam.snappy.compress_raw(request))), dispatch.LOKI_PROTOBUF
    del msgpack
    charge = IngestBudget(1 << 40, 1 << 40, 1 << 40).open("bench")
    gc.collect()

    def status(name: str) -> int:
        with open("/proc/self/status") as handle:
            return next(int(x.split()[1]) * 1024 for x in handle if x.startswith(name))

    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # the peak (VmHWM) starts again from what is resident now
    before = status("VmRSS:")
    table = dispatch.decode_body(body, code, 0, time.time_ns(), 1 << 31, charge)
    print(json.dumps({"rows": table.num_rows, "grew": status("VmHWM:") - before, "charged": charge.held}))


def _costs(quick: bool) -> str:
    """Marginal costs: decodes of n and 2n records, so the fixed cost of a first decode cancels out."""
    n = 2_500 if quick else 25_000
    rows = []
    for case in _COST_CASES:
        got = []
        for count in (n, 2 * n):
            out = subprocess.run([sys.executable, __file__, "--cost-child", case, str(count)], capture_output=True,
                                 text=True, cwd=REPO, timeout=600)
            if out.returncode:
                break
            got.append(json.loads(out.stdout))
        if len(got) < 2:
            rows.append([case, "error", out.stderr.strip().splitlines()[-1][:60], ""])
            continue
        grew, charged = got[1]["grew"] - got[0]["grew"], got[1]["charged"] - got[0]["charged"]
        rows.append([case, f"{grew / n:,.0f} B", f"{charged / n:,.0f} B", f"{charged / max(grew, 1):.1f}×"])
    return _table(["body", "peak RSS per record", "charged per record", "charged / used"], rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three bombs, no baseline (a smoke run)")
    parser.add_argument("--baseline-rev", help="also run the scenario on this revision's code (e.g. main)")
    parser.add_argument("--costs", action="store_true", help="also measure decode costs per record")
    parser.add_argument("--cost-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cost_child:
        _cost_child(args.cost_child[0], int(args.cost_child[1]))
        return 0
    bombs = BOMBS[:3] if args.quick else BOMBS
    with tempfile.TemporaryDirectory(prefix="bench-bombs-") as tmp:
        runs = {"this tree": run_scenario(Path(tmp) / "this", bombs=bombs)}
        if args.baseline_rev:
            code = _checkout(args.baseline_rev, Path(tmp) / "baseline-code")
            runs[args.baseline_rev] = run_scenario(Path(tmp) / "baseline", code, bombs=bombs)
    names = list(runs)
    print("answers to each bomb (another token ingests steadily meanwhile)\n")
    print(_table(["bomb", *names], [[bomb.name, *(" ".join(o.statuses) for o in (
        [r.outcomes[i] for r in runs.values()]))] for i, bomb in enumerate(bombs)]))
    print()
    rows = []
    for name, result in runs.items():
        worst = max((s for _, s in result.steady), default=float("nan"))
        rows.append([name, f"{result.peak_rss / MIB:,.0f} MiB" + (f" (SIGKILLed at 2 GiB after {result.killed_at:.0f} s)"
                                                                 if result.killed_at else ""),
                     f"{result.steady_ok}/{len(result.steady)}", f"{result.steady_median():.3f} s",
                     f"{result.steady_quantile(0.99):.2f} s", f"{worst:.2f} s"])
    print(_table(["code", "archive peak RSS", "steady 200 < 2 s", "steady p50", "steady p99", "steady worst"], rows))
    if args.costs:
        print("\ndecode cost per record (peak RSS of one decode in a fresh process)\n")
        print(_costs(args.quick))
    mine = runs["this tree"]
    checks = [("archive peak RSS < 1.5 GiB", mine.peak_rss < RSS_TARGET and not mine.killed_at),
              ("steady token p99 < 2 s, every request 200",
               mine.steady_quantile(0.99) < P99_TARGET and mine.steady_ok == len(mine.steady)),
              ("every bomb answered 413/429", all(set(o.statuses) <= {"413", "429"} for o in mine.outcomes))]
    print()
    for what, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
