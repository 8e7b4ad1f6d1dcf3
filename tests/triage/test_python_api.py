"""The Python API snippet of docs/cli.md runs as written on a real torchrun run and names its failing rank."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "tests" / "scenarios" / "torchrun_exception"


def _readme_snippet() -> str:
    text = (REPO / "docs" / "cli.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    snippet = next(block for block in blocks if "analyze_table" in block)
    assert '"./logs"' in snippet
    return snippet.replace('"./logs"', repr(str(SCENARIO / "out")))


def test_readme_python_api_names_the_failing_rank() -> None:
    truth = json.loads((SCENARIO / "truth.json").read_text())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_readme_snippet(), "docs/cli.md", "exec"), {})
    printed = out.getvalue()
    assert f"rank {truth['rank']}" in printed and truth["node"] in printed, printed
