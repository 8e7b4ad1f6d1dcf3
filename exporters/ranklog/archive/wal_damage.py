"""What WAL damage cost, told where operators and ``ranklog integrity`` look.

Replay (:mod:`.wal`) finds damaged regions; only entries not yet in Parquet (sequence numbers past the
flush journal's) were lost — their records were acknowledged and exist nowhere else. Each loss
becomes:

- the counters ``ranklog_archive_wal_corrupt_entries_total`` / ``…_records_total`` /
  ``…_bytes_total`` (the alert ``RanklogArchiveWalCorruption`` watches the first);
- an ERROR log line naming the segment, the byte position and the counts;
- a *loss notice*: an ERROR record stored in the archive itself (source ``wal:<segment>``,
  ``attrs.ranklog_wal_lost_entries`` / ``ranklog_wal_lost_records`` / ``ranklog_wal_lost_bytes``), which
  ``ranklog integrity`` reports and fails on, whatever the archive's storage (a directory or a
  bucket) and wherever integrity runs. Its key is (``ranklog-archive:<archive id>:wal``, first lost
  sequence number): if the archive dies before the damaged segment is set aside and finds the same
  damage again, the second notice is a duplicate and is not stored twice.

A region's record count is known when the damaged entry's header survived (the header carries it);
otherwise it is reported as unknown (``ranklog_wal_lost_records`` null) and the counter gets nothing.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from ..archive_layout import WAL_LOST_BYTES, WAL_LOST_ENTRIES, WAL_LOST_RECORDS, WAL_NOTICE_PREFIX
from .wal import WalDamage

NOTICE_FORMAT = "ranklog-archive"


@dataclass(frozen=True)
class WalLoss:
    damage: WalDamage
    entries: int  # lost entries (at least 1)
    first_seq: int  # first sequence number that may have been lost
    records: int | None  # None: unknown (the damaged header did not survive)


def losses(damage: list[WalDamage], flushed_seq: int) -> list[WalLoss]:
    """The damaged regions that held entries not yet in Parquet, with what they cost."""
    out = []
    for region in damage:
        if region.last_seq is not None and region.last_seq <= flushed_seq:
            continue  # already in Parquet: nothing lost
        first = max(region.first_seq, flushed_seq + 1)
        entries = region.last_seq - first + 1 if region.last_seq is not None else max(1, region.entries)
        records = region.records if region.entries == entries else None
        out.append(WalLoss(region, max(1, entries), first, records))
    return out


def notices(found: list[WalLoss], archive_id: str, wal_dir: str):
    """The loss notices of `found` as one record table."""
    from ..record import rows_to_table

    host = socket.gethostname()
    rows = []
    for loss in found:
        region = loss.damage
        records = "an unknown number of" if loss.records is None else f"{loss.records}"
        rows.append({
            "ts": region.received_ns or time.time_ns(), "level": "ERROR", "logger": "ranklog.archive", "host": host,
            "ip": "", "source": f"wal:{wal_dir}/{region.segment}", "source_id": f"{WAL_NOTICE_PREFIX}{archive_id}:wal",
            "offset": loss.first_seq, "format": NOTICE_FORMAT,
            "msg": (f"ranklog archive {archive_id}: {loss.entries} acknowledged write-ahead log entr"
                    f"{'y' if loss.entries == 1 else 'ies'} ({records} record(s), {region.size} bytes) lost to damage "
                    f"in {region.segment} at byte {region.position}; the segment is kept in {wal_dir}/damaged/"),
            "attrs": {WAL_LOST_ENTRIES: loss.entries, WAL_LOST_RECORDS: loss.records, WAL_LOST_BYTES: region.size,
                      "ranklog_wal_segment": region.segment, "ranklog_wal_position": region.position,
                      "ranklog_wal_first_seq": loss.first_seq, "archive_id": archive_id},
        })
    return rows_to_table(rows)


def count(found: list[WalLoss], metrics) -> None:
    for loss in found:
        metrics.archive_wal_corrupt_entries.inc(loss.entries)
        metrics.archive_wal_corrupt_bytes.inc(loss.damage.size)
        if loss.records:
            metrics.archive_wal_corrupt_records.inc(loss.records)
