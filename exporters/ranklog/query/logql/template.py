"""The Go ``text/template`` subset of Loki's ``line_format`` and ``label_format``.

Text with ``{{ … }}`` actions (``{{-``/``-}}`` trim spaces); an action is a pipeline of commands
joined by ``|`` (the previous value becomes the last argument), a command a function with arguments
or one operand: ``.label`` (a label's value, "" when absent), ``.`` (every label), strings, numbers,
``true``/``false``, ``(pipeline)``. Control: ``if`` / ``else if`` / ``else`` / ``end``; comments
``{{/* … */}}``. Functions: Go's ``and or not eq ne lt le gt ge len index print printf println``
and Loki's template functions (docs/sources/query/template_functions.md): ``__line__
__timestamp__``, string (``lower upper title trim trimAll trimPrefix trimSuffix trunc substr
replace repeat contains hasPrefix hasSuffix default b64enc b64dec urlencode urldecode alignLeft
alignRight indent nindent count regexReplaceAll regexReplaceAllLiteral ToLower ToUpper Replace
Trim TrimLeft TrimRight TrimPrefix TrimSuffix TrimSpace``), math (``add sub mul div mod addf subf
mulf divf max min maxf minf ceil floor round int float64``) and time (``unixEpoch unixEpochMillis
unixEpochNanos duration duration_seconds bytes``). ``range``, ``with``, variables and any other
function are a :class:`TemplateError` (a 400 naming it), never a silently different line.
"""

from __future__ import annotations

import base64
import math
import operator
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .values import bytes_value, go_duration_seconds

MAX_TEMPLATE_CHARS = 64 * 1024
MAX_OUTPUT_CHARS = 1 << 20


class TemplateError(ValueError):
    pass


@dataclass
class Context:
    labels: dict[str, str]
    line: str
    ts_ns: int


# -- lexing and parsing ---------------------------------------------------------------------------------
_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)
_ARG = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|`[^`]*`)
  | (?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<field>\.[A-Za-z_][A-Za-z0-9_]*|\.)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[|()])
""", re.VERBOSE)


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    position = 0
    while position < len(text):
        match = _ARG.match(text, position)
        if match is None:
            raise TemplateError(f"unexpected {text[position]!r} in action {{{{{text}}}}}")
        if match.lastgroup != "space":
            out.append((match.lastgroup or "", match.group()))
        position = match.end()
    return out


class _Cursor:
    def __init__(self, items: list[tuple[str, str]]) -> None:
        self.items, self.pos = items, 0

    def peek(self) -> tuple[str, str]:
        return self.items[self.pos] if self.pos < len(self.items) else ("end", "")

    def take(self) -> tuple[str, str]:
        item = self.peek()
        self.pos += 1
        return item


def _pipeline(cursor: _Cursor) -> list[list[Any]]:
    commands: list[list[Any]] = [[]]
    while True:
        kind, value = cursor.peek()
        if kind == "end" or (kind == "punct" and value == ")"):
            break
        cursor.take()
        if kind == "punct" and value == "|":
            if not commands[-1]:
                raise TemplateError("missing command before |")
            commands.append([])
        elif kind == "punct" and value == "(":
            inner = _pipeline(cursor)
            if cursor.take() != ("punct", ")"):
                raise TemplateError("unclosed (")
            commands[-1].append(("pipe", inner))
        elif kind == "string":
            commands[-1].append(("value", _go_string(value)))
        elif kind == "number":
            commands[-1].append(("value", float(value) if any(c in value for c in ".eE") else int(value)))
        elif kind == "field":
            commands[-1].append(("field", value[1:]))
        elif value in ("true", "false"):
            commands[-1].append(("value", value == "true"))
        elif value in FUNCTIONS:
            if commands[-1]:
                raise TemplateError(f"function {value} must come first in a command")
            commands[-1].append(("func", value))
        else:
            raise TemplateError(f'function "{value}" not defined')
    if not commands[-1]:
        raise TemplateError("empty command")
    return commands


def _go_string(text: str) -> str:
    if text.startswith("`"):
        return text[1:-1]
    from .lexer import Tokens, unquote

    return unquote(Tokens(text), ("string", text, 0))


@dataclass
class _If:
    branches: list[tuple[list[list[Any]] | None, list[Any]]]  # (condition, body); None: else


def _parse(text: str) -> list[Any]:
    """The template as nodes: str, ("action", pipeline) or _If."""
    root: list[Any] = []
    stack: list[tuple[_If, list[Any]]] = []
    body = root
    position = 0
    trim_next = False
    for match in _ACTION.finditer(text):
        literal = text[position:match.start()]
        if trim_next:
            literal = literal.lstrip()
        if match.group(1):
            literal = literal.rstrip()
        if literal:
            body.append(literal)
        trim_next = bool(match.group(3))
        position = match.end()
        action = match.group(2).strip()
        if action.startswith("/*"):
            if not action.endswith("*/"):
                raise TemplateError("unclosed comment")
            continue
        words = action.split(None, 1)
        keyword = words[0] if words else ""
        if keyword == "if":
            node = _If([(_pipeline(_Cursor(_tokens(words[1] if len(words) > 1 else ""))), [])])
            body.append(node)
            stack.append((node, body))
            body = node.branches[0][1]
        elif keyword == "else":
            if not stack:
                raise TemplateError("unexpected {{else}}")
            node = stack[-1][0]
            rest = words[1] if len(words) > 1 else ""
            if rest.startswith("if"):
                condition = _pipeline(_Cursor(_tokens(rest[2:])))
                node.branches.append((condition, []))
            else:
                node.branches.append((None, []))
            body = node.branches[-1][1]
        elif keyword == "end":
            if not stack:
                raise TemplateError("unexpected {{end}}")
            _, body = stack.pop()
        elif keyword in ("range", "with", "define", "template", "block", "break", "continue") or action.startswith("$"):
            raise TemplateError(f"{{{{{keyword}}}}} is not supported by the ranklog archive")
        else:
            cursor = _Cursor(_tokens(action))
            pipeline = _pipeline(cursor)
            if cursor.peek()[0] != "end":
                raise TemplateError("unexpected ) in action")
            body.append(("action", pipeline))
    if stack:
        raise TemplateError("unexpected EOF: {{if}} without {{end}}")
    tail = text[position:]
    if trim_next:
        tail = tail.lstrip()
    if tail:
        body.append(tail)
    return root


# -- evaluation -------------------------------------------------------------------------------------------
def _text(value: Any) -> str:
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else str(int(value)) if abs(value) < 1e21 else repr(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(value.items())) + "]"
    return str(value)


def _truth(value: Any) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0
    return bool(value)


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value)
    try:
        return int(float(str(value).strip()))
    except ValueError:
        return 0


def _float(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return 0.0


def _cmp_args(a: Any, b: Any) -> tuple[Any, Any]:
    if isinstance(a, (int, float)) and not isinstance(a, bool) and isinstance(b, str):
        return a, _float(b)
    if isinstance(b, (int, float)) and not isinstance(b, bool) and isinstance(a, str):
        return _float(a), b
    return a, b


def _eq(first: Any, *others: Any) -> bool:
    return any(operator.eq(*_cmp_args(first, other)) for other in others)


def _size(count: Any, unit: int = 1) -> int:
    """A width or repeat count, refused past the output bound (a template cannot allocate gigabytes)."""
    count = _int(count)
    if count * max(unit, 1) > MAX_OUTPUT_CHARS:
        raise TemplateError(f"the result would exceed {MAX_OUTPUT_CHARS} characters")
    return count


def _printf(fmt: str, *args: Any) -> str:
    converted = re.sub(r"%([-+ #0]*\d*(?:\.\d+)?)([vsdqtxXfFeEgG%])", lambda m: _printf_verb(m), str(fmt))
    values = [_printf_arg(arg, verb) for arg, verb in zip(args, _verbs(str(fmt)), strict=False)]
    try:
        return converted % tuple(values)
    except (TypeError, ValueError):
        return converted.replace("%%", "%")


def _verbs(fmt: str) -> list[str]:
    return [m.group(2) for m in re.finditer(r"%([-+ #0]*\d*(?:\.\d+)?)([vsdqtxXfFeEgG%])", fmt) if m.group(2) != "%"]


def _printf_verb(match: re.Match[str]) -> str:
    flags, verb = match.group(1), match.group(2)
    if verb == "%":
        return "%%"
    return "%" + flags + {"v": "s", "t": "s", "q": "s"}.get(verb, verb)


def _printf_arg(arg: Any, verb: str) -> Any:
    if verb in "dxX":
        return _int(arg)
    if verb in "fFeEgG":
        return _float(arg)
    if verb == "q":
        import json

        return json.dumps(_text(arg))
    return _text(arg)


def _substr(start: Any, end: Any, text: Any) -> str:
    text, start, end = str(text), _int(start), _int(end)
    if start < 0:
        return text[:end]
    if end < 0 or end > len(text):
        return text[start:]
    return text[start:end]


def _trunc(count: Any, text: Any) -> str:
    count, text = _int(count), str(text)
    return text[:count] if count >= 0 else text[count:]


def _default(fallback: Any, value: Any = None) -> Any:
    return value if _truth(value) else fallback


def _b64dec(text: Any) -> str:
    try:
        return base64.b64decode(str(text)).decode("utf-8", "replace")
    except ValueError as exc:
        return str(exc)


def _duration(value: Any) -> float:
    try:
        return go_duration_seconds(str(value))
    except ValueError:
        return 0.0


def _bytes(value: Any) -> float:
    try:
        return bytes_value(str(value))
    except ValueError:
        return 0.0


def _indent(spaces: Any, text: Any) -> str:
    pad = " " * max(0, _size(spaces, 1 + str(text).count("\n")))
    return pad + str(text).replace("\n", "\n" + pad)


def _regex_replace(literal: bool) -> Callable[..., str]:
    def replace(pattern: Any, text: Any, replacement: Any) -> str:
        try:
            compiled = re.compile(str(pattern))
        except re.error as exc:
            raise TemplateError(f"regexReplaceAll: {exc}") from None
        if literal:
            return compiled.sub(lambda _: str(replacement), str(text))
        return compiled.sub(re.sub(r"\$\{?(\w+)\}?", r"\\g<\1>", str(replacement)), str(text))

    return replace


def _count(pattern: Any, text: Any) -> int:
    try:
        return len(re.findall(str(pattern), str(text)))
    except re.error as exc:
        raise TemplateError(f"count: {exc}") from None


def _index(collection: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(collection, dict):
            collection = collection.get(str(key), "")
        elif isinstance(collection, (str, list)):
            index = _int(key)
            collection = collection[index] if 0 <= index < len(collection) else ""
        else:
            return ""
    return collection


def _math(function: Callable[[float, float], float], integer: bool) -> Callable[..., Any]:
    def apply(*args: Any) -> Any:
        if not args:
            return 0
        values = [_int(a) if integer else _float(a) for a in args]
        out = values[0]
        for value in values[1:]:
            out = function(out, value)
        return out

    return apply


def _div(integer: bool) -> Callable[[Any, Any], Any]:
    def divide(a: Any, b: Any) -> Any:
        if integer:
            a, b = _int(a), _int(b)
            if b == 0:
                raise TemplateError("integer divide by zero")
            return int(a / b)
        a, b = _float(a), _float(b)
        return a / b if b else (math.inf if a > 0 else -math.inf if a < 0 else math.nan)

    return divide


def _mod(a: Any, b: Any) -> int:
    a, b = _int(a), _int(b)
    if b == 0:
        raise TemplateError("integer divide by zero")
    return int(math.fmod(a, b))


def _round(value: Any, digits: Any = 0, half: Any = 0.5) -> float:
    scale = 10 ** _int(digits)
    number = _float(value) * scale
    rounded = math.floor(number) + (1 if number - math.floor(number) >= _float(half) else 0)
    return rounded / scale


FUNCTIONS: dict[str, Callable[..., Any]] = {
    # Go's builtins
    "and": lambda *a: next((v for v in a if not _truth(v)), a[-1] if a else ""),
    "or": lambda *a: next((v for v in a if _truth(v)), a[-1] if a else ""),
    "not": lambda v: not _truth(v),
    "eq": _eq, "ne": lambda a, b: not _eq(a, b),
    "lt": lambda a, b: operator.lt(*_cmp_args(a, b)), "le": lambda a, b: operator.le(*_cmp_args(a, b)),
    "gt": lambda a, b: operator.gt(*_cmp_args(a, b)), "ge": lambda a, b: operator.ge(*_cmp_args(a, b)),
    "len": lambda v: len(v) if isinstance(v, (str, dict, list)) else 0,
    "index": _index,
    "print": lambda *a: "".join(_text(v) for v in a), "println": lambda *a: " ".join(_text(v) for v in a) + "\n",
    "printf": _printf,
    # strings
    "ToLower": lambda s: str(s).lower(), "ToUpper": lambda s: str(s).upper(), "lower": lambda s: str(s).lower(),
    "upper": lambda s: str(s).upper(), "title": lambda s: str(s).title(),
    "Replace": lambda s, old, new, n: str(s).replace(str(old), str(new), _int(n) if _int(n) >= 0 else -1),
    "replace": lambda old, new, s: str(s).replace(str(old), str(new)),
    "Trim": lambda s, cut: str(s).strip(str(cut)), "TrimLeft": lambda s, cut: str(s).lstrip(str(cut)),
    "TrimRight": lambda s, cut: str(s).rstrip(str(cut)), "TrimPrefix": lambda s, p: str(s).removeprefix(str(p)),
    "TrimSuffix": lambda s, p: str(s).removesuffix(str(p)), "TrimSpace": lambda s: str(s).strip(),
    "trim": lambda s: str(s).strip(), "trimAll": lambda cut, s: str(s).strip(str(cut)),
    "trimPrefix": lambda p, s: str(s).removeprefix(str(p)), "trimSuffix": lambda p, s: str(s).removesuffix(str(p)),
    "trunc": _trunc, "substr": _substr, "repeat": lambda n, s: str(s) * max(0, _size(n, len(str(s)))),
    "contains": lambda sub, s: str(sub) in str(s), "hasPrefix": lambda p, s: str(s).startswith(str(p)),
    "hasSuffix": lambda p, s: str(s).endswith(str(p)), "default": _default,
    "b64enc": lambda s: base64.b64encode(str(s).encode()).decode(), "b64dec": _b64dec,
    "urlencode": lambda s: urllib.parse.quote_plus(str(s)), "urldecode": lambda s: urllib.parse.unquote_plus(str(s)),
    "alignLeft": lambda n, s: str(s)[:_size(n)].ljust(_size(n)),
    "alignRight": lambda n, s: str(s)[-_size(n):].rjust(_size(n)) if _size(n) > 0 else "",
    "indent": _indent, "nindent": lambda n, s: "\n" + _indent(n, s),
    "count": _count, "regexReplaceAll": _regex_replace(False), "regexReplaceAllLiteral": _regex_replace(True),
    # math
    "add": _math(operator.add, True), "sub": _math(operator.sub, True), "mul": _math(operator.mul, True),
    "div": _div(True), "mod": _mod, "addf": _math(operator.add, False), "subf": _math(operator.sub, False),
    "mulf": _math(operator.mul, False), "divf": _div(False), "max": _math(max, True), "min": _math(min, True),
    "maxf": _math(max, False), "minf": _math(min, False), "ceil": lambda v: float(math.ceil(_float(v))),
    "floor": lambda v: float(math.floor(_float(v))), "round": _round, "int": _int, "float64": _float,
    # time and units
    "duration": _duration, "duration_seconds": _duration, "bytes": _bytes,
    # filled per call from the context (see _call)
    "__line__": lambda: "", "__timestamp__": lambda: "", "unixEpoch": lambda t: 0, "unixEpochMillis": lambda t: 0,
    "unixEpochNanos": lambda t: 0,
}


class _Timestamp(datetime):
    """``__timestamp__``: a time that prints as Go's time.Time does."""

    def __str__(self) -> str:
        return self.strftime("%Y-%m-%d %H:%M:%S.%f +0000 UTC")


def _context_function(name: str, context: Context) -> Callable[..., Any] | None:
    if name == "__line__":
        return lambda: context.line
    if name == "__timestamp__":
        return lambda: _Timestamp.fromtimestamp(context.ts_ns / 1e9, tz=timezone.utc)
    if name in ("unixEpoch", "unixEpochMillis", "unixEpochNanos"):
        scale = {"unixEpoch": 10**9, "unixEpochMillis": 10**6, "unixEpochNanos": 1}[name]

        def epoch(value: Any) -> int:
            if isinstance(value, datetime):
                return int(value.timestamp() * 10**9) // scale
            return 0

        return epoch
    return None


def _run(pipeline: list[list[Any]], context: Context) -> Any:
    result: Any = None
    for index, command in enumerate(pipeline):
        args = [_operand(item, context) for item in command[1:]] if command[0][0] == "func" else []
        if index > 0:
            args.append(result)
        if command[0][0] == "func":
            name = command[0][1]
            function = _context_function(name, context) or FUNCTIONS[name]
            try:
                result = function(*args)
            except TypeError:
                raise TemplateError(f"wrong number of args for {name}") from None
        else:
            if len(command) > 1 or index > 0:
                raise TemplateError("can't give argument to non-function")
            result = _operand(command[0], context)
    return result


def _operand(item: tuple[str, Any], context: Context) -> Any:
    kind, value = item
    if kind == "value":
        return value
    if kind == "field":
        return context.labels if value == "" else context.labels.get(value, "")
    if kind == "pipe":
        return _run(value, context)
    raise TemplateError(f"function {value} must come first in a command")


def _render(nodes: list[Any], context: Context, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, _If):
            for condition, body in node.branches:
                if condition is None or _truth(_run(condition, context)):
                    _render(body, context, out)
                    break
        else:
            out.append(_text(_run(node[1], context)))


class Template:
    """A parsed template; :meth:`render` gives the text for one line's labels."""

    def __init__(self, text: str) -> None:
        if len(text) > MAX_TEMPLATE_CHARS:
            raise TemplateError(f"template longer than {MAX_TEMPLATE_CHARS} characters")
        self.text = text
        self.nodes = _parse(text)
        self.fields = set(re.findall(r"\.([A-Za-z_][A-Za-z0-9_]*)", text))

    def render(self, labels: dict[str, str], line: str, ts_ns: int) -> str:
        out: list[str] = []
        _render(self.nodes, Context(labels, line, ts_ns), out)
        text = "".join(out)
        return text if len(text) <= MAX_OUTPUT_CHARS else text[:MAX_OUTPUT_CHARS]
