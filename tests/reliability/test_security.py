"""Security: bearer tokens (none, wrong, revoked while running), secrets kept out of logs and metrics,
TLS with certificate verification, API fuzzing from the OpenAPI description, loopback-only listeners.

Every scenario runs the real `ranklog archive` and `ranklog agent` processes (at DEBUG log level, the
level most likely to leak a header) and records a RELIABILITY.md row with its figures.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pyarrow.dataset as ds
import pytest

from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import NDJSON, running_archive
from tests.helpers.reliability_tls import make_pki
from tests.reliability.report import Row

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
DEBUG = ["--log-level", "DEBUG"]
# An agent whose token is refused never gets its data acknowledged: don't wait the default 10 s on exit.
REFUSED_AGENT = [*DEBUG, "--shutdown-timeout", "1s"]
FUZZ_CASES = 25  # per operation, after the coverage phase: ~330 requests over the 7 operations
QUERY_FUZZ_CASES = 120  # /v1/query is not in the OpenAPI description: hypothesis drives it directly
MAX_FUZZ_REQUESTS = 450  # the bound the run must stay under (schemathesis counts every generated case)
RSS_GROWTH_BOUND = 256 * 1024 * 1024  # fuzzing may warm caches; a leak or an unbounded buffer shows as more


def _token_file(path: Path, *tokens: str) -> Path:
    path.write_text("".join(f"{t}\n" for t in tokens))
    path.chmod(0o600)
    return path


def _write_lines(directory: Path, job: str, count: int) -> Path:
    """`count` ranklog lines of `job` in a ranklog-layout file under `directory`."""
    path = directory / job / "node0" / "rank-0.pid-1.0000.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"ts": "2026-12-02T13:04:05.000001Z", "level": "INFO", "job": job,
                                        "msg": f"{job} line {n}"}) + "\n" for n in range(count)))
    return path


def _archived(root: Path) -> dict[str, list[str]]:
    """job → messages of every record in the archive's Parquet files."""
    if not any(root.glob("date=*/hour=*/*.parquet")):
        return {}
    table = ds.dataset(str(root), format="parquet", partitioning="hive",
                       exclude_invalid_files=True).to_table(columns=["job", "msg"])
    out: dict[str, list[str]] = {}
    for job, msg in zip(table["job"].to_pylist(), table["msg"].to_pylist(), strict=True):
        out.setdefault(job or "", []).append(msg)
    return out


def _wait_job(root: Path, job: str, count: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    found = len(_archived(root).get(job, []))
    while found < count and time.monotonic() < deadline:
        time.sleep(0.3)
        found = len(_archived(root).get(job, []))
    return found


def _ndjson(job: str, msg: str) -> bytes:
    return json.dumps({"ts": "2026-12-02T13:04:05Z", "level": "INFO", "job": job, "msg": msg}).encode() + b"\n"


def _query_cli(url: str, token_files: dict[str, Path | None], *extra: str) -> dict[str, subprocess.CompletedProcess]:
    """`ranklog query --archive URL [--token-file F] EXTRA…` once per token file, run concurrently."""
    procs = {}
    for name, token_file in token_files.items():
        args = [sys.executable, "-m", "ranklog", "query", "--archive", url, *extra]
        if token_file is not None:
            args += ["--token-file", str(token_file)]
        procs[name] = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def _leaks(texts: dict[str, str | bytes], secrets_: dict[str, str]) -> list[str]:
    """'<secret name> in <where>' for every secret found in any text."""
    found = []
    for where, text in texts.items():
        blob = text if isinstance(text, bytes) else text.encode("utf-8", "replace")
        found += [f"{name} token in {where}" for name, value in secrets_.items() if value.encode() in blob]
    return found


def _files_under(*roots: Path) -> dict[str, bytes]:
    out = {}
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.name.startswith("tokens"):
                out[str(path)] = path.read_bytes()
    return out


def test_tokens_none_wrong_revoked(tmp_path, record_row):
    """401 and nothing stored or returned for no token, a wrong one and one revoked while the archive
    runs; the good token works end to end; no token string in any log, scrape, answer or written file."""
    good, wrong, revoked = (secrets.token_hex(16) for _ in range(3))
    tokens = _token_file(tmp_path / "tokens", good, revoked)
    good_file = _token_file(tmp_path / "tokens-good", good)
    wrong_file = _token_file(tmp_path / "tokens-wrong", wrong)
    revoked_file = _token_file(tmp_path / "tokens-revoked", revoked)
    logs = tmp_path / "logs"
    answers: dict[str, str] = {}
    refused: dict[str, int] = {}
    with running_archive(tmp_path / "archive", tokens, extra_args=DEBUG, log_path=tmp_path / "archive.log") as archive, \
            httpx.Client(timeout=30) as client:
        ingest, query = f"{archive.url}/v1/ingest", f"{archive.url}/v1/query"
        before = client.post(ingest, content=_ndjson("sec-revoked-before", "sent before revocation"),
                             headers={"Content-Type": NDJSON, "Authorization": f"Bearer {revoked}"})
        assert before.status_code == 200, before.text
        _token_file(tokens, good)  # revoke: the archive re-reads the file while it runs
        revoked_at = time.monotonic()
        while client.post(query, json={"count": True}, headers={"Authorization": f"Bearer {revoked}"}).status_code != 401:
            assert time.monotonic() - revoked_at < 10, "revoked token still accepted after 10 s"
            time.sleep(0.1)
        revocation_s = time.monotonic() - revoked_at
        cases = {"none": None, "wrong": f"Bearer {wrong}", "revoked": f"Bearer {revoked}", "basic scheme": f"Basic {good}",
                 "empty bearer": "Bearer", "good token prefix": f"Bearer {good[:-1]}", "good token + suffix": f"Bearer {good}0"}
        for case, header in cases.items():
            headers = {"Authorization": header} if header else {}
            for name, response in {
                "ingest": client.post(ingest, content=_ndjson("sec-refused", f"refused {case}"),
                                      headers={**headers, "Content-Type": NDJSON}),
                "query POST": client.post(query, json={"spec": {}}, headers=headers),
                "query GET": client.get(query, params={"format": "ndjson"}, headers=headers),
                "query count": client.post(query, json={"count": True}, headers=headers),
            }.items():
                refused[f"{name} / {case}"] = response.status_code
                answers[f"{name} / {case}"] = f"{response.headers}\n{response.text}"
                assert set(response.json()) == {"error"}, response.text  # no records, no count
        cli_files = {"none": None, "wrong": wrong_file, "revoked": revoked_file}
        cli = _query_cli(archive.url, cli_files, "--format", "ndjson")
        _write_lines(logs / "good", "sec-good", 20)
        for name in ("wrong", "revoked"):
            _write_lines(logs / name, f"sec-{name}", 20)
        with running_agent([archive.url], good_file, tmp_path / "state-good", sources=[f"{logs / 'good'}/**/*"],
                           extra_args=DEBUG) as agent_good, \
                running_agent([archive.url], wrong_file, tmp_path / "state-wrong", sources=[f"{logs / 'wrong'}/**/*"],
                              extra_args=REFUSED_AGENT) as agent_wrong, \
                running_agent([archive.url], revoked_file, tmp_path / "state-revoked",
                              sources=[f"{logs / 'revoked'}/**/*"], extra_args=REFUSED_AGENT) as agent_revoked:
            unauthorized = {}
            for name, agent in (("wrong", agent_wrong), ("revoked", agent_revoked)):
                scrape = agent.wait_for(lambda s: s.value("ranklog_agent_ship_failures_total", reason="unauthorized") >= 1,
                                        timeout=60, what="a 401 counted as unauthorized")
                unauthorized[name] = scrape.value("ranklog_agent_ship_failures_total", reason="unauthorized")
            good_count = _wait_job(archive.root, "sec-good", 20)
            scrapes = {f"agent {n} /metrics": a.metrics_text()
                       for n, a in (("good", agent_good), ("wrong", agent_wrong), ("revoked", agent_revoked))}
            scrapes["archive /metrics"] = client.get(f"{archive.url}/metrics").text
            ok = _query_cli(archive.url, {"good": good_file}, "--job", "sec-good", "--count")["good"]
            alive = all(a.proc.poll() is None for a in (agent_good, agent_wrong, agent_revoked))
        agent_logs = {f"agent {n} log": (tmp_path / f"state-{n}" / "agent.log").read_text(errors="replace")
                      for n in ("good", "wrong", "revoked")}
    stored = _archived(tmp_path / "archive")
    rejected = re.findall(r'ranklog_archive_rejected_requests_total\{reason="unauthorized"\} (\S+)',
                          scrapes["archive /metrics"])
    texts = {"archive log": archive.log_text(), **agent_logs, **scrapes, **answers,
             **{f"query CLI ({c}) output": p.stdout + p.stderr for c, p in cli.items()},
             "query CLI (good) output": ok.stdout + ok.stderr,
             **_files_under(tmp_path / "archive", *(tmp_path / f"state-{n}" for n in ("good", "wrong", "revoked")))}
    leaks = _leaks(texts, {"good": good, "wrong": wrong, "revoked": revoked})
    not_401 = {k: v for k, v in refused.items() if v != 401}
    cli_bad = {c: (p.returncode, p.stdout[:200], p.stderr.strip()[-200:]) for c, p in cli.items()
               if p.returncode != 2 or p.stdout or "401" not in p.stderr}
    record_row(Row("security: no / wrong / revoked token",
                   "ingest, /v1/query (POST, GET, count) and `ranklog query --archive URL` with no token, a wrong one, "
                   "one revoked from the tokens file while the archive runs, and 4 malformed headers; agents with a "
                   "wrong and a revoked token; an agent with the good token",
                   "401 for every refused request, nothing stored or returned; good path archives and queries; "
                   "no token string in logs (DEBUG), /metrics, answers, CLI output or any written file",
                   written=20, archived=good_count, lost=20 - good_count,
                   notes=f"{len(refused)} refused requests: {sorted(set(refused.values()))}; revocation took effect in "
                         f"{revocation_s:.1f} s; archive counted {rejected[0] if rejected else '?'} unauthorized; agents "
                         f"counted {unauthorized} 401s; good `query --count` = {ok.stdout.strip()}; "
                         f"{len(texts)} texts grepped, {len(leaks)} token leaks"))
    assert not not_401, not_401
    assert not cli_bad, cli_bad
    assert ok.returncode == 0 and ok.stdout.strip() == "20", (ok.stdout, ok.stderr)
    assert good_count == 20 and alive
    assert set(stored) == {"sec-good", "sec-revoked-before"}, {k: len(v) for k, v in stored.items()}
    assert not leaks, leaks


def test_tls_verification(tmp_path, token_file, record_row):
    """HTTPS archive: an agent trusting another CA is refused (reason tls, nothing stored), the right CA
    works end to end, a plain-HTTP client on the TLS port gets nowhere, default trust refuses the cert."""
    pki, other = make_pki(tmp_path / "pki"), make_pki(tmp_path / "other-pki", name="someone else")
    logs = tmp_path / "logs"
    _write_lines(logs / "right", "tls-right", 20)
    _write_lines(logs / "wrong", "tls-wrong", 20)
    token = token_file.read_text().strip()
    with running_archive(tmp_path / "archive", token_file, scheme="https", ca_file=str(pki.ca),
                         extra_args=["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state-wrong", sources=[f"{logs / 'wrong'}/**/*"],
                          extra_args=["--tls-ca", str(other.ca), "--shutdown-timeout", "1s"]) as wrong_ca, \
            running_agent([archive.url], token_file, tmp_path / "state-right", sources=[f"{logs / 'right'}/**/*"],
                          extra_args=["--tls-ca", str(pki.ca)]):
        scrape = wrong_ca.wait_for(lambda s: s.value("ranklog_agent_ship_failures_total", reason="tls") >= 1,
                                   timeout=60, what="ship failures with reason tls")
        tls_failures = scrape.value("ranklog_agent_ship_failures_total", reason="tls")
        right_count = _wait_job(archive.root, "tls-right", 20)
        shipped_wrong = wrong_ca.scrape().value("ranklog_agent_records_shipped_total")
        plain = {}
        for name, call in {
            "GET /readyz": lambda: httpx.get(f"http://127.0.0.1:{archive.port}/readyz", timeout=10),
            "POST /v1/ingest": lambda: httpx.post(f"http://127.0.0.1:{archive.port}/v1/ingest", timeout=10,
                                                  content=_ndjson("tls-plain", "over plain http"),
                                                  headers={"Content-Type": NDJSON, "Authorization": f"Bearer {token}"}),
        }.items():
            try:
                plain[name] = f"HTTP {call().status_code}"
            except httpx.HTTPError as exc:
                plain[name] = type(exc).__name__
        try:
            httpx.get(f"{archive.url}/readyz", timeout=10)  # system trust store only
            default_trust = "accepted"
        except httpx.ConnectError as exc:
            default_trust = "refused" if "CERTIFICATE_VERIFY_FAILED" in str(exc) else repr(exc)
        queried = httpx.post(f"{archive.url}/v1/query", json={"count": True, "spec": {}},
                             headers={"Authorization": f"Bearer {token}"}, timeout=30,
                             verify=ssl.create_default_context(cafile=str(pki.ca)))
    stored = _archived(tmp_path / "archive")
    record_row(Row("security: TLS", "archive serving HTTPS (own CA, EC P-256 cert for 127.0.0.1); agent trusting "
                   "another CA; agent trusting the right CA; plain-HTTP client on the TLS port",
                   "wrong CA: ship failures reason=tls, nothing stored; right CA: all records archived and "
                   "queryable over HTTPS; plain HTTP and default trust get nothing",
                   written=20, archived=right_count, lost=20 - right_count,
                   notes=f"{tls_failures:.0f} tls failures, {shipped_wrong:.0f} shipped by the wrong-CA agent; plain "
                         f"HTTP: {plain}; default trust store: {default_trust}; HTTPS query count "
                         f"{queried.json() if queried.status_code == 200 else queried.status_code}"))
    assert tls_failures >= 1, "the wrong-CA agent counted no ship failure with reason tls"
    assert shipped_wrong == 0, f"the agent trusting another CA had {shipped_wrong:.0f} records acknowledged"
    assert right_count == 20
    assert set(stored) == {"tls-right"}, {k: len(v) for k, v in stored.items()}
    assert not any(result.startswith("HTTP 2") for result in plain.values()), plain
    assert default_trust == "refused"
    assert queried.status_code == 200 and queried.json()["count"] == 20


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def test_openapi_fuzzing(tmp_path, token_file, record_row):
    """schemathesis against /openapi.json (bounded: coverage phase + ≤FUZZ_CASES fuzzed cases per operation):
    no 5xx, no dropped connection, the archive alive and ready, RSS growth under RSS_GROWTH_BOUND."""
    report = tmp_path / "schemathesis.json"
    with running_archive(tmp_path / "archive", token_file, log_path=tmp_path / "archive.log") as archive:
        rss_before = _rss_bytes(archive.proc.pid)
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "run", f"{archive.url}/openapi.json",
             "-H", f"Authorization: Bearer {archive.token}", "--phases", "coverage,fuzzing", "-n", str(FUZZ_CASES),
             "--seed", "20261202", "--checks", "not_a_server_error", "--no-shrink", "--generation-database", "none",
             "--request-timeout", "30", "--report", "json", "--report-json-path", str(report)],
            capture_output=True, text=True, timeout=240, cwd=REPO,
            env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.helpers.reliability_schemathesis_hooks",
                 "PYTHONPATH": str(REPO), "NO_COLOR": "1"})
        seconds = time.monotonic() - started
        rss_after = _rss_bytes(archive.proc.pid)
        alive = archive.proc.poll() is None
        ready = httpx.get(f"{archive.url}/readyz", timeout=10).status_code
    assert report.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(report.read_text())
    cases = result["test_cases"]
    crashes = archive.log_text().count("Exception in ASGI application")
    record_row(Row("security: API fuzzing", f"schemathesis {result['schemathesis_version']} from /openapi.json with "
                   f"the good token: coverage phase + up to {FUZZ_CASES} fuzzed cases per operation (NDJSON bodies from the "
                   "record schema, Arrow bodies valid/damaged/random)",
                   f"no 5xx (check not_a_server_error), process alive and ready, RSS growth < {RSS_GROWTH_BOUND >> 20} MiB",
                   notes=f"{cases['generated']} requests over {result['operations']['tested']} operations in "
                         f"{seconds:.0f} s; {cases['with_failures']} failing; RSS {rss_before >> 20} → "
                         f"{rss_after >> 20} MiB; {crashes} unhandled exceptions logged"))
    assert run.returncode == 0 and cases["with_failures"] == 0 and not result["errors"], run.stdout[-4000:]
    assert result["operations"]["tested"] == result["operations"]["total"] >= 4
    assert 0 < cases["generated"] <= MAX_FUZZ_REQUESTS, cases
    assert alive and ready == 200 and crashes == 0
    assert rss_after - rss_before < RSS_GROWTH_BOUND, (rss_before, rss_after)


def test_query_endpoint_fuzzing(tmp_path, token_file, record_row):
    """/v1/query is not in the OpenAPI description, so hypothesis drives it: GET parameters and POST specs
    with awkward and random values against an archive holding records. 4xx is fine, 5xx is a bug."""
    with running_archive(tmp_path / "archive", token_file, log_path=tmp_path / "archive.log") as archive:
        body = b"".join(_ndjson(f"job{n % 3}", f"record {n}") for n in range(60))
        assert httpx.post(f"{archive.url}/v1/ingest", content=body, headers=archive.headers(NDJSON)).status_code == 200
        _wait_job(archive.root, "job0", 20)
        rss_before = _rss_bytes(archive.proc.pid)
        started = time.monotonic()
        statuses, failures = _fuzz_query_endpoint(archive.url, archive.token, QUERY_FUZZ_CASES)
        seconds = time.monotonic() - started
        rss_after = _rss_bytes(archive.proc.pid)
        alive = archive.proc.poll() is None and httpx.get(f"{archive.url}/readyz", timeout=10).status_code == 200
    record_row(Row("security: /v1/query fuzzing", f"hypothesis: {QUERY_FUZZ_CASES} GET (query parameters) and POST "
                   "(JSON spec) requests with awkward/random values against an archive holding 60 records",
                   "no 5xx, no dropped connection, process alive and ready, RSS growth < "
                   f"{RSS_GROWTH_BOUND >> 20} MiB",
                   notes=f"statuses {statuses} in {seconds:.0f} s; RSS {rss_before >> 20} → {rss_after >> 20} MiB; "
                         f"{len(failures)} server errors, e.g. {failures[:3]}"))
    assert alive and rss_after - rss_before < RSS_GROWTH_BOUND
    assert not failures, (f"{len(failures)} of {QUERY_FUZZ_CASES} /v1/query requests got a 5xx or no answer "
                          "(a malformed spec must be a 400):\n" + "\n".join(failures[:10]))


_QUERY_PARAMS = ("levels", "host", "ip", "pid", "rank", "job", "trace_id", "logger", "attr", "start", "end", "since",
                 "level", "step_min", "step_max", "contains", "regex", "limit", "sort", "columns", "format", "count",
                 "ignore_case", "no_such_param")
_AWKWARD = ("", "0", "-1", "0-7,12", "7-0", "99999999999999999999", "2h", "-5m", "1e400", "NaN", "(", "[a-", "(a+)+$",
            ".*", "2026-12-02 13:00:00", "9999-99-99T99:99", "ts:desc", "-ts", "host,ts", "msg,ts", "nope", "ERROR",
            "a=b", "x" * 5000, "\x00", "é", "%", "../../etc/passwd", "true", "arrow", "ndjson")


def _fuzz_query_endpoint(url: str, token: str, examples: int) -> tuple[dict[str, int], list[str]]:
    """Hypothesis-driven GET params and POST specs for /v1/query (not in the OpenAPI description).

    Returns status → count (a dropped connection counts as status 0) and the requests answered 5xx
    or not at all. Every example runs (failures are collected, not raised), so one bad input does
    not hide the others."""
    import dataclasses

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from ranklog.query.filters import QuerySpec

    text = st.one_of(st.sampled_from(_AWKWARD), st.text(max_size=30))
    json_value = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text,
                              lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=3),
                              max_leaves=8)
    spec_keys = st.sampled_from([f.name for f in dataclasses.fields(QuerySpec)] + ["no_such_key"])
    get = st.dictionaries(st.sampled_from(_QUERY_PARAMS), text, max_size=6).map(lambda p: ("GET", p))
    post = st.fixed_dictionaries({"spec": st.dictionaries(spec_keys, json_value, max_size=5)},
                                 optional={"columns": json_value, "format": text | json_value,
                                           "count": json_value}).map(lambda b: ("POST", b))
    statuses: dict[str, int] = {}
    failures: list[str] = []
    headers = {"Authorization": f"Bearer {token}"}

    with httpx.Client(timeout=60) as client:
        @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(st.one_of(get, post))
        def hit(request: tuple[str, dict]) -> None:
            method, payload = request
            try:
                if method == "GET":
                    answer = client.get(f"{url}/v1/query", params=payload, headers=headers)
                else:
                    answer = client.post(f"{url}/v1/query", json=payload, headers=headers)
                status = answer.status_code
            except httpx.TransportError:
                status = 0
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            if not 0 < status < 500:
                failures.append(f"{method} /v1/query {payload!r} → {status or 'no answer'}")

        hit()
    return statuses, failures


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state that process `pid` holds (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:
                continue
            hex_addr, hex_port = local.split(":")
            raw = bytes.fromhex(hex_addr)
            # /proc prints the address as host-order 32-bit words.
            words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            import ipaddress

            address = ipaddress.ip_address(words) if width == 8 else ipaddress.IPv6Address(words)
            found.add((str(address), int(hex_port, 16)))
    return found


def _ss_listening(pid: int) -> set[tuple[str, int]]:
    """The same from `ss -Hltnp` (iproute2), as a second opinion."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, timeout=30).stdout
    found = set()
    for line in out.splitlines():
        if f"pid={pid}," not in line:
            continue
        local = line.split()[3]
        address, _, port = local.rpartition(":")
        found.add((address.strip("[]"), int(port)))
    return found


def test_listeners_bind_only_where_configured(tmp_path, token_file, record_row):
    """Archive on 127.0.0.1:P and agent metrics on 127.0.0.1:Q: no socket on 0.0.0.0, ::, or another port."""
    logs = tmp_path / "logs"
    _write_lines(logs, "listen", 5)
    with running_archive(tmp_path / "archive", token_file) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/**/*"]) as agent:
        _wait_job(archive.root, "listen", 5)
        seen = {
            "archive": (_listening(archive.proc.pid), _ss_listening(archive.proc.pid), {("127.0.0.1", archive.port)}),
            "agent": (_listening(agent.proc.pid), _ss_listening(agent.proc.pid), {("127.0.0.1", agent.metrics_port)}),
        }
    record_row(Row("security: listeners", "archive --listen 127.0.0.1:P and agent --metrics-listen 127.0.0.1:Q",
                   "the processes' LISTEN sockets from /proc/<pid>/net/tcp{,6} and `ss -ltnp`: exactly the configured "
                   "address and port, nothing on 0.0.0.0 or ::",
                   notes="; ".join(f"{name}: {sorted(proc)} (ss: {sorted(ss)})" for name, (proc, ss, _) in seen.items())))
    for name, (proc, ss, wanted) in seen.items():
        assert proc == wanted, (name, proc)
        assert ss == wanted, (name, ss)
