"""Python matching of ``--attr`` filters: what an Arrow expression cannot say about the JSON ``attrs``.

The expression compiler (:mod:`.filter_arrow`) only narrows rows to those whose ``attrs`` text
mentions the top-level key; :func:`filter_batch` then decodes each remaining row's JSON and checks
the dotted path and value.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    import pyarrow as pa


def parse_attr(item: str) -> tuple[str, str | None]:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not key:
        raise UserError(f"bad --attr {item!r}: use key=value or key")
    return key, (value if sep else None)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def attrs_match(text: str | None, wanted: list[tuple[str, str | None]]) -> bool:
    if not text:
        return False
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    for key, value in wanted:
        node: Any = obj
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        if value is not None and _as_text(node) != value:
            return False
    return True


def filter_batch(batch: pa.RecordBatch, attrs: tuple[str, ...]) -> pa.RecordBatch:
    """The rows of `batch` whose JSON ``attrs`` match every ``--attr`` item in `attrs`."""
    import pyarrow as pa

    wanted = [parse_attr(item) for item in attrs]
    mask = [attrs_match(text, wanted) for text in batch.column("attrs").to_pylist()]
    return batch.filter(pa.array(mask, pa.bool_()))
