"""Benchmark: does ranklog read the ecosystem's log layouts right? (the format corpus, tests/corpus/)

For every corpus entry (real libraries under real launchers, each process's own truth sidecar), it
reads the output as a user would — the raw folder (``ranklog query --log_dir``) and through real
agents into a real archive (``ranklog query --archive``) — and prints, per entry and path, the share
of records whose boundaries, time (to the printed precision), level, logger and rank are right, each
out of the records whose output shows that field (tests/corpus/truth.py says which). Target: 100 %
everywhere. ``foreign`` counts lines no sidecar saw (C++ glog lines, other launchers' lines), judged
on their rank only.

``--quick``: the raw path only. ``--only NAME…``: those entries. ``--json FILE``: the counts as JSON.
``--update``: write the counts to tests/corpus/accuracy.json, the floor test_corpus.py holds the
parser to (raise it as the parser gets better; never lower it to make a test pass).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "exporters"))

from tests.corpus.accuracy import EXPECTED, FIELDS, entries, read_archive, read_raw, score  # noqa: E402
from tests.corpus.truth import load  # noqa: E402


def _cell(right: int, shown: int) -> str:
    return f"{'—':>13}" if shown == 0 else f"{100 * right / shown:5.1f}% {right:>3}/{shown:<3}"


def _read_all(read, what):
    """`read(what)`, or None with the reason on stderr: a crash is a wrong answer on every field."""
    try:
        return read(what)
    except Exception as exc:
        print(f"  {getattr(what, 'name', 'all entries')}: ERROR {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="raw folders only (no agent → archive path)")
    parser.add_argument("--only", nargs="*", default=None, help="entry names")
    parser.add_argument("--json", type=Path, default=None, help="write the counts here")
    parser.add_argument("--update", action="store_true", help=f"write the counts to {EXPECTED.relative_to(REPO)}")
    args = parser.parse_args()
    chosen = [load(p) for p in entries() if not args.only or p.name in args.only]
    for entry in chosen:
        if entry.unaligned:
            print(f"  {entry.name}: {len(entry.unaligned)} sidecar records not found in the output "
                  f"(regenerate): {entry.unaligned[:3]}", file=sys.stderr)
    paths = ["raw"] + ([] if args.quick else ["archive"])
    print(f"| {'entry':<22} | {'path':<7} | {'records':>7} | {'foreign':>7} | "
          + " | ".join(f"{f:^13}" for f in FIELDS) + " | {:>5} |".format("s"))
    counts: dict[str, dict[str, dict[str, list[int]]]] = {}
    totals = {p: {f: [0, 0] for f in FIELDS} for p in paths}
    for path in paths:
        started = time.perf_counter()
        shipped = _read_all(read_archive, chosen) if path == "archive" else None  # one archive for all entries
        ship_seconds = (time.perf_counter() - started) / max(len(chosen), 1)
        for entry in chosen:
            started = time.perf_counter()
            records = shipped if shipped is not None else _read_all(read_raw, entry)
            result = score(entry, records) if records is not None else {f: [0, 1] for f in FIELDS}
            counts.setdefault(entry.name, {})[path] = result
            for f in FIELDS:
                totals[path][f][0] += result[f][0]
                totals[path][f][1] += result[f][1]
            seconds = time.perf_counter() - started + (ship_seconds if path == "archive" else 0)
            records_n = sum(e.kind != "foreign" for e in entry.expected)
            print(f"| {entry.name:<22} | {path:<7} | {records_n:>7} | {len(entry.expected) - records_n:>7} | "
                  + " | ".join(_cell(*result[f]) for f in FIELDS) + f" | {seconds:5.1f} |", flush=True)
    print()
    for path in paths:
        print(f"{path:<7} all entries: " + ", ".join(f"{f} {_cell(*totals[path][f]).strip()}" for f in FIELDS))
    for path in paths:
        perfect = all(r == s for r, s in totals[path].values())
        print(f"{'PASS' if perfect else 'FAIL'} target: every field 100 % on the {path} path")
    if args.json:
        args.json.write_text(json.dumps(counts, indent=1, sort_keys=True) + "\n")
    if args.update:
        merged = {**(json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {})}
        for name, by_path in counts.items():
            merged[name] = {**merged.get(name, {}), **by_path}
        EXPECTED.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
        print(f"wrote {EXPECTED.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
