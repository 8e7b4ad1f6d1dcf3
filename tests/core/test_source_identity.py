"""The shared identity rules (ranklog.source_identity): what is lent across sources, what is refused
because it would be a guess, and that the Arrow and DuckDB fills agree. The same rules on the real
tools' output: tests/scenarios/test_rank_identity.py."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from ranklog.record import rows_to_table
from ranklog.source_identity import (
    SAME_PROCESS_GAP_NS,
    Group,
    Lent,
    fill,
    fill_sql,
    groups_of,
    lent_table,
    merge_observations,
    observe,
    resolve,
    role_family,
)

T = 1_796_000_000 * 10**9
LOGS = "/n/session_1/logs"


def g(source: str, **kw) -> Group:
    kw.setdefault("host", "node-a")
    kw.setdefault("first_ns", T)
    kw.setdefault("last_ns", T + 10**9)
    kw.setdefault("format", "ray" if "session" in source else "torchrun")
    return Group(source_id=source, source=source, records=1, **kw)


def lent_of(groups, *, evidence=(), single_node=True) -> dict[str, Lent]:
    lent = resolve(groups, evidence, single_node=single_node)
    return {key[0] + (f"#{key[2]}" if key[2] is not None else "") + (f"@{key[4]}" if key[4] is not None else ""): v
            for key, v in lent.items()}


def test_a_one_process_source_gives_its_rank_and_fullest_role_to_its_records_that_lack_them():
    worker = f"{LOGS}/worker-aa-01000000-100.err"
    lent = resolve([g(worker, pid=100, role="WorkerDict"), g(worker, pid=100, rank=1, role="pfxWorkerDict_0:1")])
    assert lent[(worker, "node-a", 100, None, None, "WorkerDict")] == Lent(rank=1, role="pfxWorkerDict_0:1")
    assert (worker, "node-a", 100, None, 1, "pfxWorkerDict_0:1") not in lent


def test_a_pid_lends_its_rank_to_its_other_files_and_refuses_when_it_names_two():
    err, out, core = f"{LOGS}/worker-aa-01-100.err", f"{LOGS}/worker-aa-01-100.out", f"{LOGS}/python-core-worker-aa_100.log"
    lent = lent_of([g(err, pid=100, rank=1), g(out, pid=100), g(core, pid=100)])
    assert lent[f"{out}#100"].rank == 1 and lent[f"{core}#100"].rank == 1
    reused = lent_of([g(err, pid=100, rank=1), g(err, pid=100, rank=2), g(core, pid=100)])
    assert f"{core}#100" not in reused


def test_a_pid_reused_long_after_is_another_process():
    err, core = f"{LOGS}/worker-aa-01-100.err", f"{LOGS}/python-core-worker-bb_100.log"
    later = T + 2 * SAME_PROCESS_GAP_NS
    assert f"{core}#100" not in lent_of([g(err, pid=100, rank=1), g(core, pid=100, first_ns=later, last_ns=later)])
    # a file whose lines print no time has no span: it is joined (its records' times say nothing)
    assert lent_of([g(err, pid=100, rank=1), g(core, pid=100, first_ns=None, last_ns=None)])[f"{core}#100"].rank == 1


def test_a_pid_on_another_host_is_another_process_and_a_hostless_record_joins_the_one_host():
    err = f"{LOGS}/worker-aa-01-100.err"
    console = "/copied/driver-console.log"
    assert "/other/core_100.log#100" not in lent_of([g(err, pid=100, rank=1),
                                                     g("/other/core_100.log", pid=100, host="node-b")])
    forwarded = [g(err, pid=100, rank=1), g(console, pid=100, host="unknown"), g(console, pid=None, host="unknown")]
    assert lent_of(forwarded)[f"{console}#100"] == Lent(rank=1, host="node-a")
    two_hosts = [*forwarded, g("/n2/worker-cc-01-100.err", pid=100, rank=3, host="node-b")]
    assert f"{console}#100" not in lent_of(two_hosts)


def test_the_launchers_pairs_give_rank_files_their_global_rank_on_that_host_and_job():
    rank_file = "/n1/job_abcdefgh/attempt_0/1/stderr.log"
    console = "/n1/torchrun.console.log"
    groups = [g(rank_file, local_rank=1, job="job", host="node1"),
              g(console, local_rank=1, rank=3, role="default", host="node1"),
              g(console, local_rank=0, rank=2, role="default", host="node1"),
              g("/n0/job_zzzzzzzz/attempt_0/1/stderr.log", local_rank=1, job="job", host="node0")]
    lent = lent_of(groups)
    assert lent[rank_file].rank == 3
    assert "/n0/job_zzzzzzzz/attempt_0/1/stderr.log" not in lent  # node0's pairs are not known
    other_job = [*groups[1:3], g(rank_file, local_rank=1, job="job", host="node1"),
                 g("/n1/console-2.log", local_rank=1, rank=5, job="other", host="node1")]
    assert lent_of(other_job)[rank_file].rank == 3  # the pair of another job does not count against it


def test_the_files_of_one_torchrun_process_folder_are_one_process():
    folder = "/n1/job_abcdefgh/attempt_0/1"
    groups = [g(f"{folder}/stderr.log", local_rank=1, pid=725, rank=3, job="job", host="node1"),
              g(f"{folder}/stdout.log", local_rank=1, job="job", host="node1"),
              g(f"{folder}/error.json", local_rank=1, job="job", host="node1", format="torchrun-error"),
              g("/n1/job_abcdefgh/attempt_0/0/stdout.log", local_rank=0, job="job", host="node1")]
    lent = lent_of(groups, single_node=False)
    assert lent[f"{folder}/stdout.log"] == lent[f"{folder}/error.json"] == Lent(rank=3, pid=725)
    assert "/n1/job_abcdefgh/attempt_0/0/stdout.log" not in lent


def test_one_node_means_global_rank_is_local_rank_unless_something_says_otherwise():
    files = [g(f"/n/job_abcdefgh/attempt_0/{lr}/stderr.log", local_rank=lr, job="job", host="node0") for lr in (0, 1)]
    assert lent_of(files)["/n/job_abcdefgh/attempt_0/1/stderr.log"].rank == 1
    assert lent_of(files, single_node=False) == {}  # an agent sees one node: one host proves nothing
    second = g("/m/job_qwertyui/attempt_0/0/stderr.log", local_rank=0, job="job", host="node1")
    assert lent_of([*files, second]) == {}
    paired = [*files, g("/n/job_abcdefgh/attempt_0/1/stderr.log", local_rank=1, rank=5, job="job", host="node0")]
    assert "/n/job_abcdefgh/attempt_0/0/stderr.log" not in lent_of(paired)


def test_roles_lend_the_fuller_name_of_one_family_only():
    assert role_family(["Trainer", "trainer_1"]) == "trainer_1"
    assert role_family(["WorkerDict", "kZ3xWqWorkerDict_0:1", None]) == "kZ3xWqWorkerDict_0:1"
    assert role_family(["tokenize_shard", "fetch_batch"]) is None
    core = f"{LOGS}/python-core-worker-aa_7.log"
    two_tasks = [g(f"{LOGS}/worker-aa-01-7.err", pid=7, rank=0, role="tokenize_shard"),
                 g(f"{LOGS}/worker-aa-01-7.err", pid=7, rank=0, role="fetch_batch"), g(core, pid=7)]
    assert lent_of(two_tasks)[f"{core}#7"] == Lent(rank=0)
    named = lent_of([g(f"{LOGS}/worker-dd-01-400.err", pid=400, rank=1, role="Trainer")],
                    evidence=[Group("/d/console.log", pid=400, role="trainer_1", format="ray")])
    assert named[f"{LOGS}/worker-dd-01-400.err#400@1"].role == "trainer_1"


def test_a_ray_folder_takes_the_host_its_raylet_names():
    raylet, worker = f"{LOGS}/raylet.out", f"{LOGS}/worker-aa-01-100.err"
    groups = [g(raylet, pid=5, host="gpu-7"), g(raylet, host="unknown"), g(worker, pid=100, rank=0, host="unknown"),
              g("/n/session_2/logs/worker-bb-01-101.err", pid=101, host="unknown")]
    lent = lent_of(groups)
    assert lent[raylet].host == "gpu-7" and lent[f"{worker}#100@0"].host == "gpu-7"
    assert "/n/session_2/logs/worker-bb-01-101.err#101" not in lent


def test_the_files_below_a_ray_folder_take_its_host_too():
    """Ray Train V2's JSON logs live in the session's logs/train/, and its worker group listing
    (evidence a reader takes from the controller's text) gives a worker's other files its rank."""
    raylet, train = f"{LOGS}/raylet.out", f"{LOGS}/train/ray-train-app-worker-aa.log"
    err = f"{LOGS}/worker-cc-01-8740.err"
    controller = f"{LOGS}/train/ray-train-app-controller-bb.log"
    groups = [g(raylet, pid=5, host="gpu-7"), g(train, pid=8740, rank=2, host="unknown", format="json"),
              g(err, pid=8740, host="unknown"), g(controller, pid=8700, host="unknown", format="json")]
    lent = lent_of(groups)
    assert lent[f"{train}#8740@2"].host == "gpu-7" and lent[f"{err}#8740"] == Lent(rank=2, host="gpu-7")
    assert lent[f"{controller}#8700"] == Lent(host="gpu-7")  # no other file of its pid: the folder's host
    listed = lent_of([g(raylet, pid=5), g(err, pid=8741)], evidence=[Group("/d/controller.log", pid=8741, rank=3)])
    assert listed[f"{err}#8741"] == Lent(rank=3)


def _records() -> pa.Table:
    base = {"ts": "2026-12-04T10:00:00.000000Z", "level": "INFO", "host": "node-a", "ip": "10.0.0.1", "format": "ray"}
    rows = [
        {**base, "msg": ":actor_name:WorkerDict", "source": "err", "source_id": "err", "offset": 0, "pid": 100,
         "role": "WorkerDict"},
        {**base, "msg": "[Rank 1] step", "source": "err", "source_id": "err", "offset": 30, "pid": 100, "rank": 1,
         "role": "pfxWorkerDict_0:1"},
        {**base, "msg": "core", "source": "core", "source_id": "core", "offset": 0, "pid": 100},
        {**base, "msg": "other", "source": "/elsewhere/other", "source_id": "other", "offset": 0, "pid": 200, "host": "unknown"},
    ]
    return rows_to_table(rows)


def test_fill_and_its_sql_agree_and_only_fill_what_a_record_lacks():
    table = _records()
    lent = lent_table(resolve(groups_of(observe(table))))
    filled = fill(table, lent)
    assert filled.column("rank").to_pylist() == [1, 1, 1, None]
    assert filled.column("role").to_pylist() == ["pfxWorkerDict_0:1"] * 3 + [None]
    assert filled.column("host").to_pylist() == ["node-a", "node-a", "node-a", "unknown"]
    con = duckdb.connect()
    con.register("base", table)
    con.register("lent", lent.table)
    from_sql = con.sql(f"SELECT * FROM ({fill_sql('base', 'lent')}) ORDER BY source, \"offset\"").to_arrow_table()
    by_arrow = filled.sort_by([("source", "ascending"), ("offset", "ascending")])
    for name in ("rank", "role", "pid", "host", "local_rank"):
        assert from_sql.column(name).to_pylist() == by_arrow.column(name).to_pylist(), name
    assert fill(table.drop_columns(["role"]), lent).equals(table.drop_columns(["role"]))  # no key: as is


def test_resolving_filled_records_lends_nothing_more():
    table = _records()
    filled = fill(table, lent_table(resolve(groups_of(observe(table)))))
    assert resolve(groups_of(observe(filled))) == {}


def test_observations_merge_and_times_from_the_files_mtime_give_no_span():
    table = _records()
    marked = table.set_column(table.schema.get_field_index("attrs"), "attrs",
                              pa.array(['{"ts_inferred":"mtime"}', None, None, None], pa.string()))
    observed = merge_observations([observe(marked), observe(marked.slice(2))])
    spans = {(row["source_id"], row["rank"]): (row["first_ns"], row["records"]) for row in observed.to_pylist()}
    assert spans[("err", None)] == (None, 1)
    assert spans[("core", None)][1] == 2


def test_records_that_all_name_their_writer_need_no_rules():
    named = [g(f"/j/rank-{r}.pid-{100 + r}.0000.jsonl", pid=100 + r, rank=r, format="ranklog") for r in range(64)]
    assert resolve(named) == {}
    core = f"{LOGS}/python-core-worker-aa_100.log"
    assert resolve([*named, g(core, pid=100)])[(core, "node-a", 100, None, None, None)].rank == 0
