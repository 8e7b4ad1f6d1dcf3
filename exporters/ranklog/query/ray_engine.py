"""``--engine ray``: the archive scan's per-file work as Ray tasks on the user's Ray cluster.

Why Ray: a fleet's archive (30 days × 100k lines/s is ~260 billion records) is not one process's
scan, and the cluster the training already runs on is there. What runs where:

- The driver (the ``ranklog`` process) lists the files (partition pruning, the trace index), makes
  sure a search's severe-rows index of each day is built once (here, not by racing tasks), cuts
  the files into chunks (whole days when a search uses that index), submits one task per chunk
  and takes the results back in file order. De-duplication, sorting, the limit, the outputs and triage's analysis stay on
  the driver, unchanged, so every answer is the local engine's: same rows, same order.
- A task runs :func:`ranklog.query.engine.scan_files` over its chunk — pyarrow with the same filter
  and projection the local engine uses — with Arrow's CPU pool sized to the CPUs Ray gave it, and
  returns the matching record batches per partition and its node id.

Requirements and choices:

- ``ray`` (the ``ray`` extra) on the driver, the cluster's Ray version. The driver's own ranklog
  package is shipped to the workers as a runtime-env ``py_module``, so tasks run the same code as the
  driver; pyarrow must be installed on the workers (it is wherever Ray Data runs).
- A local archive root must be at the same path on every node (NFS or another shared mount): a
  task that cannot read it fails the query with one line saying so. ``s3://`` roots need nothing on
  the nodes: the driver resolves endpoint and credentials (:mod:`ranklog.object_store`) and tasks
  get the pyarrow filesystem object. The secret travels inside Ray's (pickled) task arguments,
  never in a log line, an error or an answer.
- The address comes from ``--ray_address`` or ``RAY_ADDRESS`` (``HOST:PORT`` of the head's GCS,
  ``ray://HOST:PORT`` for Ray Client, ``auto`` on a cluster node); without one the command refuses
  rather than start a private Ray instance.
- Memory: at most :attr:`RayRunner.in_flight` chunk results are pending (default two per CPU of the
  cluster); a limit that is reached cancels the rest.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from itertools import groupby
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import MissingExtraError, UserError

if TYPE_CHECKING:
    import pyarrow as pa

    from .filters import QuerySpec
    from .sources import ArchiveSource, DataFile

ENGINES = ("local", "ray")
FILES_PER_TASK = 8  # at most; fewer when that leaves too few tasks to keep every CPU busy
TASKS_PER_CPU = 4
CONNECT_TIMEOUT_S = 5.0
Partition = tuple[str, int]


def chunks_of(files: list[DataFile], per_task: int, whole_days: bool) -> list[list[DataFile]]:
    """`files` in order, cut into runs of about `per_task` files.

    `whole_days` (a search the severe-rows index serves): one run per day, whatever its size. A day's
    index hits are read once per search of that day and joined with each hour's first file, so a
    day split over tasks reads them once per task (measured in one process on bench_query (c): a
    day as one chunk 0.06 s, as three chunks of 8 files 0.21 s) and an hour split over two tasks
    would get its hits twice.
    """
    if not whole_days:
        return [files[first:first + per_task] for first in range(0, len(files), per_task)]
    return [list(day) for _, day in groupby(files, key=attrgetter("date"))]


def check_address(address: str) -> None:
    """Fail fast, in one line, when nothing listens at a ``HOST:PORT`` / ``ray://HOST:PORT`` address
    (Ray itself retries a wrong address for a long time before it gives up)."""
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise UserError(f"Ray address {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise UserError(f"cannot reach the Ray cluster at {address}: {reason} (is `ray start --head` running "
                        "there? give its GCS address HOST:PORT with --ray_address or RAY_ADDRESS)") from None


class RayRunner:
    """Runs :func:`~ranklog.query.engine.scan_files` / :func:`~ranklog.query.engine.count_rows` over
    chunks of an archive's files as Ray tasks; set as ``source.runner`` (see :func:`attach`).

    ``nodes`` counts the tasks each node ran (by Ray node id); ``summary()`` says it in one line.
    """

    def __init__(self, address: str, command: str = "query", files_per_task: int = FILES_PER_TASK,
                 in_flight: int | None = None) -> None:
        self.address = address
        self.command = command
        self.files_per_task = max(1, files_per_task)
        self.in_flight = in_flight
        self.nodes: Counter[str] = Counter()
        self.tasks = 0
        self.files = 0
        self.seconds = 0.0
        self._ray: Any = None
        self._scan: Any = None
        self._count: Any = None
        self._cpus = 1

    # -- connection -----------------------------------------------------------------------------------
    def connect(self) -> Any:
        """The ray module, connected to the cluster (once per process)."""
        if self._ray is not None:
            return self._ray
        try:
            import ray
        except ImportError:
            raise MissingExtraError(self.command, "ray", "ray") from None
        check_address(self.address)
        if ray.is_initialized():  # a Python API user's process: it must be connected to this cluster
            connected = ray.get_runtime_context().gcs_address
            if "://" not in self.address and self.address != "auto" and connected != self.address:
                raise UserError(f"this process is already connected to the Ray cluster at {connected}, "
                                f"not {self.address}")
        else:
            try:
                ray.init(address=self.address, runtime_env=_runtime_env(), logging_level=logging.WARNING,
                         log_to_driver=False, namespace="ranklog")
            except Exception as exc:  # ConnectionError, RuntimeError, ValueError … depending on the address
                raise UserError(f"cannot connect to the Ray cluster at {self.address}: {_first_line(exc)}") from None
        options = {"num_cpus": 1, "scheduling_strategy": "SPREAD"}
        self._scan = ray.remote(**options)(_scan_task)
        self._count = ray.remote(**options)(_count_task)
        self._cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        if self.in_flight is None:
            self.in_flight = 2 * self._cpus
        self._ray = ray
        return ray

    # -- the engine's hooks ---------------------------------------------------------------------------------
    def scan_files(self, source: ArchiveSource, files: list[DataFile], spec: QuerySpec,
                   wanted: list[str]) -> Iterator[tuple[Partition, pa.RecordBatch]]:
        """What :func:`ranklog.query.engine.scan_files` yields for `files`, computed by Ray tasks."""
        ray = self.connect()
        indexed = _warm_search_indexes(source, files, spec)
        source_ref, spec_ref = ray.put(_shippable(source)), ray.put(spec)

        def submit(chunk: list[DataFile]) -> Any:
            return self._scan.remote(source_ref, chunk, spec_ref, wanted)

        for parts in self._in_order(submit, files, whole_days=indexed):
            for partition, batches in parts:
                for batch in batches:
                    yield partition, batch

    def count_rows(self, source: ArchiveSource, files: list[DataFile], spec: QuerySpec) -> int:
        """What :func:`ranklog.query.engine.count_rows` returns for `files`, summed over Ray tasks."""
        ray = self.connect()
        source_ref, spec_ref = ray.put(_shippable(source)), ray.put(spec)
        return sum(self._in_order(lambda chunk: self._count.remote(source_ref, chunk, spec_ref), files,
                                  whole_days=False))

    def summary(self) -> str:
        nodes = ", ".join(f"{node[:8]}×{tasks}" for node, tasks in sorted(self.nodes.items()))
        return (f"ray engine: {self.tasks} task{'s' if self.tasks != 1 else ''} over {self.files} file"
                f"{'s' if self.files != 1 else ''} on {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''} "
                f"({nodes}) of {self.address}, {self.seconds:.2f}s")

    # -- scheduling ---------------------------------------------------------------------------------------
    def _in_order(self, submit: Callable[[list[DataFile]], Any], files: list[DataFile],
                  whole_days: bool) -> Iterator[Any]:
        """Results of one task per chunk of `files`, in file order, at most `in_flight` pending."""
        ray = self._ray
        pending: deque[Any] = deque()
        per_task = min(self.files_per_task, -(-len(files) // (TASKS_PER_CPU * self._cpus)))
        chunks = iter(chunks_of(files, max(1, per_task), whole_days))
        started = time.perf_counter()

        def submit_next() -> bool:
            chunk = next(chunks, None)
            if chunk is None:
                return False
            pending.append(submit(chunk))
            self.tasks += 1
            self.files += len(chunk)
            return True

        try:
            while len(pending) < (self.in_flight or 1) and submit_next():
                pass
            while pending:
                node, result = self._get(pending.popleft())
                self.nodes[node] += 1
                submit_next()
                yield result
        finally:
            self.seconds += time.perf_counter() - started
            for ref in pending:  # a limit was reached or the consumer failed: the rest is not needed
                ray.cancel(ref)

    def _get(self, ref: Any) -> Any:
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, UserError):
                raise UserError(str(cause)) from None
            if isinstance(cause, OSError):
                raise UserError(f"a Ray task could not read the archive: {_first_line(cause)} (a local root must "
                                "be at the same path on every node of the cluster)") from None
            raise UserError(f"a Ray task failed: {_first_line(cause or exc)}") from None
        except ray.exceptions.RayError as exc:  # worker or node died, runtime env could not be set up …
            raise UserError(f"the Ray cluster at {self.address} could not run a task: {_first_line(exc)}") from None


def attach(source: Any, engine: str, address: str | None, command: str) -> None:
    """Make `source` run its scans on `engine` (``local``: this process; ``ray``: the cluster)."""
    if engine == "local":
        if address:
            raise UserError("--ray_address applies only with --engine ray")
        return
    if engine != "ray":
        raise UserError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if getattr(source, "kind", None) != "archive":
        raise UserError(f"--engine ray reads an archive root (a directory every node sees, or s3://…); "
                        f"{source.describe()} is read by {'its archive service' if source.kind == 'remote' else 'this process'}")
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise UserError("--engine ray needs the cluster's address: --ray_address HOST:PORT or RAY_ADDRESS "
                        "(e.g. 'auto' on a node of the cluster)")
    runner = RayRunner(address, command=command)
    runner.connect()  # now: a wrong address fails before any work, whether or not files match
    source.runner = runner


# -- what runs on the workers -------------------------------------------------------------------------------
def _scan_task(source: ArchiveSource, files: list[DataFile], spec: QuerySpec,
               wanted: list[str]) -> tuple[str, list[tuple[Partition, list[pa.RecordBatch]]]]:
    from .engine import scan_files

    node = _as_task()
    parts = []
    for partition, group in groupby(scan_files(source, files, spec, wanted), key=itemgetter(0)):
        batches = [_compact(batch) for _, batch in group if batch.num_rows]
        if batches:
            parts.append((partition, batches))
    return node, parts


def _compact(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` owning just its rows' data. A slice of a larger batch (a search's hits of one hour are
    a slice of its day's) is pickled with its parent's whole buffers: measured 20 MB shipped for the
    1,497 hits of one day of bench_query (c), and (c) 3x slower on Ray than it is with this copy."""
    import numpy as np
    import pyarrow as pa

    if batch.get_total_buffer_size() <= 2 * batch.nbytes:
        return batch
    return batch.take(pa.array(np.arange(batch.num_rows, dtype=np.int64)))


def _count_task(source: ArchiveSource, files: list[DataFile], spec: QuerySpec) -> tuple[str, int]:
    from .engine import count_rows

    node = _as_task()
    return node, count_rows(source, files, spec)


def _as_task() -> str:
    """Size Arrow's CPU pool to the CPUs Ray gave this task; the node id."""
    import pyarrow as pa
    import ray

    context = ray.get_runtime_context()
    pa.set_cpu_count(max(1, int(context.get_assigned_resources().get("CPU", 1))))
    return context.get_node_id()


# -- helpers --------------------------------------------------------------------------------------------
def _runtime_env() -> dict[str, Any]:
    import ranklog

    return {"py_modules": [os.path.dirname(os.path.abspath(ranklog.__file__))],
            "excludes": ["__pycache__", "*.pyc"]}


def _shippable(source: ArchiveSource) -> ArchiveSource:
    """The source as tasks get it: filesystem (with its credentials) and root, not the runner."""
    from .sources import ArchiveSource

    return ArchiveSource(source.filesystem, source.root, source.label)


def _warm_search_indexes(source: ArchiveSource, files: list[DataFile], spec: QuerySpec) -> bool:
    """Build or refresh a search's severe-rows index of each day on the driver, as the local engine
    would, so that tasks only read it (tasks building the same day's index would race). True when
    the search uses the index."""
    from .severe_index import plan_days
    from .text_search import is_text_search, search_literals

    literals = search_literals(spec) if is_text_search(spec) else []
    return bool(literals) and bool(plan_days(source, files, literals))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
