"""A realistic, seeded log corpus in the record schema, generated column-wise (~1M rows/s).

`generate(n, …)` returns a ``pyarrow.Table`` in ``ranklog.record.arrow_schema()`` that looks like
what the agent ships from a verl/torchrun job: structured JSON records with varied extras in
`attrs`, verl ``step:N - key:val`` console metric lines, multi-line Python tracebacks in `exc`,
NCCL watchdog / CUDA OOM error text, and numbers, ids, hosts, ranks, pids and trace ids that vary.
Nothing is built row by row in Python: every column comes from numpy draws joined with
``pyarrow.compute``, so the query benchmark can afford 10M rows.

`write_jsonl(table, dir)` writes the same records as the ranklog logger's JSON lines (one file per
host/rank; `extra` fields at the top level, nulls omitted) for peers such as gzip, DuckDB and grep.

Offsets are the cumulative byte sizes of each source's records (an estimate of the original line
lengths), so (source_id, offset) is unique and increasing within a source, as the agent ships it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ranklog.record import FIELDS, arrow_schema, ts_array, ts_ns

DEFAULT_START_NS = 1_796_212_800 * 1_000_000_000  # 2026-12-02T12:00:00Z
_HEX = np.frombuffer(b"0123456789abcdef", dtype="S1")

Part = str | pa.Array
Build = Callable[["_Draw", int], dict[str, object]]


class _Draw:
    """Vectorized random columns as Arrow string arrays (numbers, ids, choices)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.ts = np.empty(0, np.int64)  # event times of the rows being built (set per kind)

    def pooled(self, k: int, pool: int, low: int, high: int) -> pa.Array:
        """Integers drawn from a small recurring set (pids, ports, line numbers, tensor sizes)."""
        values = pc.cast(pa.array(self.rng.integers(low, high, pool)), pa.string())
        return values.take(pa.array(self.rng.integers(0, pool, k)))

    def ints(self, k: int, low: int, high: int) -> pa.Array:
        return pc.cast(pa.array(self.rng.integers(low, high, k)), pa.string())

    def floats(self, k: int, low: float, high: float, digits: int = 4) -> pa.Array:
        return pc.cast(pa.array(np.round(self.rng.uniform(low, high, k), digits)), pa.string())

    def choice(self, k: int, options: Sequence[str]) -> pa.Array:
        return pa.array(options, pa.string()).take(pa.array(self.rng.integers(0, len(options), k)))

    def hex(self, k: int, chars: int) -> pa.Array:
        nibbles = self.rng.integers(0, 16, (k, chars), dtype=np.uint8)
        return pc.cast(pa.array(_HEX[nibbles].view(f"S{chars}").ravel(), pa.binary()), pa.string())


def _join(*parts: Part) -> pa.Array:
    """Element-wise concatenation of literal strings and string arrays."""
    return pc.binary_join_element_wise(*parts, "")


# --- record kinds: each returns the content columns for k rows -------------------------------------

_JSON_TEMPLATES: tuple[tuple[str, Callable[[_Draw, int], tuple[pa.Array, pa.Array]]], ...] = (
    ("verl.trainer.ppo", lambda d, k: (
        _join("loaded shard ", d.ints(k, 0, 4096), " of 4096 in ", d.floats(k, 0.01, 9.0, 3), "s"),
        _join('{"shard":', d.ints(k, 0, 4096), ',"path":"/data/gsm8k/train-', d.ints(k, 10000, 99999),
              '.parquet","bytes":', d.ints(k, 10_000, 900_000_000), "}"))),
    ("verl.workers.rollout.vllm", lambda d, k: (
        _join("generated ", d.ints(k, 1, 2048), " sequences, mean response length ", d.floats(k, 20, 4000, 1)),
        _join('{"batch_id":"', d.hex(k, 12), '","prompt_tokens":', d.ints(k, 100, 900_000),
              ',"kv_cache_usage":', d.floats(k, 0, 1, 3), "}"))),
    ("torch.distributed.elastic", lambda d, k: (
        _join("rendezvous round ", d.ints(k, 0, 30), " complete: world_size=", d.ints(k, 8, 1024)),
        _join('{"rdzv_id":"', d.choice(k, ["c6a1f0e2", "9b3d77a4", "04e5bb19"]), '","master_port":', d.pooled(k, 4, 20000, 40000), "}"))),
    ("verl.utils.checkpoint", lambda d, k: (
        _join("saved checkpoint global_step_", d.ints(k, 0, 20000), " to /ckpt/run-",
              d.choice(k, ["3f9a2c", "b71e04"]), "/actor (", d.floats(k, 0.5, 300, 2), " GiB)"),
        _join('{"elapsed_s":', d.floats(k, 0.1, 900, 2), ',"tp":', d.ints(k, 1, 9), "}"))),
    ("ray.worker", lambda d, k: (
        _join("task ", d.hex(k, 16), " finished on actor WorkerDict_", d.ints(k, 0, 8), ":",
              d.ints(k, 0, 64), " after ", d.ints(k, 1, 90_000), " ms"),
        _join('{"actor_id":"', d.choice(k, [f"{i:024x}" for i in range(7**20, 7**20 + 64 * 977, 977)]),
              '","node_ip":"10.0.0.', d.pooled(k, 16, 1, 255),
              '"}'))),
    ("verl.trainer.dataset", lambda d, k: (
        _join("filtered ", d.ints(k, 0, 5000), " prompts longer than ", d.ints(k, 512, 8192), " tokens"),
        _join('{"kept":', d.ints(k, 1000, 900_000), ',"epoch":', d.ints(k, 0, 20), ',"tokenizer":"',
              d.choice(k, ["Qwen2.5-7B", "Llama-3.1-8B", "DeepSeek-V3"]), '"}'))),
    ("torch.cuda.memory", lambda d, k: (
        _join("allocated ", d.floats(k, 1, 79, 2), " GiB, reserved ", d.floats(k, 1, 80, 2), " GiB, peak ",
              d.floats(k, 1, 80, 2), " GiB"),
        _join('{"device":', d.ints(k, 0, 8), ',"num_alloc_retries":', d.ints(k, 0, 50), "}"))),
    ("verl.workers.sharding_manager", lambda d, k: (
        _join("resharding weights to vllm took ", d.floats(k, 0.1, 60, 3), "s for ", d.ints(k, 1, 800),
              " tensors"),
        pa.nulls(k, pa.string()))),
)


def _json_records(d: _Draw, k: int) -> dict[str, object]:
    which = d.rng.integers(0, len(_JSON_TEMPLATES), k)
    msg: list[pa.Array] = []
    attrs: list[pa.Array] = []
    loggers: list[pa.Array] = []
    order = np.argsort(which, kind="stable")
    for index, (logger, build) in enumerate(_JSON_TEMPLATES):
        count = int((which == index).sum())
        m, a = build(d, count)
        msg.append(m)
        attrs.append(a)
        loggers.append(pa.repeat(pa.scalar(logger, pa.string()), count))
    back = pa.array(np.argsort(order))
    level = d.rng.choice(np.array(["INFO", "DEBUG", "WARNING"]), k, p=[0.7, 0.22, 0.08])
    return {"msg": pa.concat_arrays(msg).take(back), "attrs": pa.concat_arrays(attrs).take(back),
            "logger": pa.concat_arrays(loggers).take(back), "level": pa.array(level), "format": "ranklog"}


def _verl_console(d: _Draw, k: int) -> dict[str, object]:
    step = (d.ts - d.ts.min(initial=0)) // 20_000_000_000 + 1 if k else np.empty(0, np.int64)
    msg = _join("step:", pc.cast(pa.array(step), pa.string()),
                " - actor/pg_loss:", d.floats(k, -0.5, 0.5, 4), " - actor/entropy:", d.floats(k, 0, 3, 4),
                " - actor/grad_norm:", d.floats(k, 0, 20, 3), " - critic/score/mean:", d.floats(k, -1, 1, 3),
                " - response_length/mean:", d.floats(k, 10, 4000, 1),
                " - perf/throughput:", d.floats(k, 100, 9000, 1), " - timing_s/gen:", d.floats(k, 1, 200, 2))
    return {"msg": msg, "step": pa.array(step), "level": "INFO", "format": "verl-console"}


_TRACEBACK_FRAMES = (
    ('/opt/verl/verl/trainer/main_ppo.py', 'main', 'run_ppo(config)'),
    ('/opt/verl/verl/trainer/ppo/ray_trainer.py', 'fit', 'actor_output = self.actor_rollout_wg.update_actor(batch)'),
    ('/opt/verl/verl/workers/fsdp_workers.py', 'update_actor', 'metrics = self.actor.update_policy(data=data)'),
    ('/usr/lib/python3/dist-packages/torch/nn/modules/module.py', '_call_impl', 'return forward_call(*args, **kwargs)'),
    ('/opt/verl/verl/workers/actor/dp_actor.py', '_forward_micro_batch', 'output = self.actor_module(input_ids)'),
)
_EXCEPTIONS = (
    "ValueError: expected sequence length <= {a}, got {b}",
    "KeyError: 'response_mask_{a}'",
    "RuntimeError: CUDA error: an illegal memory access was encountered (device {a}, stream {b})",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {a}.00 MiB. GPU {b} has a total capacity "
    "of 79.15 GiB of which 1.06 GiB is free.",
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task (actor {a}, pid {b}).",
)


def _tracebacks(d: _Draw, k: int) -> dict[str, object]:
    frames = [_join('  File "', path, '", line ', d.pooled(k, 2, 10, 2400), ", in ", func, "\n    ", code, "\n")
              for path, func, code in _TRACEBACK_FRAMES]
    which = d.rng.integers(0, len(_EXCEPTIONS), k)
    lines = []
    for text in _EXCEPTIONS:
        head, _, rest = text.partition("{a}")
        middle, _, tail = rest.partition("{b}")
        lines.append(_join(head, d.pooled(k, 8, 0, 65536), middle, d.pooled(k, 8, 0, 9999), tail))
    last = pc.choose(pa.array(which), *lines)
    exc = _join("Traceback (most recent call last):\n", *frames, last)
    return {"msg": _join("Error executing job with overrides: ['trainer.n_gpus_per_node=8']: ", last),
            "exc": exc, "level": "ERROR", "logger": "verl.trainer.main_ppo", "format": "python"}


def _nccl_errors(d: _Draw, k: int) -> dict[str, object]:
    rank = d.ints(k, 0, 1024)
    watchdog = _join("[rank", rank, "]:[E ProcessGroupNCCL.cpp:", d.ints(k, 500, 1700), "] [Rank ", rank,
                     "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=", d.pooled(k, 32, 1, 900_000),
                     ", OpType=", d.choice(k, ["ALLREDUCE", "ALLGATHER", "_REDUCE_SCATTER_BASE", "BROADCAST"]),
                     ", NumelIn=", d.pooled(k, 16, 1, 1 << 28), ", NumelOut=", d.pooled(k, 16, 1, 1 << 28),
                     ", Timeout(ms)=600000) ran for ", d.ints(k, 600_000, 600_200),
                     " milliseconds before timing out.")
    remote = _join("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                   "ProcessGroupNCCL.cpp:", d.ints(k, 1000, 3000), ", remote process exited or there was a network "
                   "error, NCCL version 2.21.5\nncclRemoteError: A call failed possibly due to a network error or "
                   "a remote process exiting prematurely.\nLast error:\nNET/IB : Got completion from peer 10.0.",
                   d.ints(k, 0, 255), ".", d.ints(k, 1, 255), "<", d.ints(k, 30000, 60000),
                   "> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.",
                   d.ints(k, 0, 255), ".", d.ints(k, 1, 255))
    cuda = _join("RuntimeError: CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously "
                 "reported at some other API call, so the stacktrace below might be incorrect.\nCompile with "
                 "`TORCH_USE_CUDA_DSA` to enable device-side assertions. (device ", d.ints(k, 0, 8), ")")
    which = pa.array(d.rng.choice(3, k, p=[0.6, 0.25, 0.15]))
    level = d.rng.choice(np.array(["ERROR", "CRITICAL"]), k, p=[0.85, 0.15])
    return {"msg": pc.choose(which, watchdog, remote, cuda), "level": pa.array(level),
            "logger": "torch.distributed", "format": "text"}


def _console_text(d: _Draw, k: int) -> dict[str, object]:
    msg = _join("(WorkerDict pid=", d.pooled(k, 64, 1000, 400_000), ", ip=10.0.0.", d.pooled(k, 16, 1, 255),
                ") ", d.choice(k, [
                    "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.",
                    "INFO: vLLM KV cache blocks: ", "Flash Attention 2.0 only supports torch.float16 and bfloat16 ",
                    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [gpu-node]:",
                    "Processed prompts: "]), d.ints(k, 0, 100_000))
    level = d.rng.choice(np.array(["WARNING", "INFO", "UNKNOWN"]), k, p=[0.5, 0.3, 0.2])
    return {"msg": msg, "level": pa.array(level), "format": "ray"}


_REPEATED_WARNINGS = (
    "/usr/lib/python3/dist-packages/torch/utils/checkpoint.py:92: UserWarning: None of the inputs have "
    "requires_grad=True. Gradients will be None",
    "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', "
    "args...)` instead.",
    "[W ProcessGroupNCCL.cpp:4115] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this "
    "environment variable is thus deprecated. (function operator())",
    "Token indices sequence length is longer than the specified maximum sequence length for this model "
    "(8723 > 8192). Running this sequence through the model will result in indexing errors",
    "Processed prompts: 100%|██████████| 512/512 [00:41<00:00, 12.33it/s]",
    "INFO:     127.0.0.1:52844 - \"GET /health HTTP/1.1\" 200 OK",
)


def _repeated(d: _Draw, k: int) -> dict[str, object]:
    """Lines every rank prints verbatim again and again (deprecation warnings, progress, health checks)."""
    level = d.rng.choice(np.array(["WARNING", "INFO"]), k, p=[0.6, 0.4])
    return {"msg": d.choice(k, _REPEATED_WARNINGS), "level": pa.array(level), "format": "text"}


@dataclass(frozen=True)
class _Kind:
    weight: float
    build: Build


_KINDS = (
    _Kind(0.47, _json_records),
    _Kind(0.18, _verl_console),
    _Kind(0.15, _repeated),
    _Kind(0.12, _console_text),
    _Kind(0.05, _tracebacks),
    _Kind(0.03, _nccl_errors),
)
_CONTENT = ("msg", "exc", "logger", "level", "format", "step", "attrs")


def _kind_table(d: _Draw, kind: _Kind, k: int) -> pa.Table:
    cols = kind.build(d, k)
    out = {}
    for name in _CONTENT:
        value = cols.get(name)
        typ = arrow_schema().field(name).type
        if value is None:
            out[name] = pa.nulls(k, typ)
        elif isinstance(value, str):
            out[name] = pa.repeat(pa.scalar(value, typ), k)
        else:
            out[name] = value
    return pa.table(out)


def _per_source_running(source: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Exclusive running sum of `values` within each source, rows in their given order."""
    order = np.argsort(source, kind="stable")
    sorted_src = source[order]
    csum = np.cumsum(values[order]) - values[order]
    starts = np.flatnonzero(np.r_[True, sorted_src[1:] != sorted_src[:-1]])
    base = np.repeat(csum[starts], np.diff(np.r_[starts, len(order)]))
    out = np.empty_like(values)
    out[order] = csum - base
    return out


def generate(n: int, start_ns: int = DEFAULT_START_NS, span_s: float = 3600.0, hosts: int = 4,
             ranks_per_host: int = 8, seed: int = 0, job: str = "ppo-qwen7b-gsm8k") -> pa.Table:
    """`n` records spread over [start_ns, start_ns + span_s), from `hosts` × `ranks_per_host` ranks.

    Deterministic for a given seed. Rows are in time order (as an agent ships them).
    """
    rng = np.random.default_rng(seed)
    d = _Draw(rng)
    weights = np.array([kind.weight for kind in _KINDS])
    kind = rng.choice(len(_KINDS), n, p=weights / weights.sum())
    order = np.argsort(kind, kind="stable")
    # Event times with microsecond precision, as the ranklog logger writes them.
    ts = np.sort(rng.integers(start_ns, start_ns + int(span_s * 1e9), n)) // 1000 * 1000
    parts = []
    for i, kind_spec in enumerate(_KINDS):
        d.ts = ts[kind == i]
        parts.append(_kind_table(d, kind_spec, len(d.ts)))
    content = pa.concat_tables(parts).combine_chunks().take(pa.array(np.argsort(order)))

    ranks = hosts * ranks_per_host
    rank = rng.integers(0, ranks, n).astype(np.int32)
    host_index = rank // ranks_per_host
    local_rank = (rank % ranks_per_host).astype(np.int32)
    console = pc.not_equal(content["format"], "ranklog").to_numpy(zero_copy_only=False)
    source_index = rank.astype(np.int64) * 2 + console

    host_names = pa.array([f"gpu-node-{h:03d}" for h in range(hosts)], pa.string())
    host_ips = pa.array([f"10.0.{h // 250}.{h % 250 + 1}" for h in range(hosts)], pa.string())
    pids = rng.integers(1000, 400_000, ranks)
    source_names = pa.array([f"/var/log/ranklog/{job}/rank-{r:05d}.jsonl" if s == 0
                             else f"/tmp/torchelastic/{job}/attempt_0/{r % ranks_per_host}/stderr.log"
                             for r in range(ranks) for s in (0, 1)], pa.string())
    source_ids = pa.array([f"{2049 + r % 7}:{rng.integers(1 << 20, 1 << 34)}:{rng.integers(1 << 63):016x}"
                           for r in range(ranks) for _ in (0, 1)], pa.string())

    sizes = (pc.utf8_length(content["msg"]).to_numpy().astype(np.int64) + 180
             + pc.fill_null(pc.utf8_length(content["exc"]), 0).to_numpy().astype(np.int64)
             + pc.fill_null(pc.utf8_length(content["attrs"]), 0).to_numpy().astype(np.int64))
    offset = _per_source_running(source_index, sizes)
    seq = _per_source_running(source_index, np.ones(n, dtype=np.int64))
    trace_pool = d.hex(max(n // 40, 1), 32)
    has_trace = rng.random(n) < 0.3
    trace_id = trace_pool.take(pa.array(rng.integers(0, len(trace_pool), n), mask=~has_trace))
    roles = pa.array([f"WorkerDict_{r // 64}:{r % 64}" for r in range(ranks)], pa.string())
    rank_index, host_index_arrow, source_arrow = pa.array(rank), pa.array(host_index), pa.array(source_index)

    columns = {
        "ts": ts_array(ts),
        "level": content["level"], "msg": content["msg"], "exc": content["exc"], "logger": content["logger"],
        "host": host_names.take(host_index_arrow), "ip": host_ips.take(host_index_arrow),
        "pid": pa.array(pids[rank].astype(np.int32)), "rank": pa.array(rank), "local_rank": pa.array(local_rank),
        "job": pa.repeat(pa.scalar(job, pa.string()), n), "role": roles.take(rank_index), "trace_id": trace_id, "step": content["step"],
        "seq": pa.array(seq, mask=console), "source": source_names.take(source_arrow),
        "source_id": source_ids.take(source_arrow), "offset": pa.array(offset),
        "format": content["format"], "attrs": content["attrs"],
    }
    return pa.Table.from_pydict({name: columns[name] for name in FIELDS}, schema=arrow_schema())


# --- raw JSONL, as the ranklog logger writes it ----------------------------------------------------

_JSON_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))
_LINE_FIELDS = ("level", "msg", "exc", "logger", "host", "ip", "pid", "rank", "local_rank", "job", "role",
                "trace_id", "step", "seq")


def _json_string(values: pa.Array) -> pa.Array:
    data = values.buffers()[2]
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256) if data is not None else None
    present = set() if counts is None else set(np.flatnonzero(counts).tolist())
    for old, new in _JSON_ESCAPES:
        if ord(old) in present:  # replace_substring costs a pass per pattern: skip absent ones
            values = pc.replace_substring(values, old, new)
    return _join('"', values, '"')


def _rfc3339(ts: pa.ChunkedArray) -> pa.Array:
    """`2026-12-02T13:04:05.123456Z`: strftime only on the distinct seconds (strftime is slow per row)."""
    micros = ts_ns(ts) // 1000
    seconds, fraction = np.divmod(micros, 1_000_000)
    unique, index = np.unique(seconds, return_inverse=True)
    stamps = pc.strftime(pa.array(unique, pa.timestamp("s", tz="UTC")), format="%Y-%m-%dT%H:%M:%S")
    digits = pc.utf8_lpad(pc.cast(pa.array(fraction), pa.string()), 6, "0")
    return _join(stamps.take(pa.array(index.ravel())), ".", digits, "Z")


def _json_member(name: str, column: pa.ChunkedArray) -> pa.Array:
    """`,"name":value` for each row, or "" where the value is null (the logger omits nulls)."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    text = _json_string(values) if pa.types.is_string(values.type) else pc.cast(values, pa.string())
    return pc.fill_null(_join(f',"{name}":', text), "")


def jsonl_lines(table: pa.Table) -> pa.Array:
    """The ranklog logger's JSON line (with trailing newline) for every row of `table`."""
    members = [_json_member(name, table[name]) for name in _LINE_FIELDS]
    attrs = table["attrs"].combine_chunks()
    extra = pc.fill_null(_join(",", pc.utf8_slice_codeunits(attrs, 1, -1)), "")
    return _join('{"ts":"', _rfc3339(table["ts"]), '"', *members, extra, "}\n")


def write_jsonl(table: pa.Table, directory: str | os.PathLike[str], chunk_rows: int = 500_000) -> list[Path]:
    """Write `table` as raw JSONL, one file per host/rank (`<dir>/<host>/rank-<rank>.jsonl`).

    Works in chunks so the text of a 10M-row corpus never has to fit in one Arrow string array.
    """
    root = Path(directory)
    ordered = table.sort_by([("host", "ascending"), ("rank", "ascending"), ("ts", "ascending")])
    written: dict[Path, None] = {}
    for chunk_start in range(0, len(ordered), chunk_rows):
        chunk = ordered.slice(chunk_start, chunk_rows)
        lines = jsonl_lines(chunk)
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32, count=len(lines) + 1, offset=lines.offset * 4)
        data = memoryview(lines.buffers()[2])
        host = chunk["host"].to_numpy()
        rank = pc.fill_null(chunk["rank"], -1).to_numpy()
        bounds = np.flatnonzero(np.r_[True, (host[1:] != host[:-1]) | (rank[1:] != rank[:-1]), True])
        for start, end in pairwise(bounds.tolist()):
            path = root / str(host[start]) / f"rank-{rank[start]:05d}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab" if path in written else "wb") as handle:
                handle.write(data[offsets[start]:offsets[end]])
            written[path] = None
    return list(written)
