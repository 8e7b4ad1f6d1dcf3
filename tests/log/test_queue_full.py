"""Queue-full policy: records below WARNING are dropped and counted, WARNING and above never."""

from __future__ import annotations

import itertools

from tests.helpers.log_files import ranklog_files, read_records, run_python


def test_flood_drops_only_low_levels_and_reports_the_count(tmp_path):
    proc = run_python("""
        import threading
        sink = ranklog.log.logger.current_sink()
        def flood(t):
            for i in range(20000):
                log.info("info %d %d", t, i)
                if i % 20 == 0:
                    log.warning("warn %d %d", t, i)
                if i % 500 == 0:
                    log.error("error %d %d", t, i)
        threads = [threading.Thread(target=flood, args=(t,)) for t in range(3)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        ranklog.flush()
        print(sink.dropped)
    """, tmp_path, env={"RANKLOG_QUEUE_SIZE": "64", "RANKLOG_FLUSH_INTERVAL": "50ms"}, timeout=180)
    dropped = int(proc.stdout.strip())
    (path,) = ranklog_files(tmp_path)
    records = read_records(path)
    warnings = {r["msg"] for r in records if r["level"] == "WARNING" and r["logger"] == "test"}
    errors = {r["msg"] for r in records if r["level"] == "ERROR"}
    assert warnings == {f"warn {t} {i}" for t in range(3) for i in range(0, 20000, 20)}
    assert errors == {f"error {t} {i}" for t in range(3) for i in range(0, 20000, 500)}
    infos = [r for r in records if r["level"] == "INFO"]
    notices = [r for r in records if r["logger"] == "ranklog"]
    assert dropped > 0, "the flood did not fill the queue; the test proves nothing"
    assert len(infos) + dropped == 60000
    assert notices and all(r["level"] == "WARNING" and "queue was full" in r["msg"] for r in notices)
    assert sum(r["dropped"] for r in notices) == dropped
    # seq stays strictly increasing and its gaps account exactly for the dropped records.
    seqs = [r["seq"] for r in records]
    assert all(a < b for a, b in itertools.pairwise(seqs))
    assert seqs[-1] - len(records) == dropped
