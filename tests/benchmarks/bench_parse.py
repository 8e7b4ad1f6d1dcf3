"""Parser throughput: ranklog's parsers against the naive per-line Python they replace, same data, same run.

    python tests/benchmarks/bench_parse.py [--quick]

Feeds files the way the agent does (4 MiB reads, unconsumed rest re-offered, final at EOF) and
reports lines per CPU-second (process time, so other load on the machine counts less), median of
several runs:

- ranklog JSON lines (10% carry `extra=` fields) — peers: `json.loads` per line + record building
  (what a hand-written agent does), and bare `pyarrow.json.read_json` on the whole file (the ceiling:
  parsing without offsets, fallbacks, attrs or the record schema).
- The same JSON lines with one in 100 not JSON (a C++ library's warning in the file, or a line cut
  short by a crash) — peer: the same per-line `json.loads` agent, which keeps such a line as text.
  The JSON reader rejects a block for one such line; this row shows what the lines around it cost.
- Python logging text (`%(asctime)s - %(name)s - %(levelname)s - %(message)s`, 1% tracebacks) — peer:
  a per-line Python `re` parser with the same traceback joining.
- Ray's structured logging (``LoggingConfig(encoding="JSON")``), the JSON lines of the Ray runs
  worker files (tests/scenarios), format `json`: a dozen keys a line, two of them (``timestamp_ns``,
  ``asctime``) rivals for the time, so one goes to attrs on every line — peer: per-line `json.loads`
  with the same key mapping (each field's first key with a value, the others dumped to attrs).
- What real runs wrote (tests/scenarios/*/out, repeated to the size): Ray's worker files (format
  `ray`: markers, Ray's and Python's layouts, JSON lines with a dozen extra keys each, tracebacks) and
  torchrun's per-rank files (format `torchrun`: `[rankN]:`-prefixed tracebacks, gloo's C++ lines,
  prints) — failure runs, so tracebacks are a far larger share than in a healthy run's logs. Peer:
  per line, Python `re` trying the format's own layouts in order; it builds no records, groups no
  traceback and keeps no JSON extras, so it does much less than we do. No target: these rows are
  there so that the cost of real tools' output (several times a clean logging file's per line) is
  seen and a regression on it shows.

Targets: the agent must ship ≥ 300,000 JSON lines/s per core end to end, so the JSON parse alone
must do ≥ 600,000 lines per CPU-second (2×, leaving half the core to tailing and shipping) — which
needs a machine where pyarrow's reader itself does well over that, hence also: ≥ 60% of the bare
reader's rate in the same run (the overhead of offsets, fallbacks, attrs and the record schema), ≥ 2×
the per-line `json.loads` agent, also with 1% of the lines not JSON and for Ray's JSON lines; and the
text parser must beat the per-line Python parser by ≥ 2×.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "exporters"))

import pyarrow.json as pa_json  # noqa: E402

from ranklog.parse import SourceContext, parse  # noqa: E402
from ranklog.parse.formats.json import build_mapping  # noqa: E402
from ranklog.parse.inference import learned_patterns  # noqa: E402
from ranklog.parse.inference.prefixes import LAUNCHER_PREFIXES  # noqa: E402
from ranklog.record import normalize_row  # noqa: E402
from tests.benchmarks.mixed_layouts import write as write_mixed  # noqa: E402
from tests.helpers.layouts import ranklog_line, traceback_lines  # noqa: E402

CACHE = REPO / ".cache" / "bench_parse"
CHUNK = 4 * 1024 * 1024
JSON_MAPPING = build_mapping(None)
START = datetime(2026, 12, 2, 13, 0, 0, tzinfo=timezone.utc)


def ranklog_data(lines: int) -> bytes:
    path = CACHE / f"ranklog-{lines}.jsonl"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        out = []
        for i in range(lines):
            extra = {"loss": round(0.5 + (i % 1000) / 400, 4), "tokens": 4096} if i % 10 == 0 else {}
            out.append(ranklog_line(START + timedelta(microseconds=i * 137), "INFO", f"step {i // 8} micro-batch {i} done",
                                    host="node17", ip="10.0.3.17", pid=40213, rank=i % 8, local_rank=i % 8,
                                    job="llama-70b-sft", seq=i, step=i // 8, **extra))
        path.write_text("\n".join(out) + "\n")
    return path.read_bytes()


def mixed_json_data(lines: int) -> bytes:
    """The ranklog JSON lines with one line in 100 that is not JSON: a C++ library's warning written into
    the same file (every 100th line), or a line cut short by a crash (every 1,000th, instead)."""
    out = ranklog_data(lines).splitlines(keepends=True)
    for i in range(99, lines, 100):
        out[i] = (out[i][:out[i].index(b'"msg"')] + b"\n" if i % 1000 == 999 else
                  b"W1202 13:00:00.%06d 40213 ProcessGroupNCCL.cpp:1203] NCCL WARN Cuda failure 'out of memory'\n" % i)
    return b"".join(out)


def python_data(lines: int) -> bytes:
    path = CACHE / f"python-{lines}.log"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        out = []
        tb = traceback_lines("RuntimeError: CUDA error: an illegal memory access was encountered")
        i = 0
        while len(out) < lines:
            t = START + timedelta(milliseconds=i * 3)
            level = "ERROR" if i % 100 == 99 else "INFO"
            out.append(f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d} - trainer.loop - {level} - "
                       f"step {i} loss=0.{i % 997:03d} lr=3e-05 tokens/s=15321.4")
            if level == "ERROR":
                out.extend(tb)
            i += 1
        path.write_text("\n".join(out[:lines]) + "\n")
    return path.read_bytes()


SCENARIOS = REPO / "tests" / "scenarios"
RAY_FILES = "ray_*/out/**/worker-*.[oe][ur][tr]"


def real_lines(pattern: str, lines: int, json_only: bool = False) -> bytes:
    """Lines of the real runs' files matching `pattern` (under tests/scenarios), repeated to `lines`
    (`json_only`: only those that are JSON objects)."""
    own = [line for path in sorted(SCENARIOS.glob(pattern)) for line in path.read_bytes().splitlines(keepends=True)
           if not json_only or line.startswith(b"{")]
    return b"".join((own * (lines // len(own) + 1))[:lines])


def layouts_peer(fmt: str, data: bytes):
    """Per line, Python `re`: the launcher prefixes peeled, then the layouts ranklog learned from the
    data tried in order (the peer is told what ranklog had to find out)."""
    ctx = SourceContext(source="bench", source_id="bench", format=fmt, host="h", ip="127.0.0.1")
    parse(data[:4 << 20], 0, ctx, final=False, read_time_ns=0)
    prefixes = [re.compile(p) for p in LAUNCHER_PREFIXES]
    layouts = [re.compile(p) for p in learned_patterns(ctx)]

    def run(data: bytes) -> int:
        matched = 0
        for raw in data.decode("utf-8", "replace").splitlines():
            for prefix in prefixes:
                found = prefix.match(raw)
                if found:
                    raw = raw[found.end():]
            matched += any(layout.match(raw) for layout in layouts)
        return matched
    return run


def feed(data: bytes, fmt: str) -> int:
    """Parse like the agent: CHUNK reads, re-offer the rest, final at EOF. Returns records."""
    ctx = SourceContext("/bench/file", "bench-id", fmt, "node17", "10.0.3.17", {"job": "bench"}, {}, {})
    records, offset, pos, carry = 0, 0, 0, b""
    while True:
        block = data[pos:pos + CHUNK]
        pos += len(block)
        buffer = carry + block
        final = not block
        result = parse(buffer, offset, ctx, final=final, read_time_ns=time.time_ns())
        records += result.batch.num_rows
        offset += result.consumed
        carry = buffer[result.consumed:]
        if final:
            return records


def json_loads_peer(data: bytes) -> int:
    """Per-line json.loads + record normalisation: the straightforward Python agent."""
    records = 0
    defaults = {"host": "node17", "ip": "10.0.3.17", "source": "/bench/file", "source_id": "bench-id", "format": "ranklog"}
    offset = 0
    for line in data.splitlines(keepends=True):
        if line.strip():
            try:
                row = normalize_row(json.loads(line), defaults)
            except ValueError as exc:  # not JSON: kept as text, with the error
                row = normalize_row({"msg": line.decode("utf-8", "replace"), "attrs": {"parse_error": str(exc)}},
                                    defaults)
            row["offset"] = offset
            records += 1
        offset += len(line)
    return records


def mapped_loads_peer(data: bytes) -> int:
    """Per-line json.loads with the `json` format's key mapping (each field's first key with a value;
    the other keys, rivals included, dumped to attrs) + record normalisation."""
    defaults = {"host": "node17", "ip": "10.0.3.17", "source": "/bench/file", "source_id": "bench-id", "format": "json"}
    records, offset = 0, 0
    for line in data.splitlines(keepends=True):
        if line.strip():
            obj, fields, used = json.loads(line), {}, set()
            for name, keys in JSON_MAPPING.items():
                key = next((key for key in keys if obj.get(key) is not None), None)
                if key is not None:
                    fields[name] = obj[key]
                    used.add(key)
            extras = {k: v for k, v in obj.items() if k not in used and v is not None}
            fields["attrs"] = json.dumps(extras, ensure_ascii=False, separators=(",", ":")) if extras else None
            normalize_row(fields, defaults)["offset"] = offset
            records += 1
        offset += len(line)
    return records


def read_json_ceiling(data: bytes) -> int:
    return pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(use_threads=False,
                                                                             block_size=CHUNK)).num_rows


_HEADER = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - (\S+) - ([A-Z]+) - (.*)$")


def regex_peer(data: bytes) -> int:
    """Per-line `re` parser with traceback joining: the straightforward Python agent for text logs."""
    records, current = 0, None
    for raw in data.decode("utf-8", "replace").splitlines():
        match = _HEADER.match(raw)
        if match:
            if current is not None:
                records += 1
            ts = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc)
            current = {"ts": ts, "logger": match.group(2), "level": match.group(3), "msg": match.group(4), "exc": []}
        elif current is not None:
            current["exc"].append(raw)
        else:
            records += 1
    return records + (current is not None)


def measure(fn, data: bytes, runs: int) -> tuple[float, int]:
    """Median CPU seconds over `runs`, and the record count (checked equal across runs)."""
    times, counts = [], set()
    for _ in range(runs):
        start = time.process_time()
        counts.add(fn(data))
        times.append(time.process_time() - start)
    assert len(counts) == 1, counts
    return statistics.median(times), counts.pop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data, few runs (< 30 s)")
    args = parser.parse_args()
    lines, runs = (10_000, 3) if args.quick else (400_000, 5)
    ranklog = ranklog_data(lines)
    text = python_data(lines)
    feed(ranklog[:100_000], "ranklog")  # warm up imports
    feed(text[:100_000], "python")

    results = []
    ours_json, n_json = measure(lambda d: feed(d, "ranklog"), ranklog, runs)
    loads, n_loads = measure(json_loads_peer, ranklog, runs)
    ceiling, n_ceiling = measure(read_json_ceiling, ranklog, runs)
    assert n_json == n_loads == n_ceiling == lines
    results.append(("ranklog JSON lines", lines, ours_json, "json.loads + normalize_row per line", loads))
    results.append(("ranklog JSON lines", lines, ours_json, "bare pyarrow read_json (ceiling)", ceiling))
    mixed = mixed_json_data(lines)
    ours_mixed, n_mixed = measure(lambda d: feed(d, "ranklog"), mixed, runs)
    loads_mixed, n_loads_mixed = measure(json_loads_peer, mixed, runs)
    assert n_mixed == n_loads_mixed == lines, (n_mixed, n_loads_mixed)
    results.append(("JSON, 1% not JSON", lines, ours_mixed, "json.loads + normalize_row per line", loads_mixed))
    ours_text, n_text = measure(lambda d: feed(d, "python"), text, runs)
    peer_text, n_peer = measure(regex_peer, text, runs)
    assert n_text == n_peer, (n_text, n_peer)
    results.append(("python logging text", lines, ours_text, "per-line re + strptime", peer_text))
    ray_json = real_lines(RAY_FILES, lines, json_only=True)
    ours_ray_json, n_ray_json = measure(lambda d: feed(d, "json"), ray_json, runs)
    mapped, n_mapped = measure(mapped_loads_peer, ray_json, runs)
    assert n_ray_json == n_mapped == lines, (n_ray_json, n_mapped)
    results.append(("Ray's JSON lines", lines, ours_ray_json, "json.loads + key mapping per line", mapped))
    for name, pattern, fmt in (("Ray worker files", RAY_FILES, "ray"),
                               ("torchrun rank files", "torchrun_*/out/**/attempt_*/*/std*.log", "torchrun")):
        data = real_lines(pattern, lines)
        ours, _ = measure(lambda d, fmt=fmt: feed(d, fmt), data, runs)
        peer, _ = measure(layouts_peer(fmt, data), data, runs)
        results.append((name, lines, ours, "per-line re, the learned layouts", peer))
    mixed_files = [path.read_bytes() for path, _, _ in write_mixed(CACHE / f"mixed-{lines}", lines)]
    peers = [layouts_peer("python", data) for data in mixed_files]
    ours, _ = measure(lambda files: sum(feed(data, "python") for data in files), mixed_files, runs)
    peer, _ = measure(lambda files: sum(run(data) for run, data in zip(peers, files, strict=True)), mixed_files, runs)
    results.append(("mixed layouts, 6 files", lines, ours, "per-line re, the learned layouts", peer))

    print(f"parse benchmark ({'quick' if args.quick else 'full'}: {lines:,} lines per input, median of {runs} runs, "
          "lines per CPU-second)")
    header = f"{'input':<22} {'ranklog.parse':>14} {'peer':<38} {'peer lines/s':>13} {'ratio':>7}"
    print(header)
    print("─" * len(header))
    for name, n, ours, peer_name, peer in results:
        print(f"{name:<22} {n / ours:>14,.0f} {peer_name:<38} {n / peer:>13,.0f} {peer / ours:>6.2f}x")
    json_rate = lines / ours_json
    targets = [
        (f"ranklog JSON parse >= 600,000 lines/CPU-s (2x the agent's 300k/s/core): {json_rate:,.0f}", json_rate >= 600_000),
        (f"ranklog JSON parse >= 60% of bare pyarrow read_json: {ceiling / ours_json:.0%}", ceiling / ours_json >= 0.6),
        (f"ranklog JSON parse >= 2x json.loads per line: {loads / ours_json:.2f}x", loads / ours_json >= 2),
        (f"ranklog JSON with 1% lines not JSON >= 2x json.loads per line: {loads_mixed / ours_mixed:.2f}x",
         loads_mixed / ours_mixed >= 2),
        (f"python text parse >= 2x per-line re: {peer_text / ours_text:.2f}x", peer_text / ours_text >= 2),
        (f"Ray's JSON lines (two keys for the time on every line) >= 2x json.loads per line: {mapped / ours_ray_json:.2f}x",
         mapped / ours_ray_json >= 2),
    ]
    for label, ok in targets:
        print(f"{'PASS' if ok else 'FAIL'}: {label}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
