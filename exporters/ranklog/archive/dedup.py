"""Exactly-once: which (source_id, offset) keys the archive already holds.

State: for each source, sorted disjoint inclusive ranges ``[lo, hi]`` of offsets already stored,
with the time each range was last extended. A batch is checked with numpy (`searchsorted` per
source, no per-row Python): a row is a duplicate when its offset falls in a stored range, or
repeats an earlier row of the same batch. The rows kept for a source extend the state by one range
per gap they fall in — an agent ships, per source, every line between its first and last offset
in a batch, so the offsets between two shipped lines of one batch belong to that batch. Re-sends,
overlapping re-sends and out-of-order batches (an agent failing over between archives) are all
decided exactly, because ranges record only what this archive stored.

Bounded:
* ranges of a source that were last extended more than `settle` seconds ago are merged with their
  neighbours (the gaps between them are closed): by then nothing can still be in flight for those
  offsets, so an idle source costs one range;
* a source idle for longer than the retention window is forgotten (its records are gone too);
  key-less NDJSON bodies (``ndjson-body:…`` sources) are forgotten after `body_window`;
* so memory is about (active sources × recent batches) ranges, 24 bytes each.

Persistence: :meth:`snapshot` returns an Arrow table (source_id, lo, hi, touched) that the
pipeline writes atomically together with the WAL sequence it covers; entries after it are replayed
through :meth:`apply` at start, which rebuilds exactly the same state.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .ingest import BODY_KEY_PREFIXES


class _Ranges:
    __slots__ = ("hi", "lo", "touched")

    def __init__(self, lo: np.ndarray, hi: np.ndarray, touched: np.ndarray) -> None:
        self.lo, self.hi, self.touched = lo, hi, touched


def _empty() -> _Ranges:
    return _Ranges(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))


class DedupIndex:
    def __init__(self) -> None:
        self._sources: dict[str, _Ranges] = {}

    def __len__(self) -> int:
        return len(self._sources)

    def range_count(self) -> int:
        return sum(len(r.lo) for r in self._sources.values())

    def apply(self, table: pa.Table, now: float) -> np.ndarray:
        """Mark the new keys of `table` as stored; return the boolean mask of rows to keep."""
        n = table.num_rows
        keep = np.ones(n, dtype=bool)
        if n == 0:
            return keep
        encoded = pc.dictionary_encode(table["source_id"]).combine_chunks()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        names = encoded.dictionary.to_pylist()
        offsets = table["offset"].to_numpy()
        order = _source_offset_order(codes, offsets, len(names))
        sorted_codes = codes[order]
        sorted_offsets = offsets[order]
        same_source = sorted_codes[1:] == sorted_codes[:-1]
        repeated = np.r_[False, same_source & (sorted_offsets[1:] == sorted_offsets[:-1])]
        bounds = np.flatnonzero(np.r_[True, ~same_source, True])
        keep_sorted = ~repeated
        firsts = sorted_offsets[bounds[:-1]].tolist()
        lasts = sorted_offsets[bounds[1:] - 1].tolist()
        for group, (start, end) in enumerate(pairwise(bounds.tolist())):
            name = names[sorted_codes[start]]
            ranges = self._sources.get(name)
            if ranges is None or ranges.hi[-1] < firsts[group]:
                # The common case: the batch continues the source past everything stored.
                self._sources[name] = _append(ranges, firsts[group], lasts[group], now)
            else:
                keep_sorted[start:end] &= self._apply_source(name, ranges, sorted_offsets[start:end], now)
        keep[order] = keep_sorted
        return keep

    def _apply_source(self, name: str, ranges: _Ranges, offs: np.ndarray, now: float) -> np.ndarray:
        """Rows of one source (offsets sorted) that overlap stored ranges: exact interval test."""
        repeated = np.r_[False, offs[1:] == offs[:-1]]
        slot = np.searchsorted(ranges.lo, offs, side="right") - 1
        stored = (slot >= 0) & (offs <= ranges.hi[np.maximum(slot, 0)])
        keep = ~stored & ~repeated
        if keep.any():
            self._add(name, ranges, offs[keep], slot[keep], now)
        return keep

    def _add(self, name: str, ranges: _Ranges, new: np.ndarray, slot: np.ndarray, now: float) -> None:
        """Insert one range per gap the kept offsets (sorted) fall in, merging ranges that touch."""
        starts = np.flatnonzero(np.r_[True, slot[1:] != slot[:-1]])
        ends = np.r_[starts[1:], len(new)] - 1
        lo = np.concatenate([ranges.lo, new[starts]])
        hi = np.concatenate([ranges.hi, new[ends]])
        touched = np.concatenate([ranges.touched, np.full(len(starts), now)])
        order = np.argsort(lo, kind="stable")
        self._sources[name] = _merge(lo[order], hi[order], touched[order], np.zeros(len(lo), dtype=bool))

    # --- bounding --------------------------------------------------------------------------------
    def settle(self, now: float, settle_seconds: float, ttl_seconds: float, body_ttl_seconds: float) -> None:
        """Close old gaps and forget idle sources (see the module docstring)."""
        settled_before = now - settle_seconds
        for name in list(self._sources):
            ranges = self._sources[name]
            ttl = body_ttl_seconds if name.startswith(BODY_KEY_PREFIXES) else ttl_seconds
            if len(ranges.lo) == 0 or ranges.touched.max() < now - ttl:
                del self._sources[name]
                continue
            old = ranges.touched < settled_before
            mergeable = np.r_[False, old[1:] & old[:-1]]
            if mergeable.any():
                self._sources[name] = _merge(ranges.lo, ranges.hi, ranges.touched, mergeable)

    # --- persistence -----------------------------------------------------------------------------
    def snapshot(self) -> pa.Table:
        """The whole state as a table; cheap to take under a lock (ranges are never mutated in place)."""
        items = list(self._sources.items())
        counts = np.array([len(r.lo) for _, r in items], dtype=np.int64)
        names = pa.array([name for name, _ in items], pa.string())
        take = pa.array(np.repeat(np.arange(len(items)), counts))

        def column(attr: str, dtype: type) -> np.ndarray:
            parts = [getattr(r, attr) for _, r in items]
            return np.concatenate(parts) if parts else np.empty(0, dtype)

        return pa.table({"source_id": names.take(take), "lo": column("lo", np.int64),
                         "hi": column("hi", np.int64), "touched": column("touched", np.float64)})

    @classmethod
    def restore(cls, table: pa.Table) -> DedupIndex:
        index = cls()
        if table.num_rows == 0:
            return index
        encoded = pc.dictionary_encode(table["source_id"]).combine_chunks()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        names = encoded.dictionary.to_pylist()
        lo, hi = table["lo"].to_numpy(), table["hi"].to_numpy()
        touched = table["touched"].to_numpy()
        order = np.lexsort((lo, codes))
        codes, lo, hi, touched = codes[order], lo[order], hi[order], touched[order]
        bounds = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1], True])
        for start, end in pairwise(bounds.tolist()):
            index._sources[names[codes[start]]] = _Ranges(lo[start:end].copy(), hi[start:end].copy(),
                                                          touched[start:end].copy())
        return index


def _source_offset_order(codes: np.ndarray, offsets: np.ndarray, distinct: int) -> np.ndarray:
    """Row order by (source, offset). Agents send each source's lines in offset order, so a stable
    radix sort on the source code alone usually suffices (~0.5 ms for 64k rows vs ~30 ms lexsort)."""
    if distinct <= 1 << 16:
        order = np.argsort(codes.astype(np.uint16), kind="stable")
        sorted_codes, sorted_offsets = codes[order], offsets[order]
        if not ((sorted_offsets[1:] < sorted_offsets[:-1]) & (sorted_codes[1:] == sorted_codes[:-1])).any():
            return order
    return np.lexsort((offsets, codes))


def _append(ranges: _Ranges | None, first: int, last: int, now: float) -> _Ranges:
    """`ranges` plus [first, last] beyond its end (merged with the last range when adjacent)."""
    if ranges is None or len(ranges.lo) == 0:
        return _Ranges(np.array([first], np.int64), np.array([last], np.int64), np.array([now]))
    if ranges.hi[-1] + 1 >= first:
        hi = ranges.hi.copy()
        hi[-1] = last
        touched = ranges.touched.copy()
        touched[-1] = now
        return _Ranges(ranges.lo, hi, touched)
    return _Ranges(np.append(ranges.lo, first), np.append(ranges.hi, last), np.append(ranges.touched, now))


def _merge(lo: np.ndarray, hi: np.ndarray, touched: np.ndarray, mergeable: np.ndarray) -> _Ranges:
    """Ranges (sorted by lo) with overlapping/adjacent ones merged, and each range i whose
    `mergeable[i]` is set joined to its predecessor whatever the gap."""
    if len(lo) == 0:
        return _empty()
    running = np.maximum.accumulate(hi)
    joins = np.r_[False, lo[1:] <= running[:-1] + 1] | (mergeable & (np.arange(len(lo)) > 0))
    starts = np.flatnonzero(~joins)
    return _Ranges(lo[starts], np.maximum.reduceat(hi, starts), np.maximum.reduceat(touched, starts))
