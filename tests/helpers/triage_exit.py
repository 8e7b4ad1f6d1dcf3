"""The exit status ``ranklog triage``/``report`` must give for a result (the documented contract, written out
here independently of the code that computes it): 1 a failure found, 3 degraded, 0 otherwise; with several
jobs the worst decides."""

from __future__ import annotations

from typing import Any

BY_STATUS = {"failure": 1, "degraded": 3, "no failure": 0, "no data": 0}


def expected_exit(result: dict[str, Any]) -> int:
    statuses = [job["status"] for job in result.get("jobs_judged") or [result["verdict"]]]
    if "failure" in statuses:
        return 1
    return 3 if "degraded" in statuses else 0


def assert_exit(code: int, result: dict[str, Any]) -> None:
    assert code == expected_exit(result), f"exit {code} for {[j['status'] for j in result['jobs_judged']]}"
