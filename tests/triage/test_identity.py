"""The identity join's rules on records whose shape Ray's real files give (see tests/scenarios/ray_*
for the same rules on real output): what is lent, and what is refused because it would be a guess."""

from __future__ import annotations

from ranklog.record import rows_to_table
from ranklog.triage.gather import TriageData, gather

LOGS = "/x/node-a/session_1/logs"
T0 = "2026-12-04T10:00:00.000000Z"


def _row(source: str, msg: str, *, pid: int | None = None, rank: int | None = None, role: str | None = None,
         level: str = "INFO", host: str = "unknown", ts: str = T0, fmt: str = "ray") -> dict:
    return {"ts": ts, "level": level, "msg": msg, "source": source, "source_id": source, "offset": 0,
            "pid": pid, "rank": rank, "role": role, "host": host, "ip": "unknown", "format": fmt}


def _records(rows: list[dict]) -> list[dict]:
    data = TriageData.from_table(rows_to_table(rows))
    gather(data)
    rows = data.query("SELECT source, pid, rank, role, host FROM records ORDER BY source, pid")
    return [dict(zip(("source", "pid", "rank", "role", "host"), row, strict=True)) for row in rows]


def test_a_pid_with_one_rank_lends_it_to_its_rankless_records_in_other_files():
    rows = [
        _row(f"{LOGS}/worker-aa11aa11aa11aa11aa11-01000000-100.err", "[Rank 1] step", pid=100, rank=1,
             role="pfxWorkerDict_0:1"),
        _row(f"{LOGS}/python-core-worker-aa11aa11aa11aa11aa11_100.log", "Creating actor", pid=100),
        _row("/x/node-a/driver-console.log", "forwarded line", pid=100, role="WorkerDict"),
    ]
    by_source = {r["source"]: r for r in _records(rows)}
    assert by_source[f"{LOGS}/python-core-worker-aa11aa11aa11aa11aa11_100.log"]["rank"] == 1
    console = by_source["/x/node-a/driver-console.log"]
    assert console["rank"] == 1
    assert console["role"] == "pfxWorkerDict_0:1"  # the fuller name wins over the class


def test_a_pid_seen_with_two_ranks_lends_nothing():
    rows = [
        _row(f"{LOGS}/worker-a-01000000-200.err", "[Rank 1] chunk", pid=200, rank=1),
        _row(f"{LOGS}/worker-a-01000000-200.err", "[Rank 2] chunk", pid=200, rank=2),
        _row(f"{LOGS}/worker-a-01000000-200.err", "Traceback (most recent call last):", pid=200, level="ERROR"),
    ]
    ranks = {r["rank"] for r in _records(rows)}
    assert ranks == {1, 2, None}


def test_the_raylet_names_the_host_of_its_own_folder_only():
    raylet = ("Raylet of id, 0310ab started. Raylet consists of node_manager and object_manager. "
              "node_manager address: 192.0.2.7:0 object_manager address: 192.0.2.7:39097 hostname: gpu-node-7")
    rows = [
        _row(f"{LOGS}/raylet.out", raylet, pid=4100),
        _row(f"{LOGS}/worker-b-01000000-300.err", "[Rank 0] step", pid=300, rank=0),
        _row("/x/node-b/session_2/logs/worker-c-01000000-301.err", "[Rank 1] step", pid=301, rank=1),
        _row("/x/node-a/driver-console.log", "forwarded", pid=300),
    ]
    hosts = {r["source"]: r["host"] for r in _records(rows)}
    assert hosts[f"{LOGS}/raylet.out"] == "gpu-node-7"
    assert hosts[f"{LOGS}/worker-b-01000000-300.err"] == "gpu-node-7"
    assert hosts["/x/node-b/session_2/logs/worker-c-01000000-301.err"] == "unknown"  # another node's folder
    assert hosts["/x/node-a/driver-console.log"] == "gpu-node-7"  # through pid 300


def test_records_with_their_own_identity_keep_it():
    rows = [
        _row("/a/rank-0.pid-10.0000.jsonl", "x", pid=10, rank=0, host="h1", fmt="ranklog"),
        _row("/a/rank-1.pid-11.0000.jsonl", "y", pid=11, rank=1, host="h1", fmt="ranklog"),
    ]
    assert [(r["rank"], r["host"]) for r in _records(rows)] == [(0, "h1"), (1, "h1")]


def test_ray_errors_that_name_an_actor_beside_its_pid_lend_the_name():
    died = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
            "\tclass_name: Trainer\n\tactor_id: 74b6d1f5722c17bde46cc80a01000000\n\tpid: 400\n\tname: trainer_1\n"
            "\tnamespace: b244c375\n\tip: 192.0.2.2")
    created = ("ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, "
               "ray::pfxWorkerDict_0:2:WorkerDict.__init__() (pid=401, ip=192.0.2.2, actor_id=b58a)")
    rows = [
        _row(f"{LOGS}/worker-d-01000000-400.err", "[Rank 1] step", pid=400, rank=1, role="Trainer"),
        _row(f"{LOGS}/worker-e-01000000-401.err", "[Rank 2] init", pid=401, rank=2, role="WorkerDict"),
        _row("/x/node-a/driver-console.log", died, level="ERROR"),
        _row("/x/node-a/driver-console.log", created, level="ERROR"),
    ]
    roles = {r["pid"]: r["role"] for r in _records(rows) if r["pid"] is not None}
    assert roles == {400: "trainer_1", 401: "pfxWorkerDict_0:2"}
