"""The agent's configuration: one dataclass, so every YAML key is also a flag (see ranklog.config_loader).

Defaults are what a production node wants without tuning: 4 MB / 250 ms batches (≤ 1 s latency at
low rates, big compressed requests at high rates), 8 MB reads (see below), 64 MB of unacknowledged data
before reading pauses, a 250 ms discovery poll (the safety net: where inotify works a new file is
picked up within milliseconds of its directory changing), and
a record that may still grow (a traceback can follow it) is shipped after 0.5 s of quiet: with the
batch latency that keeps the last record of a burst under the 1 s latency target (logging writes a
record and its traceback in one write, so its lines do not arrive seconds apart). Once the reader
has caught up, a request waits only to hold a trickle to one request per batch latency (see
``Shipper.tick``): a lone record, the tail of a burst and a quarter batch go at once.

A read is at most ``read_chunk`` bytes of one file, and what a parse gets at once (a worker joins
the reads that waited for it up to the same size): a read returns what the file holds, so only a
backlog — a burst, a restart, a file renamed in — makes big reads, and there each parse, metrics
summary and IPC message has set-up costs (the JSON reader, the group-bys, a regex compiled per
call) that more lines share. Measured on ranklog JSON, CPU-µs a line in one process (parse +
summary + encode) at 2/4/8 MB: 1.80/1.79/1.59; the agent alone (bench_agent.py's sink, 2.4 M lines,
medians of 3, two rounds): the reading-thread parse 527k–591k → 652k–678k lines/s, Python text
959k–1,005k → 1,021k–1,134k, two workers on four files 811k–886k → 967k–1,004k. The costs, only
while the agent is behind: a reading thread that parses holds polls and acknowledgements for one
parse (~0.1 s for 8 MB of JSON), and the working set of a bigger parse — peak RSS after two 2.4 M-line
backlogs, 2 MB → 8 MB: the reading-thread agent 228 → 322 MiB; with two workers the agent 205 → 254
MiB and each worker 135 → 224–244 MiB.

A file being written is read again only ``tail_interval`` (250 ms) after a read reached its end
(:meth:`.tracked_file.TrackedFile.rest_after`). Python logging writes every record with a write of
its own, so a rank logging steadily gave the agent a line or two at each read, and each read pays
the set-up costs of a parse, a metrics summary and an encoding (~1–2 ms together): measured with
``tests/benchmarks/bench_trickle.py`` (8 files, one write a line, 2,000 lines/s in all), reading at
every write took 1.32 cores (675 CPU-µs a line, ~50 reads a file a second); with 250 ms (and a
round's batches summarized together) 0.075 cores (38.5 µs, 4 reads a file a second; rsyslog 14). A
lone line after a quiet spell is still read at once (an empty read does not rest a file), and a
backlog or a file written before the agent saw it is read straight to its end, so only a
trickle's second and later lines wait, at most ``tail_interval`` on top of the batch latency.

Parsing runs in ``parse_workers`` worker processes (:mod:`.parse_pool`) when that is more than 1:
by default one per CPU the agent may run on (its affinity mask and its cgroup's CPU quota, i.e.
systemd's ``CPUAffinity=`` and ``CPUQuota=``) beyond the one its reading and shipping need, at most 4
(each is a process of its own, ~60 MB); on 2 CPUs or fewer that is 1: the reading thread parses, as
it always did, which measured faster there.

Requests are lz4-compressed by default. Measured on ranklog JSON lines (CPU-s per million lines):
lz4 costs the agent 0.27 to encode and the archive 0.12 to decode, zstd 0.47–0.73 and 0.28; lz4
bodies are 64 bytes per line against zstd's 32 (the lines themselves: 216). The agent's CPU is the
scarcer resource on a training node, so lz4; ``compression: zstd`` halves the bytes on the wire.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
from dataclasses import dataclass, field
from typing import ClassVar

from ..config_loader import log_format_field, log_level_field
from ..log.log_config import default_log_dir
from ..parse import zones
from ..parse.zones import check_zone

DEFAULT_TRAINING_METRICS = [
    "perf/throughput", "perf/time_per_step", "perf/mfu/actor", "perf/max_memory_allocated_gb",
    "actor/pg_loss", "actor/grad_norm", "actor/entropy", "actor/lr", "actor/kl_loss", "actor/pg_clipfrac",
    "critic/vf_loss", "critic/grad_norm", "critic/score/mean", "critic/rewards/mean",
    "response_length/mean", "response_length/clip_ratio", "timing_s/step", "timing_s/gen",
    "training/loss", "training/lr", "training/grad_norm", "loss", "lr", "grad_norm",
    "tokens_per_second", "samples_per_second", "throughput",
]
PRESETS = ("ranklog", "ray", "torchrun", "verl")
MAX_DEFAULT_PARSE_WORKERS = 4


def allowed_cpus(cgroup_root: str = "/sys/fs/cgroup") -> int:
    """CPUs this process may use: its affinity mask, capped by its cgroup v2 CPU quota (``cpu.max``)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        with open("/proc/self/cgroup", encoding="ascii") as handle:
            group = next((line.split(":", 2)[2].strip() for line in handle if line.startswith("0::")), None)
        if group is not None:
            with open(os.path.join(cgroup_root, group.lstrip("/"), "cpu.max"), encoding="ascii") as handle:
                quota, period = handle.read().split()
            if quota != "max":
                cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError, IndexError):
        pass
    return max(1, cpus)


def default_parse_workers() -> int:
    """One worker per allowed CPU beyond the one the reading/shipping process needs, at most 4; 1 (the
    reading thread parses) on 2 CPUs or fewer: there a second worker gains little on one hot file
    (bench_agent.py, agent alone: 1.08–1.10×) and 1.5–1.7× on four only by taking both cores, which
    a node's own work (or the archive beside it) needs."""
    return max(1, min(allowed_cpus() - 1, MAX_DEFAULT_PARSE_WORKERS))


def _split_source(value: object) -> SourceSpec:
    """A source from YAML (mapping) or a flag (`GLOB[:FORMAT]`)."""
    if isinstance(value, SourceSpec):
        return value
    if isinstance(value, dict):
        unknown = set(value) - {f.name for f in dataclasses.fields(SourceSpec)}
        if unknown:
            raise ValueError(f"unknown source key(s) {sorted(unknown)} (known: glob, format, options, exclude)")
        if not value.get("glob"):
            raise ValueError("a source needs a 'glob'")
        return SourceSpec(glob=str(value["glob"]), format=str(value.get("format") or "auto"),
                          options=dict(value.get("options") or {}), exclude=list(value.get("exclude") or []))
    text = str(value)
    glob_part, sep, fmt = text.rpartition(":")
    # A colon inside the glob (rare) is kept: only a trailing `:word` is a format.
    if sep and fmt and "/" not in fmt and "*" not in fmt:
        return SourceSpec(glob=glob_part, format=fmt)
    return SourceSpec(glob=text)


def _glob_problem(spec: SourceSpec) -> str | None:
    """Why a source's glob (or exclude list) cannot be used as it is written."""
    if not spec.glob.strip():
        return "glob: empty"
    if not os.path.isabs(spec.glob):
        return (f"glob: {spec.glob!r} is relative; the agent's working directory is not yours (systemd starts "
                "it in /): write the absolute path")
    if not all(isinstance(item, str) and item for item in spec.exclude):
        return f"exclude: expected a list of glob patterns, got {spec.exclude!r}"
    return None


@dataclass
class SourceSpec:
    """Files matching `glob` (recursive `**` allowed) read with `format` (`auto` = recognise by name/layout)."""

    glob: str
    format: str = "auto"
    options: dict = field(default_factory=dict)
    exclude: list = field(default_factory=list)


def default_host() -> str:
    return socket.gethostname()


def default_ip() -> str:
    """The address this node uses for outbound traffic (a UDP connect sends no packet), else loopback."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("10.255.255.255", 1))
            return sock.getsockname()[0]
    except OSError:
        return "127.0.0.1"


@dataclass
class AgentConfig:
    ENV_PREFIX: ClassVar[str] = "RANKLOG_AGENT"  # every key also from RANKLOG_AGENT_<KEY> (ranklog.config_loader)
    SECTION: ClassVar[str] = "agent"  # a file may hold the keys under `agent:`

    archive: list[str] = field(default_factory=list, metadata={"help": "archive base URLs (comma-separated)"})
    token_file: str = field(default="", metadata={"help": "file whose first line starts with the bearer token"})
    state_dir: str = field(default="/var/lib/ranklog-agent", metadata={"help": "checkpoints live here"})
    metrics_listen: str = field(default="127.0.0.1:9465", metadata={"help": "HOST:PORT of /metrics ('' = off)"})
    preset: list[str] = field(default_factory=list, metadata={"help": f"presets: {', '.join(PRESETS)}"})
    source: list[str] = field(default_factory=list, metadata={"help": "extra sources 'GLOB[:FORMAT]'", "flag": True})
    sources: list[SourceSpec] = field(default_factory=list, metadata={
        "parse": lambda v: [_split_source(x) for x in ([v] if isinstance(v, (str, dict)) else v)],
        "help": "sources as mappings {glob, format, options, exclude} (YAML / environment only)"})
    host: str = field(default_factory=default_host, metadata={
        "help": "node name stamped on records (default: this host's name)", "show_default": False})
    ip: str = field(default_factory=default_ip, metadata={
        "help": "node address stamped on records (default: the address of the outbound route)", "show_default": False})
    ranklog_log_dir: str = field(default_factory=lambda: os.environ.get("RANKLOG_LOG_DIR") or default_log_dir(),
                                 metadata={"help": "root of the ranklog preset: where the ranklog logger and `ranklog "
                                                   "run` write (default: $RANKLOG_LOG_DIR, else /var/log/ranklog where "
                                                   "it exists, else $TMPDIR/ranklog or /tmp/ranklog)",
                                           "show_default": False})
    tz: str = field(default="", metadata={
        "help": "zone of times printed without one (default: this machine's; a source's options.timezone "
                "wins; see docs/parsing.md)", "show_default": False})
    ray_root: str = field(default="/tmp/ray", metadata={"help": "root of the ray preset (session_*/logs below)"})
    torchrun_log_dirs: list[str] = field(default_factory=lambda: ["/var/log/torchrun"],
                                         metadata={"help": "torchrun --log-dir roots of the torchrun preset"})
    verl_log_dirs: list[str] = field(default_factory=lambda: ["/var/log/verl"],
                                     metadata={"help": "roots of the verl preset (console logs, metrics JSONL)"})
    batch_bytes: int = field(default=4_000_000, metadata={"unit": "size", "help": "ship when a batch has this many raw bytes"})
    batch_latency: float = field(default=0.25, metadata={"unit": "duration", "help": "ship a partial batch after this long"})
    read_chunk: int = field(default=8_000_000, metadata={"unit": "size", "help": "bytes read from one file per turn"})
    max_unacked_bytes: int = field(default=64_000_000, metadata={"unit": "size", "help": "pause reading above this"})
    poll_interval: float = field(default=0.25, metadata={"unit": "duration", "help": "discovery/stat poll period"})
    tail_interval: float = field(default=0.25, metadata={
        "unit": "duration", "help": "read a file being written again this long after a read reached its end (0: at once)"})
    idle_final: float = field(default=0.5, metadata={"unit": "duration", "help": "flush a pending record after this quiet time"})
    rotate_grace: float = field(default=2.0, metadata={"unit": "duration", "help": "keep a rotated file this long after EOF"})
    checkpoint_interval: float = field(default=0.5, metadata={"unit": "duration", "help": "max checkpoint write rate"})
    request_timeout: float = field(default=30.0, metadata={"unit": "duration", "help": "give up on one request after"})
    backoff_initial: float = field(default=0.25, metadata={"unit": "duration", "help": "first retry delay after a failure"})
    backoff_max: float = field(default=30.0, metadata={"unit": "duration", "help": "longest retry delay (doubling from the first)"})
    unauthorized_retry: float = field(default=60.0, metadata={"unit": "duration", "help": "re-try a 401 endpoint after"})
    senders: int = field(default=2, metadata={"help": "concurrent requests in flight"})
    parse_workers: int = field(default_factory=default_parse_workers, metadata={
        "help": "parse worker processes (1: parse in the reading thread; default: the CPUs the agent may use "
                f"minus one, at least 1, at most {MAX_DEFAULT_PARSE_WORKERS})", "show_default": False})
    compression: str = field(default="lz4", metadata={"choices": ("lz4", "zstd"),
                                                      "help": "Arrow IPC buffer codec of requests"})
    tls_ca: str = field(default="", metadata={"help": "CA bundle to verify the archive's certificate"})
    tls_verify: bool = field(default=True, metadata={"help": "verify the archive's TLS certificate"})
    max_jobs: int = field(default=32, metadata={"help": "label budget: distinct training_job label values"})
    max_ranks: int = field(default=8192, metadata={"help": "label budget: distinct rank values"})
    max_metric_names: int = field(default=64, metadata={"help": "label budget: training metric names"})
    training_metrics: list[str] = field(default_factory=lambda: list(DEFAULT_TRAINING_METRICS),
                                        metadata={"help": "allow-listed training metric names"})
    stall_timeout: float = field(default=10.0, metadata={
        "unit": "duration", "help": "a read or stat of a file on a network/FUSE mount that has not returned after "
                                    "this long marks the file stuck (reported; the other files go on)"})
    shutdown_timeout: float = field(default=10.0, metadata={"unit": "duration", "help": "ship what is read on exit for up to"})
    suspect_push: bool = field(default=True, metadata={
        "help": "push each job's failure lines to an archive's /v1/alerts at once (the verdict without a scrape)"})
    suspect_url: str = field(default="", metadata={
        "help": "the archive that sends verdicts (default: the first --archive URL; the one Alertmanager calls)"})
    suspect_interval: float = field(default=10.0, metadata={
        "unit": "duration", "help": "at most one suspect per job this often (the archive re-triages on each)"})
    log_level: str = log_level_field("agent")
    log_format: str = log_format_field("agent")
    # The config key each entry of `sources` came from (sources[i] from YAML, source[j] from flags).
    source_keys: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def validate(self) -> None:
        if not self.archive:
            raise ValueError("archive: at least one archive URL is required")
        for url in self.archive:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"archive: {url!r} is not an http(s) URL")
        if self.suspect_url and not self.suspect_url.startswith(("http://", "https://")):
            raise ValueError(f"suspect_url: {self.suspect_url!r} is not an http(s) URL")
        if self.suspect_interval < 0:
            raise ValueError("suspect_interval: must not be negative")
        if not self.token_file:
            raise ValueError("token_file: required")
        if self.metrics_listen:
            port = self.metrics_listen.rpartition(":")[2]
            if ":" not in self.metrics_listen or not port.isdigit() or int(port) > 65535:
                raise ValueError(f"metrics_listen: {self.metrics_listen!r} is not HOST:PORT")
        for key in ("batch_bytes", "read_chunk", "max_unacked_bytes", "senders"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key}: must be positive")
        if isinstance(self.parse_workers, bool) or not isinstance(self.parse_workers, int) or self.parse_workers < 1:
            raise ValueError(f"parse_workers: must be a whole number of processes ≥ 1 (got {self.parse_workers!r}; "
                             "1 parses in the reading thread, leave it unset for one per allowed CPU beyond the first)")
        flagged = [_split_source(text) for text in self.source]
        self.source_keys = [f"sources[{i}]" for i in range(len(self.sources))] + [f"source[{j}]" for j in range(len(flagged))]
        self.sources = [*self.sources, *flagged]
        self.source = []
        if self.tz:
            check_zone(self.tz, "tz")
        for i, spec in enumerate(self.sources):
            if zones.OPTION in spec.options:
                check_zone(str(spec.options[zones.OPTION]), f"sources[{i}].options.{zones.OPTION}")
        if not self.sources and not self.preset:
            raise ValueError("sources: give at least one --source or --preset")

    def source_problems(self) -> list[tuple[str, str]]:
        """(config key, why) of every source and preset that cannot be read as configured: an unknown
        format or preset, options the format's parser refuses, a relative or empty glob. ``ranklog
        check-config`` fails on any; the agent skips them (one error line, a metric, an alert each)
        and ships the other sources (:mod:`ranklog.parse.source_check`)."""
        from ..parse.source_check import source_problem

        found = []
        for key, spec in zip(self.source_keys or [f"sources[{i}]" for i in range(len(self.sources))],
                             self.sources, strict=True):
            why = _glob_problem(spec) or source_problem(spec.format, spec.options)
            if why:
                found.append((key, f"{key}.{why}"))
        found += [(f"preset:{name}", f"preset: unknown preset {name!r} (known: {', '.join(PRESETS)})")
                  for name in self.preset if name not in PRESETS]
        return found

    def skip(self, keys: set[str]) -> None:
        """Drop the sources and presets named by `keys` (as :meth:`source_problems` names them)."""
        kept = [(key, spec) for key, spec in zip(self.source_keys, self.sources, strict=True) if key not in keys]
        self.source_keys, self.sources = [key for key, _ in kept], [spec for _, spec in kept]
        self.preset = [name for name in self.preset if f"preset:{name}" not in keys]

    def token(self) -> str:
        """The first field of the first non-empty, non-comment line of the token file (re-read on
        demand: tokens rotate). The archive's ``TOKEN IDENTITY HOST…`` line works here as is."""
        try:
            with open(self.token_file, encoding="utf-8") as handle:
                for line in handle:
                    if line.strip() and not line.lstrip().startswith("#"):
                        return line.split()[0]
        except OSError as exc:
            raise ValueError(f"token_file: cannot read {self.token_file}: {exc.strerror}") from None
        raise ValueError(f"token_file: {self.token_file} holds no token")
