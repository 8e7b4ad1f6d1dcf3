"""Pull out of millions of records only what triage needs, inside DuckDB.

Triage never materialises the whole job in Python. Two scans do the work:

- *incidents*: records at WARNING or above, records with an exception, records without a level
  (``print`` output, C++ glog lines: UNKNOWN) whose text contains a failure keyword, and verl
  console metrics (INFO) with a non-finite value. Per rank at most the first and last
  :data:`INCIDENTS_PER_RANK` of the error-like ones and the first :data:`WARNINGS_PER_RANK` plain
  warnings are kept, so a rank that logs a warning every step cannot drown the one OOM.
  Decision: other INFO/DEBUG messages are not text-searched. Reading every INFO message would
  make triage of a 10 M-record archive several times slower, and a failure logged at INFO by a
  logger (not printed, not raised) is rare; what matters (tracebacks, OOMs, NCCL lines) comes
  with ERROR, an exception, or no level at all.
- *summary*: per (job, host, rank, local_rank, pid): record count, first/last time, highest step,
  role; jobs, hosts and ranks all come from this one aggregate. When some records lack their rank
  or host, a second aggregate per identity key (:data:`ranklog.source_identity.KEY`: source, host,
  pid, local rank, rank, role) gives the observations the identity rules run on
  (:mod:`ranklog.source_identity`, with the evidence only a record's text gives, :mod:`.identity`,
  and a local archive's identity map); what they lend is joined into the records' view, and the
  summary is taken again over it (its step buckets need the lent ranks). The last lines of a
  rank are fetched afterwards, only for the rank the verdict names (a time-pruned query).

The same SQL runs over a Parquet archive on this machine (only the hour partitions of the time
range are listed, only the needed columns are read), over a log directory parsed on the fly, over
any Arrow table, and over what a remote archive returns.

Jobs. ``--job X`` judges the records of job X only: a record without a job id is taken in only when
its process (host and pid) names X on other records (:func:`_jobs_by_pid` lends the job), never because
it has no job. Without ``--job`` every job of the range is judged on its own (:func:`gather` returns
one :class:`TriageInput` per job): its own records, plus the job-less ones (plain-text layouts:
torchrun's console, Ray's files, ``print`` output) that fall within its time span (a minute either
side: the launcher starts before and ends after its workers). Job-less records outside every job's
span are judged as one more group (``job`` None), as is everything when no record names a job.
Jobs that merely overlap in time are not merged: concurrent jobs share clusters and archives.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..agent_outages import AgentOutage
from ..parse.steps import TEXT_STEP
from ..record import ANNOTATION_FORMAT, ns_to_ts
from ..source_identity import Group as Observation
from ..source_identity import (
    Lent,
    fill_sql,
    groups_of,
    known_host,
    lent_table,
    map_files,
    read_map,
    resolve,
    role_family,
)
from .flight_recorder import LOGGER as FR_LOGGER
from .identity import evidence, worker_pids

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from .flight_recorder import Stuck
    from .progress import Progress

INCIDENTS_PER_RANK = 100
WARNINGS_PER_RANK = 5
LAST_LINES = 10
SECOND_NS = 1_000_000_000
TAIL_WINDOW_NS = 600 * SECOND_NS
# A cheap RE2 prefilter on INFO/UNKNOWN/DEBUG text; signatures.match() decides afterwards. A test
# checks that every signature example of the scenario library passes it.
KEYWORDS = (
    r"Error|Exception|Traceback|error:|CUDA|NCCL|\b[Nn]a[Nn]\b|\b-?inf\b|not finite|non-finite|[Kk]illed"
    r"|[Tt]imed out|[Tt]imeout|died|dead|OOM|out of memory|Connection (?:closed|reset)|SIG[A-Z]{3,4}\b|exitcode"
)
# What launchers print when the job ended: torchelastic's agent, Ray's job manager, Ray Train's
# controller, a process reporting its exit status. Only records without a rank are looked at.
LAUNCHER_SUCCEEDED = (r"WorkerState\.SUCCEEDED|worker group successfully finished|Job '[^']+' succeeded"
                      r"|[Tt]raining (?:run )?(?:finished|completed) successfully|exited with (?:exit )?(?:code|status) 0\b")
LAUNCHER_FAILED = (r"WorkerState\.FAILED|ChildFailedError|Job '[^']+' failed|[Tt]raining (?:run )?failed"
                   r"|exited with (?:exit )?(?:code|status) -?[1-9]")
# ranklog's own records about the logs, kept out of the evidence (TriageData._own_records)
OWN_RECORDS = {"verdicts": f"format <> '{ANNOTATION_FORMAT}'",
               "flight recorder": f"logger IS DISTINCT FROM '{FR_LOGGER}'"}
# A step record that says its step is over: what the rank does next belongs to the next step.
STEP_OVER = r"(?i)\b(?:done|finished|completed?|ended|end of)\b"
# DuckDB reads only the columns a query uses.
NONFINITE = r"(?i)\b(?:nan|-?inf)\b"  # non-finite metrics in verl console lines (INFO)
COLUMNS = ("ts", "level", "msg", "exc", "logger", "host", "rank", "local_rank", "pid", "role", "job", "step",
           "source", "source_id", "offset", "format", "attrs")
_LINE_SELECT = ("epoch_ns(ts) AS ts_ns, level, msg, exc, host, rank, pid, role, step, source, \"offset\", format")


@dataclass(frozen=True)
class Line:
    """One record as triage shows it."""

    ts: int  # ns since the epoch, as the writer's clock saw it
    level: str
    msg: str
    host: str
    rank: int | None
    exc: str | None = None
    pid: int | None = None
    role: str | None = None
    step: int | None = None
    source: str | None = None
    offset: int | None = None
    format: str | None = None

    @property
    def text(self) -> str:
        """Message and exception together (where signatures are searched)."""
        return self.msg if not self.exc else f"{self.msg}\n{self.exc}"


@dataclass
class Process:
    """Everything triage knows about one rank (or the rank-less processes of one host)."""

    host: str
    rank: int | None
    records: int
    first_ts: int
    last_ts: int
    last_step: int | None
    pids: tuple[int, ...]
    role: str | None


@dataclass
class TriageInput:
    """What the evidence stage works on; `data` can answer follow-up questions (lines before X)."""

    job: str | None
    jobs: list[str]
    incidents: list[Line]
    processes: list[Process]
    notes: list[str]
    data: TriageData
    timings: dict[str, float] = field(default_factory=dict)
    worker_pids: dict[str, int] = field(default_factory=dict)  # Ray worker id -> pid (see .identity)
    selection: Selection | None = None  # which records (TriageData.select) this input was gathered from
    single_host: bool = False
    start_ns: int | None = None
    end_ns: int | None = None
    progress: Progress | None = None  # the step buckets of this selection's processes (.progress)
    stuck: list[Stuck] = field(default_factory=list)  # what its flight recorder dumps say
    launcher: list[tuple[str, bool, str]] = field(default_factory=list)  # how its launchers said it ended
    outages: list[AgentOutage] = field(default_factory=list)  # its hosts' agents down (TriageData.agent_outages)


class TriageData:
    """A DuckDB view ``records`` over the selected records of one source."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, label: str) -> None:
        self.con = connection
        self.label = label
        self._selected = False
        self.progress: Progress | None = None  # the step buckets of the last summary scan
        self._own: list[str] | None = None
        # what an archive's identity map adds to the records' own observations (its agents' notices)
        self.mapped: list[Observation] = []
        # when agents of the source's hosts were down (the archive's verdict service knows; a folder has none)
        self.agent_outages: list[AgentOutage] = []

    # -- construction --------------------------------------------------------------------------------
    @classmethod
    def from_table(cls, table: pa.Table, label: str = "records") -> TriageData:

        con = _connect()
        con.register("base_records", _with_columns(table))
        con.execute("CREATE VIEW all_records AS SELECT * FROM base_records")
        return cls(con, label)

    @classmethod
    def from_parquet(cls, paths: Sequence[str], label: str, dedup: bool = False) -> TriageData:
        """Over archive files; `dedup` drops copies of one batch stored by two archives (failover)."""
        con = _connect()
        if paths:
            files = ", ".join(_sql_string(p) for p in paths)
            once = ' QUALIFY row_number() OVER (PARTITION BY source_id, "offset") = 1' if dedup else ""
            con.execute(f"CREATE VIEW all_records AS SELECT {', '.join(_quoted(c) for c in COLUMNS)} "
                        f"FROM read_parquet([{files}], union_by_name=true, hive_partitioning=false){once}")
        else:
            from ..record import arrow_schema

            con.register("base_records", arrow_schema().empty_table())
            con.execute("CREATE VIEW all_records AS SELECT * FROM base_records")
        return cls(con, label)

    @classmethod
    def from_source(cls, source: Any, start_ns: int | None = None, end_ns: int | None = None) -> TriageData:
        """From a :func:`ranklog.query.sources.open_source` source (archive dir/URI/URL or log dir).

        A local archive is read by DuckDB straight from its Parquet files; a log directory, object
        storage, a remote archive and an archive scanned on a Ray cluster (``--engine ray``: the files
        are read and filtered by Ray tasks, the analysis runs here) go through the query engine.
        """
        if getattr(source, "kind", None) == "archive" and getattr(source, "local_root", None) is not None \
                and getattr(source, "runner", None) is None:
            files = source.list_files(start_ns, end_ns)
            writers = {f.archive_id for f in files}
            data = cls.from_parquet([f.path for f in files], source.describe(), dedup=len(writers) > 1)
            mapped = read_map(source.filesystem, map_files(source.filesystem, source.root))
            data.mapped = groups_of(mapped) if mapped is not None else []
            return data
        from ..query.engine import read
        from ..query.filters import QuerySpec

        spec = QuerySpec(start_ns=start_ns, end_ns=end_ns, order=())
        return cls.from_table(read(source, spec, columns=list(COLUMNS)), source.describe())

    # -- selection ----------------------------------------------------------------------------------
    def select(self, selection: Selection | None = None, start_ns: int | None = None, end_ns: int | None = None,
               single_host: bool = False) -> None:
        """Define the view ``records``: the records one verdict judges (:class:`Selection`) in a time range.

        In a single-node job a record without a global rank but with a local rank (a torchrun
        ``--log-dir`` file) gets the local rank as its rank: on one node they are the same.
        """
        filters = self._filters(start_ns, end_ns)
        if selection is not None and selection.where():
            filters.append(selection.where())
        where = ("WHERE " + " AND ".join(filters)) if filters else ""
        rank = "coalesce(rank, local_rank)" if single_host else "rank"
        self.con.execute(f"CREATE OR REPLACE VIEW records AS SELECT * REPLACE ({rank} AS rank) "
                         f"FROM all_records {where}")
        self._selected = True

    @staticmethod
    def where(*clauses: str) -> str:
        return ("WHERE " + " AND ".join(clauses)) if clauses else ""

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Run `sql` over the view ``records`` (see :meth:`select`) and fetch all rows."""
        self._ensure_selected()
        return self.con.execute(sql, list(params)).fetchall()

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        self._ensure_selected()
        return self.con.execute(sql, list(params)).fetch_arrow_table()

    def _ensure_selected(self) -> None:
        if not self._selected:
            self.select()
            self._selected = True

    # -- what triage asks ---------------------------------------------------------------------------
    def summary(self, start_ns: int | None = None, end_ns: int | None = None, view: str = "all_records") -> list[Group]:
        """One aggregate scan: per (job, host, rank, local_rank, pid) count, times, highest step, role.

        Jobs, hosts and per-rank statistics all come from it, so the archive is scanned once for
        them, before the job is chosen; the pids feed the identity join (:mod:`.identity`). The role
        is the fullest name the group's records give (a Ray actor's name over its class). The scan
        groups by step bucket too (:mod:`.progress`): :attr:`progress` holds those rows.
        """
        from .progress import PROGRESS_COLUMNS, Progress, duration_keys, progress_sql, roles_sql, step_width

        filters = self._filters(start_ns, end_ns)
        where = ("WHERE " + " AND ".join(filters)) if filters else ""
        width = step_width(self.con, view, where)
        keys = duration_keys(self.con, view, where)
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE progress AS {progress_sql(view, where, width, keys)}")
        rows = self.con.execute(f"""
            WITH roles AS ({roles_sql(view, where)})
            SELECT p.job, p.host, p.rank, p.local_rank, sum(p.n)::BIGINT, min(p.first_ns), max(p.last_ns),
                   max(p.step_hi), p.pid, any_value(r.role)
            FROM progress p LEFT JOIN roles r
              ON p.job IS NOT DISTINCT FROM r.job AND p.host IS NOT DISTINCT FROM r.host
             AND p.rank IS NOT DISTINCT FROM r.rank AND p.local_rank IS NOT DISTINCT FROM r.local_rank
             AND p.pid IS NOT DISTINCT FROM r.pid
            GROUP BY p.job, p.host, p.rank, p.local_rank, p.pid""").fetchall()
        table = self.con.sql(f"SELECT {', '.join(PROGRESS_COLUMNS)} FROM progress WHERE bucket IS NOT NULL "
                             "ORDER BY host, rank, local_rank, bucket").to_arrow_table()
        self.progress = Progress(table, width, keys)
        return [Group(*row[:8], () if row[8] is None else (row[8],), row[9]) for row in rows]

    def observations(self, start_ns: int | None = None, end_ns: int | None = None) -> list[Summary]:
        """One aggregate scan: per identity key and job, the records' count, first/last time and
        highest step (see the module docstring)."""
        filters = self._filters(start_ns, end_ns)
        sql = f"""
            SELECT source_id, host, pid, local_rank, rank, role, any_value(source), any_value(format), job,
                   min(epoch_ns(ts)), max(epoch_ns(ts)), count(*), max(step)
            FROM all_records {("WHERE " + " AND ".join(filters)) if filters else ""}
            GROUP BY source_id, host, pid, local_rank, rank, role, job
        """
        return [Summary(Observation(*row[:12]), row[12]) for row in self.con.execute(sql).fetchall()]

    def join_identity(self, lent: dict[tuple, Lent]) -> None:
        """Lend rank, role, pid and host across sources (:mod:`ranklog.source_identity`):
        ``all_records`` becomes the joined view over the records as read."""
        self.con.register("identity_lent", lent_table(lent).table)
        self.con.execute("ALTER VIEW all_records RENAME TO read_records")
        self.con.execute(f"CREATE VIEW all_records AS {fill_sql('read_records', 'identity_lent')}")

    def join_jobs(self, jobs: dict[tuple[str, int], str]) -> None:
        """Lend each (host, pid) its one job (:func:`_jobs_by_pid`): ``all_records`` becomes the
        joined view over the records (identities lent first)."""
        import pyarrow as pa

        keys = sorted(jobs)
        self.con.register("identity_job", pa.table({
            "host": pa.array([k[0] for k in keys], pa.string()), "pid": pa.array([k[1] for k in keys], pa.int32()),
            "job": pa.array([jobs[k] for k in keys], pa.string())}))
        self.con.execute("ALTER VIEW all_records RENAME TO job_less_records")
        self.con.execute("CREATE VIEW all_records AS SELECT r.* REPLACE (coalesce(r.job, j.job) AS job) "
                         "FROM job_less_records r LEFT JOIN identity_job j ON r.job IS NULL AND r.host = j.host "
                         "AND r.pid = j.pid")

    def incidents(self) -> list[Line]:
        """Warning-or-worse and failure-looking records (see the module docstring), capped per rank.

        Written as a UNION of selective scans so that each part filters on `level` / `exc` first:
        DuckDB then decodes `msg` only for the rows that can matter, never for the millions of
        INFO lines (measured: 5x faster than one OR-ed predicate).
        """
        keywords = _sql_string(KEYWORDS)
        sql = f"""
            WITH picked AS (
                SELECT *, level <> 'WARNING' OR regexp_matches(msg, {keywords}) AS important FROM records
                WHERE level IN ('WARNING', 'ERROR', 'CRITICAL')
                UNION ALL
                SELECT *, true FROM records WHERE level IN ('UNKNOWN', 'INFO', 'DEBUG') AND exc IS NOT NULL
                UNION ALL
                SELECT *, true FROM records
                WHERE level = 'UNKNOWN' AND exc IS NULL AND regexp_matches(msg, {keywords})
                UNION ALL
                SELECT *, true FROM records
                WHERE level = 'INFO' AND format LIKE 'verl%' AND exc IS NULL AND regexp_matches(msg, {_sql_string(NONFINITE)})
            ), ordered AS (
                SELECT *,
                    row_number() OVER (PARTITION BY host, rank, important ORDER BY ts, source, "offset") AS first_n,
                    row_number() OVER (PARTITION BY host, rank, important ORDER BY ts DESC, source DESC,
                                       "offset" DESC) AS last_n
                FROM picked
            )
            SELECT {_LINE_SELECT} FROM ordered
            WHERE (important AND (first_n <= {INCIDENTS_PER_RANK} OR last_n <= {INCIDENTS_PER_RANK}))
               OR (NOT important AND first_n <= {WARNINGS_PER_RANK})
            ORDER BY ts, source, "offset"
        """
        return [_line(row) for row in self.query(sql)]

    def has_flight_records(self) -> bool:
        """Whether any record is a flight recorder dump (one cheap look: the logger column's statistics)."""
        return OWN_RECORDS["flight recorder"] in self._own_records()

    def _own_records(self) -> list[str]:
        """The conditions that leave out ranklog's own records about the logs — triage's verdicts
        (``--annotate``: a verdict is no evidence) and flight recorder dumps (read apart,
        :mod:`.flight_recorder`) — for the kinds the data holds (one cheap look each, answered by the
        columns' statistics when there are none: no predicate is paid for on every record)."""
        if self._own is None:
            self._own = [condition for kind, condition in OWN_RECORDS.items() if self.con.execute(
                f"SELECT 1 FROM all_records WHERE NOT ({condition}) LIMIT 1").fetchall()]
        return self._own

    def _filters(self, start_ns: int | None, end_ns: int | None) -> list[str]:
        return [*self._own_records(), *_time_range(start_ns, end_ns)]

    def flight_recorder(self, selection: Selection | None, start_ns: int | None, end_ns: int | None) -> list[Stuck]:
        """What the selection's flight recorder dumps say (:mod:`.flight_recorder`)."""
        from .flight_recorder import stuck_groups

        where = [*_time_range(start_ns, end_ns), *([selection.where()] if selection and selection.where() else [])]
        return stuck_groups(self, " AND ".join(where))

    def launcher_reports(self) -> list[tuple[str, bool, str]]:
        """(host, succeeded, line) for each report of a launcher on how the job ended, oldest first
        (records without a rank only: a rank's own text never speaks for the job)."""
        rows = self.query(f"""
            SELECT host, regexp_matches(msg, {_sql_string(LAUNCHER_SUCCEEDED)}) AS ok, msg FROM records
            WHERE rank IS NULL AND (regexp_matches(msg, {_sql_string(LAUNCHER_SUCCEEDED)})
                                    OR regexp_matches(msg, {_sql_string(LAUNCHER_FAILED)}))
            ORDER BY ts LIMIT 1000""")
        return [(host or "?", bool(ok), (msg or "").splitlines()[0][:200]) for host, ok, msg in rows]

    def lines_before(self, line: Line, count: int = LAST_LINES) -> list[Line]:
        """The `count` records the same rank (same host) wrote just before `line`, oldest first."""
        return self._tail(line.host, line.rank, line.ts, count, exclude=line)

    def step_at(self, line: Line) -> int | None:
        """The training step `line`'s rank was at: the highest step its records named up to `line` —
        the next one when that step's last record said it was over (``step 5 done``, ``finished
        step 5``): the rank failed in the step after it (loading its batch, saving its checkpoint).

        torchelastic's ``error.json`` stamps whole seconds, so for it "up to" reaches the end of
        that second (the step line the rank wrote just before dying is in it).
        """
        until = line.ts + (SECOND_NS - 1 if line.format == "torchrun-error" else 0)
        # the step column, or the step a message names when its format left the column empty (JSON lines)
        step = f"coalesce(step, TRY_CAST(regexp_extract(msg, {_sql_string(TEXT_STEP)}, 1) AS BIGINT))"
        rows = self.query(f"""
            SELECT {step} AS s, regexp_matches(msg, {_sql_string(STEP_OVER)}) FROM records
            WHERE host = ? AND rank IS NOT DISTINCT FROM ? AND s IS NOT NULL
              AND ts <= {_ts_literal(until + 1000)} AND ts >= {_ts_literal(until - TAIL_WINDOW_NS)}
            ORDER BY s DESC, ts DESC, "offset" DESC LIMIT 1""", [line.host, line.rank])
        if not rows:
            return None
        step, over = rows[0]
        return step + 1 if over else step

    def first_at_step(self, host: str, rank: int, step: int) -> Line | None:
        """The first record `rank` on `host` wrote at training step `step` (or the first after it)."""
        rows = self.query(f"""
            SELECT {_LINE_SELECT} FROM records WHERE host = ? AND rank = ? AND step >= ?
            ORDER BY step, ts, source, "offset" LIMIT 1""", [host, rank, step])
        return _line(rows[0]) if rows else None

    def last_lines(self, process: Process, count: int = LAST_LINES) -> list[Line]:
        """The last `count` records of a rank (or of the rank-less processes of a host), oldest first."""
        return self._tail(process.host, process.rank, process.last_ts, count)

    def _tail(self, host: str, rank: int | None, until_ns: int, count: int, exclude: Line | None = None) -> list[Line]:
        # Look back 10 minutes first (row groups outside are skipped by their ts statistics), then
        # everything if that was not enough.
        for since in (until_ns - TAIL_WINDOW_NS, None):
            lower = f"AND ts >= {_ts_literal(since)}" if since is not None else ""
            sql = f"""
                SELECT {_LINE_SELECT} FROM records
                WHERE host = ? AND rank IS NOT DISTINCT FROM ? AND ts <= {_ts_literal(until_ns + 1000)} {lower}
                ORDER BY ts DESC, source DESC, "offset" DESC LIMIT ?
            """
            rows = [_line(row) for row in self.query(sql, [host, rank, count + 6]) if row[0] <= until_ns]
            if len(rows) >= count + 1:
                break
        if exclude is not None:
            # Not the record itself, nor what was stamped in the same instant but written after it.
            rows = [r for r in rows if not (r.source == exclude.source and r.offset == exclude.offset)
                    and not (r.ts == exclude.ts and r.source == exclude.source
                             and (r.offset or 0) > (exclude.offset or 0))]
        return list(reversed(rows[:count]))


def gather(data: TriageData, job: str | None = None, start_ns: int | None = None,
           end_ns: int | None = None) -> list[TriageInput]:
    """One summary scan, the jobs to judge (see the module docstring), then an incidents scan per job:
    one :class:`TriageInput` per job, in the order of the jobs' newest records (newest first)."""
    started = time.perf_counter()
    groups = data.summary(start_ns, end_ns)
    timings = {"scan: ranks and jobs": time.perf_counter() - started}
    mark = time.perf_counter()
    lent: dict[tuple, Lent] = {}
    if any(g.rank is None or not known_host(g.host) for g in groups):
        # some records lack who wrote them: the observations per source, and what the rules lend
        observed = data.observations(start_ns, end_ns)
        found = [item.observation for item in observed]
        lent = resolve([*found, *data.mapped], evidence(data.con, "all_records", found))
        if lent:
            data.join_identity(lent)
            groups = _summary(observed, lent)
    jobs_lent = _jobs_by_pid(groups)
    if jobs_lent:
        data.join_jobs(jobs_lent)
    if lent or jobs_lent:  # the per-rank statistics and step buckets of the joined records
        groups = data.summary(start_ns, end_ns)
    workers = worker_pids(data.con, "all_records")
    timings["identity join"] = time.perf_counter() - mark
    jobs = _jobs(groups)
    job_names = [name for name, _ in jobs]
    if job is not None and job not in job_names:
        from ..errors import UserError

        known = ", ".join(job_names[:10]) or "none"
        raise UserError(f"job {job!r} not found in {data.label} (jobs: {known})")
    selections = [Selection(job)] if job is not None else _selections(groups)
    notes = _job_notes(selections, job_names) if job is None else []
    out = []
    for selection in selections:
        mine = groups if len(selections) == 1 and selection.job_less == ALL else None
        single_host = len({g.host for g in (mine if mine is not None else groups)}) <= 1
        data.select(selection, start_ns, end_ns, single_host)
        progress = data.progress
        if mine is None:  # several groups: what this one holds, counted over its own records
            mine = data.summary(view="records")
            progress = data.progress
            single_host = len({g.host for g in mine}) <= 1
            data.select(selection, start_ns, end_ns, single_host)
        mark = time.perf_counter()
        incidents = data.incidents()
        timings["scan: incidents"] = timings.get("scan: incidents", 0.0) + time.perf_counter() - mark
        stuck = data.flight_recorder(selection, start_ns, end_ns) if data.has_flight_records() else []
        launcher = data.launcher_reports()
        out.append(TriageInput(job=selection.job, jobs=job_names, incidents=incidents,
                               processes=_processes(mine, single_host), notes=list(notes), data=data,
                               timings=timings, worker_pids=workers, selection=selection,
                               single_host=single_host, progress=progress, stuck=stuck, launcher=launcher,
                               outages=list(data.agent_outages)))
    return out


ALL, SPAN, NONE, ONLY = "all", "span", "none", "only"
SPAN_MARGIN_NS = 60 * SECOND_NS  # job-less lines this close to a job's span belong to it (launcher start/exit)


@dataclass(frozen=True)
class Selection:
    """The records one verdict judges: a job's own records and which job-less records join them.

    ``job_less``: ``none`` (only the job's own: ``--job``), ``all`` (the range holds no job id at all),
    ``span`` (those within ``spans`` of the job), ``only`` (the job-less records outside every
    job's span: ``job`` is None and ``spans`` are the other jobs')."""

    job: str | None
    job_less: str = NONE
    spans: tuple[tuple[int, int], ...] = ()

    def where(self) -> str:
        inside = " OR ".join(f"ts BETWEEN {_ts_literal(a)} AND {_ts_literal(b)}" for a, b in self.spans)
        if self.job is None:
            if self.job_less == ONLY:
                return f"job IS NULL AND NOT ({inside})" if inside else "job IS NULL"
            return ""
        mine = f"job = {_sql_string(self.job)}"
        if self.job_less == ALL:
            return f"({mine} OR job IS NULL)"
        if self.job_less == SPAN and inside:
            return f"({mine} OR (job IS NULL AND ({inside})))"
        return mine


def _selections(groups: list[Group]) -> list[Selection]:
    """Every job of the range (newest first), and the job-less records no job's span takes in."""
    jobs = _jobs(groups)
    if not jobs or (len(jobs) == 1 and all(g.job is not None for g in groups)):
        return [Selection(jobs[0][0] if jobs else None, ALL)]  # nothing to tell apart
    spans: dict[str, tuple[int, int]] = {}
    for g in groups:
        if g.job is not None:
            low, high = spans.get(g.job, (g.first_ts, g.last_ts))
            spans[g.job] = (min(low, g.first_ts), max(high, g.last_ts))
    padded = {name: (low - SPAN_MARGIN_NS, high + SPAN_MARGIN_NS) for name, (low, high) in spans.items()}
    out = [Selection(name, SPAN, (padded[name],)) for name, _ in jobs]
    everywhere = tuple(padded.values())
    if any(g.job is None and not any(low <= g.first_ts and g.last_ts <= high for low, high in everywhere)
           for g in groups):
        out.append(Selection(None, ONLY, everywhere))
    return out


def _job_notes(selections: list[Selection], job_names: list[str]) -> list[str]:
    if len(job_names) <= 1:
        return []
    shown = ", ".join(job_names[:5]) + ("…" if len(job_names) > 5 else "")
    return [f"{len(job_names)} jobs in the data ({shown}): each is judged on its own (choose one with --job)"]


@dataclass(frozen=True)
class Summary:
    """One row of :meth:`TriageData.observations`: an observation and its records' highest step."""

    observation: Observation
    last_step: int | None


@dataclass(frozen=True)
class Group:
    """The records of one (job, host, rank, local rank, pid), identities lent."""

    job: str | None
    host: str
    rank: int | None
    local_rank: int | None
    records: int
    first_ts: int
    last_ts: int
    last_step: int | None
    pids: tuple[int, ...]  # the group's pid (one group per pid), empty when the records name none
    role: str | None


def _summary(observed: list[Summary], lent: dict[tuple, Lent]) -> list[Group]:
    """The observations with what was lent, regrouped by (job, host, rank, local rank, pid)."""
    merged: dict[tuple, list] = {}
    for item in observed:
        o = item.observation
        gained = lent.get(o.key, Lent())
        host = gained.host or o.host
        rank = o.rank if gained.rank is None else gained.rank
        local_rank = o.local_rank if gained.local_rank is None else gained.local_rank
        pid = o.pid if gained.pid is None else gained.pid
        role = gained.role or o.role
        key = (o.job, host, rank, local_rank, pid)
        entry = merged.get(key)
        if entry is None:
            merged[key] = [o.records, o.first_ns, o.last_ns, item.last_step, {role}]
            continue
        entry[0] += o.records
        entry[1] = min(entry[1], o.first_ns)
        entry[2] = max(entry[2], o.last_ns)
        entry[3] = max((step for step in (entry[3], item.last_step) if step is not None), default=None)
        entry[4].add(role)
    return [Group(job, host, rank, local_rank, records, first, last, step, () if pid is None else (pid,),
                  role_family(roles) or max((r for r in roles if r), key=len, default=None))
            for (job, host, rank, local_rank, pid), (records, first, last, step, roles) in merged.items()]


def _jobs_by_pid(groups: list[Group]) -> dict[tuple[str, int], str]:
    """(host, pid) → the one job its records name, for the pids that also have job-less records (a
    worker's ``print`` lines beside its logger's): ``--job`` and each job's verdict keep them."""
    named: dict[tuple[str, int], set[str]] = {}
    lacking: set[tuple[str, int]] = set()
    for g in groups:
        if not g.pids or not known_host(g.host):
            continue
        key = (g.host, g.pids[0])
        if g.job is None:
            lacking.add(key)
        else:
            named.setdefault(key, set()).add(g.job)
    return {key: next(iter(found)) for key, found in named.items() if len(found) == 1 and key in lacking}


def _jobs(groups: list[Group]) -> list[tuple[str, int]]:
    """(job, newest ts) for every job id, newest first."""
    newest: dict[str, int] = {}
    for g in groups:
        if g.job is not None:
            newest[g.job] = max(newest.get(g.job, g.last_ts), g.last_ts)
    return sorted(newest.items(), key=lambda item: -item[1])


def _processes(groups: list[Group], single_host: bool) -> list[Process]:
    """Merge summary rows into one :class:`Process` per (host, rank)."""
    merged: dict[tuple[str, int | None], list[Group]] = {}
    for g in groups:
        rank = g.rank if g.rank is not None or not single_host else g.local_rank
        merged.setdefault((g.host or "?", rank), []).append(g)
    out = []
    for (host, rank), parts in merged.items():
        newest = max(parts, key=lambda g: g.last_ts)
        out.append(Process(
            host=host, rank=rank, records=sum(g.records for g in parts), first_ts=min(g.first_ts for g in parts),
            last_ts=newest.last_ts, last_step=max((g.last_step for g in parts if g.last_step is not None), default=None),
            pids=tuple(sorted({pid for g in parts for pid in g.pids})),
            role=next((g.role for g in parts if g.role), None)))
    out.sort(key=lambda p: (p.rank is None, p.rank if p.rank is not None else 0, p.host))
    return out


def _time_range(start_ns: int | None, end_ns: int | None) -> list[str]:
    filters = []
    if start_ns is not None:
        filters.append(f"ts >= {_ts_literal(start_ns)}")
    if end_ns is not None:
        filters.append(f"ts < {_ts_literal(end_ns)}")
    return filters


def _connect() -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")  # naive timestamps in our SQL are UTC, whatever the machine's zone
    return con


def _line(row: Sequence[Any]) -> Line:
    ts, level, msg, exc, host, rank, pid, role, step, source, offset, fmt = row
    return Line(ts=int(ts), level=level or "UNKNOWN", msg=msg or "", host=host or "?", rank=rank, exc=exc, pid=pid,
                role=role, step=step, source=source, offset=offset, format=fmt)


def _with_columns(table: pa.Table) -> pa.Table:
    """The columns triage reads, adding null ones a foreign table lacks (schema order kept)."""
    import pyarrow as pa

    from ..record import arrow_schema

    schema = arrow_schema()
    columns = []
    for name in COLUMNS:
        if name in table.column_names:
            columns.append(table.column(name))
        else:
            columns.append(pa.nulls(table.num_rows, schema.field(name).type))
    return pa.table(columns, names=list(COLUMNS))


def _ts_literal(ns: int) -> str:
    """A timestamp literal comparable with `ts` that DuckDB pushes down to Parquet row-group
    statistics (a filter on ``epoch_ns(ts)`` is not pushed down and scans every row group).

    Rounded up to the stored microsecond: exact for ``ts >= t`` and ``ts < t`` (the bounds used)."""
    return f"make_timestamp({ns_to_ts(int(ns), ceil=True)})::TIMESTAMPTZ"


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quoted(name: str) -> str:
    return f'"{name}"'
