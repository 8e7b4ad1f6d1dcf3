"""parse_many: several files' reads parsed in one pass give exactly the results of parsing each alone."""

from __future__ import annotations

import copy
import json
import random
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ranklog.parse import detect, json_bulk, parse, parse_many
from ranklog.parse.registry import parsers
from tests.helpers.layouts import ranklog_line
from tests.parse.conftest import READ_TIME_NS, make_ctx
from tests.parse.test_chunking import CORPUS

T = datetime(2026, 12, 2, 13, 4, 5, tzinfo=timezone.utc)
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _line(msg: str, seq: int, rank: int | None = None, **extra: object) -> str:
    return ranklog_line(T, "WARNING", msg, host="n2", ip="10.0.0.2", pid=9, rank=rank, local_rank=None, job=None,
                        seq=seq, **extra)

RAY_WORKER = b"\n".join([
    b":job_id:01000000", b":actor_name:WorkerDict_0", b"2026-12-02 13:04:05,123 INFO w.py:1 -- [Rank 1] up",
    *(b"2026-12-02 13:04:%02d,000 INFO w.py:2 -- [Rank 1] step %d" % (i % 60, i) for i in range(20)),
    b":task_name:compute", b"print without a time",
    b"Error in task: User exception:", b"ray::W.f() (pid=3, ip=10.0.0.3)", b'  File "w.py", line 3, in f',
    b"ValueError: boom", b"", b":actor_name:WorkerDict_1", b"[Rank 2] after the marker",
]) + b"\n"

RAY_JSON_WORKER = b"\n".join([  # ray.LoggingConfig(encoding="JSON"): marker lines, then JSON lines only
    b":job_id:02000000", b":actor_name:Actor_3",
    *(json.dumps({"asctime": f"2026-12-02 13:04:{i % 60:02d},000", "levelname": "INFO", "message": f"[Rank 3] m{i}",
                  "process": 7, **({"job_id": "03000000"} if i % 7 == 0 else {}),
                  **({"actor_name": "Own"} if i % 5 == 0 else {})}).encode() for i in range(30)),
    b'{"message": "no time"}', b'{"broken', b":actor_name:Actor_4",
    *(json.dumps({"timestamp_ns": 1796224695000000000 + i, "message": f"m{i}"}).encode() for i in range(10)),
]) + b"\n"

# (format, bytes, layout fields, options): JSON lines of every kind the fast path bisects away from
# (garbage, wrong types, invalid UTF-8, a line without newline at the end), heads without any time
# (inferred from the next line, or from the state), layouts that differ per file (defaults filled
# per row, extra attributes merged per file), two json mappings (two groups), Ray's marker lines
# (role and job run on from line to line of a file, and across its reads) and error bodies, a Ray
# file mixing JSON lines (parsed alone) among them.
FILES = [
    ("ranklog", CORPUS["ranklog"], {}, {}),
    ("ranklog", b'{"msg": "before any time"}\n\n  \n' + b"\n".join(
        _line(f"late {i}", i, rank=3 if i % 2 else None, extra_key=i).encode() for i in range(12))
     + b'\n{"msg": "\x1b[31mred\x1b[0m", "level": "error"}\n{"ts": "2999-01-01T00:00:00Z", "msg": "far"}\n',
     {"rank": 5, "job": "layout-job", "attempt": 2}, {}),
    ("ranklog", b"\n".join(_line(f"plain {i}", i).encode() for i in range(25)) + b"\n",
     {"rank": 7, "local_rank": 1}, {}),
    ("json", CORPUS["json"], {"job": "j2"}, {}),
    ("json", CORPUS["json"].replace(b"message", b"text"), {}, {}),
    ("json", b"\n".join(json.dumps({"body": f"b{i}", "lvl": "info", "ts": "2026-12-02T13:04:05Z"}).encode()
                        for i in range(15)) + b"\n", {}, {"mapping": {"body": "msg"}}),
    ("python", CORPUS["python"], {}, {}),
    ("python", CORPUS["python"].replace(b"[rank3]:", b"") + b"  trailing continuation\n", {"rank": 2}, {}),
    ("python", b"".join(b"2026-12-02 13:04:%02d,000 - t - INFO - line %d\n" % (i % 60, i) for i in range(40)),
     {"job": "j"}, {"multiline_max_lines": 3}),
    ("torchrun", CORPUS["torchrun"], {}, {}),
    ("torchrun", CORPUS["torchrun"].replace(b"default1", b"trainer1"), {"attempt": 1}, {}),
    ("text", CORPUS["text"], {}, {}),
    ("ranklog-text", CORPUS["ranklog-text"], {"rank": 4}, {}),
    ("ranklog-text", CORPUS["ranklog-text"] + b"\n2026-12-02T13:04:06Z WARNING x [rank=5] again\n", {}, {}),
    ("ray", CORPUS["ray"], {}, {}),
    ("ray", RAY_WORKER, {"pid": 4}, {}),
    ("ray", RAY_JSON_WORKER, {}, {}),
    ("ray", RAY_JSON_WORKER.replace(b"actor_name", b"task_name"), {"rank": 6}, {}),
    ("ray", RAY_WORKER.replace(b"[Rank 1]", b"").replace(b"WorkerDict", b"Critic"), {}, {}),
    ("verl-console", CORPUS["verl-console"] + CORPUS["ray"].split(b"\n", 1)[1].replace(b"{", b"x"), {}, {}),
]


def _contexts():
    return [make_ctx(fmt, fields=fields, options=options, source=f"/logs/{i}.log") for i, (fmt, _, fields, options)
            in enumerate(FILES)]


def _rounds(files: list[tuple[bytes, object]], sizes: list[list[int]]):
    """Every file (its bytes and context) read as the agent reads a trickle: one read a round
    (`sizes` per file, then the rest), the unconsumed rest offered again, a final flush once a file
    ends. Yields each round's items with a callback taking the round's results."""
    contexts = [ctx for _, ctx in files]
    pos, offset, carry, done = [0] * len(files), [0] * len(files), [b""] * len(files), [False] * len(files)
    while not all(done):
        members, items = [], []
        for i, (data, _) in enumerate(files):
            if done[i]:
                continue
            if pos[i] < len(data):
                size = sizes[i].pop(0) if sizes[i] else len(data)
                block = data[pos[i]:pos[i] + size]
                pos[i] += len(block)
                items.append((carry[i] + block, offset[i], contexts[i], False))
            else:
                items.append((carry[i], offset[i], contexts[i], True))
                done[i] = True
            members.append(i)
        results = yield items
        for i, (buffer, *_), result in zip(members, items, results, strict=True):
            offset[i] += result.consumed
            carry[i] = buffer[result.consumed:]
            yield None


def _check_round(items) -> list:
    """parse_many of `items` against parse of each alone (on copies of the contexts)."""
    alone_ctx = [copy.deepcopy(ctx) for _, _, ctx, _ in items]
    alone = [parse(data, base, ctx, final=final, read_time_ns=READ_TIME_NS)
             for (data, base, _, final), ctx in zip(items, alone_ctx, strict=True)]
    together = parse_many(items, read_time_ns=READ_TIME_NS)
    for (_, _, ctx, _), one, other, single_ctx in zip(items, together, alone, alone_ctx, strict=True):
        assert one.consumed == other.consumed, ctx.source
        assert one.errors == other.errors, ctx.source
        assert pa.Table.from_batches([one.batch]).equals(pa.Table.from_batches([other.batch])), ctx.source
        assert ctx.state == single_ctx.state, ctx.source
    return together


def _run(sizes: list[list[int]], files: list[tuple[bytes, object]] | None = None) -> int:
    """Rows parsed, every round checked; `files` defaults to FILES."""
    rows = 0
    files = files or [(data, ctx) for (_, data, _, _), ctx in zip(FILES, _contexts(), strict=True)]
    steps = _rounds(files, [list(s) for s in sizes])
    items = next(steps)
    while True:
        results = _check_round(items)
        rows += sum(result.batch.num_rows for result in results)
        steps.send(results)
        for _ in range(len(items) - 1):
            next(steps)
        try:
            items = next(steps)
        except StopIteration:
            return rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.lists(st.integers(min_value=1, max_value=400), max_size=30), min_size=len(FILES),
                      max_size=len(FILES)))
def test_reads_parsed_together_equal_reads_parsed_alone(sizes):
    assert _run(sizes) > 100


def test_one_group_of_reads_takes_one_pass(monkeypatch):
    """Six JSON-lines reads of two formats and two json mappings: three reader passes (ranklog ×3 →
    one, the two default-mapping json reads → one, the one with its own mapping alone); the Python
    reads take no JSON reader."""
    passes = []
    original = json_bulk._BlockReader.read
    monkeypatch.setattr(json_bulk._BlockReader, "read", lambda self, idx: (passes.append(len(idx)), original(self, idx)))
    items = [(data[:data.index(b"\n", 200) + 1], 0, ctx, False) for (fmt, data, _, _), ctx in zip(FILES, _contexts(),
                                                                                                   strict=True)
             if fmt in ("ranklog", "json", "python")]
    _check_round(items)  # parse alone: one pass a JSON read (six), then together
    assert len(passes) == 6 + 3


def test_text_reads_of_one_format_share_one_pass_of_the_line_kernels(monkeypatch):
    """Python, torchrun, text, ranklog-text and Ray reads: the per-line kernels (prefixes, layouts,
    kinds) run once a format and options; a record is grouped per read (a traceback never runs into
    another file). A Ray read with JSON lines among its text is parsed alone."""
    from ranklog.parse import text_layouts

    marks = []
    original = text_layouts._mark
    monkeypatch.setattr(text_layouts, "_mark", lambda *args, **kw: (marks.append(len(args[1])), original(*args, **kw))[1])
    # (final: a source's first lines would wait for more to learn its layout from, without a pass)
    items = [(data[:data.index(b"\n", 300) + 1], 0, ctx, True) for (fmt, data, _, _), ctx in zip(FILES, _contexts(),
                                                                                                  strict=True)
             if fmt not in ("ranklog", "json") and data is not RAY_JSON_WORKER and b":job_id:02" not in data]
    (mixed,) = [(data, base, copy.deepcopy(ctx), final) for data, base, ctx, final in items if b"\n{" in data]
    parse(mixed[0], mixed[1], mixed[2], final=mixed[3], read_time_ns=READ_TIME_NS)
    per_mixed_read = len(marks)  # (Ray's parser runs the text engine more than once on a mixed read)
    marks.clear()
    _check_round(items)  # each read alone, then together
    groups = {(ctx.format, json.dumps(ctx.options)) for _, _, ctx, _ in items}
    assert len(items) == 12 and len(groups) == 7  # the Python read with its own options: a group of its own
    # alone: 11 text reads one pass each, the mixed one; together: 7 groups (the verl-console read is a
    # group of one; Ray's group joins its two text reads), the mixed read again
    assert len(marks) == (11 + per_mixed_read) + (7 + per_mixed_read)


def test_ray_reads_of_json_lines_only_share_one_pass_of_the_json_reader(monkeypatch):
    """A Ray worker's file after its marker lines, when the job logs JSON: the reads of three such
    files take one reader pass together (each would take its own, after a text-engine pass for a
    placeholder), with each file's role and job from its own markers."""
    passes = []
    original = json_bulk._BlockReader.read
    monkeypatch.setattr(json_bulk._BlockReader, "read", lambda self, idx: (passes.append(len(idx)), original(self, idx)))
    body = RAY_JSON_WORKER.split(b"\n", 2)[2]
    items = []
    for i, role in enumerate(("Actor_0", "Actor_1", None)):
        ctx = make_ctx("ray", source=f"/logs/worker-{i}.out")
        ctx.state.update({"role": role, "job": "0a000000"} if role else {})
        items.append((body[:body.index(b"\n", 400 * (i + 1)) + 1], 100, ctx, False))
    together = _check_round(items)
    assert len(passes) == 3 + 1
    roles = [set(result.batch.column("role").to_pylist()) for result in together]
    # no file's marker role reaches another's records; the third file's records without a role are the
    # process that names itself "Own" (ranklog.parse.identity_stage)
    assert roles == [{"Actor_0", "Own"}, {"Actor_1", "Own"}, {"Own"}]


def _scenario_files(*scenarios: str) -> list[tuple[bytes, object]]:
    """The files of real runs' output (tests/scenarios/*/out) whose format parses reads together."""
    joint = set(parsers("PARSERS_MANY"))
    files = []
    for path in sorted(p for scenario in scenarios for p in (SCENARIOS / scenario / "out").rglob("*") if p.is_file()):
        found = detect(str(path))
        if found is not None and found.format in joint:
            files.append((path.read_bytes(), make_ctx(found.format, fields=found.fields, source=str(path))))
    return files


@pytest.mark.parametrize("scenarios", [("ray_verl_worker_group",), ("ray_task_exception_text",), ("ray_actor_sigkill",),
                                       ("ray_noisy",), ("ray_task_exception_json",), ("verl_clean", "verl_console_inf", "verl_console_nan"),
                                       ("torchrun_exception",)], ids=lambda names: names[0])
def test_real_runs_read_in_small_pieces_parse_together_as_alone(scenarios):
    """What Ray, verl and torchrun wrote (every worker, driver and component file of a run), read in
    pieces of 1 byte to 4 KiB a round, parsed together equals parsed alone."""
    files = _scenario_files(*scenarios)
    rng = random.Random(" ".join(scenarios))
    sizes = [[rng.choice((1, rng.randint(2, 300), rng.randint(300, 4096))) for _ in range(len(data) // 700 + 1)]
             for data, _ in files]
    # (a floor on the records compared: torch's multi-line messages — a launch config under repeated
    # glog headers — are one record each, so a torchrun console holds fewer records than lines)
    assert len(files) >= 3 and _run(sizes, files) >= 8 * len(files)


def test_only_the_reads_with_a_line_without_time_take_the_inference_pass(monkeypatch):
    """Four Python reads, one with a print among its timed lines: one inference pass, not four (a
    trickle's reads of a file whose prints are rare need none)."""
    from ranklog.parse import joined

    passes = []
    original = joined.with_inferred_time
    monkeypatch.setattr(joined, "with_inferred_time", lambda batch, ctx, t: (passes.append(ctx.source),
                                                                             original(batch, ctx, t))[1])
    timed = b"".join(b"2026-12-02 13:04:%02d,000 - t - INFO - line %d\n" % (i, i) for i in range(9))
    contexts = [make_ctx("python", source=f"/logs/{i}.log") for i in range(4)]
    items = [(timed.replace(b"line 3\n", b"line 3\na print\n") if i == 2 else timed, 0, ctx, False)
             for i, ctx in enumerate(contexts)]
    _check_round(items)
    assert passes == ["/logs/2.log"]
