"""The expected records of a corpus entry, from its processes' sidecars and its launcher's facts.

For each output file (``truth/sources.json``) the lines are split among the groups that write it
(by the launcher's prefix, e.g. torchrun's ``[default1]:``), and each group's text is walked from
the start: where the next sidecar record of one of its writers is found verbatim, that is one
expected record with exactly those lines; a line no sidecar record claims is a *foreign* line (C++
glog output, the launcher's own lines). The walk only compares text the process says it wrote with
the file; it never reads a field out of a line.

What each expected record says (``None``: not judged, the output does not show it):

- ``lines``: offsets of its lines — no record may start at any but the first (a record is never
  split), and where the layout prints a header (time, level or logger) a record must start at the
  first: that is what says the lines before it ended (a caught traceback must not swallow the lines
  after it). A headerless line (a ``print``, a traceback printed by ``sys.excepthook``) may belong to
  the record before it as far as the output can tell, so its start is not judged;
- ``time_us``: the instant as printed (UTC µs), truncated to the printed precision, where the layout
  prints a time;
- ``level`` (normalized), ``logger``: where the layout prints them;
- ``rank``: where the file's place or the launcher's prefix reveals it (a per-rank file, a
  ``[defaultN]:`` line on one node), or the layout prints a rank field.

Foreign lines are judged only on the rank their file or prefix reveals: no sidecar sees them.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.corpus.library import SOURCES


@dataclass
class Expected:
    source: str  # path relative to out/
    lines: list[int]  # byte offsets of the record's lines in the file
    kind: str  # log, print, warning, traceback, line (a loose write), foreign
    text: str
    header: bool = False  # the layout prints a time, level or logger in front: the record's start shows
    time_us: int | None = None
    level: str | None = None
    logger: str | None = None
    rank: int | None = None


@dataclass
class Entry:
    name: str
    path: Path
    expected: list[Expected] = field(default_factory=list)
    unaligned: list[str] = field(default_factory=list)  # sidecar records not found in their file

    @property
    def out(self) -> Path:
        return self.path / "out"

    def nodes(self) -> list[str]:
        return sorted(p.name for p in self.out.iterdir() if p.is_dir())


def normalized_level(levelno: int | None) -> str | None:
    """A numeric level as ranklog's level column spells it (loguru's SUCCESS counts as INFO, TRACE as DEBUG)."""
    if levelno is None:
        return None
    for limit, name in ((10, "DEBUG"), (29, "INFO"), (30, "WARNING"), (40, "ERROR")):
        if levelno <= limit:
            return name
    return "CRITICAL"


def printed_time_us(record: dict[str, Any]) -> int | None:
    """The record's time as its layout prints it, in UTC microseconds (None: no time printed)."""
    if not record.get("time_shown"):
        return None
    created = record["created"]
    whole, frac = int(created), created - int(created)
    us = record.get("time_us", whole * 1_000_000 + round(frac * 1_000_000))  # as datetime.fromtimestamp rounds
    precision = record.get("precision", "ms")
    if precision == "ms" and "msecs" in record:  # logging: int(created) + int(msecs), as formatTime prints
        return int(created) * 1_000_000 + int(record["msecs"]) * 1000
    step = {"us": 1, "ms": 1000, "s": 1_000_000, "min": 60_000_000}[precision]
    return us - us % step


def _sidecars(truth: Path) -> tuple[dict[tuple[str, int, str], deque], dict[tuple[str, int], dict]]:
    """Each writer's records in order, keyed (host, pid, stream), and each process's identity."""
    feeds: dict[tuple[str, int, str], deque] = defaultdict(deque)
    identities: dict[tuple[str, int], dict] = {}
    for path in sorted(truth.glob("*.jsonl")):
        host, _, pid_text = path.stem.rpartition("-")
        pid = int(pid_text)
        identity: dict[str, Any] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if "identity" in record:
                identity.update(record["identity"])
            elif record.get("text"):
                feeds[(host, pid, record["stream"])].append(record)
        identities[(host, pid)] = identity
    return feeds, identities


def load(path: Path) -> Entry:
    """The expected records of the entry at `path` (``tests/corpus/<name>``)."""
    from tests.scenarios.library import restore_mtimes

    restore_mtimes(path)
    entry = Entry(path.name, path)
    feeds, identities = _sidecars(path / "truth")
    for source in json.loads((path / "truth" / SOURCES).read_text()):
        _align_file(entry, source, feeds, identities)
    return entry


def _align_file(entry: Entry, source: dict[str, Any], feeds: dict, identities: dict) -> None:
    data = (entry.out / source["path"]).read_bytes()
    offsets, lines, pos = [], [], 0
    for line in re.findall(rb"[^\n]*\n|[^\n]+$", data):  # lines end at \n only (a \r is inside a line)
        offsets.append(pos)
        lines.append(line)
        pos += len(line)
    groups = source["groups"]
    prefixed = [g for g in groups if g["prefix"]]
    unprefixed = next((g for g in groups if not g["prefix"]), None)
    members: dict[int, list[tuple[int, bytes]]] = defaultdict(list)  # group index -> (offset, stripped line)
    for offset, line in zip(offsets, lines, strict=True):
        index = next((i for i, g in enumerate(groups) if g["prefix"] and line.startswith(g["prefix"].encode())), None)
        if index is None:
            index = groups.index(unprefixed) if unprefixed is not None else -1
        prefix = groups[index]["prefix"].encode() if index >= 0 else b""
        members[index].append((offset, line[len(prefix):]))
    # a launcher's own records include the lines it copies from its workers behind their prefix: those
    # are the workers' records, not the launcher's
    copies = tuple(g["prefix"] for g in prefixed)
    for index, group_lines in members.items():
        group = groups[index] if index >= 0 else {"feeds": [], "identity": None}
        _align_group(entry, source["path"], group, group_lines, feeds, identities, copies if index >= 0 and not group["prefix"] else ())


def _next_match(queue: deque, text: bytes, pos: int, forwarded: bool) -> int | None:
    """Which queued record is written at `pos`: the next one, or for forwarded lines any later one."""
    for k, record in enumerate(queue if forwarded else list(queue)[:1]):
        if text.startswith(record["text"].encode(), pos):
            return k
    return None


def _align_group(entry: Entry, path: str, group: dict[str, Any], lines: list[tuple[int, bytes]],
                 feeds: dict, identities: dict, copies: tuple[str, ...] = ()) -> None:
    text = b"".join(line for _, line in lines)
    starts, at = [], 0  # each line's start in `text`
    for _, line in lines:
        starts.append(at)
        at += len(line)
    queues = [(tuple(f), deque(r for r in feeds.get(tuple(f), ()) if not (copies and r["text"].startswith(copies))))
              for f in group["feeds"]]  # copies: the same writer feeds several files
    file_rank = (group.get("identity") or {}).get("rank")
    found: list[Expected] = []
    i = 0
    while i < len(lines):
        pos = starts[i]
        matching = [(q[k]["created"], key, q, k) for key, q in queues
                    for k in [_next_match(q, text, pos, group.get("forwarded", False))] if k is not None]
        if not matching:
            found.append(Expected(path, [lines[i][0]], "foreign", lines[i][1].decode(errors="replace"), rank=file_rank))
            i += 1
            continue
        _, key, queue, skipped = min(matching, key=lambda m: m[0])
        for _ in range(skipped):  # records the launcher did not forward to this file
            queue.popleft()
        record = queue.popleft()
        end = pos + len(record["text"].encode())
        first, last = i, max(i + 1, bisect.bisect_left(starts, end))
        identity = identities.get(key[:2], {})
        rank = file_rank if file_rank is not None else (identity.get("rank") if record.get("rank_shown") else None)
        facts = {"time_us": printed_time_us(record),
                 "level": normalized_level(record.get("levelno")) if record.get("level_shown") else None,
                 "logger": record.get("logger") if record.get("logger_shown") else None, "rank": rank,
                 "header": any(record.get(k) for k in ("time_shown", "level_shown", "logger_shown"))}
        if record["kind"] in ("print", "line"):  # a reader cannot tell one print of two lines from two prints
            for k in range(first, last):
                found.append(Expected(path, [lines[k][0]], record["kind"], lines[k][1].decode(errors="replace"), **facts))
        else:
            found.append(Expected(path, [lines[k][0] for k in range(first, last)], record["kind"],
                                  record["text"], **facts))
        i = last
    entry.expected.extend(found)
    for key, queue in queues if not group.get("forwarded") else ():  # a forwarding launcher may drop lines
        entry.unaligned.extend(f"{path}: {key}: {r['text'][:80]!r}" for r in queue)
