"""One owner per hour: the lease that lets several archives compact and expire one shared root.

Each archive flushes its own files (named by its `archive_id`), so flushing needs no coordination.
Compaction and retention rewrite *everyone's* files of an hour, so they first take the hour's lease:
the object ``<hour dir>/_ranklog_lease.json`` (archive_layout.LEASE_NAME), holding the owner, an
expiry and the last replacements (`commits`) made under it.

- Taking it: create it only if absent (S3 ``If-None-Match: *``), or replace a released / expired /
  own lease only if it is still the version read (``If-Match: <ETag>``); then read it back (a store
  that ignored the condition is caught here). SeaweedFS and AWS S3 both honour these conditions.
- Every change under the lease (a commit, renewing the expiry, releasing) is again an ``If-Match``
  write, so an owner that stalled past its expiry and lost the hour to another archive finds out
  at its next write and stops before touching anything (fencing).
- A replacement commits by writing itself into the lease before any input is deleted; whoever holds
  the hour next finishes a commit left undone (see compaction.finish_commits), so a takeover after
  the owner died mid-compaction loses nothing and counts nothing twice.

Local roots use the same protocol with a POSIX lock file standing in for the conditional writes.
Expiry is wall-clock time: archives sharing a root need synchronised clocks (NTP) to within a
small fraction of `s3.lease_ttl`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from typing import Any, Protocol

from ..archive_layout import LEASE_NAME
from ..object_store import S3Settings, resolve_s3, split_s3
from .storage import Storage, write_atomic

log = logging.getLogger("ranklog.archive.leases")
KEPT_COMMITS = 16  # replacements remembered per hour: readers listing an hour mid-commit need them


class LeaseLost(RuntimeError):
    """The hour's lease changed under its owner (expired and taken over): stop touching the hour."""


class LeaseStore(Protocol):
    def read(self, key: str) -> tuple[dict[str, Any], str] | None: ...

    def create(self, key: str, body: dict[str, Any]) -> str | None: ...

    def replace(self, key: str, body: dict[str, Any], etag: str) -> str | None: ...


class S3LeaseStore:
    """Conditional PUTs on an S3 bucket (botocore: pyarrow's S3 client cannot send If-Match)."""

    def __init__(self, root: str, settings: S3Settings | None) -> None:
        import botocore.config
        import botocore.session

        self.bucket, self.prefix = split_s3(root)
        resolved = resolve_s3(settings)
        timeout = resolved.request_timeout or 30.0
        self.client = botocore.session.get_session().create_client(
            "s3", endpoint_url=resolved.endpoint_url, region_name=resolved.region,
            aws_access_key_id=resolved.access_key_id, aws_secret_access_key=resolved.secret_access_key,
            aws_session_token=resolved.session_token,
            config=botocore.config.Config(connect_timeout=timeout, read_timeout=timeout,
                                          retries={"mode": "standard", "max_attempts": 3},
                                          s3={"addressing_style": "path"}))

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def read(self, key: str) -> tuple[dict[str, Any], str] | None:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except self.client.exceptions.NoSuchKey:
            return None
        return _decode(answer["Body"].read()), answer["ETag"]

    def _put(self, key: str, body: dict[str, Any], **condition: str) -> str | None:
        from botocore.exceptions import ClientError

        try:
            answer = self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=_encode(body),
                                            ContentType="application/json", **condition)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in {"PreconditionFailed", "ConditionalRequestConflict"} \
                    or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") in (409, 412):
                return None
            raise
        return answer["ETag"]

    def create(self, key: str, body: dict[str, Any]) -> str | None:
        return self._put(key, body, IfNoneMatch="*")

    def replace(self, key: str, body: dict[str, Any], etag: str) -> str | None:
        return self._put(key, body, IfMatch=etag)


class LocalLeaseStore:
    """The same conditions on a local (or NFS) root: compare-and-write under an exclusive flock."""

    def __init__(self, base: str) -> None:
        self.base = base

    def _locked(self, key: str):
        path = os.path.join(self.base, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(f"{os.path.dirname(path)}/.{LEASE_NAME}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return path, fd

    def read(self, key: str) -> tuple[dict[str, Any], str] | None:
        try:
            with open(os.path.join(self.base, key), "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        return _decode(data), hashlib.sha256(data).hexdigest()

    def _write(self, key: str, body: dict[str, Any], expected: str | None) -> str | None:
        path, fd = self._locked(key)
        try:
            current = self.read(key)
            if (current[1] if current else None) != expected:
                return None
            data = _encode(body)
            write_atomic(path, data)
            return hashlib.sha256(data).hexdigest()
        finally:
            os.close(fd)

    def create(self, key: str, body: dict[str, Any]) -> str | None:
        return self._write(key, body, None)

    def replace(self, key: str, body: dict[str, Any], etag: str) -> str | None:
        return self._write(key, body, etag)


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True).encode()


def _decode(data: bytes) -> dict[str, Any]:
    try:
        body = json.loads(data)
    except ValueError:
        return {}  # damaged: treated as expired, taken over and rewritten whole
    return body if isinstance(body, dict) else {}


def lease_store(storage: Storage, root: str, settings: S3Settings | None) -> LeaseStore:
    if storage.local_base is not None:
        return LocalLeaseStore(storage.local_base)
    return S3LeaseStore(root, settings)


class HourLease:
    """The lease of one hour partition (`hour_dir` is ``date=…/hour=…``), held by `owner`."""

    def __init__(self, store: LeaseStore, hour_dir: str, owner: str, ttl: float, metrics=None) -> None:
        self.store, self.key, self.owner, self.ttl, self.metrics = store, f"{hour_dir}/{LEASE_NAME}", owner, ttl, metrics
        self.body: dict[str, Any] = {}
        self.etag: str | None = None

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.archive_hour_leases.labels(outcome=outcome).inc()

    def acquire(self) -> bool:
        """Take the hour if nobody else holds it; False when another archive's lease is live."""
        now = time.time()
        current = self.store.read(self.key)
        previous = current[0] if current else {}
        held_by_other = previous.get("owner") not in (None, self.owner) and float(previous.get("expires", 0)) > now
        if held_by_other:
            self._count("busy")
            return False
        body = {"owner": self.owner, "expires": now + self.ttl, "commits": list(previous.get("commits") or [])}
        etag = self.store.create(self.key, body) if current is None else self.store.replace(self.key, body, current[1])
        check = self.store.read(self.key) if etag is not None else None
        if check is None or check[1] != etag or check[0].get("owner") != self.owner:
            self._count("busy")
            return False
        taken_over = previous.get("owner") not in (None, self.owner) and float(previous.get("expires", 0)) > 0
        if taken_over:
            log.warning("took over %s from %s (its lease expired)", self.key, previous.get("owner"))
        self._count("takeover" if taken_over else "acquired")
        self.body, self.etag = body, etag
        return True

    @property
    def commits(self) -> list[dict[str, Any]]:
        return list(self.body.get("commits") or [])

    def write(self, commits: list[dict[str, Any]] | None = None, release: bool = False) -> None:
        """Renew (or release) the lease, optionally with new `commits`; raises LeaseLost when another
        archive changed it since our last write."""
        if self.etag is None:
            raise LeaseLost(f"{self.key}: not held")
        body = {"owner": self.owner, "expires": 0 if release else time.time() + self.ttl,
                "commits": (self.commits if commits is None else commits)[-KEPT_COMMITS:]}
        etag = self.store.replace(self.key, body, self.etag)
        if etag is None:
            self.etag = None
            self._count("lost")
            raise LeaseLost(f"{self.key}: taken over by another archive")
        self.body, self.etag = body, etag

    def release(self) -> None:
        if self.etag is not None:
            self.write(release=True)
            self.etag = None
