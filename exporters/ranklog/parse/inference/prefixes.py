"""Launcher prefixes: what a launcher or runtime writes in front of every line of a process's output.

They stack (a container runtime's, then torchrun's ``--tee``, then torch's own) and come before any
header, on tracebacks and prints too, so they are peeled first, in this order (the outermost
writer first), each where it appears:

- ``2026-12-07T11:06:10.123456789Z stdout F `` — a container runtime's log file (CRI): the time the
  line was written (the record's when the line has none of its own) and the stream;
- ``worker-1: `` / ``3: `` — pdsh (DeepSpeed's multi-node runner) and ``srun --label``: the node, or the
  task number (the global rank). Any line may start with ``word: ``, so this one counts only when
  ``LABELLED`` of a source's lines have it;
- ``[1,3]<stdout>:`` — ``mpirun --tag-output``: the rank;
- ``(WorkerDict pid=123, ip=10.0.0.2)`` — Ray's forwarded worker lines: role (the actor class), pid, ip;
- ``[rank3]:`` — torch's per-rank prefix (before and after torchrun's);
- ``[default0]:`` — torchrun ``--tee``: role and local rank.

Each prefix is a stream of its own for multi-line grouping (its text, or its ``_key`` group when the
text varies from line to line, like the runtime's time).
"""

from __future__ import annotations

import re

import numpy as np

CRI = (r"(?P<_prefix_ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) "
       r"(?P<_key>stdout|stderr) [FP] ")
LABEL = r" *(?P<_label>[A-Za-z0-9][\w.\-]*): "
MPI = r"\[\d+,(?P<rank>\d+)\]<(?P<_key>stdout|stderr|stddiag)>: ?"
RAY_DRIVER = r"\((?:(?P<role>[^\s()=,]+) )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?[^)]*\) ?"
TORCH_RANK = r"\[rank(?P<rank>\d+)\]: ?"  # torch writes "[rank3]: " before each line of a rank's error
TORCHRUN_TEE = r"\[(?P<role>[A-Za-z_][\w\-]*?)(?P<local_rank>\d+)\]:"

LABELLED = 0.9  # share of a source's lines that must carry a `label: ` prefix for it to be one

# peel order; torch's rank prefix before torchrun's (whose `[<role><n>]:` would take `[rank3]:` as
# role "rank") and again after it (a teed console: `[default0]:[rank3]: `)
LAUNCHER_PREFIXES: tuple[str, ...] = (CRI, MPI, RAY_DRIVER, TORCH_RANK, TORCHRUN_TEE, TORCH_RANK)


def unnamed(pattern: str) -> str:
    """`pattern` with its named groups made plain (for a test that extracts nothing)."""
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


# one anchored test for all of them: most files have none, and then nothing else runs
ANY_LAUNCHER_PREFIX = "^(?:" + "|".join(unnamed(p) for p in LAUNCHER_PREFIXES) + ")"


def may_start_with_one(first: np.ndarray, eleventh: np.ndarray) -> bool:
    """Could any line start with a launcher prefix, by its first and eleventh bytes (a few numpy passes,
    far cheaper than the regex over every line)? Each prefix starts with ``[`` or ``(``, except the
    container runtime's, a date whose eleventh character is ``T``."""
    return bool(np.isin(first, _OPENING).any() or ((first >= 48) & (first <= 57) & (eleventh == 84)).any())


_OPENING = np.frombuffer(b"[(", dtype=np.uint8)
