"""The identity the agent knows across its node's files, on the records it ships and counts.

The parse stage gives a file's records what the file itself says (:mod:`ranklog.parse.identity_stage`,
kept in each file's parser state). Across files, the agent applies the shared rules
(:mod:`ranklog.source_identity`) to what its tracked files' states say — a Ray worker's ``.out`` file
and core-worker log take the rank its ``.err`` file names; a torchrun rank file the global rank the
launcher's console pairs with its local rank — and puts what a one-process file gains into its
layout defaults (``ctx.fields``), which every record parsed from then on takes where its line says
nothing. So the metrics' ``rank`` label (``ranklog_log_records_total``, signatures, steps) and the
shipped records carry it from that moment. What the records shipped before lacked goes to the
archive as *identity notices* (:meth:`NodeIdentity.take_notices`, shipped by :meth:`.ship.Shipper.notify`):
the file's identity as its records now carry it, and a launcher's pairing of local and global
ranks; the archive's map keeps them and readers join them (:mod:`ranklog.archive.identity_map`).
Rule 5 (one host: global rank = local rank) is left out here: an agent sees one node.

The rules run over a few observations per file (no records), when what a file's state says of its
writer changed (its records' span does not count), at most once per :data:`RESOLVE_INTERVAL`, and
when files appear, before their first read (at most every :data:`NEW_FILE_INTERVAL`: a burst of new
files is one pass).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..parse.identity_stage import STATE_KEY
from ..source_identity import Group, Lent, resolve

if TYPE_CHECKING:
    from .tracked_file import TrackedFile

RESOLVE_INTERVAL = 1.0
NEW_FILE_INTERVAL = 0.2  # a burst of new files (a Ray node starting its workers) is resolved in few passes
_LENDABLE = ("rank", "local_rank", "pid", "role")


def observations(tf: TrackedFile) -> list[Group]:
    """What `tf`'s parser state says of its writer(s), as observations."""
    ctx = tf.ctx
    if ctx is None:
        return []
    state = ctx.state.get(STATE_KEY) or {}
    fields = tf.fields
    common: dict[str, Any] = {"source_id": ctx.source_id, "host": ctx.host, "source": tf.path, "format": ctx.format,
                              "job": fields.get("job")}
    if _one_process(tf):
        return _groups(common, state, fields.get("pid"), fields.get("local_rank"), fields.get("rank"))
    out: list[Group] = [Group(**common, local_rank=int(local), rank=rank)  # the launcher's pairing
                        for local, rank in (state.get("launcher") or {}).items()]
    for key, identity in (state.get("streams") or {}).items():
        kind, value = key[0], int(key[1:])
        out += _groups(common, identity, value if kind == "p" else None, value if kind == "l" else None, None)
    return out


def _groups(common: dict[str, Any], identity: dict[str, Any], pid: int | None, local_rank: int | None,
            rank: int | None) -> list[Group]:
    def one(name: str, own: int | None) -> int | None:
        values = identity.get(name) or []
        return own if own is not None else (values[0] if len(values) == 1 else None)

    ranks = [rank] if rank is not None else (identity.get("rank") or [None])
    return [Group(**common, pid=one("pid", pid), local_rank=one("local_rank", local_rank), rank=value,
                  role=identity.get("role"), first_ns=identity.get("first_ns"), last_ns=identity.get("last_ns"))
            for value in ranks]


class NodeIdentity:
    """The tracked files' observations and what the rules lend their files (see the module docstring)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[Group, ...]] = {}
        self._noticed: dict[str, tuple[Group, ...]] = {}  # what was told of each file
        self._notices: list[Group] = []
        self._dirty = False
        self._new = False  # files appeared since the last pass
        self._last = 0.0

    def note(self, tf: TrackedFile) -> None:
        """`tf` was parsed: remember what its state says now."""
        if tf.key is None:
            return
        found = tuple(observations(tf))
        before = self._seen.get(tf.key)
        self._seen[tf.key] = found  # the spans move with every read: they count when the rules run
        if before is None or _facts(before) != _facts(found):
            self._dirty = True
            self._tell(tf.key, tuple(g for g in found if g.pid is None and g.local_rank is not None
                                     and g.rank is not None and not _one_process(tf)))  # a launcher's pairs

    def forget(self, tf: TrackedFile) -> None:
        self._noticed.pop(tf.key or "", None)
        if self._seen.pop(tf.key or "", None) is not None:
            self._dirty = True

    def take_notices(self) -> list[Group]:
        """What the archive must be told since the last call (see the module docstring)."""
        out, self._notices = self._notices, []
        return out

    def _tell(self, key: str, groups: tuple[Group, ...]) -> None:
        spanless = tuple(replace(g, first_ns=None, last_ns=None, records=0) for g in groups)
        if spanless and self._noticed.get(key) != spanless:
            self._noticed[key] = spanless
            self._notices.extend(spanless)

    def lend(self, files: list[TrackedFile], now: float | None = None) -> list[TrackedFile]:
        """Resolve and put what each one-process file gains into its layout defaults; returns the files
        whose defaults changed. A file seen for the first time is resolved before its first read (its
        layout alone may be enough: a rank file's local rank); see the module docstring."""
        now = time.monotonic() if now is None else now
        for tf in files:
            if tf.key is not None and tf.ctx is not None and tf.key not in self._seen:
                self.note(tf)
                self._new = True
        if not self._dirty or now - self._last < (NEW_FILE_INTERVAL if self._new else RESOLVE_INTERVAL):
            return []
        self._dirty, self._new, self._last = False, False, now
        lent = resolve([g for groups in self._seen.values() for g in groups], single_node=False)
        changed = []
        for tf in files:
            mine = self._seen.get(tf.key or "")
            if not mine or tf.ctx is None or not _one_process(tf):
                continue
            gained = _gained(lent.get(mine[0].key, Lent()))
            fields = {**tf.ctx.fields, **{k: v for k, v in gained.items() if tf.ctx.fields.get(k) is None}}
            if fields != tf.ctx.fields:
                tf.ctx.fields = fields
                changed.append(tf)
                self._tell(tf.key, (replace(mine[0], **{k: fields.get(k) for k in _LENDABLE}),))
        return changed


def _facts(groups: tuple[Group, ...]) -> tuple[Group, ...]:
    """What the rules look at but the spans (which change with every read)."""
    return tuple(replace(g, first_ns=None, last_ns=None) for g in groups)


def _one_process(tf: TrackedFile) -> bool:
    return tf.fields.get("pid") is not None or tf.fields.get("local_rank") is not None


def _gained(lent: Lent) -> dict[str, Any]:
    return {name: getattr(lent, name) for name in _LENDABLE if getattr(lent, name) is not None}
