"""Loki's parser stages on one line: ``json``, ``logfmt``, ``regexp``, ``pattern``, ``unpack``, and
the pattern line filter (``|>``/``!>``). Each returns the fields it extracted (names sanitized) or
raises :class:`ParseFailure` with the ``__error__`` value Loki would set (the line is kept)."""

from __future__ import annotations

import json
import re
from typing import Any

from .labels import flatten, json_text, sanitize

_JSON_PATH = re.compile(r"""\.?([A-Za-z_][A-Za-z0-9_\-]*)|\[\s*(\d+)\s*\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]""")


class ParseFailure(Exception):
    """The line is not in the parser's format: ``error`` is the ``__error__`` label value."""

    def __init__(self, error: str, details: str) -> None:
        super().__init__(details)
        self.error = error
        self.details = details


def _load_json(line: str) -> Any:
    # Numbers keep the text they had in the line (Loki's json parser reads the raw bytes).
    return json.loads(line, parse_float=_RawNumber, parse_int=_RawNumber)


class _RawNumber(str):
    """A JSON number as the text it was written with."""


def json_fields(line: str) -> dict[str, str]:
    """``| json``: every field of a JSON object line, nested keys joined by ``_``, arrays skipped."""
    try:
        value = _load_json(line)
    except ValueError as exc:
        raise ParseFailure("JSONParserErr", str(exc)) from None
    if not isinstance(value, dict):
        raise ParseFailure("JSONParserErr", "the line is not a JSON object")
    out: dict[str, str] = {}
    flatten(value, "", out)
    return {name: text for name, text in out.items() if text != ""}


def json_path(expression: str) -> list[str | int]:
    """``a.b[0]["c d"]`` as [a, b, 0, "c d"]; ValueError for anything else."""
    parts: list[str | int] = []
    position = 0
    while position < len(expression):
        match = _JSON_PATH.match(expression, position)
        if match is None or (position == 0 and expression.startswith(".")):
            raise ValueError(f"invalid JSON expression {expression!r}")
        name, index, quoted = match.groups()
        parts.append(int(index) if index is not None else name if name is not None else json.loads(f'"{quoted}"'))
        position = match.end()
    if not parts:
        raise ValueError("empty JSON expression")
    return parts


def json_selected(line: str, params: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """``| json label="path", …``: only the named paths (objects and arrays as JSON text)."""
    try:
        value = _load_json(line)
    except ValueError as exc:
        raise ParseFailure("JSONParserErr", str(exc)) from None
    out: dict[str, str] = {}
    for label, expression in params:
        found: Any = value
        for part in json_path(expression):
            if (isinstance(part, int) and isinstance(found, list) and part < len(found)) or (isinstance(part, str) and isinstance(found, dict) and part in found):
                found = found[part]
            else:
                found = None
                break
        text = json_text(found)
        if text != "" and label not in out:
            out[label] = text
    return out


def unpack_fields(line: str) -> tuple[dict[str, str], str]:
    """``| unpack``: the string fields of a JSON object line, and ``_entry`` as the new line."""
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise ParseFailure("JSONParserErr", str(exc)) from None
    if not isinstance(value, dict):
        raise ParseFailure("JSONParserErr", "the line is not a JSON object")
    entry = value.get("_entry")
    fields = {sanitize(key): text for key, text in value.items() if key != "_entry" and isinstance(text, str) and text}
    return fields, entry if isinstance(entry, str) else line


# -- logfmt ---------------------------------------------------------------------------------------------
def logfmt_pairs(line: str, strict: bool) -> list[tuple[str, str | None]]:
    """The key/value pairs of a logfmt line (value None for a standalone key). Non-strict: malformed
    pairs are skipped; strict: the first one raises :class:`ParseFailure`."""
    pairs: list[tuple[str, str | None]] = []
    position, size = 0, len(line)
    while position < size:
        while position < size and line[position] <= " ":
            position += 1
        if position >= size:
            break
        start = position
        while position < size and line[position] > " " and line[position] not in '="':
            position += 1
        key = line[start:position]
        if position < size and line[position] == '"':  # a quote inside a key
            if strict:
                raise ParseFailure("LogfmtParserErr", f"logfmt syntax error at pos {position + 1}: unexpected '\"'")
            position = _skip_token(line, position)
            continue
        if position < size and line[position] == "=":
            position += 1
            if not key:
                if strict:
                    raise ParseFailure("LogfmtParserErr", f"logfmt syntax error at pos {position}: unexpected '='")
                position = _skip_token(line, position)
                continue
            if position < size and line[position] == '"':
                value, position, ok = _quoted(line, position)
                if not ok:
                    if strict:
                        raise ParseFailure("LogfmtParserErr", "logfmt syntax error: unterminated quoted value")
                    break
            else:
                start = position
                while position < size and line[position] > " " and line[position] not in '="':
                    position += 1
                value = line[start:position]
                if position < size and line[position] in '="':
                    if strict:
                        raise ParseFailure("LogfmtParserErr",
                                           f"logfmt syntax error at pos {position + 1}: unexpected {line[position]!r}")
                    position = _skip_token(line, position)
                    continue
            pairs.append((key, value))
        elif key:
            pairs.append((key, None))
    return pairs


def _skip_token(line: str, position: int) -> int:
    while position < len(line) and line[position] > " ":
        position += 1
    return position


def _quoted(line: str, position: int) -> tuple[str, int, bool]:
    """A double-quoted logfmt value from `position` (its opening quote): (value, end, closed)."""
    end = position + 1
    while end < len(line):
        if line[end] == "\\":
            end += 2
            continue
        if line[end] == '"':
            raw = line[position:end + 1]
            try:
                return json.loads(raw), end + 1, True
            except ValueError:
                return raw[1:-1], end + 1, True
        end += 1
    return "", len(line), False


def logfmt_fields(line: str, params: tuple[tuple[str, str], ...], strict: bool, keep_empty: bool) -> dict[str, str]:
    """``| logfmt``: every key (or only the requested ones), first occurrence wins."""
    pairs = logfmt_pairs(line, strict)
    out: dict[str, str] = {}
    if params:
        found: dict[str, str] = {}
        for key, value in pairs:
            found.setdefault(key, value or "")
        for label, key in params:
            if key in found and label not in out:
                out[label] = found[key]
        return out
    for key, value in pairs:
        name = sanitize(key)
        if name in out:
            continue
        if value is None or value == "":
            if keep_empty:
                out[name] = ""
            continue
        out[name] = value
    return out


# -- regexp ---------------------------------------------------------------------------------------------
def compile_regexp(pattern: str) -> re.Pattern[str]:
    """The regexp parser's expression: RE2 syntax with at least one named group ``(?P<name>…)``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    try:
        compiled = re.compile(pattern.replace("(?<", "(?P<") if "(?<" in pattern and "(?<=" not in pattern
                              and "(?<!" not in pattern else pattern)
    except re.error as exc:
        raise ValueError(f"not supported by the ranklog archive's regexp parser: {exc}") from None
    if not compiled.groupindex:
        raise ValueError("at least one named capture must be supplied")
    for name in compiled.groupindex:
        if sanitize(name) != name:
            raise ValueError(f"invalid extracted label name {name!r}")
    return compiled


def regexp_fields(compiled: re.Pattern[str], line: str) -> dict[str, str]:
    match = compiled.search(line)
    if match is None:
        return {}
    return {name: value for name, value in match.groupdict().items() if value}


# -- pattern --------------------------------------------------------------------------------------------
_CAPTURE = re.compile(r"<(_|[A-Za-z_][A-Za-z0-9_]*)>")


class LinePattern:
    """Loki's pattern expressions: captures ``<name>`` / ``<_>`` and literals. As a parser (``| pattern``)
    it extracts the named captures; as a line filter (``|>``) it tests a line (pkg/logql/log/pattern)."""

    def __init__(self, text: str, parser: bool) -> None:
        self.nodes: list[tuple[str, str]] = []  # ("lit", text) / ("cap", name)
        position = 0
        for match in _CAPTURE.finditer(text):
            if match.start() > position:
                self.nodes.append(("lit", text[position:match.start()]))
            self.nodes.append(("cap", match.group(1)))
            position = match.end()
        if position < len(text):
            self.nodes.append(("lit", text[position:]))
        for first, second in zip(self.nodes, self.nodes[1:], strict=False):
            if first[0] == second[0] == "cap":
                raise ValueError("found consecutive capture; captures must be separated by literals")
        names = [value for kind, value in self.nodes if kind == "cap" and value != "_"]
        if parser and not names:
            raise ValueError("at least one capture is required")
        if not parser and names:
            raise ValueError("named captures are not allowed in a pattern filter")
        if len(set(names)) != len(names):
            raise ValueError("duplicate capture name")

    def matches(self, line: str) -> dict[str, str]:
        """The named captures of `line` (Loki's Matcher.Matches); {} when it does not match."""
        nodes = self.nodes
        if not line or not nodes:
            return {}
        out: dict[str, str] = {}
        if nodes[0][0] == "lit":
            if not line.startswith(nodes[0][1]):
                return {}
            line = line[len(nodes[0][1]):]
            nodes = nodes[1:]
        while nodes:
            name = nodes[0][1]
            if len(nodes) == 1:
                if name != "_":
                    out[name] = line
                return out
            literal = nodes[1][1]
            nodes = nodes[2:]
            index = line.find(literal)
            if index == -1:
                if name != "_":
                    out[name] = line
                return out
            if name != "_":
                out[name] = line[:index]
            line = line[index + len(literal):]
        return out

    def test(self, line: str) -> bool:
        """Whether `line` matches the pattern as a line filter (Loki's Matcher.Test)."""
        if not line or not self.nodes:
            return not line and not self.nodes
        offset = 0
        for position, (kind, literal) in enumerate(self.nodes):
            if kind != "lit":
                continue
            index = line.find(literal, offset)
            if index == -1:
                return False
            if position != 0 and index == offset:
                return False
            offset = index + len(literal)
        ends_on_capture = self.nodes[-1][0] == "cap"
        return ends_on_capture == (offset != len(line))
