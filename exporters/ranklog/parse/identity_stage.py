"""The source-level identity stage: what a source says about its writer goes on all of its records.

The parsers give each record what its own line (or the file's layout, ``ctx.fields``) says; this
stage runs on every parsed batch and adds what the *source* says, remembering it in
``ctx.state["identity"]`` (checkpointed by the agent with the rest of the parser state):

- A source the layout gives to one process (``ctx.fields`` names its pid or local rank: torchrun's
  per-rank files, Ray's worker and core-worker files, ranklog's ``rank-N.pid-P`` files) has one
  identity: the rank, pid and local rank its records name (one value each; a source naming two ranks
  is marked and lends none) and the fullest role name (``kZ3xWqWorkerDict_0:1`` over the class
  ``WorkerDict`` of Ray's marker line). From the moment one of its lines names them, every record
  of the source carries them. Records shipped before that are given them at read time
  (:mod:`ranklog.source_identity`, rule 2).
- A shared stream (a launcher's console, a Ray driver's console) holds one identity per stream: the
  prefix's local rank (``[default1]:``) or pid (``(Trainer pid=799)``).
- torch elastic's rendezvous result in a launcher's console (``local_ranks=[0, 1]`` then
  ``global_ranks=[2, 3]``, printed at ``LOGLEVEL=INFO`` before every attempt's workers start) pairs
  each local rank with its global rank: the console's ``[defaultN]:`` lines after it take it, and
  the state keeps the pairing for the rank files of the same node (:mod:`ranklog.agent.node_identity`).
  Any text source is searched for it (one substring search per batch): a console whose first lines
  are the launcher's own is not recognised as torchrun's by its head.
- Ray's raylet names its node ("Raylet of id … hostname: X"): read from a copied session folder
  (no host known), its records take that host, and so, at read time, the folder's other files
  (:mod:`ranklog.source_identity`, rule 1).

Every value is learned from lines the source itself wrote; lending across sources happens at read
time and in the agent (the rules of :mod:`ranklog.source_identity`), never here. Costs are per
batch and per distinct identity, not per line: a batch that adds nothing (a JSON file naming its
rank on every line) costs two ``unique`` kernels.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ranklog.source_identity import UNKNOWN_HOST, raylet_host, role_family

from .batch import replace_columns

if TYPE_CHECKING:
    from .contract import SourceContext

STATE_KEY = "identity"
MAX_STREAMS = 4096  # streams of one shared source remembered (a console of a 1000-rank launcher fits)
_NUMBERS = ("rank", "pid", "local_rank")
_RANK_LIST = re.compile(r"\b(?P<kind>local|global)_ranks=\[(?P<ranks>[\d,\s]*)\][ \t]*$", re.M)
_RANK_LIST_HINT = "_ranks=["
_RAYLET_HINT = "Raylet of id"
# formats whose records are never a launcher's console (the rendezvous result is printed as text)
_STRUCTURED = frozenset({"ranklog", "json", "verl-jsonl", "torchrun-error"})


def with_source_identity(batch: pa.RecordBatch, ctx: SourceContext) -> pa.RecordBatch:
    """`batch` (records of `ctx`'s source, in file order) with the source's identity filled in;
    ``ctx.state`` learns from it (see the module docstring)."""
    if not batch.num_rows:
        return batch
    columns = _one_identity(batch, ctx) if _one_process(ctx) else _streams(batch, ctx)
    if (ctx.host or UNKNOWN_HOST) == UNKNOWN_HOST and (ctx.fields or {}).get("ray_component") == "raylet":
        host = _raylet_host(batch, ctx)
        if host is not None:
            own = columns.get("host", batch.column("host"))
            columns["host"] = pc.if_else(pc.equal(pc.fill_null(own, UNKNOWN_HOST), UNKNOWN_HOST), host, own)
    return replace_columns(batch, columns) if columns else batch


def _one_process(ctx: SourceContext) -> bool:
    fields = ctx.fields or {}
    return fields.get("pid") is not None or fields.get("local_rank") is not None


# -- what one identity learns ------------------------------------------------------------------------
def learn(known: dict[str, Any], seen: dict[str, list[Any]]) -> dict[str, Any]:
    """`known` (one identity, as JSON) with `seen` (values per field) added: for rank, pid and local
    rank the values seen (two at most: two mean a conflict, nothing is lent), for the role its
    fullest name (:func:`ranklog.source_identity.role_family`) or a conflict."""
    out = dict(known)
    for name in _NUMBERS:
        values = list(out.get(name, []))
        for value in seen.get(name, ()):
            if value is not None and value not in values and len(values) < 2:
                values.append(value)
        if values:
            out[name] = values
    roles = [r for r in seen.get("role", ()) if r]
    if roles and not out.get("role_conflict"):
        role = role_family([out.get("role"), *roles])
        if role is None:
            out.pop("role", None)
            out["role_conflict"] = True
        else:
            out["role"] = role
    return out


def _spanned(identity: dict[str, Any], batch: pa.RecordBatch) -> dict[str, Any]:
    """`identity` with the time span of the source's records (what tells a reused pid's processes
    apart, :data:`ranklog.source_identity.SAME_PROCESS_GAP_NS`)."""
    ts = batch.column("ts")
    bounds = pc.min_max(ts)
    low, high = bounds["min"].value, bounds["max"].value
    if low is None:
        return identity
    scale = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[ts.type.unit]
    first, last = identity.get("first_ns"), identity.get("last_ns")
    return {**identity, "first_ns": min(low * scale, first if first is not None else low * scale),
            "last_ns": max(high * scale, last if last is not None else high * scale)}


def _one_value(identity: dict[str, Any], name: str) -> Any:
    values = identity.get(name) or []
    return values[0] if len(values) == 1 else None


def _distinct(column: pa.Array) -> list[Any]:
    if column.null_count == len(column):
        return []
    return [v for v in pc.unique(column).to_pylist() if v is not None]


# -- a one-process source ----------------------------------------------------------------------------
def _one_identity(batch: pa.RecordBatch, ctx: SourceContext) -> dict[str, pa.Array]:
    known = ctx.state.get(STATE_KEY) or {}
    identity = _spanned(learn(known, {name: _distinct(batch.column(name)) for name in (*_NUMBERS, "role")}), batch)
    if identity != known:
        ctx.state[STATE_KEY] = identity
    out: dict[str, pa.Array] = {}
    for name in _NUMBERS:
        value, column = _one_value(identity, name), batch.column(name)
        if value is not None and column.null_count:
            out[name] = pc.fill_null(column, pa.scalar(value, column.type))
    role = identity.get("role")
    if role:
        column = batch.column("role")
        replaced = [name for name in _distinct(column) if name != role and name.lower() in role.lower()]
        takes = pc.is_null(column)
        if replaced:
            takes = pc.or_(takes, pc.fill_null(pc.is_in(column, value_set=pa.array(replaced, pa.string())), False))
        if pc.any(takes).as_py():
            out["role"] = pc.if_else(takes, pa.scalar(role, pa.string()), column)
    return out


# -- a shared source: one identity per stream ----------------------------------------------------------
def _stream_keys(batch: pa.RecordBatch) -> pa.Array:
    """Each record's stream: ``l<local rank>`` for a launcher prefix, else ``p<pid>``, else null."""
    local = pc.binary_join_element_wise("l", pc.cast(batch.column("local_rank"), pa.string()), "")
    pid = pc.binary_join_element_wise("p", pc.cast(batch.column("pid"), pa.string()), "")
    return pc.coalesce(local, pid)


def _streams(batch: pa.RecordBatch, ctx: SourceContext) -> dict[str, pa.Array]:
    """A shared source's records: the launcher's rank pairs (first: a stream spans the launcher's
    restarts, each attempt paired anew), then each stream's identity."""
    pairs = [] if ctx.format in _STRUCTURED else _launcher_pairs(batch, ctx)
    if batch.column("local_rank").null_count == batch.num_rows and batch.column("pid").null_count == batch.num_rows:
        return {}
    rank = _paired_ranks(batch.column("rank"), batch, pairs)
    current = replace_columns(batch, {"rank": rank}) if rank is not None else batch
    keys = _stream_keys(current)
    state = ctx.state.get(STATE_KEY) or {}
    known = state.get("streams") or {}
    streams = dict(known)
    distinct = pa.table({"key": keys, **{name: current.column(name) for name in (*_NUMBERS, "role")}}).group_by(
        ["key", *_NUMBERS, "role"], use_threads=False).aggregate([]).to_pylist()
    seen: dict[str, dict[str, list[Any]]] = {}
    for row in distinct:
        if row["key"] is not None:
            entry = seen.setdefault(row["key"], {})
            for name in (*_NUMBERS, "role"):
                entry.setdefault(name, []).append(row[name])
    for key, values in seen.items():
        if key in streams or len(streams) < MAX_STREAMS:
            streams[key] = learn(streams.get(key, {}), values)
    if streams != known:
        ctx.state[STATE_KEY] = {**(ctx.state.get(STATE_KEY) or state), "streams": streams}
    out = _fill_streams(current, keys, {k: streams[k] for k in seen if k in streams})
    if rank is not None and "rank" not in out:
        out["rank"] = rank
    return out


def _fill_streams(batch: pa.RecordBatch, keys: pa.Array, identities: dict[str, dict[str, Any]]) -> dict[str, pa.Array]:
    """The columns that change when each stream's records take their stream's identity."""
    names = list(identities)
    if not names:
        return {}
    at = pc.index_in(keys, value_set=pa.array(names, pa.string()))
    out: dict[str, pa.Array] = {}
    for name in _NUMBERS:
        column = batch.column(name)
        values = [_one_value(identities[k], name) for k in names]
        if column.null_count and any(v is not None for v in values):
            filled = pc.coalesce(column, pa.array(values, column.type).take(at))
            if not filled.equals(column):
                out[name] = filled
    roles = [identities[k].get("role") for k in names]
    if any(roles):
        column = batch.column("role")
        family = pa.array(roles, pa.string()).take(at)
        replaced = [f"{k}\x1f{name}" for k, role in zip(names, roles, strict=True) if role
                    for name in _distinct(column) if name != role and name.lower() in role.lower()]
        takes = pc.and_(pc.is_valid(family), pc.is_null(column))
        if replaced:
            pair = pc.binary_join_element_wise(keys, column, "\x1f")
            takes = pc.or_(takes, pc.fill_null(pc.is_in(pair, value_set=pa.array(replaced, pa.string())), False))
        if pc.any(takes).as_py():
            out["role"] = pc.if_else(takes, family, column)
    return out


def _launcher_pairs(batch: pa.RecordBatch, ctx: SourceContext) -> list[tuple[int, dict[int, int]]]:
    """torch elastic's rendezvous results: (offset from which each holds, local → global rank),
    starting with the one in force before `batch`; ``ctx.state`` keeps the last one."""
    state = ctx.state.get(STATE_KEY) or {}
    in_force = {int(k): v for k, v in (state.get("launcher") or {}).items()}
    out = [(-1, in_force)] if in_force else []
    msg = batch.column("msg")
    hits = pc.fill_null(pc.match_substring(msg, _RANK_LIST_HINT), False)
    if not pc.any(hits).as_py():
        return out
    rows = pa.array(np.flatnonzero(hits.to_numpy(zero_copy_only=False)))
    pending = state.get("launcher_local")
    for text, offset in zip(msg.take(rows).to_pylist(), batch.column("offset").take(rows).to_pylist(), strict=True):
        # a line a record, or the whole rendezvous result as one multi-line record
        for found in _RANK_LIST.finditer(text or ""):
            numbers = [int(x) for x in found["ranks"].replace(" ", "").split(",") if x]
            if found["kind"] == "local":
                pending = numbers
            elif pending is not None and len(pending) == len(numbers):
                in_force = dict(zip(pending, numbers, strict=True))
                out.append((offset, in_force))
                pending = None
    updated = {k: v for k, v in state.items() if k != "launcher_local"}
    if in_force:
        updated["launcher"] = {str(k): v for k, v in in_force.items()}
    if pending is not None:
        updated["launcher_local"] = pending
    if updated != state:
        ctx.state[STATE_KEY] = updated
    return out


def _paired_ranks(rank: pa.Array, batch: pa.RecordBatch, pairs: list[tuple[int, dict[int, int]]]) -> pa.Array | None:
    """`rank` with the launcher's global rank on records that have a local rank but no rank, each by
    the rendezvous result in force at its offset (None: nothing changes)."""
    local = batch.column("local_rank")
    if not pairs or rank.null_count == 0 or local.null_count == len(local):
        return None
    which = np.searchsorted(np.array([start for start, _ in pairs], dtype=np.int64),
                            batch.column("offset").to_numpy(), side="right") - 1
    own = rank.to_pylist()
    paired = [r if r is not None or lr is None or w < 0 else pairs[w][1].get(lr)
              for r, lr, w in zip(own, local.to_pylist(), which.tolist(), strict=True)]
    return None if paired == own else pa.array(paired, rank.type)


# -- a raylet's own host -------------------------------------------------------------------------------
def _raylet_host(batch: pa.RecordBatch, ctx: SourceContext) -> str | None:
    """The host a raylet's own file names (remembered), for a source read without a host."""
    state = ctx.state.get(STATE_KEY) or {}
    if state.get("host"):
        return state["host"]
    msg = batch.column("msg")
    hits = pc.fill_null(pc.match_substring(msg, _RAYLET_HINT), False)
    if not pc.any(hits).as_py():
        return None
    for text in msg.filter(hits).to_pylist():
        found = raylet_host(text or "")
        if found is not None:
            ctx.state[STATE_KEY] = {**state, "host": found[0]}
            return found[0]
    return None
