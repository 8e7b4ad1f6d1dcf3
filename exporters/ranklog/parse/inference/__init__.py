"""Layout inference: a text source's line layout learned from its own lines.

No list of known formats: each source's header layout — where the time sits and its syntax, the
level, logger and code-position fields, rank fields, where the message starts — is learned from the
source's lines (:mod:`.tokens` proposes fields, :mod:`.shapes` decides which are fields, :mod:`.patterns`
compiles the decision to RE2), after the launcher prefixes stacked in front of them are peeled
(:mod:`.prefixes`). The columnar engine (:mod:`ranklog.parse.text_layouts`) applies the patterns.

A source's evidence lives in ``ctx.state["layout"]`` (plain JSON, persisted with the agent's
checkpoint): the first ``SAMPLE_LINES`` lines of the file, then every later line that looks like a
header (it starts with a time or a level word) and fits none of the learned shapes — a new header
shape appearing mid-file is learned when it appears. Only lines before a call's cut (the bytes it
consumed) are committed to the state, so re-offered bytes are never counted twice, and feeding a
file in any pieces leaves the same state as one feed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..multiline import INTERJECTION, LONG_INTERJECTION
from .patterns import shape_pattern
from .shapes import SAMPLE_LINES, Evidence, Shape, decide
from .tokens import Scan, scan
from .vocabulary import LEVEL_WORDS, MONTHS

if TYPE_CHECKING:
    from ..contract import SourceContext

STATE_KEY = "layout"
FIRST_LINES = 8  # a source's first lines wait for this many (or for the file to go quiet) to learn from
STAND_INS = (INTERJECTION, LONG_INTERJECTION)
MAX_RELEARN = 64  # lines looked at per call for new header shapes
# a line that may be a header: it starts (after an opening bracket) with a time or a level word
HEADER_LIKE = (r"^[\[(]?(?:\d{4}[-/]\d\d[-/]\d\d[T ]\d|\d\d/\d\d/\d\d|\d\d-\d\d \d\d:|\d\d:\d\d:\d\d"
               r"|[A-Z]\d{4} \d\d:|(?:" + "|".join(MONTHS) + r") [ \d]\d \d|1\d{9}"
               r"|(?i:" + "|".join(LEVEL_WORDS) + r")\b)")


@dataclass
class Lesson:
    """One read's learning: the evidence so far (state + this read's lines), the lines scanned in
    this read (by line index; the first sample's and later header-like ones) and the shapes decided."""

    base: Evidence
    seen: int  # lines of the file taken into the first sample before this read
    scans: list[tuple[int, Scan]] = field(default_factory=list)
    sampled: int = 0  # how many of `scans` belong to the first sample (they come first)
    shapes: tuple[Shape, ...] = ()

    def evidence(self, before: int | None = None) -> Evidence:
        """The state's evidence plus this read's scanned lines (those before line `before`)."""
        out = Evidence(self.base.lines, dict(self.base.paths), {k: [v[0], list(v[1])] for k, v in self.base.words.items()})
        out.add([one for i, one in self.scans if before is None or i < before])
        return out

    def patterns(self) -> tuple[str, ...]:
        return tuple(shape_pattern(shape) for shape in self.shapes)

    def commit(self, ctx: SourceContext, cut: int, lo: int = 0) -> None:
        """Keep in ``ctx.state`` what the lines before line `cut` of this read (starting at line `lo`
        of the buffer) showed."""
        kept = sum(1 for i, _ in self.scans if i < lo + cut)
        if not kept:
            return
        state = self.evidence(before=lo + cut).to_state()
        state["seen"] = self.seen + min(self.sampled, kept)
        ctx.state[STATE_KEY] = state


def waits(data: bytes, ctx: SourceContext, *, final: bool) -> bool:
    """Should a read of a source that has shown fewer than ``FIRST_LINES`` lines wait for more? One or
    two lines cannot say which of their tokens are fields; the agent offers the bytes again with more
    lines, or as final once the file has gone quiet."""
    if final:
        return False
    need = FIRST_LINES - int((ctx.state.get(STATE_KEY) or {}).get("seen", 0))
    at = 0
    while need > 0:
        end = data.find(b"\n", at)
        if end < 0:
            return True
        if data[at:end].strip() and data[at:at + 1] not in (b" ", b"\t"):  # (indented lines continue a record)
            need -= 1
        at = end + 1
    return False


def learn(ctx: SourceContext, body: pa.Array, lo: int, hi: int) -> Lesson:
    """The lesson of lines [lo, hi) of `body` (prefixes peeled) for a read of `ctx`'s source: its
    lines up to the first sample's size are scanned (blank lines and stand-ins for another writer's
    lines, see :mod:`..multiline`, are no evidence)."""
    state: dict[str, Any] = ctx.state.get(STATE_KEY) or {}
    lesson = Lesson(Evidence.from_state(state), int(state.get("seen", 0)))
    want = SAMPLE_LINES - lesson.seen
    at = lo
    while want > 0 and at < hi:
        texts = body.slice(at, min(hi - at, want + 64)).to_pylist()
        for i, text in enumerate(texts):
            if text and text.strip() and text not in STAND_INS:
                lesson.scans.append((at + i, scan(text)))
                want -= 1
                if not want:
                    break
        at += len(texts)
    lesson.sampled = len(lesson.scans)
    lesson.shapes = decide(lesson.evidence())
    return lesson


def relearn(lesson: Lesson, body: pa.Array, unmatched: np.ndarray, lo: int, hi: int) -> bool:
    """Scan the lines of [lo, hi) that no shape took and look like headers (`unmatched`: a mask over
    `body`); True when that changed the shapes."""
    rows = np.flatnonzero(unmatched[lo:hi]) + lo
    if lesson.sampled:  # the first sample's lines are scanned already
        rows = rows[rows > lesson.scans[lesson.sampled - 1][0]]
    if not len(rows):
        return False
    candidates = body.take(pa.array(rows))
    like = np.asarray(pc.fill_null(pc.match_substring_regex(candidates, HEADER_LIKE), False))
    rows = rows[like][:MAX_RELEARN]
    if not len(rows):
        return False
    lesson.scans += [(int(i), scan(text)) for i, text in zip(rows.tolist(), body.take(pa.array(rows)).to_pylist(),
                                                              strict=True)]
    shapes = decide(lesson.evidence())
    changed = shapes != lesson.shapes
    lesson.shapes = shapes
    return changed


def learned_patterns(ctx: SourceContext) -> tuple[str, ...]:
    """The RE2 patterns of what `ctx`'s source has learned so far (for a reader's curiosity and tests)."""
    return tuple(shape_pattern(shape) for shape in decide(Evidence.from_state(ctx.state.get(STATE_KEY))))
