"""What every scenario generator ends with: ``truth.json``, ``README.md`` and ``mtimes.json`` beside ``out/``.

``mtimes.json`` keeps each output file's modification time as the tool left it. Git does not keep
mtimes, and a file without any timestamp takes its mtime (DESIGN's time rule), so a fresh checkout
would otherwise date torchrun's launcher console "now" and break every "first" in the verdict.
Readers of the library call :func:`restore_mtimes` before using ``out/``."""

from __future__ import annotations

import json
import os
import platform
from importlib import metadata
from pathlib import Path


def finish(scenario_dir: Path, *, doc: str, commands: list[str], tools: tuple[str, ...], **truth: object) -> None:
    """Write truth.json (what the generator injected) and README.md (how the output was made)."""
    if "failure" not in truth:
        raise ValueError("truth needs 'failure' (true/false)")
    decisive = truth.get("decisive")
    if decisive and not any(decisive in p.read_text(errors="replace")
                            for p in (scenario_dir / "out").rglob("*") if p.is_file()):
        raise RuntimeError(f"the run did not go as planned: {decisive!r} is in no output file")
    (scenario_dir / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    versions = ", ".join(f"{name} {tool_version(name)}" for name in tools)
    body = [f"# {scenario_dir.name}", "", doc.strip(), "", "## How it was made", "",
            f"`make scenarios` (or `python tests/scenarios/{scenario_dir.name}/gen/generate.py`) ran, on "
            f"{platform.system()} with Python {platform.python_version()} and {versions}:", "", "```",
            *commands, "```", "",
            "`out/` is what the tools wrote, one folder per node (`out/<host>/`), never edited by hand.",
            "`truth.json` is what the generator injected: " + _truth_text(truth), ""]
    (scenario_dir / "README.md").write_text("\n".join(body))
    record_mtimes(scenario_dir)


MTIMES = "mtimes.json"


def record_mtimes(scenario_dir: Path) -> None:
    """Write ``mtimes.json``: every ``out/`` file's mtime (ns), by path relative to ``out/``."""
    out = scenario_dir / "out"
    stamps = {str(p.relative_to(out)): p.stat().st_mtime_ns for p in sorted(out.rglob("*")) if p.is_file()}
    (scenario_dir / MTIMES).write_text(json.dumps(stamps, indent=1, sort_keys=True) + "\n")


def restore_mtimes(scenario_dir: Path) -> None:
    """Give ``out/``'s files back the mtimes the tool left (a no-op where they already have them)."""
    manifest = scenario_dir / MTIMES
    if not manifest.exists():
        return
    out = scenario_dir / "out"
    for relative, mtime_ns in json.loads(manifest.read_text()).items():
        path = out / relative
        if path.is_file() and path.stat().st_mtime_ns != mtime_ns:
            os.utime(path, ns=(mtime_ns, mtime_ns))


def _truth_text(truth: dict[str, object]) -> str:
    if truth.get("status") == "degraded":
        return (f"no failure but degraded: rank {truth.get('rank')} on {truth.get('node')}, {truth.get('category')} "
                f"from step {truth.get('step')}, decisive line containing {truth.get('decisive')!r}.")
    if not truth["failure"]:
        return "no failure (the verdict must say so)."
    return (f"root cause rank {truth.get('rank')} on {truth.get('node')}, category {truth.get('category')!r}, "
            f"step {truth.get('step')}, decisive line containing {truth.get('decisive')!r}.")


def tool_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "(not installed)"
