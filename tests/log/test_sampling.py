"""SamplingFilter: the kept fraction, the recorded rate, and WARNING+ never sampled."""

from __future__ import annotations

import logging
import math

import pytest

from ranklog import SamplingFilter
from tests.helpers.log_files import all_records, run_python

N = 20_000
RATE = 0.1


def _assert_sampled(records: list[dict], logger: str) -> None:
    infos = [r for r in records if r["logger"] == logger and r["level"] == "INFO"]
    warnings = [r for r in records if r["logger"] == logger and r["level"] == "WARNING"]
    sigma = math.sqrt(N * RATE * (1 - RATE))
    assert abs(len(infos) - N * RATE) < 5 * sigma, len(infos)
    assert all(r["sample_rate"] == RATE for r in infos)
    # Counts can be reconstructed from the rate.
    assert abs(sum(1 / r["sample_rate"] for r in infos) - N) < 5 * sigma / RATE
    assert len(warnings) == 200 and all("sample_rate" not in r for r in warnings)
    debugs = [r for r in records if r["logger"] == logger and r["level"] == "DEBUG"]
    assert len(debugs) == 100 and all("sample_rate" not in r for r in debugs)


def test_fast_logger_sampling_statistics(tmp_path):
    run_python(f"""
        log.addFilter(ranklog.SamplingFilter(rate={RATE}))
        for i in range({N}):
            log.info("info %d", i)
            if i % 100 == 0:
                log.warning("warn %d", i)
            if i % 200 == 0:
                log.debug("debug %d", i)
    """, tmp_path, env={"RANKLOG_LEVEL": "DEBUG"})
    _assert_sampled(all_records(tmp_path), "test")


def test_stdlib_handler_sampling_statistics(tmp_path):
    run_python(f"""
        handler = ranklog.install(level="DEBUG")
        handler.addFilter(ranklog.SamplingFilter(rate={RATE}))
        std = logging.getLogger("third.party")
        for i in range({N}):
            std.info("info %d", i)
            if i % 100 == 0:
                std.warning("warn %d", i)
            if i % 200 == 0:
                std.debug("debug %d", i)
    """, tmp_path)
    _assert_sampled(all_records(tmp_path), "third.party")


def test_warning_and_above_are_never_sampled_even_when_asked():
    sampler = SamplingFilter(rate=0.01, levels=("INFO", "WARNING", "ERROR"), seed=1)
    assert sampler.levelnos == frozenset({logging.INFO})
    assert all(sampler.decide(level) is None for level in (30, 40, 50) for _ in range(100))


def test_rate_must_be_a_fraction():
    with pytest.raises(ValueError):
        SamplingFilter(rate=0)
    with pytest.raises(ValueError):
        SamplingFilter(rate=1.5)
