"""The self-contained HTML report (``ranklog report``): triage verdict, plots and templates in one file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..triage.analyze import Triage
    from ..triage.gather import TriageData


def build_report(data: TriageData, triage: Triage) -> str:
    """The HTML page for a finished triage of `data` (same job and time selection)."""
    from .data import training_curves, volume_by_node
    from .html import render_html

    return render_html(triage, volume_by_node(data, triage.evidence.offsets), training_curves(data))


def write_report(data: TriageData, triage: Triage, path: str | Path) -> Path:
    """Write the page atomically (temp file + rename) so a reader never sees half a report."""
    import os
    import tempfile

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    content = build_report(data, triage)
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # a report is for sharing, not a secret (mkstemp makes it 0600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
