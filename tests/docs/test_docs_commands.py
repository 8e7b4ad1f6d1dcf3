"""Every shell block of README.md and docs/*.md runs (the rules, for writers: docs/README.md).

A document's ``sh``/``bash``/``shell`` blocks run in order as one ``bash`` script with ``set -eo
pipefail``, in a directory of its own with a private ``$TMPDIR`` and ``$HOME``; every command must
succeed. README.md runs in a directory holding only the clone's ``.venv`` (a link to this test's
environment: a fresh clone after ``make demo``), with nothing of ranklog on ``PATH`` but what the README
itself activates; each ``docs/*.md`` runs with that environment's ``bin`` on ``PATH`` beside ``logs/``
and ``archive/`` of a real four-rank job (tests.helpers.everyday_job, trace id ``train_20251013_001``)
and its ``token``. The documents' ports 8470, 9464 and 9465 become free loopback ports, and the
process group is stopped afterwards. A block whose info string says ``not-run: <reason>`` is not run
(the reason is required). The README's walkthrough is also checked for its outcome: a four-rank torchrun
job shipped by the agent, queried, and triaged to rank 2 — with no flag the README does not show.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.net import free_port
from tests.helpers.procs import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELLS = ("sh", "bash", "shell")
PORTS = (8470, 9464, 9465)
TRACE_ID = "train_20251013_001"
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    info: str
    text: str

    @property
    def language(self) -> str:
        return self.info.split()[0] if self.info.split() else ""

    @property
    def shell(self) -> bool:
        return self.language in SHELLS

    @property
    def not_run(self) -> str | None:
        """The reason given after ``not-run:`` (empty when the marker has none), or None when the block runs."""
        marker = re.search(r"\bnot-run\b:?(.*)", self.info)
        return marker.group(1).strip() if marker else None


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file (CommonMark fences: a closing fence has the opening's
    character and at least its length, so a ```` block can show a ``` one)."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening or (opening["fence"][0] == "`" and "`" in opening["info"]):
            i += 1
            continue
        fence, start = opening["fence"], i
        body: list[str] = []
        i += 1
        while i < len(lines):
            closing = _FENCE.match(lines[i])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence) \
                    and not closing["info"].strip():
                break
            body.append(lines[i])
            i += 1
        blocks.append(Block(path, start + 1, opening["info"].strip(), "\n".join(body)))
        i += 1
    return blocks


def script_of(path: Path) -> str:
    return "\n".join(block.text for block in fenced_blocks(path) if block.shell and block.not_run is None)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_a_block_not_run_says_why(doc: Path) -> None:
    for block in fenced_blocks(doc):
        if block.shell and block.not_run is not None:
            assert len(block.not_run) > 10, f"{doc.name}:{block.line}: give the reason after not-run:"


def test_the_readme_starts_with_the_two_commands() -> None:
    first = next(block for block in fenced_blocks(REPO / "README.md") if block.shell)
    assert [line.split("#")[0].strip() for line in first.text.splitlines()] == ["make demo", "make test"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_links_stay_inside_the_repository_and_resolve(doc: Path) -> None:
    text = re.sub(r"^(`{3,}|~{3,}).*?^\1", "", doc.read_text(encoding="utf-8"), flags=re.S | re.M)
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            assert doc.name != "README.md" or doc.parent != REPO or target.startswith("https://"), target
            continue
        path = target.split("#", 1)[0]
        if not path:
            continue
        resolved = (doc.parent / path).resolve()
        assert resolved.is_relative_to(REPO), f"{doc.name} links outside the repository: {target}"
        assert resolved.exists(), f"{doc.name}: broken link {target}"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """logs/, archive/ and token of a real four-rank job, for the documents to run against."""
    from tests.helpers.everyday_job import job_logs_and_archive

    base = tmp_path_factory.mktemp("docs-job")
    job_logs_and_archive(base, trace_id=TRACE_ID)
    (base / "token").write_text("docs-token-0123456789abcdef0123\n")
    return base


def _run(script: str, sandbox: Path, path_dirs: list[str]) -> subprocess.CompletedProcess:
    for port in PORTS:
        script = re.sub(rf"\b{port}\b", str(free_port()), script)
    (sandbox / "home").mkdir()
    (sandbox / "tmp").mkdir()
    env = {"PATH": os.pathsep.join([*path_dirs, "/usr/local/bin", "/usr/bin", "/bin"]), "HOME": str(sandbox / "home"),
           "TMPDIR": str(sandbox / "tmp"), "LANG": "C.UTF-8", "COLUMNS": "200", "NO_COLOR": "1",
           **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}  # the tree under test, when not installed
    log = sandbox / "output.txt"  # a file, not a pipe: a background process keeps no one waiting for EOF
    with open(log, "w") as output:
        proc = subprocess.Popen(["bash", "-c", "set -eo pipefail\n" + script], cwd=sandbox, env=env, text=True,
                                stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        proc.wait(timeout=900)
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):  # what the document left running in the background
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(2)
    return subprocess.CompletedProcess(proc.args, proc.returncode, log.read_text(errors="replace"), "")


@pytest.mark.slow
@pytest.mark.parametrize("doc", [d for d in DOCS if script_of(d)], ids=lambda p: p.relative_to(REPO).as_posix())
def test_doc_commands_run(doc: Path, job: Path, tmp_path: Path) -> None:
    sandbox = tmp_path / "clone"
    sandbox.mkdir()
    (sandbox / ".venv").symlink_to(sys.prefix)
    readme = doc == REPO / "README.md"
    if not readme:
        for name in ("logs", "archive"):
            shutil.copytree(job / name, sandbox / name)
        shutil.copy(job / "token", sandbox / "token")
    proc = _run(script_of(doc), sandbox, [] if readme else [str(Path(sys.prefix) / "bin")])
    assert proc.returncode == 0, f"{doc.name}: exit {proc.returncode}\n{proc.stdout[-6000:]}"
    if readme:
        out = proc.stdout
        assert "ROOT CAUSE: rank 2" in out and "CUDA error: an illegal memory access" in out, out[-6000:]
        assert "training finished" in out  # the WARNING query: every rank's own warning, shipped
        assert sum(1 for line in out.splitlines() if '"rank":2' in line.replace(" ", "")) >= 5  # -n 5 of rank 2
