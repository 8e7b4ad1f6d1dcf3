"""Write a scenario's records as real log files, so triage is tested through the parsers too.

Records become what the ranklog logger writes: one JSON object per line in
``<root>/<job>/<host>/rank-<rank>.pid-<pid>.0000.jsonl`` (``rank-x`` for rank-less processes:
driver, raylet, launcher), with `extra` fields (loss, throughput) at the top level. The fields an
agent adds (source, source_id, offset, format) are left out: the reader fills them in.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from .builder import Job

_AGENT_FIELDS = ("source", "source_id", "offset", "format")


def write_ranklog_files(job: Job, root: Path) -> list[Path]:
    """The job's records as ranklog JSON files under `root`; returns the files written."""
    files: dict[Path, list[str]] = defaultdict(list)
    for record in sorted(job.records, key=lambda r: r["ts"]):
        rank = "x" if record.get("rank") is None else str(record["rank"])
        path = root / job.name / record["host"] / f"rank-{rank}.pid-{record['pid']}.0000.jsonl"
        line = {k: v for k, v in record.items() if k not in _AGENT_FIELDS and v is not None}
        files[path].append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
    for path, lines in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return sorted(files)
