"""Realistic log directory trees, laid out exactly as Ray, torchrun, verl and the ranklog logger write them.

For tests of every area (parse, agent, query, triage). Each writer returns a :class:`Tree` listing the
files it wrote with the number of records a correct parser yields for each (blank lines carry no
record; a traceback is one record with the line it follows), plus what the failure story is: which
rank failed first, with which message, and when.

    tree = write_ranklog_tree(tmp_path / "logs", failing_rank=3)      # <job>/<host>/rank-N.pid-P.0000.jsonl
    tree = write_torchrun_tree(tmp_path / "tr")                       # a real torchrun --log-dir (scenario library)
    tree = write_ray_session(tmp_path / "ray")                        # real Ray sessions (copied, see below)
    tree = write_verl_run(tmp_path / "verl")                          # real verl console + metrics JSONL
    tree.expected_records()  # → total; tree.files[i].records per file; tree.first_failure → Failure

The Ray, torchrun and verl trees are not written by hand: they are the real tools' output from the
scenario library (tests/scenarios/, made by ``make scenarios``), copied byte for byte. Only the
ranklog logger's trees are written here (the logger is ours; its format is tested against the
logger itself), with the real message strings of the failures (NCCL watchdog — GPU-only, so not
in the library's CPU runs —, CUDA OOM, Ray ActorDiedError and OOM killer, verl step lines).
Their timestamps are deterministic: ``start`` (default 2026-12-02T13:00:00Z) plus one second per
step; the failing rank fails at ``fail_after`` steps, the others time out 600 s later (as NCCL does).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2026, 12, 2, 13, 0, 0, tzinfo=timezone.utc)

# -- real message strings --------------------------------------------------------------------------


def nccl_watchdog(rank: int, seq: int = 1234) -> str:
    return (f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600011 milliseconds before timing out.")


CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.15 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in "
            "use. Of the allocated memory 75.52 GiB is allocated by PyTorch, and 1.01 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
            "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
CUDA_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"
NCCL_ERROR = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
              "remote process exited or there was a network error, NCCL version 2.21.5")
RAY_ACTOR_DIED = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
                  "\tclass_name: WorkerDict\n\tactor_id: 9b2a1f5c3e7d4a6b8c0d1e2f01000000\n\tpid: 41234\n"
                  "\tname: WorkerDict_0:3\n\tnamespace: 5f3c2a1b\n\tip: 10.0.0.4\n"
                  "The actor is dead because its worker process has died. Worker exit type: NODE_OUT_OF_MEMORY "
                  "Worker exit detail: Task was killed due to the node running low on memory.")
RAY_OOM_KILL = ("Task was killed due to the node running low on memory.\nMemory on the node (IP: 10.0.0.4, ID: "
                "c2f1e0d9b8a7) where the task (actor ID: 9b2a1f5c3e7d4a6b8c0d1e2f01000000, name=WorkerDict.__init__, "
                "pid=41234, memory used=71.02GB) was running was 118.50GB / 124.00GB (0.955645), which exceeds the "
                "memory usage threshold of 0.95. Ray killed this worker (ID: 3c4d) because it was the most recently "
                "scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out "
                "-ip 10.0.0.4`.")
FAILURES = {"cuda_oom": CUDA_OOM, "cuda_error": CUDA_ERROR, "nccl_error": NCCL_ERROR}


def verl_step_line(step: int, rng: random.Random | None = None) -> str:
    """verl's console logger line for one step (`step:N - key:val - …`)."""
    rng = rng or random.Random(step)
    metrics = {
        "actor/pg_loss": round(rng.uniform(-0.2, 0.2), 3), "actor/entropy": round(rng.uniform(0.3, 0.9), 3),
        "actor/grad_norm": round(rng.uniform(0.1, 2.0), 3), "critic/score/mean": round(rng.uniform(0, 1), 3),
        "response_length/mean": round(rng.uniform(200, 800), 1), "perf/throughput": round(rng.uniform(1200, 1800), 1),
        "timing_s/step": round(rng.uniform(20, 40), 3),
    }
    return f"step:{step} - " + " - ".join(f"{k}:{v}" for k, v in metrics.items())


def traceback_lines(exception: str, frames: tuple[str, ...] = ("train.py", "trainer.py")) -> list[str]:
    """A Python traceback ending in `exception` (which may span several lines)."""
    out = ["Traceback (most recent call last):"]
    for i, name in enumerate(frames):
        out += [f'  File "/workspace/{name}", line {40 + i * 17}, in {"main" if i == 0 else "step"}',
                f"    {'trainer.fit()' if i == 0 else 'loss.backward()'}"]
    return out + exception.split("\n")


# -- results ---------------------------------------------------------------------------------------
@dataclass
class WrittenFile:
    path: Path
    format: str  # what ranklog.parse.detect should say
    records: int  # records a correct parser yields
    lines: int  # physical lines written
    rank: int | None = None
    local_rank: int | None = None


@dataclass
class Failure:
    rank: int | None
    ts: datetime
    message: str  # the exception / error line of the first failure
    path: Path


@dataclass
class Tree:
    root: Path
    files: list[WrittenFile] = field(default_factory=list)
    first_failure: Failure | None = None
    job: str | None = None

    def expected_records(self) -> int:
        return sum(f.records for f in self.files)

    def by_format(self, fmt: str) -> list[WrittenFile]:
        return [f for f in self.files if f.format == fmt]


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write(path: Path, lines: list[str]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


# -- ranklog ---------------------------------------------------------------------------------------
def ranklog_line(t: datetime, level: str, msg: str, *, host: str, ip: str, pid: int, rank: int | None,
                 local_rank: int | None, job: str, seq: int, step: int | None = None, exc: str | None = None,
                 **extra: object) -> str:
    """One JSON line exactly as the ranklog logger writes it (field order, absent fields left out)."""
    record: dict[str, object] = {"ts": _ts(t), "level": level, "msg": msg, "logger": "train", "host": host, "ip": ip,
                                 "pid": pid}
    for key, value in (("rank", rank), ("local_rank", local_rank), ("job", job), ("step", step), ("seq", seq)):
        if value is not None:
            record[key] = value
    if exc is not None:
        record["exc"] = exc
    record.update(extra)
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def write_ranklog_tree(root: Path, *, job: str = "llama-7b-run42", hosts: tuple[str, ...] = ("node1", "node2"),
                       ranks_per_host: int = 2, steps: int = 10, failing_rank: int | None = 1,
                       failure: str = "cuda_oom", start: datetime = START, fail_after: int | None = None,
                       text_layout: bool = False) -> Tree:
    """`<root>/<job>/<host>/rank-<rank>.pid-<pid>.0000.jsonl` per rank (or `.log` with `text_layout`).

    Every rank logs `steps` INFO step lines (with a `loss` extra field); the failing rank logs the
    `failure` (a key of FAILURES) as an ERROR with traceback in `exc` after `fail_after` steps (default
    steps // 2) and stops; the others then log the NCCL watchdog timeout 600 s later.
    """
    tree = Tree(root=Path(root), job=job)
    fail_after = steps // 2 if fail_after is None else fail_after
    world = len(hosts) * ranks_per_host
    for h, host in enumerate(hosts):
        ip = f"10.0.0.{h + 1}"
        for local in range(ranks_per_host):
            rank = h * ranks_per_host + local
            pid = 4000 + rank
            lines, seq = [], 0
            stop = fail_after if rank == failing_rank else steps
            for step in range(stop):
                t = start + timedelta(seconds=step, microseconds=rank * 1000)
                seq += 1
                lines.append(ranklog_line(t, "INFO", f"step {step} done", host=host, ip=ip, pid=pid, rank=rank,
                                          local_rank=local, job=job, seq=seq, step=step, loss=round(2.0 / (step + 1), 4)))
            if failing_rank is not None and rank == failing_rank:
                t = start + timedelta(seconds=fail_after, microseconds=500)
                exc = "\n".join(traceback_lines(FAILURES[failure]))
                seq += 1
                lines.append(ranklog_line(t, "ERROR", "training step failed", host=host, ip=ip, pid=pid, rank=rank,
                                          local_rank=local, job=job, seq=seq, step=fail_after, exc=exc))
                tree.first_failure = Failure(rank, t, FAILURES[failure].split("\n")[0], Path())
            elif failing_rank is not None and failing_rank < world:
                t = start + timedelta(seconds=fail_after + 600, microseconds=rank * 1000)
                seq += 1
                lines.append(ranklog_line(t, "ERROR", nccl_watchdog(rank), host=host, ip=ip, pid=pid, rank=rank,
                                          local_rank=local, job=job, seq=seq))
            ext = "log" if text_layout else "jsonl"
            path = tree.root / job / host / f"rank-{rank}.pid-{pid}.0000.{ext}"
            if text_layout:
                lines = [_as_text_layout(json.loads(line)) for line in lines]
                physical = sum(line.count("\n") + 1 for line in lines)
                _write(path, lines)
                tree.files.append(WrittenFile(path, "ranklog-text", len(lines), physical, rank, local))
            else:
                tree.files.append(WrittenFile(path, "ranklog", _write(path, lines), len(lines), rank, local))
            if tree.first_failure is not None and tree.first_failure.rank == rank:
                tree.first_failure.path = path
    return tree


def _as_text_layout(record: dict) -> str:
    """The ranklog logger's text layout: `<ts> <LEVEL> <logger> [k=v …] <msg>` + traceback lines."""
    pairs = " ".join(f"{k}={record[k]}" for k in ("rank", "local_rank", "job", "step", "seq") if k in record)
    extra = " ".join(f"{k}={v}" for k, v in record.items() if k == "loss")
    line = f"{record['ts']} {record['level']} {record['logger']} [{pairs}{' ' + extra if extra else ''}] {record['msg']}"
    return line + ("\n" + record["exc"] if record.get("exc") else "")


# -- torchrun --------------------------------------------------------------------------------------
def write_torchrun_tree(root: Path, *, scenario: str = "torchrun_cuda_oom", node: str = "node0",
                        console: bool = True) -> Tree:
    """A real torchrun ``--log-dir`` at `root`: one node's folder of a scenario of the library
    (tests/scenarios/<scenario>/out/<node>/, torch 2.13 with gloo), copied byte for byte —
    ``<run_id>_<suffix>/attempt_<n>/<local_rank>/{stdout,stderr}.log``, the failed ranks'
    ``error.json``, and with `console` the launcher's ``torchrun.console.log`` (``[default0]:`` lines).
    The default is a 3-rank run whose rank 1 dies of a CUDA OOM (text raised by the generator).

    Each file's ``records`` is what parsing the whole file in one call yields (nothing is written by
    hand here); ``local_rank`` comes from the folder the file sits in."""
    import shutil

    from tests.scenarios.library import restore_mtimes

    restore_mtimes(Path(__file__).resolve().parents[1] / "scenarios" / scenario)
    source = Path(__file__).resolve().parents[1] / "scenarios" / scenario / "out" / node
    tree = Tree(root=Path(root))
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        relative = path.relative_to(source)
        if relative.name == "torchrun.console.log" and not console:
            continue
        copy = tree.root / relative
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
        if tree.job is None and len(relative.parts) > 1:
            tree.job = relative.parts[0].rsplit("_", 1)[0]
        local = int(relative.parts[-2]) if len(relative.parts) >= 4 and relative.parts[-2].isdigit() else None
        fmt = "torchrun-error" if relative.name == "error.json" else "torchrun"
        data = copy.read_bytes()
        if data:
            tree.files.append(WrittenFile(copy, fmt, _records(copy, data), data.count(b"\n"), None, local))
    return tree


def _records(path: Path, data: bytes) -> int:
    """Records that parsing `data` (the whole file, in one call) yields."""
    from ranklog.parse import parse
    from ranklog.parse.contract import SourceContext
    from ranklog.parse.detection import detect

    found = detect(str(path))
    if found is None:
        return 0
    ctx = SourceContext(source=str(path), source_id="x", format=found.format, host="unknown", ip="unknown",
                        fields={k: v for k, v in found.fields.items() if k != "host"})
    return parse(data, 0, ctx, final=True, read_time_ns=0).batch.num_rows


# -- Ray -------------------------------------------------------------------------------------------
RAY_SCENARIOS = ("ray_verl_worker_group", "ray_memory_monitor")


def write_ray_session(root: Path, *, scenarios: tuple[str, ...] = RAY_SCENARIOS) -> Tree:
    """Real Ray sessions under `root`: the ``session_*/logs/*.{out,err,log}`` files (what the ray preset
    reads) of the scenario library's real Ray 2.60 runs (tests/scenarios/<name>/out/<host>/), copied
    byte for byte. The defaults give a verl-style named actor group with JSON logging
    (``kZ3xWqWorkerDict_0:<rank>`` actors, a RayTaskError) and a memory-monitor kill.

    Each file's ``records`` is what parsing the whole file in one call yields: what the chunked,
    tailed and directory readers are checked against (nothing is written by hand here)."""
    import shutil

    from ranklog.parse import parse
    from ranklog.parse.contract import SourceContext
    from ranklog.parse.detection import detect

    tree = Tree(root=Path(root))
    library = Path(__file__).resolve().parents[1] / "scenarios"
    from tests.scenarios.library import restore_mtimes

    for name in scenarios:
        restore_mtimes(library / name)
        for logs in sorted((library / name / "out").glob("*/session_*/logs")):
            target = tree.root / logs.parent.name / "logs"
            target.mkdir(parents=True, exist_ok=True)
            for path in sorted(p for p in logs.iterdir() if p.is_file() and p.suffix in (".out", ".err", ".log")):
                copy = target / path.name
                shutil.copy2(path, copy)
                data = copy.read_bytes()
                found = detect(str(copy))
                records = 0
                if data and found is not None:
                    ctx = SourceContext(source=str(copy), source_id="x", format=found.format, host="unknown",
                                        ip="unknown", fields={k: v for k, v in found.fields.items() if k != "host"})
                    records = parse(data, 0, ctx, final=True, read_time_ns=0).batch.num_rows
                if data:  # Ray's empty .err/.out files are copied too; they hold no record to list
                    tree.files.append(WrittenFile(copy, "ray", records, data.count(b"\n")))
    return tree


# -- verl ------------------------------------------------------------------------------------------
def write_verl_run(root: Path, *, scenario: str = "verl_console_inf") -> Tree:
    """A real verl run at `root`: verl 0.9.1's own ``Tracking`` loggers' output from the scenario
    library (tests/scenarios/<scenario>/out/node0/), copied byte for byte — the console capture
    ``verl.console.log`` (``step:N - actor/pg_loss:np.float64(…) - …``) and the file logger's
    ``metrics/qwen-tiny.jsonl`` (``{"step":N,"data":{…}}``, NaN/Inf as ``null``). The default run's
    loss turns Inf at step 6."""
    import shutil

    source = Path(__file__).resolve().parents[1] / "scenarios" / scenario / "out" / "node0"
    tree = Tree(root=Path(root))
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        copy = tree.root / path.relative_to(source)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
        data = copy.read_bytes()
        fmt = "verl-jsonl" if path.suffix == ".jsonl" else "verl-console"
        tree.files.append(WrittenFile(copy, fmt, _records(copy, data), data.count(b"\n")))
    return tree
