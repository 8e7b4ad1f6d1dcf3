"""LogQL, Loki's query language, as the archive answers it: the grammar (:mod:`.parser` → the tree of
:mod:`.syntax`), the labels a record has in Loki's eyes (:mod:`.labels`), Loki's parsers and templates
(:mod:`.extract`, :mod:`.template`) and what the query engine can do of a log query (:mod:`.spec`).
Pure and shared: the archive's Loki API (``ranklog.archive.loki``) evaluates it, ``ranklog query``
takes a log query."""

from .lexer import LogQLError
from .parser import parse, parse_duration_ns, parse_selector
from .syntax import LogSelector

__all__ = ["LogQLError", "LogSelector", "parse", "parse_duration_ns", "parse_selector"]
