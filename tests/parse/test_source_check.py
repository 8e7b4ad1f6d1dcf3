"""ranklog.parse.source_check: the options the agent and check-config accept are the options the parsers
read, and every format name the registry knows passes."""

from __future__ import annotations

import re
from pathlib import Path

from ranklog.parse.registry import parsers
from ranklog.parse.source_check import OPTION_KEYS, source_problem

PARSE = Path(__file__).resolve().parents[2] / "exporters" / "ranklog" / "parse"


def test_option_keys_are_the_options_the_parsers_read():
    read = set()
    for path in PARSE.rglob("*.py"):
        read |= set(re.findall(r"""options(?:\.get\(|\[)\s*["']([a-z_]+)["']""", path.read_text()))
    assert read and read == set(OPTION_KEYS), "update source_check.OPTION_KEYS with the parsers' options"


def test_every_registered_format_and_auto_pass_without_options():
    assert [name for name in ["auto", *parsers()] if source_problem(name, {})] == []


def test_good_options_pass():
    assert source_problem("auto", {"timezone": "Europe/Paris", "multiline_max_lines": 50}) is None
    assert source_problem("text", {"regex": r"^(?P<ts>\S+) (?P<msg>.*)$"}) is None
    assert source_problem("json", {"mapping": {"message": "msg", "severity": "level"}}) is None
