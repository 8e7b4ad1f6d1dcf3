"""LogQL's tokens: strings (Go escapes or `raw`), range brackets, operators, numbers with their unit
(``5m``, ``20MB``, ``1.5``), identifiers and ``--flags``; ``#`` starts a comment. Errors are Loki's
``parse error at line 1, col N: …``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<flag>--[a-z][a-z-]*)
  | (?P<op>\|=|\|~|\|>|!=|!~|!>|=~|==|>=|<=|=|>|<|\||\{|\}|\(|\)|,|\+|-|\*|/|%|\^)
  | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:[a-zA-Zµμ]+(?:\d+(?:\.\d+)?[a-zA-Zµμ]+)*)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
""", re.VERBOSE)

Token = tuple[str, str, int]  # (kind, text, position)


class LogQLError(ValueError):
    """A query outside the supported LogQL or not LogQL at all; the message is Loki's (``parse error at …``)."""


@dataclass
class Tokens:
    text: str
    items: list[Token] = field(default_factory=list)
    pos: int = 0

    def peek(self, ahead: int = 0) -> Token:
        index = self.pos + ahead
        return self.items[index] if index < len(self.items) else ("end", "", len(self.text))

    def take(self) -> Token:
        token = self.peek()
        self.pos += 1
        return token

    def at(self, kind: str, value: str | None = None, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token[0] == kind and (value is None or token[1] == value)

    def accept(self, kind: str, value: str | None = None) -> Token | None:
        return self.take() if self.at(kind, value) else None

    def error(self, message: str, at: int | None = None) -> LogQLError:
        column = (self.peek()[2] if at is None else at) + 1
        return LogQLError(f"parse error at line 1, col {column}: {message}")

    def expect(self, kind: str, value: str | None = None, wanted: str | None = None) -> Token:
        if not self.at(kind, value):
            raise self.unexpected(wanted or value or kind)
        return self.take()

    def unexpected(self, wanted: str) -> LogQLError:
        kind, value, _ = self.peek()
        seen = "end of input" if kind == "end" else repr(value)
        return self.error(f"syntax error: unexpected {seen}, expecting {wanted}")

    def unsupported(self, what: str, at: int | None = None) -> LogQLError:
        return self.error(f"not supported by the ranklog archive: {what}", at)


def tokenize(text: str) -> Tokens:
    tokens = Tokens(text)
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise tokens.error(f"syntax error: unexpected character {text[position]!r}", position)
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.items.append((kind, match.group(), position))
        position = match.end()
    return tokens


_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
                   '"': '"', "'": "'", "`": "`"}


def _go_escape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[code]
    if code[0] in "xuU":
        point = int(code[1:], 16)
        if 0xD800 <= point <= 0xDFFF:
            raise ValueError(code)
        return chr(point)
    if code[0] in "01234567" and len(code) == 3:
        return chr(int(code, 8))
    raise ValueError(code)


def unquote(tokens: Tokens, token: Token) -> str:
    """A string token's value: backticks are raw, double quotes take Go's escapes (strconv.Unquote)."""
    raw = token[1]
    if raw.startswith("`"):
        return raw[1:-1]
    try:
        return _ESCAPE.sub(_go_escape, raw[1:-1])
    except (ValueError, OverflowError):
        raise tokens.error(f"invalid string literal {raw}", token[2]) from None
