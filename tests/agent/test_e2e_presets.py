"""Every preset on trees laid out exactly as Ray, torchrun, verl and the ranklog logger lay them out."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.agent.conftest import wait_archived
from tests.helpers.agent_proc import running_agent
from tests.helpers.layouts import write_ranklog_tree, write_ray_session, write_torchrun_tree, write_verl_run

pytestmark = pytest.mark.slow

COLUMNS = ("source_id", "offset", "source", "format", "rank", "local_rank", "role", "job", "step", "host")


def test_all_presets_find_and_parse_their_layouts(tmp_path: Path, token_file: Path, archive) -> None:
    roots = {name: tmp_path / name for name in ("ranklog", "ray", "torchrun", "verl")}
    trees = {
        "ranklog": write_ranklog_tree(roots["ranklog"], failing_rank=1),
        "ray": write_ray_session(roots["ray"]),
        "torchrun": write_torchrun_tree(roots["torchrun"], console=False),
        "verl": write_verl_run(roots["verl"]),
    }
    files = [f for tree in trees.values() for f in tree.files]
    expected = sum(f.records for f in files)
    flags = ["--ranklog-log-dir", str(roots["ranklog"]), "--ray-root", str(roots["ray"]),
             "--torchrun-log-dirs", str(roots["torchrun"]), "--verl-log-dirs", str(roots["verl"]), "--host", "node9"]
    with running_agent([archive.url], token_file, tmp_path / "state", presets=list(trees), extra_args=flags) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= expected, timeout=90,
                       what=f"{expected} records")
        scrape = agent.wait_idle()
    table = wait_archived(tmp_path / "archive", expected, columns=COLUMNS)
    assert table.num_rows == expected
    per_source = Counter(table.column("source").to_pylist())
    formats = dict(zip(table.column("source").to_pylist(), table.column("format").to_pylist(), strict=True))
    for f in files:
        assert per_source[str(f.path)] == f.records, f.path
        assert formats[str(f.path)] == f.format, f.path
    rows = table.select(["source", "local_rank", "role", "rank", "job"]).to_pylist()
    for f in trees["torchrun"].files:
        if f.local_rank is not None:
            assert {r["local_rank"] for r in rows if r["source"] == str(f.path)} == {f.local_rank}, f.path
    assert any("WorkerDict_0:" in (r["role"] or "") for r in rows if "/ray/" in r["source"])
    assert {r["rank"] for r in rows if "/ranklog/" in r["source"]} >= {0, 1, 2, 3}
    # Metrics from the same files: verl steps and metrics, failure signatures, records per level.
    assert scrape.value("ranklog_training_step") >= 6
    assert scrape.value("ranklog_training_metric", name="perf/throughput") > 0
    assert any(s["name"] == "actor/pg_loss" for s in scrape.labels("ranklog_training_metric"))
    assert scrape.value("ranklog_failure_signatures_total", signature="cuda_oom") >= 1
    assert scrape.value("ranklog_failure_signatures_total", signature="nccl_timeout") >= 1
    assert scrape.value("ranklog_failure_signatures_total", signature="ray_oom_kill") >= 1
    assert scrape.value("ranklog_log_records_total") == expected
    assert scrape.value("ranklog_agent_parse_errors_total") == 0
