"""Failure signatures: the real strings that say a training run is failing, and what they mean.

Used by the agent (``ranklog_failure_signatures_total``), by ``ranklog run`` and by triage. Each
signature has a category (what triage reports) and a flag saying whether it is usually a
*consequence* of a failure elsewhere (a collective timeout is what healthy ranks print when one
peer died), which triage uses to order causes before effects. The table itself is data, in
``signatures.txt`` beside this module, in priority order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Signature:
    name: str  # label value of ranklog_failure_signatures_total
    category: str  # triage category
    pattern: str  # regex, searched in msg + exc
    consequence: bool = False  # typically caused by another rank's failure
    priority: int = 50  # higher wins when several signatures match one record
    lasting: bool = False  # a run that ends well is still broken by it (a NaN loss)


SIGNATURE_FILE = Path(__file__).with_name("signatures.txt")


def _load(path: Path) -> tuple[Signature, ...]:
    """The table as data: the strings change with the tools, the code that applies them does not.

    A block of ``key: value`` lines per signature (blocks apart by a blank line, ``#`` comments);
    the value is taken as written, so a regex needs no quoting. Stdlib only (Python 3.10 has no tomllib).
    """
    signatures = []
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith("#"))
        if fields:
            signatures.append(Signature(fields["name"], fields["category"], fields["pattern"],
                                        fields.get("consequence", "no") == "yes", int(fields["priority"]),
                                        fields.get("lasting", "no") == "yes"))
    return tuple(signatures)


SIGNATURES: tuple[Signature, ...] = _load(SIGNATURE_FILE)
_COMPILED = tuple((sig, re.compile(sig.pattern, re.MULTILINE)) for sig in SIGNATURES)
BY_NAME: dict[str, Signature] = {sig.name: sig for sig in SIGNATURES}
CATEGORIES: tuple[str, ...] = (
    "CUDA OOM", "CUDA error", "NCCL error", "NCCL/collective timeout", "Ray actor death", "host OOM kill",
    "non-finite loss/gradients", "killed (SIGKILL)", "uncaught exception", "hang/silence", "terminated by signal",
    "disk full/quota", "data loader worker died", "storage connection lost", "checkpoint save failed",
    "checkpoint load failed", "node lost", "straggler", "slow-down", "unknown",
)


def match(text: str | None) -> Signature | None:
    """The highest-priority signature found in `text`, or None."""
    if not text:
        return None
    best: Signature | None = None
    for sig, regex in _COMPILED:
        if (best is None or sig.priority > best.priority) and regex.search(text):
            best = sig
    return best
