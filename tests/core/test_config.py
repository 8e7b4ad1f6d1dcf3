"""Config loading: YAML and flags share one validation, and a bad key is named."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import pytest

from ranklog.config_loader import add_config_flags, flag_overrides, load_config
from ranklog.errors import ConfigError


@dataclass
class Tls:
    cert: str | None = None
    verify: bool = True


@dataclass
class Source:
    glob: str
    format: str = field(default="text", metadata={"choices": ("text", "json")})


@dataclass
class Example:
    listen: str = "127.0.0.1:9000"
    retention: float = field(default=30 * 86400, metadata={"unit": "duration"})
    max_body: int = field(default=64 << 20, metadata={"unit": "size"})
    workers: int = 2
    endpoints: list[str] = field(default_factory=list)
    tls: Tls = field(default_factory=Tls)
    sources: list[Source] = field(default_factory=list)


def test_yaml_values_are_converted(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("retention: 7d\nmax_body: 1MiB\ntls: {verify: 'no'}\nsources: [{glob: '/x/*', format: json}]\n")
    cfg = load_config(Example, path)
    assert cfg.retention == 7 * 86400 and cfg.max_body == 1 << 20
    assert cfg.tls.verify is False and cfg.sources[0].format == "json"


@pytest.mark.parametrize(("text", "message"), [
    ("retentoin: 7d\n", "retentoin: unknown key"),
    ("workers: many\n", "workers:"),
    ("sources: [{glob: a, format: xml}]\n", "sources[0].format: 'xml' is not one of"),
    ("sources: [{format: json}]\n", "sources[0].glob: required key is missing"),
    ("tls: {cert: [1]}\n", "tls.cert: expected a string"),
    ("- a\n", "top level must be a mapping"),
    ("a: [\n", "not valid YAML"),
])
def test_bad_config_names_the_key(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(Example, path)


def test_every_scalar_key_is_a_flag_and_flags_override_yaml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("workers: 3\nlisten: 127.0.0.1:1\n")
    parser = argparse.ArgumentParser()
    add_config_flags(parser, Example)
    args = parser.parse_args(["--workers", "5", "--tls-cert", "/c.pem", "--no-tls-verify",
                              "--endpoints", "a,b", "--endpoints", "c", "--max_body", "2k"])
    cfg = load_config(Example, path, flag_overrides(args))
    assert cfg.workers == 5 and cfg.listen == "127.0.0.1:1"
    assert cfg.tls.cert == "/c.pem" and cfg.tls.verify is False
    assert cfg.endpoints == ["a", "b", "c"] and cfg.max_body == 2000


def test_bad_flag_value_is_named():
    parser = argparse.ArgumentParser()
    add_config_flags(parser, Example)
    with pytest.raises(ConfigError, match="retention: not a duration"):
        load_config(Example, None, flag_overrides(parser.parse_args(["--retention", "forever"])))


def test_missing_file_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(Example, tmp_path / "nope.yaml")


@dataclass
class EnvExample(Example):
    ENV_PREFIX = "EXAMPLE"  # not a field: no annotation


def test_every_key_comes_from_the_environment_and_flags_win(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("workers: 3\nlisten: 127.0.0.1:1\nretention: 1d\n")
    environ = {"EXAMPLE_WORKERS": "4", "EXAMPLE_RETENTION": "7d", "EXAMPLE_TLS__VERIFY": "false",
               "EXAMPLE_ENDPOINTS": "a,b", "EXAMPLE_SOURCES": "[{glob: '/x/*', format: json}]", "OTHER_X": "1"}
    parser = argparse.ArgumentParser()
    add_config_flags(parser, EnvExample)
    cfg = load_config(EnvExample, path, flag_overrides(parser.parse_args(["--workers", "5"])), environ=environ)
    assert cfg.workers == 5  # flag > environment
    assert cfg.retention == 7 * 86400  # environment > file
    assert cfg.listen == "127.0.0.1:1"  # file > default
    assert cfg.tls.verify is False and cfg.endpoints == ["a", "b"] and cfg.sources[0].format == "json"


@pytest.mark.parametrize(("environ", "message"), [
    ({"EXAMPLE_WORKER": "4"}, "environment EXAMPLE_WORKER: names no config key (did you mean EXAMPLE_WORKERS?)"),
    ({"EXAMPLE_RETENTION": "forever"}, "environment EXAMPLE_RETENTION: retention: not a duration"),
    ({"EXAMPLE_TLS__VERIFY": "maybe"}, "environment EXAMPLE_TLS__VERIFY: tls.verify: expected true/false"),
    ({"EXAMPLE_SOURCES": "[{glob: a"}, "environment EXAMPLE_SOURCES: not valid YAML"),
])
def test_bad_environment_names_the_variable(environ, message):
    with pytest.raises(ConfigError) as caught:
        load_config(EnvExample, None, environ=environ)
    assert str(caught.value).startswith(message)


def test_help_shows_one_spelling_human_defaults_and_the_environment_scheme():
    parser = argparse.ArgumentParser()
    add_config_flags(parser, EnvExample)
    text = parser.format_help()
    assert "--max-body SIZE" in text and "--max_body" not in text
    assert "(default: 30d)" in text and "(default: 64MiB)" in text
    assert "EXAMPLE_<KEY>" in text and "joined by __" in text
