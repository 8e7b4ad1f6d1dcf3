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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="raw folders only (no agent → archive path)")
    parser.add_argument("--only", nargs="*", default=None, help="entry names")
    parser.add_argument("--json", type=Path, default=None, help="write the counts here")
    parser.add_argument("--update", action="store_true", help=f"write the counts to {EXPECTED.relative_to(REPO)}")
    args = parser.parse_args()
    chosen = [p for p in entries() if not args.only or p.name in args.only]
    paths = [("raw", read_raw)] + ([] if args.quick else [("archive", read_archive)])
    print(f"| {'entry':<22} | {'path':<7} | {'records':>7} | {'foreign':>7} | "
          + " | ".join(f"{f:^13}" for f in FIELDS) + " | {:>5} |".format("s"))
    counts: dict[str, dict[str, dict[str, list[int]]]] = {}
    totals = {p: {f: [0, 0] for f in FIELDS} for p, _ in paths}
    for path_dir in chosen:
        entry = load(path_dir)
        if entry.unaligned:
            print(f"  {entry.name}: {len(entry.unaligned)} sidecar records not found in the output "
                  f"(regenerate): {entry.unaligned[:3]}", file=sys.stderr)
        records = sum(e.kind != "foreign" for e in entry.expected)
        foreign = len(entry.expected) - records
        for path, read in paths:
            started = time.perf_counter()
            try:
                result = score(entry, read(entry))
            except Exception as exc:  # a crash is a wrong answer on every field, shown with its reason
                print(f"  {entry.name} {path}: ERROR {type(exc).__name__}: {exc}", file=sys.stderr)
                result = {f: [0, 1] for f in FIELDS}
            counts.setdefault(entry.name, {})[path] = result
            for f in FIELDS:
                totals[path][f][0] += result[f][0]
                totals[path][f][1] += result[f][1]
            print(f"| {entry.name:<22} | {path:<7} | {records:>7} | {foreign:>7} | "
                  + " | ".join(_cell(*result[f]) for f in FIELDS) + f" | {time.perf_counter() - started:5.1f} |",
                  flush=True)
    print()
    for path, _ in paths:
        print(f"{path:<7} all entries: " + ", ".join(f"{f} {_cell(*totals[path][f]).strip()}" for f in FIELDS))
    for path, _ in paths:
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
