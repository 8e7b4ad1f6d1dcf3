"""Remote queries over HTTP against the real /v1/query endpoint, with and without a token."""

from __future__ import annotations

import json
import subprocess

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranklog.errors import UserError
from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import open_source
from tests.helpers.procs import REPO, ranklog_cmd
from tests.helpers.query_server import running_query_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(archive_root, tmp_path_factory):
    tokens = tmp_path_factory.mktemp("tokens") / "tokens"
    tokens.write_text("s3cret-token\n")
    log = tmp_path_factory.mktemp("server") / "server.log"
    with running_query_server(archive_root, tokens, log, max_rows=5000) as url:
        yield url, tokens


def test_remote_answers_equal_local(server, archive_root):
    url, tokens = server
    remote = open_source(archive=url, token_file=str(tokens))
    local = open_source(archive=str(archive_root))
    for spec in (QuerySpec(levels=("ERROR", "CRITICAL"), ranks=(1, 2)), QuerySpec(regex="NCCL", order=("-ts",)),
                 QuerySpec(contains="nothing like this 0x5e")):
        assert engine.read(remote, spec).equals(engine.read(local, spec))
        assert engine.count(remote, spec) == engine.count(local, spec)
    batches = list(engine.scan(remote, QuerySpec(limit=3000), ["ts", "msg"]))
    assert sum(b.num_rows for b in batches) == 3000 and all(b.schema.names == ["ts", "msg"] for b in batches)


def test_server_side_row_limit(server, capfd):
    url, tokens = server
    remote = open_source(archive=url, token_file=str(tokens))
    assert engine.read(remote, QuerySpec()).num_rows == 5000
    assert "capped the result at 5000 rows" in capfd.readouterr().err


def test_missing_or_wrong_token_is_one_line(server, tmp_path):
    url, _ = server
    with pytest.raises(UserError, match="401"):
        engine.read(open_source(archive=url), QuerySpec())
    wrong = tmp_path / "wrong"
    wrong.write_text("nope\n")
    proc = subprocess.run(ranklog_cmd("query", "--archive", url, "--token-file", str(wrong), "--count"),
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "401" in proc.stderr and "--token-file" in proc.stderr


def test_cli_through_remote_and_get_with_curl_style_params(server, archive_root, tmp_path):
    url, tokens = server
    out_remote, out_local = tmp_path / "r.ndjson", tmp_path / "l.ndjson"
    common = ["--level", "ERROR", "--host", "gpu-node-001", "--limit", "50"]
    for target, out in ((["--archive", url, "--token-file", str(tokens)], out_remote),
                        (["--archive", str(archive_root)], out_local)):
        proc = subprocess.run(ranklog_cmd("query", *target, *common, "--output", str(out)),
                              capture_output=True, text=True, timeout=60, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
    assert out_remote.read_bytes() == out_local.read_bytes() and out_local.stat().st_size > 0
    response = httpx.get(f"{url}/v1/query", params={"level": "ERROR", "host": "gpu-node-001", "limit": "50"},
                         headers={"Authorization": f"Bearer {tokens.read_text().strip()}"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
    assert [json.loads(line) for line in response.text.splitlines()] == \
        [json.loads(line) for line in out_local.read_text().splitlines()]
    bad = httpx.get(f"{url}/v1/query", params={"regex": "(x"},
                    headers={"Authorization": f"Bearer {tokens.read_text().strip()}"})
    assert bad.status_code == 400 and "regex" in bad.json()["error"]
    assert httpx.get(f"{url}/v1/query").status_code == 401


def test_running_archive_serves_what_it_ingested(parsed, archive_root, tmp_path, token_file):
    """End to end: the parsed raw directory is ingested by a real `ranklog archive`, then queried back
    over its /v1/query (same token as ingest) — identical to the locally written archive."""
    import time

    from tests.helpers.archive_proc import ARROW, arrow_body, running_archive

    with running_archive(tmp_path / "served", token_file) as archive:
        for batch in parsed.to_batches(max_chunksize=4000):
            response = httpx.post(f"{archive.url}/v1/ingest", content=arrow_body(pa.Table.from_batches([batch])),
                                  headers=archive.headers(ARROW), timeout=60)
            assert response.status_code == 200, response.text
        remote = open_source(archive=archive.url, token_file=str(token_file))
        deadline = time.monotonic() + 60
        while engine.count(remote, QuerySpec()) < parsed.num_rows and time.monotonic() < deadline:
            time.sleep(0.5)
        local = open_source(archive=str(archive_root))
        for spec in (QuerySpec(), QuerySpec(levels=("ERROR", "CRITICAL"), hosts=("gpu-node-001",)),
                     QuerySpec(trace_ids=(pc.drop_null(parsed["trace_id"])[0].as_py(),))):
            assert engine.read(remote, spec).equals(engine.read(local, spec))
        with pytest.raises(UserError, match="401"):
            engine.count(open_source(archive=archive.url), QuerySpec())


@pytest.mark.parametrize("body", [
    {"spec": {"start_ns": "yesterday"}}, {"spec": {"levels": 5}}, {"spec": {"ranks": [True]}},
    {"spec": {"start_ns": 10**30}}, {"spec": {"attrs": ["="]}}, {"spec": {"hosts": [5]}},
    {"spec": {"order": ["attrs"]}}, {"spec": []}, {"columns": [1, 2]}, {"columns": "ts"}, {"format": "xml"},
])
def test_malformed_remote_queries_are_400(server, body):
    url, tokens = server
    answer = httpx.post(f"{url}/v1/query", json=body, headers={"Authorization": f"Bearer {tokens.read_text().strip()}"})
    assert answer.status_code == 400, answer.text[:300]
    assert answer.json()["error"]
