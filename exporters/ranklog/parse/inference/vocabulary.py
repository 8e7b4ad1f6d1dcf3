"""What a header field can look like: the syntaxes the tokenizer recognises and the RE2 they compile to.

Every kind comes twice: a Python regex that finds an instance in a sampled line (:mod:`.tokens`), and
the generic RE2 fragment a learned layout matches all its lines with (:mod:`.patterns`). A fragment
never holds an instance's value, only its syntax: ``[rank1]`` compiles to ``\\[rank(?P<rank>\\d+)\\]``.

- times: ISO 8601 (``T`` or space, ``,``/``.`` fractions to nanoseconds, with or without a zone),
  ``YYYY/MM/DD``, ``MM/DD/YYYY`` (``DD/MM/YYYY`` when a day above 12 shows the order), ``MM/DD/YY``,
  year-less ``MM-DD HH:MM:SS``, glog's ``IMMDD HH:MM:SS.ffffff`` (its level letter glued on),
  syslog's ``Dec  7 11:03:07``, a time of day alone, epoch seconds or milliseconds;
- levels: every spelling :func:`ranklog.record.normalize_level` knows (and loguru's ``SUCCESS``), in
  upper, lower or capitalised case, or a single capital letter (``I``/``W``/``E``/…);
- ranks: ``rank1``, ``Rank 1``, ``RANK 1``, ``rank: 1``, ``rank=1``, ``local_rank=0``, ``rank 1/8``;
- code positions: ``file.py:12``, ``file.py:12:func``, ``module:func:12`` (a module names the logger);
- plain numbers after the time or level (glog's and Ray's pid, then thread id), words (a logger name,
  or a ``(component)`` in parentheses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# -- times -------------------------------------------------------------------------------------------
_FRACTION = r"(?:[.,]\d{1,9})?"
_HMS = r"\d\d:\d\d:\d\d"
ZONE = r"(?:Z|[+-]\d\d:?\d\d)"
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class TimeSyntax:
    """One way of printing a time. `dated`: ``full`` (a date with its year), ``yearless`` or ``clock``
    (a time of day alone): the missing part comes from the file's context (:mod:`ranklog.parse.dating`)."""

    name: str
    python: str  # finds an instance at a position (no zone: see ZONE)
    re2: str  # the fragment, without groups
    dated: str
    strong: bool = True  # a line starting with it is a log line even when only one line shows it
    zone_allowed: bool = False


TIME_SYNTAXES: tuple[TimeSyntax, ...] = (
    TimeSyntax("iso", rf"\d{{4}}-\d\d-\d\d[T ]{_HMS}{_FRACTION}", rf"\d{{4}}-\d\d-\d\d[T ]{_HMS}{_FRACTION}", "full",
               zone_allowed=True),
    TimeSyntax("ymd", rf"\d{{4}}/\d\d/\d\d[T ]{_HMS}{_FRACTION}", rf"\d{{4}}/\d\d/\d\d[T ]{_HMS}{_FRACTION}", "full"),
    TimeSyntax("mdy", rf"\d\d/\d\d/\d{{4}} {_HMS}{_FRACTION}", rf"\d\d/\d\d/\d{{4}} {_HMS}{_FRACTION}", "full"),
    TimeSyntax("mdy2", rf"\d\d/\d\d/\d\d {_HMS}{_FRACTION}", rf"\d\d/\d\d/\d\d {_HMS}{_FRACTION}", "full"),
    TimeSyntax("md", rf"\d\d-\d\d {_HMS}{_FRACTION}", rf"\d\d-\d\d {_HMS}{_FRACTION}", "yearless"),
    # glog: the level letter comes first, glued to the month and day
    TimeSyntax("glog", rf"[A-Z]\d{{4}} {_HMS}(?:\.\d{{1,9}})?", rf"\d{{4}} {_HMS}(?:\.\d{{1,9}})?", "yearless"),
    TimeSyntax("syslog", rf"(?:{'|'.join(MONTHS)}) [ \d]\d {_HMS}{_FRACTION}",
               rf"(?:{'|'.join(MONTHS)}) [ \d]\d {_HMS}{_FRACTION}", "yearless"),
    TimeSyntax("clock", rf"{_HMS}{_FRACTION}", rf"{_HMS}{_FRACTION}", "clock", strong=False),
    TimeSyntax("epoch", r"1\d{9}(?:\.\d{1,9})?(?!\d)|1\d{12}(?!\d)", r"1\d{9}(?:\.\d{1,9})?|1\d{12}", "full",
               strong=False),
)
TIME_BY_NAME = {syntax.name: syntax for syntax in TIME_SYNTAXES}
# the day-first twins of the month-first syntaxes: chosen when a sampled value's first number exceeds 12
DAY_FIRST = {"mdy": "dmy", "mdy2": "dmy2"}


# -- levels ------------------------------------------------------------------------------------------
LEVEL_WORDS: tuple[str, ...] = (  # longer spellings first: an alternation takes the first that fits
    "INFORMATION", "INFO", "WARNING", "WARN", "ERROR", "ERR", "CRITICAL", "CRIT", "DEBUG", "DBG", "TRACE",
    "VERBOSE", "NOTICE", "NOTSET", "SUCCESS", "FATAL", "EMERG", "ALERT", "PANIC",
)
LEVEL_LETTERS = "TVDIWEFC"  # (torch's glog formatter writes V for DEBUG)
LEVEL_WORD = re.compile(rf"(?i:{'|'.join(LEVEL_WORDS)})(?![\w])")
LEVEL_LETTER = re.compile(rf"[{LEVEL_LETTERS}](?![\w])")


def level_case(word: str) -> str:
    """The spelling style of a level token: ``U`` (INFO), ``l`` (info), ``C`` (Info), ``1`` (I)."""
    if len(word) == 1:
        return "1"
    if word.isupper():
        return "U"
    if word.islower():
        return "l"
    return "C"


# a level word's letters in each spelling style: what a learned layout's pattern matches, the word
# then checked against LEVEL_WORDS (`is_level_word`). RE2 runs a 19-word alternation at ~0.95 µs a
# line against ~0.45 for a letter class: its program outgrows the fast engine's size limit.
_LEVEL_CLASS = {"U": "[A-Z]{3,11}", "l": "[a-z]{3,11}", "C": "[A-Z][a-z]{2,10}"}
LEVEL_WORD_SET: frozenset[str] = frozenset(LEVEL_WORDS)


def level_fragment(case: str) -> str:
    if case == "1":
        return f"[{LEVEL_LETTERS}]"
    return _LEVEL_CLASS[case]


# -- ranks -------------------------------------------------------------------------------------------
RANK = re.compile(r"(?P<label>(?i:(?:global|local|node)[_ ]?)?(?i:rank))(?P<mid>[ \t]*[:=#]?[ \t]*)"
                  r"(?P<n>\d+)(?P<of>/\d+)?(?![\w.])")


def rank_field(label: str) -> str | None:
    """The record field a rank label fills: ``local_rank`` for a local one, ``rank`` for the global or
    plain one, None for a node rank (a launcher's group rank is not a process's rank)."""
    lower = label.lower()
    if lower.startswith("node"):
        return None
    return "local_rank" if lower.startswith("local") else "rank"


# -- code positions ----------------------------------------------------------------------------------
CODE = re.compile(r"(?P<name>[\w.<>/\\-]*[\w>])(?::(?P<a>[A-Za-z_<][\w<>.]*))?:(?P<line>\d+)"
                  r"(?::(?P<b>[A-Za-z_<][\w<>.]*))?(?![\w.])")
_FILE_NAME = re.compile(r"(?:/|^<|\.(?:py|pyx|pyi|c|cc|cpp|cxx|h|hh|hpp|cu|cuh|rs|go|java|js|ts|rb|scala|kt|swift|m|mm)$)")


def is_file_name(name: str) -> bool:
    """A source file (`train.py`, `<string>`, `a/b.cc`) rather than a module name (`__main__`)."""
    return _FILE_NAME.search(name) is not None


# -- numbers and words -------------------------------------------------------------------------------
NUMBER = re.compile(r"\d+(?![\w.:/])")
WORD = re.compile(r"[A-Za-z_<][\w.\-<>]*(?<![.\-])")

# -- separators --------------------------------------------------------------------------------------
# Between two fields, or between the last one and the message: blanks, closing brackets, one
# punctuation mark (``-``, ``:``, ``|``, ``--``, ``>>``, ``,``, …), opening brackets.
SEPARATOR = re.compile(r"[ \t]*[\])}]*[ \t]*(?:--|>>|=>|->|[-:|,;])?[ \t]*[\[({]*")
OPENERS = "[({"


def sep_key(sep: str) -> str:
    """A separator as the layout knows it: each run of blanks as one space (the padding of
    ``%(levelname)-8s`` varies from line to line; a blank or none is kept apart)."""
    if "\t" not in sep and "  " not in sep:
        return sep  # (most separators: nothing to fold, no regex call)
    return _BLANKS.sub(" ", sep)


_BLANKS = re.compile(r"[ \t]+")


def is_distinctive(sep: str) -> bool:
    """Does the separator after a word say the word ends a field (a mark, a closing bracket), rather
    than a blank that any word of a message is followed by?"""
    return any(ch not in " \t" and ch not in OPENERS for ch in sep)
