"""group_lines against the plain walker: every line fed in order, one open record per stream.

That walk is the definition of the grouping rules (multiline's docstring); group_lines only decides
most lines in bulk and walks the rest, per stream. Random kinds of every sort, a few streams, tiny
windows and bounds, so that window ends, splits, interjections and cuts all happen."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ranklog.parse.multiline import Block, Grouping, Kind, _Walker, group_lines


def walk(kinds: np.ndarray, lengths: np.ndarray, streams: list[str], *, final: bool, max_lines: int, max_bytes: int,
         stream_window: int, blocks: np.ndarray | None = None) -> Grouping:
    """Every line through one walker (what group_lines did for prefixed lines before it went in bulk)."""
    n = len(kinds)
    walker = _Walker(lengths.tolist(), max_lines, max_bytes, stream_window, None if blocks is None else blocks.tolist())
    for i, kind in enumerate(kinds.tolist()):
        walker.feed(i, kind, streams[i])
    for stream, group in list(walker.open.items()):
        if final or n - group.last_seen > stream_window:
            walker.close(stream)
    groups = sorted(walker.groups, key=lambda g: g.start)
    cut = min((g.start for g in walker.open.values()), default=n)
    while True:
        overlapping = [g.start for g in groups if g.start < cut and g.last >= cut]
        if not overlapping:
            break
        cut = min(overlapping)
    kept = [g for g in groups if g.start < cut]
    multi = {g.start: g for g in kept if len(g.lines) > 1 or g.roles[0] == "x" or g.split}
    return Grouping(np.array([g.start for g in kept], dtype=np.int64), multi, cut)


def _same(got: Grouping, want: Grouping) -> None:
    assert got.cut == want.cut
    assert got.starts.tolist() == want.starts.tolist()
    assert got.multi.keys() == want.multi.keys()
    for start, group in want.multi.items():
        other = got.multi[start]
        assert (other.lines, other.roles, other.exception_lines, other.split, other.header) == \
               (group.lines, group.roles, group.exception_lines, group.split, group.header), start


KINDS = st.sampled_from([Kind.HEADER, Kind.HEADER, Kind.HEADER_ERROR, Kind.OTHER, Kind.OTHER, Kind.BLANK,
                         Kind.INDENT, Kind.INDENT, Kind.TRACEBACK, Kind.CONNECTOR, Kind.MARKER, Kind.INTERJECTION,
                         Kind.LONG_INTERJECTION, Kind.WARNING, Kind.KEYVALUE, Kind.KEYVALUE, Kind.BANNER, Kind.LEAD])


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(st.tuples(KINDS, st.integers(0, 2), st.integers(1, 40)), max_size=80), final=st.booleans(),
       max_lines=st.integers(2, 12), max_bytes=st.integers(30, 400), window=st.integers(1, 12),
       prefixed=st.booleans(), block_seed=st.integers(0, 2**32 - 1))
# a traceback interrupted by an interjection: the window counts from its last line, not from the interjection
@example(lines=[(Kind.HEADER_ERROR, 0, 9), (Kind.TRACEBACK, 0, 9), (Kind.INDENT, 0, 9), (Kind.HEADER, 1, 9),
                (Kind.HEADER, 1, 9), (Kind.INTERJECTION, 0, 1), (Kind.INDENT, 0, 9)], final=True, max_lines=50,
         max_bytes=1000, window=3, prefixed=True, block_seed=0)
# without prefixes too, a record followed by more than a window of interjections ends the read complete
# (found by this test in a clean-clone run: the single-stream path held it back)
@example(lines=[(Kind.TRACEBACK, 0, 1), (Kind.INTERJECTION, 0, 1)], final=False, max_lines=5, max_bytes=112,
         window=1, prefixed=False, block_seed=0)
def test_group_lines_is_the_walk(lines, final, max_lines, max_bytes, window, prefixed, block_seed):
    kinds = np.array([kind for kind, _, _ in lines], dtype=np.int8)
    lengths = np.array([length for _, _, length in lines], dtype=np.int64)
    streams = [f"[s{stream}]" if prefixed else "" for _, stream, _ in lines]
    # what a header's message or a key-value line says about the lines after it (blocks, dumps)
    rng = np.random.default_rng(block_seed)
    blocks = np.where(np.isin(kinds, (Kind.HEADER, Kind.HEADER_ERROR, Kind.KEYVALUE)),
                      rng.choice([Block.NONE, Block.ITEMS, Block.OPENS, Block.REST], len(kinds)), Block.NONE).astype(np.int8)
    bounds = {"max_lines": max_lines, "max_bytes": max_bytes, "stream_window": window}
    got = group_lines(kinds, lengths, streams if prefixed else None, final=final, blocks=blocks, **bounds)
    _same(got, walk(kinds, lengths, streams, final=final, blocks=blocks, **bounds))
