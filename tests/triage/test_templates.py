"""Templates mask what varies between ranks; rank sets print compactly; the keyword prefilter lets
every failure line of the scenario library through."""

from __future__ import annotations

import re

import pytest

from ranklog import signatures
from ranklog.triage.gather import KEYWORDS
from ranklog.triage.templates import describe_ranks, format_ranks, template_of

from .scenarios import SCENARIOS
from .scenarios import messages as m


def test_timeouts_of_different_ranks_share_a_template():
    a = template_of(m.nccl_watchdog_timeout(3, 4821, ran_ms=600081))
    b = template_of(m.nccl_watchdog_timeout(61, 4822, ran_ms=600112, numel=1024))
    assert a == b
    assert "SeqNum=<n>" in a and "[Rank <r>]" in a


def test_masks_paths_ips_hex_and_timestamps():
    text = "2026-12-02T13:04:05.123Z worker 0x7f3a2b at 10.0.3.4:6379 read /data/shard-00042.parquet id a1b2c3d4e5f6"
    assert template_of(text) == "<ts> worker <hex> at <ip> read <path> id <id>"


def test_only_the_first_line_and_bounded_length():
    assert template_of("first 12\nsecond") == "first <n>"
    assert len(template_of("x" * 1000)) <= 240
    assert template_of(None) == "" and template_of("") == ""


@pytest.mark.parametrize(("ranks", "text"), [
    ([0, 1, 2, 3, 4, 6, 7, 63], "0-4,6-7,63"), ([5], "5"), ([], ""), ([3, None, 1, 2, 3], "1-3")])
def test_format_ranks(ranks, text):
    assert format_ranks(ranks) == text


def test_describe_ranks():
    assert describe_ranks([5]) == "rank 5"
    assert describe_ranks(range(16)) == "ranks 0-15"


def test_prefilter_passes_every_signature_line_of_the_library():
    keywords = re.compile(KEYWORDS)
    checked = 0
    for build in SCENARIOS.values():
        for record in build().job.records:
            text = record["msg"] + "\n" + (record.get("exc") or "")
            if signatures.match(text):
                checked += 1
                assert keywords.search(record["msg"]) or record.get("exc") or record["level"] in (
                    "WARNING", "ERROR", "CRITICAL"), record["msg"]
                assert keywords.search(record["msg"]), f"prefilter misses: {record['msg'][:100]}"
    assert checked > 50
