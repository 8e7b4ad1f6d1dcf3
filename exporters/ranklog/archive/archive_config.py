"""The archive's configuration: one dataclass, so every YAML key is also a flag (see ranklog.config_loader).

Defaults are what a production archive wants without tuning: 1 s flushes (a record is queryable
from Parquet within ~2 s of its ACK), 30 d retention, 128 MB compacted files, 1 GiB disk reserve,
256 MiB request bodies, 10 s and 64 KiB for a request's headers (ranklog.archive.http_limits).
Two keys exist for tests and drills and are harmless in production:
`free_space_file` (a file holding the free byte count the 507 check uses instead of statvfs) and
`clock_file` (a file holding the epoch seconds retention and compaction use as "now").
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from ..config_loader import log_format_field, log_level_field
from ..record import LEVELS, normalize_level
from ..units import parse_duration
from .verdicts.config import VerdictConfig

_ARCHIVE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._]*(?:-[A-Za-z0-9._]+)*$")


def parse_level_durations(value: object) -> dict[str, float]:
    """Per-level retention from YAML (`{DEBUG: 3d}`) or a flag (`DEBUG=3d,ERROR=90d`)."""
    if isinstance(value, str):
        pairs = [part.split("=", 1) for part in value.split(",") if part.strip()]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError(f"expected LEVEL=DURATION[,LEVEL=DURATION…], got {value!r}")
        value = {k.strip(): v.strip() for k, v in pairs}
    if isinstance(value, list):
        value = dict(part.split("=", 1) for item in value for part in str(item).split(",") if part)
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a mapping of level to duration, got {type(value).__name__}")
    out: dict[str, float] = {}
    for level, duration in value.items():
        name = normalize_level(level)
        if name == "UNKNOWN" and str(level).strip().upper() != "UNKNOWN":
            raise ValueError(f"unknown level {level!r} (levels: {', '.join(LEVELS)})")
        out[name] = parse_duration(duration)
    return out


def default_archive_id() -> str:
    """The host name, made safe for file names."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()).strip("-") or "archive"


@dataclass
class RetentionConfig:
    """How long records are kept: `default` for every level, `levels` overrides (e.g. DEBUG 3d)."""

    default: float = field(default=30 * 86400.0, metadata={"unit": "duration", "help": "keep records this long"})
    levels: dict = field(default_factory=dict, metadata={
        "parse": parse_level_durations, "help": "per-level overrides, e.g. DEBUG=3d,ERROR=90d"})
    interval: float = field(default=3600.0, metadata={"unit": "duration", "help": "how often retention runs"})

    def keep_for(self, level: str) -> float:
        return self.levels.get(level, self.default)

    def longest(self) -> float:
        return max([self.default, *self.levels.values()])


@dataclass
class S3Config:
    """Object storage settings for an ``s3://bucket/prefix`` root. Empty keys fall back to the standard
    AWS variables and files (ranklog.object_store); the secret is only ever read from a file."""

    endpoint_url: str = field(default="", metadata={
        "help": "S3 endpoint, e.g. http://127.0.0.1:8333 (default: $AWS_ENDPOINT_URL, the AWS config, AWS)"})
    region: str = field(default="", metadata={"help": "S3 region (default: $AWS_REGION, the AWS config, us-east-1)"})
    access_key_id: str = field(default="", metadata={"help": "S3 access key id (default: $AWS_ACCESS_KEY_ID, files)"})
    secret_access_key_file: str = field(default="", metadata={
        "help": "file holding the S3 secret key (default: $AWS_SECRET_ACCESS_KEY, ~/.aws/credentials)"})
    request_timeout: float = field(default=30.0, metadata={
        "unit": "duration", "help": "per-request timeout against the object store"})
    lease_ttl: float = field(default=300.0, metadata={
        "unit": "duration", "help": "an hour's compaction/retention lease expires this long after its last renewal"})

    def settings(self):
        from ..object_store import S3Settings

        return S3Settings.from_files(self.endpoint_url, self.region, self.access_key_id, self.secret_access_key_file,
                                     self.request_timeout)


@dataclass
class QueryConfig:
    """What one read query may cost (the Loki API and /v1/query; ranklog.query.budget)."""

    timeout: float = field(default=60.0, metadata={
        "unit": "duration", "help": "a Loki API query still running after this is stopped (504)"})
    export_timeout: float = field(default=600.0, metadata={
        "unit": "duration", "help": "a /v1/query answer (ranklog query --archive URL) still streaming after this ends"})
    memory: int = field(default=256 * 1024**2, metadata={
        "unit": "size", "help": "memory one query may hold (sorted hours, lines, series); past it 400"})
    max_series: int = field(default=500, metadata={"help": "series in one metric answer (Loki's max_query_series)"})
    max_concurrent: int = field(default=4, metadata={"help": "Loki API queries at once; 429 beyond"})
    process_memory: int = field(default=1024**3, metadata={
        "unit": "size", "help": "queries stop when Arrow memory of the whole process passes this"})

    def budget_limits(self, export: bool = False):
        from ..query.budget import BudgetLimits

        return BudgetLimits(self.export_timeout if export else self.timeout, self.memory, self.max_series,
                            self.process_memory)


@dataclass
class ArchiveConfig:
    ENV_PREFIX: ClassVar[str] = "RANKLOG_ARCHIVE"  # every key also from RANKLOG_ARCHIVE_<KEY> (ranklog.config_loader)
    SECTION: ClassVar[str] = "archive"  # a file may hold the keys under `archive:`

    root: str = field(default="", metadata={"help": "archive root: a directory or s3://bucket/prefix"})
    listen: str = field(default="127.0.0.1:8470", metadata={"help": "HOST:PORT to serve HTTP(S) on"})
    token_file: str = field(default="", metadata={"help": (
        "bearer tokens, one per line: TOKEN (shared, any host) or TOKEN IDENTITY [HOST-GLOB…] (bound to a node's "
        "hosts); re-read when it changes")})
    archive_id: str = field(default_factory=default_archive_id, metadata={
        "help": "names this instance's files; instances sharing a root need distinct ids (default: host name)",
        "show_default": False})
    state_dir: str = field(default="", metadata={
        "help": "WAL, dedup snapshot and journals (default: <root>/_ranklog/<archive_id> for a local root)"})
    max_body_size: int = field(default=256 * 1024**2, metadata={"unit": "size", "help": "larger requests get 413"})
    max_query_body_size: int = field(default=1024**2, metadata={
        "unit": "size", "help": "larger bodies of /v1/query and the Loki API's POST forms get 413"})
    max_decoded_size: int = field(default=1024**3, metadata={
        "unit": "size", "help": "413 when a compressed body inflates past this"})
    ingest_memory_budget: int = field(default=512 * 1024**2, metadata={
        "unit": "size", "help": "memory all ingest requests may hold at once (bodies, decoded data, records); "
                                "past it 429 with Retry-After"})
    ingest_memory_per_token: int = field(default=256 * 1024**2, metadata={
        "unit": "size", "help": "memory one token's requests may hold at once; a request that alone needs more "
                                "gets 413"})
    max_request_records: int = field(default=1_000_000, metadata={"help": "413 for a request with more records"})
    disk_reserve: int = field(default=1024**3, metadata={"unit": "size", "help": "507 when free disk is below this"})
    free_space_file: str = field(default="", metadata={"help": "read free bytes from this file (tests, drills)"})
    clock_file: str = field(default="", metadata={"help": "read 'now' (epoch seconds) from this file (tests)"})
    flush_interval: float = field(default=1.0, metadata={"unit": "duration", "help": "WAL → Parquet at least this often"})
    flush_rows: int = field(default=2_000_000, metadata={"help": "flush early when this many rows are pending"})
    max_pending_bytes: int = field(default=1024**3, metadata={
        "unit": "size", "help": "503 while this much ACKed data waits for Parquet"})
    background_nice: int = field(default=10, metadata={
        "help": "nice value added to the flush and compaction threads so ingest gets the CPU first (0: off)"})
    max_inflight_requests: int = field(default=64, metadata={"help": "429 beyond this many concurrent ingests"})
    max_inflight_per_token: int = field(default=16, metadata={
        "help": "429 beyond this many concurrent ingests by one token, so one client cannot starve the others"})
    body_timeout: float = field(default=30.0, metadata={
        "unit": "duration", "help": "408 and the connection closed when a request body takes longer to arrive"})
    header_timeout: float = field(default=10.0, metadata={
        "unit": "duration", "help": "408 (or a silent close) when a request's headers take longer to arrive (slowloris)"})
    max_header_size: int = field(default=64 * 1024, metadata={
        "unit": "size", "help": "431 and the connection closed when a request's line and headers exceed this"})
    wal_segment_size: int = field(default=128 * 1024**2, metadata={"unit": "size", "help": "WAL segment rotation size"})
    wal_retry_for: float = field(default=30.0, metadata={
        "unit": "duration", "help": "a WAL segment that cannot be opened is retried (503) this long, then the archive "
                                    "exits non-zero for its supervisor to restart it"})
    fatal_exit_delay: float = field(default=5.0, metadata={
        "unit": "duration", "help": "after a failure that sticks, /readyz says why this long before the process exits"})
    snapshot_interval: float = field(default=30.0, metadata={
        "unit": "duration", "help": "dedup snapshot period (bounds WAL replay at start)"})
    dedup_settle: float = field(default=3600.0, metadata={
        "unit": "duration", "help": "unused since dedup is exact (gaps are never closed); accepted for old configs"})
    dedup_body_window: float = field(default=86400.0, metadata={
        "unit": "duration", "help": "how long re-sent key-less NDJSON bodies are recognised"})
    compaction_target_size: int = field(default=128 * 1000**2, metadata={"unit": "size", "help": "compacted file size"})
    compaction_interval: float = field(default=60.0, metadata={"unit": "duration", "help": "compaction check period"})
    compaction_delay: float = field(default=600.0, metadata={
        "unit": "duration", "help": "an hour is compacted this long after it ends"})
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    s3: S3Config = field(default_factory=S3Config)
    verdict: VerdictConfig = field(default_factory=VerdictConfig)  # /v1/alerts → triage → receivers (.verdicts)
    query: QueryConfig = field(default_factory=QueryConfig)
    tls_cert: str = field(default="", metadata={"help": "PEM certificate (enables HTTPS with tls_key)"})
    tls_key: str = field(default="", metadata={"help": "PEM private key"})
    log_level: str = log_level_field("archive")
    log_format: str = log_format_field("archive")

    def validate(self) -> None:
        if not self.root:
            raise ValueError("root: required (a directory or a filesystem URI)")
        if not self.token_file:
            raise ValueError("token_file: required (the archive never accepts anonymous writes)")
        if not _ARCHIVE_ID.match(self.archive_id):
            raise ValueError(f"archive_id: {self.archive_id!r} must be letters, digits, '.', '_' and inner '-'")
        if "://" in self.root and not self.state_dir:
            raise ValueError("state_dir: required when root is a URI (the WAL needs a local disk)")
        if self.root.startswith("s3://"):
            from ..object_store import StoreConfigError, split_s3

            try:
                split_s3(self.root)
                self.s3.settings()
            except StoreConfigError as exc:
                raise ValueError(str(exc)) from None
        if self.s3.lease_ttl <= 0 or self.s3.request_timeout <= 0:
            raise ValueError("s3.lease_ttl and s3.request_timeout: must be positive")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together")
        self.listen_address()
        if not 0 <= self.background_nice <= 19:
            raise ValueError(f"background_nice: {self.background_nice} must be between 0 and 19")
        for name in ("flush_interval", "snapshot_interval", "compaction_interval", "body_timeout", "header_timeout",
                     "wal_retry_for"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be positive")
        if self.ingest_memory_per_token <= 0 or self.ingest_memory_budget <= 0 or self.max_request_records <= 0:
            raise ValueError("ingest_memory_budget, ingest_memory_per_token and max_request_records: must be positive")
        if min(self.query.timeout, self.query.export_timeout, self.query.memory, self.query.max_series,
               self.query.max_concurrent, self.query.process_memory) <= 0:
            raise ValueError("query.timeout, query.export_timeout, query.memory, query.max_series, "
                             "query.max_concurrent, query.process_memory: must be positive")
        if self.max_header_size < 1024:
            raise ValueError(f"max_header_size: {self.max_header_size} is below 1 KiB (no client's headers fit)")

    def listen_address(self) -> tuple[str, int]:
        """(host, port) from `listen` (`HOST:PORT`, `[v6]:PORT`)."""
        host, sep, port = self.listen.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"listen: expected HOST:PORT, got {self.listen!r}")
        return host.strip("[]") or "0.0.0.0", int(port)
