"""A chained traceback's causes: the decisive one is chosen from every exception of the chain.

Python prints a chain root cause first: ``OSError: [Errno 28] No space left on device``, then
"During handling of the above exception, another exception occurred:" (or "The above exception was
the direct cause of the following exception:"), then what the code around it raised — torch.save's
``RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos``, a trainer's "failed
to save checkpoint". The last line is what a reader sees first and is rarely the cause.

:func:`classify` matches the signatures against each link of the chain (and against the record as
a whole, for texts that are no traceback): the decisive signature is the one of highest priority
(a full disk outranks the checkpoint writer that met it), the root-most link among equals; the
other links' categories are kept as context ("disk full/quota (checkpoint save failed)").
"""

from __future__ import annotations

import re

from .. import signatures
from ..signatures import Signature

SEPARATOR = re.compile(r"^[ \t]*(?:\[[^\]\n]*\]:[ \t]*)?(?:During handling of the above exception, another exception "
                       r"occurred:|The above exception was the direct cause of the following exception:)[ \t]*$",
                       re.MULTILINE)


def links(text: str) -> list[str]:
    """The chain's parts, root cause first (one part when `text` is no chained traceback)."""
    return [part for part in SEPARATOR.split(text) if part.strip()] or [text]


def classify(text: str | None) -> tuple[Signature | None, tuple[str, ...]]:
    """The decisive signature of `text` and the categories the chain's other links add."""
    if not text:
        return None, ()
    decisive = signatures.match(text)
    if decisive is None or SEPARATOR.search(text) is None:
        return decisive, ()
    found = [sig for sig in (signatures.match(part) for part in links(text)) if sig is not None]
    if found:  # root-most among the highest priority (max keeps the first of equals)
        decisive = max(found, key=lambda sig: sig.priority) if decisive.priority <= max(
            sig.priority for sig in found) else decisive
    context = tuple(dict.fromkeys(sig.category for sig in found
                                  if sig.category != decisive.category and sig.name != "python_exception"))
    return decisive, context
