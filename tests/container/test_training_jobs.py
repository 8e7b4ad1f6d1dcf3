"""Real torchrun and Ray jobs of an unprivileged user, on a node rolled out by the roles: nothing lost.

On the training node (the training image: torch CPU + Ray + bindfs), user `alice` (not in any
ranklog group) runs, with `umask 077`:

- a 2-rank DDP job under `torchrun --max-restarts 1 --redirects 3 --log-dir ~/torchrun` (gloo): torchrun makes its
  run directory with `mkdtemp` (0700) inside alice's 0700 home, files are 0600;
- a Ray job (tasks and an actor): `/tmp/ray/session_*` is alice's, its log files 0600.

The agent (user `ranklog`, CAP_DAC_READ_SEARCH only) must ship every line of every file those tools
wrote: the files are read back from the node and, line by line, each one is either the start of a
record at its byte offset or a continuation carried in the record before it (a traceback line).

Then alice mounts a FUSE file system (bindfs, no allow_other) under the watched torchrun tree: the
kernel refuses every other uid, capability or not, so the agent cannot read it — and says so in
its journal, in `ranklog_agent_unreadable_paths{reason}` and through the `RanklogAgentUnreadablePaths`
alert evaluated by the stack's Prometheus.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.container.cluster import Cluster
from tests.container.conftest import JOBS, MONITORING_HOST, TRAINING_JOB_NODE, TRAINING_USER
from tests.container.docker_env import docker
from tests.helpers.procs import ranklog_cmd

pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.timeout(1800)]

HOME = f"/home/{TRAINING_USER}"
TORCHRUN_DIR = f"{HOME}/torchrun"
FUSE_DIR = f"{TORCHRUN_DIR}/fuse_run"
# The files the tools wrote, by the agent presets' globs (session_latest is a symlink to a session).
COLLECT = r"""
import glob, json, os, stat
pats = [f"{root}/*/attempt_*/*/{leaf}" for root in ["TORCHRUN_ROOT"] for leaf in ("stdout.log", "stderr.log", "error.json")]
pats += [f"/tmp/ray/session_*/logs/*.{ext}" for ext in ("out", "err", "log")]
out = {}
for pat in pats:
    for path in sorted(glob.glob(pat)):
        if "/session_latest/" in path:
            continue
        data = open(path, "rb").read()
        lines, offset = [], 0
        for raw in data.splitlines(keepends=True):
            lines.append([offset, raw.decode("utf-8", "replace").rstrip("\r\n")])
            offset += len(raw)
        out[path] = {"mode": stat.S_IMODE(os.stat(path).st_mode),
                     "dir_mode": stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode), "lines": lines}
print(json.dumps(out))
""".replace("TORCHRUN_ROOT", TORCHRUN_DIR)


def _poll(what: str, fn, timeout: float, interval: float = 3.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {str(last)[:3000]})")


def _as_user(cluster: Cluster, command: str, timeout: float = 600) -> str:
    """Run `command` on the training node as the training user, umask 077, in a login shell."""
    proc = subprocess.run(["docker", "exec", cluster.nodes[TRAINING_JOB_NODE].container_id, "su", "-l",
                           TRAINING_USER, "-c", f"umask 077 && {command}"],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{command} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def jobs_ran(cluster: Cluster, converged) -> dict[str, dict]:
    """Run both jobs as the training user; returns the files they wrote (path → modes, lines)."""
    node = cluster.nodes[TRAINING_JOB_NODE].container_id
    for script in ("ddp_train.py", "ray_job.py"):
        docker("cp", str(JOBS / script), f"{node}:/usr/local/share/{script}")
    docker("exec", node, "chmod", "0644", "/usr/local/share/ddp_train.py", "/usr/local/share/ray_job.py")
    _as_user(cluster, "chmod 0700 ~")  # a private home, as on many clusters
    # --max-restarts 1: gloo's rendezvous on a loaded 2-core host once aborted a rank ("[c10d] The
    # hostname of the client socket cannot be retrieved", SIGABRT); torchrun's own restart reruns the
    # group as attempt_1 of the same run directory, and every file of both attempts must arrive.
    _as_user(cluster, f"/opt/train/bin/torchrun --nnodes 1 --nproc-per-node 2 --max-restarts 1 --redirects 3 "
                      f"--log-dir {TORCHRUN_DIR} /usr/local/share/ddp_train.py")
    _as_user(cluster, "/opt/train/bin/python /usr/local/share/ray_job.py")
    files = json.loads(docker("exec", node, "python3", "-c", COLLECT, timeout=120))
    assert any("/attempt_0/" in p for p in files) and any("/tmp/ray/" in p for p in files), sorted(files)
    return files


def test_the_tools_wrote_owner_only_files(jobs_ran) -> None:
    """The hard case for real: 0600 files in 0700 directories of another user (what issue #16 lost)."""
    torchrun = {p: f for p, f in jobs_ran.items() if p.startswith(TORCHRUN_DIR)}
    assert {f["mode"] for f in torchrun.values()} == {0o600}
    assert {f["dir_mode"] for f in torchrun.values()} == {0o700}
    run_dirs = {p[len(TORCHRUN_DIR) + 1:].split("/")[0] for p in torchrun}
    assert len(run_dirs) == 1, run_dirs  # one mkdtemp'd run directory of torchrun (<run id>_<random>)
    ray = {p: f for p, f in jobs_ran.items() if p.startswith("/tmp/ray/")}
    assert any("/worker-" in p for p in ray), sorted(ray)
    assert {f["mode"] & 0o077 for f in ray.values()} == {0}


def _archive_rows(archive_url: str, token_file: Path) -> dict[str, dict[int, dict]]:
    proc = subprocess.run(ranklog_cmd("query", "--archive", archive_url, "--token-file", str(token_file),
                                      "--host", TRAINING_JOB_NODE, "--format", "ndjson", "--limit", "10000000",
                                      "--columns", "source,offset,msg,exc,attrs"),
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return {}
    rows: dict[str, dict[int, dict]] = {}
    for line in proc.stdout.splitlines():
        if line.strip():
            row = json.loads(line)
            rows.setdefault(row["source"], {})[row["offset"]] = row
    return rows


def _missing_lines(files: dict[str, dict], rows: dict[str, dict[int, dict]]) -> list[tuple[str, int, str]]:
    """Lines of the files that are neither a record's first line nor inside the record before them."""
    missing = []
    for path, info in files.items():
        records, owner = rows.get(path, {}), None
        for offset, text in info["lines"]:
            if offset in records:
                owner = records[offset]
                continue
            body = "" if owner is None else "\n".join(str(owner.get(k) or "") for k in ("msg", "exc", "attrs"))
            if text.strip() and text.strip() not in body:
                missing.append((path, offset, text[:200]))
    return missing


def test_every_line_the_tools_wrote_is_in_the_archive(jobs_ran, archive_url, token_file) -> None:
    total = sum(len(info["lines"]) for info in jobs_ran.values())

    def complete():
        rows = _archive_rows(archive_url, token_file)
        missing = _missing_lines(jobs_ran, rows)
        return (rows, total) if not missing else None

    rows, total = _poll(f"all {total} lines of {len(jobs_ran)} files in the archive", complete, timeout=300)
    for path, info in jobs_ran.items():
        offsets = sorted(rows.get(path, {}))
        starts = {offset for offset, _ in info["lines"]}
        assert set(offsets) <= starts, f"{path}: record offsets that are no line start"
        if info["lines"]:
            assert 0 in rows.get(path, {}), f"{path}: its first line is not a record"
    torchrun_lines = sum(len(i["lines"]) for p, i in jobs_ran.items() if p.startswith(TORCHRUN_DIR))
    # 2 ranks × 25 steps × (stdout + stderr line) at least: the job's own output, counted from its files.
    assert torchrun_lines >= 2 * 25 * 2, torchrun_lines


@pytest.fixture(scope="module")
def fuse_mounted(cluster: Cluster, jobs_ran) -> str:
    """alice's bindfs of a private folder under the watched torchrun tree (no allow_other)."""
    node = cluster.nodes[TRAINING_JOB_NODE].container_id
    docker("exec", node, "chmod", "0666", "/dev/fuse")  # as on a host where users may mount FUSE
    _as_user(cluster, f"mkdir -p {HOME}/private/attempt_0/0 {FUSE_DIR} && "
                      f"echo 'written where the agent cannot read' > {HOME}/private/attempt_0/0/stdout.log && "
                      f"bindfs --no-allow-other {HOME}/private {FUSE_DIR}")
    # Even root, with CAP_DAC_READ_SEARCH and CAP_DAC_OVERRIDE, is refused: FUSE checks the caller's uid.
    denied = subprocess.run(["docker", "exec", node, "ls", FUSE_DIR], capture_output=True, text=True)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr, denied
    yield FUSE_DIR
    docker("exec", node, "umount", "-l", FUSE_DIR, check=False)


def _agent_metrics(cluster: Cluster) -> str:
    try:
        return httpx.get(f"http://{cluster.ip(TRAINING_JOB_NODE)}:9465/metrics", timeout=5).text
    except httpx.HTTPError:
        return ""


def test_unreadable_fuse_mount_is_counted_logged_and_alerted(cluster: Cluster, fuse_mounted) -> None:
    def counted():
        lines = [line for line in _agent_metrics(cluster).splitlines()
                 if line.startswith("ranklog_agent_unreadable_paths{") and float(line.rsplit(" ", 1)[1]) >= 1]
        return lines

    metric = _poll("ranklog_agent_unreadable_paths >= 1 on the agent", counted, timeout=120)
    assert all('reason="' in line for line in metric), metric

    def logged():
        journal = cluster.exec(TRAINING_JOB_NODE, "journalctl", "-u", "ranklog-agent", "--no-pager", "-o", "cat")
        return [line for line in journal.splitlines() if fuse_mounted in line]

    _poll(f"a journal line of the agent naming {fuse_mounted}", logged, timeout=60)

    def firing():
        alerts = httpx.get(f"http://{cluster.ip(MONITORING_HOST)}:9090/api/v1/alerts", timeout=5).json()
        return [a for a in alerts["data"]["alerts"] if a["labels"].get("alertname") == "RanklogAgentUnreadablePaths"
                and a["state"] == "firing"]

    alerts = _poll("RanklogAgentUnreadablePaths firing in the stack's Prometheus", firing, timeout=420, interval=5)
    assert any(a["labels"]["instance"].startswith(f"{cluster.ip(TRAINING_JOB_NODE)}:") for a in alerts), alerts
