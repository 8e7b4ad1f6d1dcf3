"""A driver's console where Ray printed a worker's forwarded JSON line into the driver's traceback.

Python writes an uncaught exception's traceback line by line while Ray's log-forwarding thread
keeps printing the workers' lines to the same console, so a forwarded line can land anywhere inside
the traceback — a CI run of the live Ray scenario did exactly that. The console here is the real one
of ``ray_verl_worker_group`` with one of its own forwarded lines (the first one Ray printed after the
traceback) moved to each line inside the traceback: the lines are all Ray's, only the interleaving is
chosen, at every position it can take. The traceback must stay one record and triage must still name
the rank; the forwarded line stays a record of its own.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from ranklog.parse import parse
from ranklog.parse.contract import SourceContext
from tests.scenarios.harness import judge, load, triage_raw

SCENARIO = Path(__file__).resolve().parent / "ray_verl_worker_group"
CONSOLE = next(SCENARIO.glob("out/*/driver-console.log"))


def _console_lines() -> tuple[list[bytes], int, int, int]:
    """The console's lines, the traceback's first and last line, the forwarded line after it."""
    lines = CONSOLE.read_bytes().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith(b"Traceback (most recent call last):"))
    last = next(i for i in range(first, len(lines)) if lines[i].startswith(b"RuntimeError: The size of tensor"))
    forwarded = next(i for i in range(last, len(lines)) if lines[i].startswith(b'{"asctime"'))
    return lines, first, last, forwarded


LINES, FIRST, LAST, FORWARDED = _console_lines()
POSITIONS = range(FIRST + 1, LAST + 1)  # before each traceback line after its first


def _interleaved(position: int) -> bytes:
    """The console with the forwarded line moved to just before line `position` of the traceback."""
    rest = LINES[:FORWARDED] + LINES[FORWARDED + 1:]
    return b"".join([*rest[:position], LINES[FORWARDED], *rest[position:]])


def _records(data: bytes) -> list[dict]:
    ctx = SourceContext(source=str(CONSOLE), source_id="console", format="ray", host="vm", ip=None,
                        fields={}, state={}, options={})
    result = parse(data, 0, ctx, final=True, read_time_ns=0)
    assert result.consumed == len(data)
    return result.batch.select(["level", "msg", "exc", "rank", "pid", "ts"]).to_pylist()


def test_the_console_has_a_traceback_and_a_forwarded_line_after_it():
    assert LAST - FIRST >= 10 and b'"[Rank ' in LINES[FORWARDED]


@pytest.mark.parametrize("position", POSITIONS, ids=lambda p: f"line{p - FIRST}")
def test_a_forwarded_line_inside_the_traceback_leaves_every_record_whole(position):
    original = _records(b"".join(LINES))
    interleaved = _records(_interleaved(position))
    key = lambda r: (r["msg"], r["exc"] or "")  # noqa: E731
    assert sorted(map(key, interleaved)) == sorted(map(key, original))
    (traceback,) = [r for r in interleaved if r["exc"] and "Traceback" in r["exc"]]
    assert traceback["msg"].startswith("ray.exceptions.RayTaskError(RuntimeError)")
    assert traceback["exc"].endswith("'attention_mask': (64, 511)}")


@pytest.mark.parametrize("position", [FIRST + 1, (FIRST + LAST) // 2, LAST], ids=["first", "middle", "last"])
def test_triage_still_names_the_rank(position, tmp_path):
    copy = tmp_path / SCENARIO.name
    shutil.copytree(SCENARIO, copy, symlinks=True)
    console = next(copy.glob("out/*/driver-console.log"))
    console.write_bytes(_interleaved(position))
    scenario = load(copy)
    result = triage_raw(scenario)
    verdict = judge(replace(scenario.truth), result)
    assert all(verdict.values()), (verdict, result["verdict"]["summary"])
