"""The parse stage that puts what a source says about its writer on every record of it (and keeps
it in the parser state across reads and restarts), on the real tools' files of the scenario library."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc

from ranklog.parse import SourceContext, detect, parse
from ranklog.parse.identity_stage import STATE_KEY

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _ctx(path: Path, host: str = "unknown") -> SourceContext:
    found = detect(str(path))
    return SourceContext(source=str(path), source_id=str(path), format=found.format, host=host, ip="unknown",
                         fields=dict(found.fields), mtime_ns=path.stat().st_mtime_ns)


def _reads(path: Path, cut: bytes, host: str = "unknown", restart: bool = False) -> list:
    """Parse `path` in two reads, split before the first line containing `cut`; `restart` parses the
    second with a new context holding only the JSON state of the first (an agent restarted)."""
    data = path.read_bytes()
    at = data.index(b"\n", data.index(cut) - 200) + 1 if data.index(cut) > 200 else data.index(cut)
    at = data.rindex(b"\n", 0, data.index(cut)) + 1
    ctx = _ctx(path, host)
    first = parse(data[:at], 0, ctx, final=False, read_time_ns=0)
    consumed = first.consumed
    if restart:
        state = json.loads(json.dumps(ctx.state))
        ctx = _ctx(path, host)
        ctx.state = state
    second = parse(data[consumed:], consumed, ctx, final=True, read_time_ns=0)
    return [*first.batch.to_pylist(), *second.batch.to_pylist()], ctx


def test_a_rank_file_takes_the_rank_its_traceback_names_from_then_on_across_a_restart():
    path = next((SCENARIOS / "torchrun_exception" / "out" / "node1").glob("job_*/attempt_0/1/stderr.log"))
    records, ctx = _reads(path, b"[rank3]: Traceback", restart=True)
    assert ctx.state[STATE_KEY]["rank"] == [3]
    assert records[-1]["rank"] == 3 and records[-1]["local_rank"] == 1
    more = parse(b"2026-12-04 09:43:00,000 INFO train: after\n", path.stat().st_size, ctx, final=True, read_time_ns=0)
    assert more.batch.column("rank").to_pylist() == [3]


def test_a_ray_workers_records_take_its_actor_name_and_rank_once_a_line_names_them():
    path = next((SCENARIOS / "ray_verl_worker_group" / "out" / "vm").glob("session_*/logs/worker-*-10160.err"))
    records, ctx = _reads(path, b'"message": "[Rank 1] generate_sequences')
    assert {r["role"] for r in records[2:]} == {"kZ3xWqWorkerDict_0:1"}  # the class of the marker line replaced
    assert {r["rank"] for r in records[2:]} == {1}
    assert ctx.state[STATE_KEY]["role"] == "kZ3xWqWorkerDict_0:1"


def test_two_ranks_in_one_process_file_lend_none():
    path = Path("/x/job_abcdefgh/attempt_0/0/stderr.log")
    ctx = SourceContext(source=str(path), source_id="s", format="torchrun", host="h", ip="i",
                        fields=dict(detect(str(path)).fields))
    lines = b"[rank1]: Traceback (most recent call last):\n[rank1]: E\nplain line\n[rank2]: Traceback\n[rank2]: F\nlast\n"
    records = parse(lines, 0, ctx, final=True, read_time_ns=0).batch.to_pylist()
    assert {r["msg"]: r["rank"] for r in records if "line" in r["msg"] or r["msg"] == "last"} == \
        {"plain line": None, "last": None}
    assert ctx.state[STATE_KEY]["rank"] == [1, 2]


def test_a_launchers_console_pairs_local_ranks_with_global_ranks_by_its_rendezvous():
    path = SCENARIOS / "torchrun_exception" / "out" / "node1" / "torchrun.console.log"
    records, ctx = _reads(path, b"[default0]:", restart=True)
    teed = [r for r in records if r["local_rank"] is not None]
    assert teed and {(r["local_rank"], r["rank"]) for r in teed} == {(0, 2), (1, 3)}
    assert ctx.state[STATE_KEY]["launcher"] == {"0": 2, "1": 3}


def test_each_restart_of_the_launcher_pairs_anew():
    path = SCENARIOS / "torchrun_restarts" / "out" / "node0" / "torchrun.console.log"
    data = path.read_bytes()
    swapped = data.replace(b"global_ranks=[0, 1]", b"global_ranks=[1, 0]", 1)  # a second attempt pairing otherwise
    ctx = _ctx(path)
    batch = parse(swapped, 0, ctx, final=True, read_time_ns=0).batch
    teed = batch.filter(pc.is_valid(batch.column("local_rank")))
    second = swapped.index(b"global_ranks=[0, 1]")
    checked = 0
    for offset, local, rank in zip(*(teed.column(n).to_pylist() for n in ("offset", "local_rank", "rank")), strict=True):
        if b"[rank" not in swapped[offset:swapped.index(b"\n", offset)]:  # torch's own [rankN]: prefix wins
            assert rank == (1 - local if offset < second else local), swapped[offset:offset + 80]
            checked += 1
    assert checked > 4


def test_a_raylet_read_without_a_host_names_its_node():
    path = next((SCENARIOS / "ray_raylet_death" / "out" / "vm").glob("session_*/logs/raylet.out"))
    batch = parse(path.read_bytes(), 0, _ctx(path), final=True, read_time_ns=0).batch
    assert set(batch.column("host").to_pylist()) == {"vm"}
    assert parse(path.read_bytes(), 0, _ctx(path, "node-7"), final=True, read_time_ns=0).batch.column(
        "host").unique().to_pylist() == ["node-7"]  # an agent's own host is kept
