"""Run `ranklog archive` as a real process for tests of any area.

    with running_archive(tmp_path / "archive", token_file) as archive:
        httpx.post(f"{archive.url}/v1/ingest", content=body, headers=archive.headers(ARROW))

`running_archive` starts the service on a free loopback port, waits for /readyz, and always stops
it (SIGTERM, SIGKILL after 10 s). `handle.stop(signal.SIGKILL)` simulates a crash; `handle.restart()`
starts it again on the same port and root. Helpers to encode record tables as request bodies are
here too (`arrow_body`, `ndjson_body`).
"""

from __future__ import annotations

import contextlib
import functools
import signal
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.net import free_port
from tests.helpers.procs import ranklog_cmd, spawn, stop

ARROW = "application/vnd.apache.arrow.stream"
NDJSON = "application/x-ndjson"


@dataclass
class ArchiveHandle:
    root: Path | str  # a directory, or an s3://bucket/prefix URI
    token_file: Path
    port: int
    extra_args: tuple[str, ...] = ()
    scheme: str = "http"
    env: dict[str, str] | None = None  # extra environment (e.g. the AWS variables of an S3 root)
    log_path: Path | None = None
    proc: subprocess.Popen | None = None
    ca_file: str | None = None
    preexec_fn: Callable[[], None] | None = None  # run in the child before exec (e.g. resource limits)
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return self.token_file.read_text().split()[0]  # a bound line is "TOKEN IDENTITY HOST…"

    def headers(self, content_type: str = ARROW, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Content-Type": content_type, **extra}

    def start(self, timeout: float = 60.0) -> None:
        args = ranklog_cmd("archive", "--root", str(self.root), "--listen", f"127.0.0.1:{self.port}",
                           "--token-file", str(self.token_file), *self.extra_args)
        self.proc = spawn(args, log_path=self.log_path, env=self.env, preexec_fn=self.preexec_fn)
        self._stopped = False
        wait_ready(self.url, self.proc, timeout, self.ca_file)

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.proc is None or self._stopped:
            return None if self.proc is None else self.proc.returncode
        self._stopped = True
        return stop(self.proc, sig)

    def restart(self, timeout: float = 60.0) -> None:
        self.stop()
        self.start(timeout)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60.0, ca_file: str | None = None) -> None:
    """Poll GET /readyz until 200; fail early when the process exits."""
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"archive exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2, context=context) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise TimeoutError(f"archive at {url} not ready after {timeout}s")


@contextlib.contextmanager
def running_archive(root: Path | str, token_file: Path, port: int | None = None, extra_args: Sequence[str] = (),
                    log_path: Path | None = None, scheme: str = "http",
                    ca_file: str | None = None, env: dict[str, str] | None = None) -> Iterator[ArchiveHandle]:
    """A started archive process (stopped on exit, whatever happens). An ``s3://`` root needs
    `log_path` and a ``--state-dir`` in `extra_args`."""
    if "://" not in str(root):
        root = Path(root)
        log_path = log_path or root.parent / f"archive-{root.name}.log"
    handle = ArchiveHandle(root=root, token_file=Path(token_file), port=port or free_port(),
                           extra_args=tuple(extra_args), scheme=scheme, env=env, log_path=log_path, ca_file=ca_file)
    try:
        handle.start()
        yield handle
    finally:
        handle.stop()


@functools.cache
def _flags(command: str) -> frozenset[str]:
    help_text = subprocess.run(ranklog_cmd(command, "--help"), capture_output=True, text=True, timeout=60).stdout
    return frozenset(word.rstrip(",") for word in help_text.split() if word.startswith("--"))


def known_flags(*pairs: str, command: str = "archive") -> tuple[str, ...]:
    """``FLAG VALUE`` pairs `command` (``archive``, ``agent``) knows: a scenario that tunes a newer setting
    still runs against an older ranklog (to show how that one fails), with the setting's default there."""
    out: list[str] = []
    for flag, value in zip(pairs[::2], pairs[1::2], strict=True):
        if flag in _flags(command):
            out += [flag, value]
    return tuple(out)


def arrow_body(table, compression: str | None = "zstd") -> bytes:
    """An Arrow IPC stream body for `table` (buffers compressed with `compression`)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def read_archive(root: Path):
    """Every record stored under `root`, read with pyarrow.dataset (hive partitions)."""
    import pyarrow.dataset as ds

    from ranklog.record import arrow_schema

    if not any(Path(root).glob("date=*/hour=*/*.parquet")):
        return arrow_schema().empty_table()
    dataset = ds.dataset(str(root), format="parquet", partitioning="hive", schema=arrow_schema())
    return dataset.to_table()


def post_concurrently(url: str, headers: dict[str, str], bodies: Sequence[bytes], clients: int,
                      timeout: float = 120.0) -> None:
    """POST every body to ``/v1/ingest`` from `clients` concurrent connections (body i on client
    i % clients), as a fleet of agents would; raise on any answer but 200."""
    import httpx

    errors: list[str] = []

    def client(share: Sequence[bytes]) -> None:
        with httpx.Client(timeout=timeout) as http:
            for body in share:
                answer = http.post(f"{url}/v1/ingest", content=body, headers=headers)
                for _ in range(50):  # 429 (the ingest memory budget held by the others): retry, as agents do
                    if answer.status_code != 429:
                        break
                    time.sleep(float(answer.headers.get("Retry-After", "1")))
                    answer = http.post(f"{url}/v1/ingest", content=body, headers=headers)
                if answer.status_code != 200:
                    errors.append(f"{answer.status_code} {answer.text[:200]}")

    threads = [threading.Thread(target=client, args=(bodies[i::clients],)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"ingest failed: {errors[0]}")
