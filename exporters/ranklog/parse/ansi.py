"""Removing ANSI escape sequences (colours, cursor moves) from log text, vectorized."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from .arrowbytes import values_contain

# CSI sequences (ESC [ … final byte), OSC sequences (ESC ] … BEL/ST) and two-byte escapes.
ANSI_PATTERN = r"\x1b\[[0-9;?:<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
_ANSI = re.compile(ANSI_PATTERN)


def strip_ansi(texts: pa.Array) -> pa.Array:
    """`texts` without escape sequences; untouched (no copy) when no line holds an ESC byte."""
    if len(texts) == 0 or not values_contain(texts, b"\x1b"):
        return texts
    return pc.replace_substring_regex(texts, ANSI_PATTERN, "")


def strip_ansi_text(text: str) -> str:
    """The scalar version, for values built one by one."""
    return _ANSI.sub("", text) if "\x1b" in text else text
