"""Times without a zone read in the writer's zone and marked as assumed; partial times dated from the file."""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from ranklog.agent.agent_config import AgentConfig, SourceSpec
from ranklog.agent.presets import all_sources
from ranklog.parse import SourceContext, parse, zones
from ranklog.parse.directory import read_log_dir
from tests.parse.conftest import READ_TIME_NS, rows


def _ns(text: str, zone: str = "UTC") -> int:
    dt = datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone))
    return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000


def _parse(data: bytes, *, zone: str | None = None, mtime: str | None = None, state: dict | None = None) -> list[dict]:
    ctx = SourceContext("/logs/a.log", "sid", "python", "node1", "10.0.0.1",
                        options={"timezone": zone} if zone else {}, state=dict(state or {}),
                        mtime_ns=_ns(mtime) if mtime else None)
    return rows(parse(data, 0, ctx, final=True, read_time_ns=READ_TIME_NS).batch)


def _logged(fmt: str, datefmt: str | None, when: list[datetime], converter=None) -> bytes:
    """Lines the real logging module writes for records created at `when` (UTC instants)."""
    formatter = logging.Formatter(fmt, datefmt)
    if converter is not None:
        formatter.converter = converter
    out = []
    for instant in when:
        record = logging.LogRecord("train", logging.INFO, __file__, 1, "step", None, None)
        record.created = instant.timestamp()
        record.msecs = (record.created - int(record.created)) * 1000
        out.append(formatter.format(record))
    return ("\n".join(out) + "\n").encode()


def _in_zone(zone: str):
    tz = ZoneInfo(zone)
    return lambda seconds: datetime.fromtimestamp(seconds, tz).timetuple()


def test_naive_times_are_read_in_the_given_zone_and_say_so():
    when = [datetime(2026, 12, 7, 2, 6, 10, tzinfo=timezone.utc), datetime(2026, 7, 7, 2, 6, 10, tzinfo=timezone.utc)]
    data = _logged("%(asctime)s - %(name)s - %(levelname)s - %(message)s", None, when, _in_zone("Europe/Berlin"))
    got = _parse(data, zone="Europe/Berlin")
    assert [r["ts"] for r in got] == [int(w.timestamp()) * 1_000_000_000 for w in when]  # winter and summer time
    assert {json.loads(r["attrs"])["tz_assumed"] for r in got} == {"Europe/Berlin"}


def test_zoned_times_and_epochs_are_not_marked():
    when = [datetime(2026, 12, 7, 2, 6, 10, tzinfo=timezone.utc)] * 3
    data = _logged("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%S%z", when, time.gmtime)
    got = _parse(data, zone="Europe/Berlin")
    assert {r["ts"] for r in got} == {int(when[0].timestamp()) * 1_000_000_000}
    assert all(r["attrs"] is None or "tz_assumed" not in json.loads(r["attrs"]) for r in got)


def test_glog_times_across_new_year_take_the_year_from_the_file():
    """torch's glog lines carry no year: the file's modification time (early January) dates them, and the
    December lines before the wrap are the year before."""
    torch_logging = pytest.importorskip("torch._logging._internal", reason="torch's own glog formatter makes the lines: needs torch (the torch extra)")
    formatter = torch_logging.TorchLogsFormatter()
    formatter.converter = lambda seconds: datetime.fromtimestamp(seconds, timezone.utc).timetuple()
    when = [datetime(2026, 12, 31, 23, 59, 58, tzinfo=timezone.utc), datetime(2026, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
            datetime(2027, 1, 1, 0, 0, 1, tzinfo=timezone.utc)]
    lines = []
    for instant in when:
        record = logging.LogRecord("torch.distributed", logging.INFO, "run.py", 874, "rendezvous", None, None)
        record.created = instant.timestamp()
        record.msecs = 0
        lines.append(formatter.format(record))
    data = ("\n".join(lines) + "\n").encode()
    got = _parse(data, zone="UTC", mtime="2027-01-01 00:00:30")
    assert [r["ts"] for r in got] == [int(w.timestamp()) * 1_000_000_000 for w in when]


def test_times_of_day_are_dated_from_a_full_timestamp_before_them_across_midnight():
    data = (b"2026-12-07 23:59:58,000 - train - INFO - a line with a date\n"
            b"23:59:59 INFO     train step 1\n"
            b"00:00:02 INFO     train step 2\n")
    got = _parse(data, zone="UTC")
    assert [r["ts"] for r in got] == [_ns("2026-12-07 23:59:58"), _ns("2026-12-07 23:59:59"), _ns("2026-12-08 00:00:02")]


def test_local_zone_is_the_tz_variable_else_the_system_one(monkeypatch):
    zones.local_zone.cache_clear()
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    try:
        assert zones.local_zone() == "Asia/Kolkata"
        monkeypatch.setenv("TZ", "not/a-zone")
        zones.local_zone.cache_clear()
        assert zones.valid_zone(zones.local_zone())
    finally:
        zones.local_zone.cache_clear()


@pytest.mark.parametrize(("name", "ok"), [("Europe/Berlin", True), ("UTC", True), ("+05:30", True), ("-08:00", True),
                                          ("Mars/Olympus", False), ("+5", False), ("", False)])
def test_zone_names(name, ok):
    assert zones.valid_zone(name) is ok


def test_log_dir_reads_in_the_given_zone_default_this_machines(tmp_path, monkeypatch):
    (tmp_path / "train.log").write_bytes(b"2026-12-07 11:06:10,123 - train - INFO - hello\n")
    (row,) = rows(read_log_dir(str(tmp_path), timezone="Asia/Tokyo"))
    assert row["ts"] == _ns("2026-12-07 11:06:10.123", "Asia/Tokyo")
    assert json.loads(row["attrs"])["tz_assumed"] == "Asia/Tokyo"
    zones.local_zone.cache_clear()
    monkeypatch.setenv("TZ", "America/New_York")
    try:
        (row,) = rows(read_log_dir(str(tmp_path)))
    finally:
        zones.local_zone.cache_clear()
    assert row["ts"] == _ns("2026-12-07 11:06:10.123", "America/New_York")


def test_agent_sources_take_tz_unless_their_own_timezone_option(tmp_path):
    token = tmp_path / "token"
    token.write_text("t\n")
    cfg = AgentConfig(archive=["http://127.0.0.1:1"], token_file=str(token), tz="Europe/Berlin",
                      sources=[SourceSpec("/a/*.log"), SourceSpec("/b/*.log", options={"timezone": "Asia/Tokyo"})])
    cfg.validate()
    assert [s.options["timezone"] for s in all_sources(cfg)] == ["Europe/Berlin", "Asia/Tokyo"]
    bad = AgentConfig(archive=["http://127.0.0.1:1"], token_file=str(token),
                      sources=[SourceSpec("/b/*.log", options={"timezone": "Mars/Olympus"})])
    with pytest.raises(ValueError, match=r"sources\[0\]\.options\.timezone"):
        bad.validate()
    with pytest.raises(ValueError, match="tz"):
        AgentConfig(archive=["http://127.0.0.1:1"], token_file=str(token), tz="nowhere", preset=["ray"]).validate()
