"""Typed configuration from YAML files and command-line flags, failing fast on the offending key.

A component describes its configuration as a dataclass (nested dataclasses and lists of them
allowed). :func:`load_config` reads a YAML file, applies environment and flag overrides and
returns an instance; an unknown key or a bad value raises :class:`~ranklog.errors.ConfigError`
naming the key path (``sources[2].format: unknown format 'jsn'``) and where it came from.
:func:`add_config_flags` gives every scalar key a flag (``retention.default`` →
``--retention-default``; ``--retention_default`` is accepted too but not listed), so one-off use
needs no YAML.

Environment: a config class with ``ENV_PREFIX`` (``RANKLOG_AGENT``, ``RANKLOG_ARCHIVE``) takes every
key from ``<PREFIX>_<KEY>``, the key upper-cased with nested keys joined by ``__``
(``RANKLOG_ARCHIVE_RETENTION__DEFAULT=30d``). Values are text as on the command line (lists
comma-separated); a value starting with ``[`` or ``{`` is read as YAML (``RANKLOG_AGENT_SOURCES=
[{glob: '/data/*.log', format: text}]``). A variable with the prefix that names no key is an error,
so a typo fails instead of being ignored. Precedence: flag > environment > ``--config`` file >
default.

Field metadata understood: ``help``; ``unit`` = ``"duration"`` (seconds, from ``30s``/``7d``) or
``"size"`` (bytes, from ``1GB``); ``choices``; ``parse`` (a callable for anything else);
``flag`` = False to keep a key out of the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from .errors import ConfigError
from .units import format_duration, format_size, parse_duration, parse_size

T = TypeVar("T")
_MISSING = object()


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _convert(value: Any, tp: Any, meta: Mapping[str, Any], path: str) -> Any:
    try:
        return _convert_inner(value, tp, meta, path)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _convert_inner(value: Any, tp: Any, meta: Mapping[str, Any], path: str) -> Any:
    if value is None:
        return None
    if "parse" in meta:
        return meta["parse"](value)
    unit = meta.get("unit")
    if unit == "duration":
        return parse_duration(value)
    if unit == "size":
        return parse_size(value)
    tp = _strip_optional(tp)
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {type(value).__name__}")
        return _build(tp, value, path)
    if origin in (list, tuple):
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        if isinstance(value, str):
            value = [part for part in value.split(",") if part]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {type(value).__name__}")
        items = [_convert(item, item_tp, {}, f"{path}[{i}]") for i, item in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {type(value).__name__}")
        _, value_tp = typing.get_args(tp) or (str, Any)
        return {str(k): _convert(v, value_tp, {}, f"{path}.{k}") for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{path}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        value = int(value)
    elif tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        value = float(value)
    elif tp is str:
        if isinstance(value, (Mapping, list)):
            raise ConfigError(f"{path}: expected a string, got {type(value).__name__}")
        value = str(value)
    choices = meta.get("choices")
    if choices and value not in choices:
        raise ConfigError(f"{path}: {value!r} is not one of {', '.join(map(str, choices))}")
    return value


def _build(cls: type[T], data: Mapping[str, Any], prefix: str = "") -> T:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        path = f"{prefix}.{key}" if prefix else str(key)
        if name not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"{path}: unknown key (known keys: {known})")
        kwargs[name] = _convert(value, hints[name], fields[name].metadata, path)
    for name, f in fields.items():
        if name not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix + '.' if prefix else ''}{name}: required key is missing")
    instance = cls(**kwargs)
    validate = getattr(instance, "validate", None)
    if callable(validate):
        try:
            validate()
        except ValueError as exc:
            raise ConfigError(f"{prefix + ': ' if prefix else ''}{exc}") from None
    return instance


def read_yaml(path: str | os.PathLike[str], section: str | None = None) -> dict[str, Any]:
    """The mapping in a YAML file (or its `section` key); a clear error when it is not one."""
    try:
        import yaml
    except ImportError:
        raise ConfigError(f"{path}: reading YAML needs PyYAML (pip install pyyaml)") from None
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    data = {} if data is None else data
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping of keys")
    if section is not None:
        data = data.get(section) or {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: {section}: must be a mapping of keys")
    return dict(data)


def _merge(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for dotted, value in overrides.items():
        node = out
        *parents, leaf = dotted.split(".")
        for part in parents:
            child = node.get(part)
            node[part] = dict(child) if isinstance(child, Mapping) else {}
            node = node[part]
        node[leaf] = value
    return out


ENV_NESTING = "__"


def env_name(prefix: str, dotted: str) -> str:
    """The environment variable of a key: ``env_name("RANKLOG_ARCHIVE", "retention.default")``."""
    return f"{prefix}_{dotted.replace('.', ENV_NESTING).upper()}"


def _env_value(text: str) -> Any:
    if text.lstrip().startswith(("[", "{")):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
    return text


def env_overrides(cls: type, prefix: str, environ: Mapping[str, str] | None = None) -> dict[str, tuple[str, Any]]:
    """dotted key → (variable, value) for every ``<prefix>_…`` variable; unknown ones raise ConfigError."""
    environ = os.environ if environ is None else environ
    known = {env_name(prefix, dotted): dotted for dotted in config_keys(cls)}
    out: dict[str, tuple[str, Any]] = {}
    for var in sorted(environ):
        if not var.startswith(prefix + "_"):
            continue
        if var not in known:
            import difflib

            close = difflib.get_close_matches(var, list(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"environment {var}: names no config key{hint}; the scheme is "
                              f"{prefix}_<KEY>, nested keys joined by {ENV_NESTING}")
        try:
            out[known[var]] = (var, _env_value(environ[var]))
        except ValueError as exc:
            raise ConfigError(f"environment {var}: {exc}") from None
    return out


def load_config(cls: type[T], path: str | os.PathLike[str] | None = None,
                overrides: Mapping[str, Any] | None = None, *, section: str | None = None,
                environ: Mapping[str, str] | None = None) -> T:
    """An instance of `cls` from the YAML at `path` (optional), the environment (when `cls` has an
    ``ENV_PREFIX``) and dotted-key `overrides` (flags), later ones winning.

    When `section` is None and `cls` has a ``SECTION`` that is a top-level key of the file, that
    key's mapping is read (one file may hold ``agent:`` and ``archive:``).
    """
    data = read_yaml(path) if path else {}
    section = section or getattr(cls, "SECTION", None)
    if path and section and isinstance(data.get(section), Mapping):
        data = dict(data[section])
    prefix = getattr(cls, "ENV_PREFIX", None)
    from_env = env_overrides(cls, prefix, environ) if prefix else {}
    try:
        return _build(cls, _merge(_merge(data, {k: v for k, (_, v) in from_env.items()}), overrides or {}))
    except ConfigError as exc:
        key = str(exc).split(":", 1)[0].split("[", 1)[0]
        origin = next((var for dotted, (var, _) in from_env.items()
                       if dotted == key and dotted not in (overrides or {})), None)
        if origin:
            raise ConfigError(f"environment {origin}: {exc}") from None
        if path and key not in (overrides or {}):
            raise ConfigError(f"{path}: {exc}") from None
        raise


def config_keys(cls: type, prefix: str = "") -> list[str]:
    """Every settable dotted key of `cls` (nested dataclasses expanded, lists and mappings whole)."""
    hints = typing.get_type_hints(cls)
    keys: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = _strip_optional(hints[f.name])
        if dataclasses.is_dataclass(tp):
            keys += config_keys(tp, f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def _scalar_fields(cls: type, prefix: str = ""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init or f.metadata.get("flag", True) is False:
            continue
        tp = _strip_optional(hints[f.name])
        dotted = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(tp):
            yield from _scalar_fields(tp, dotted + ".")
        elif typing.get_origin(tp) is list and dataclasses.is_dataclass((typing.get_args(tp) or (None,))[0]):
            continue
        else:
            yield dotted, tp, f


def default_text(f: dataclasses.Field) -> str:
    """A field's default as a person writes it: ``7d``, ``1GiB``, ``a, b, c … (27 in all)``; '' when none."""
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING and f.metadata.get("show_default", True):
        value = f.default_factory()
    else:
        return ""
    if value in (None, "", [], (), {}):
        return ""
    unit = f.metadata.get("unit")
    if unit == "duration":
        return format_duration(value)
    if unit == "size":
        return format_size(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int) and value >= 10_000:
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        shown = ", ".join(map(str, value[:3]))
        return shown + (f" … ({len(value)} in all)" if len(value) > 3 else "")
    return str(value)


def add_config_flags(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> None:
    """Add a flag for every scalar key of `cls`: ``--a-b`` listed, ``--a_b`` accepted unlisted.

    Values are kept as text and converted by :func:`load_config`, so a flag and a YAML key go
    through the same validation. List keys take a comma-separated value or repeat the flag. Help
    shows defaults in human units (``7d``, ``1GiB``) and the key's environment variable scheme.
    """
    prefix = getattr(cls, "ENV_PREFIX", None)
    title = "configuration keys (override the environment and the --config file)"
    description = (f"Every key is also read from {prefix}_<KEY> (nested keys joined by {ENV_NESTING}, "
                   f"e.g. {env_name(prefix, config_keys(cls)[-1])})." if prefix else None)
    group = parser.add_argument_group(title, description)
    for dotted, tp, f in _scalar_fields(cls):
        if dotted in skip:
            continue
        dashed = "--" + dotted.replace(".", "-").replace("_", "-")
        underscored = "--" + dotted.replace(".", "_")
        help_text = f.metadata.get("help") or dotted.replace("_", " ")
        shown = default_text(f)
        if shown:
            help_text = f"{help_text} (default: {shown})"
        metavar = {"duration": "DURATION", "size": "SIZE"}.get(f.metadata.get("unit", ""),
                                                               dotted.split(".")[-1].upper())
        if typing.get_origin(tp) is list:
            kwargs: dict[str, Any] = {"action": "append", "metavar": metavar}
        elif tp is bool:
            kwargs = {"action": argparse.BooleanOptionalAction}
        else:
            kwargs = {"metavar": metavar}
        group.add_argument(dashed, dest=f"cfg:{dotted}", default=None, help=help_text, **kwargs)
        if underscored != dashed:
            hidden = dict(kwargs, action="append") if kwargs.get("action") == "append" else dict(kwargs)
            if tp is bool:
                hidden["action"] = "store_const"
                hidden["const"] = True
            group.add_argument(underscored, dest=f"cfg:{dotted}", default=None, help=argparse.SUPPRESS, **hidden)


def flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The dotted-key overrides given on the command line (flags left unset are not included)."""
    out: dict[str, Any] = {}
    for dest, value in vars(args).items():
        if dest.startswith("cfg:") and value is not None:
            if isinstance(value, list):
                value = [part for item in value for part in str(item).split(",") if part]
            out[dest[4:]] = value
    return out


def log_level_field(program: str) -> Any:
    """The `log_level` key every ranklog service has (its own log lines, not the logs it ships)."""
    return dataclasses.field(default="INFO", metadata={"choices": ("DEBUG", "INFO", "WARNING", "ERROR"),
                                                       "help": f"the {program}'s own log level (DEBUG, INFO, WARNING, ERROR)"})


def log_format_field(program: str) -> Any:
    """The `log_format` key every ranklog service has: text, or ranklog JSON for log pipelines."""
    return dataclasses.field(default="text", metadata={"choices": ("text", "json"), "help": (
        f"the {program}'s own log lines: text, or json (one ranklog JSON record per line, for log pipelines)")})
