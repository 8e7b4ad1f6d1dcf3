"""Every command's ``--help``: one spelling per flag, help on every flag, defaults in human units."""

from __future__ import annotations

import argparse
import re

import pytest

from ranklog.cli import COMMANDS
from ranklog.cli import build_parser as parser_of


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_flag_has_help_and_is_listed_once(name):
    parser = parser_of(name)
    text = parser.format_help()
    listed = [action for action in parser._actions if action.help is not argparse.SUPPRESS]
    for action in listed:
        assert action.help and action.help.strip(), f"ranklog {name}: {action.option_strings or action.dest} has no help"
    options = text.split("options:", 1)[1]
    for line in options.splitlines():
        if line.startswith("  -"):
            invocation = re.split(r"\s{2,}", line.strip())[0]
            assert invocation.count("--") <= 1, f"ranklog {name}: {invocation!r} shows more than one spelling"
    shown = re.findall(r"^\s{2}(?:-\w, )?(--[-\w]+)", options, re.M)
    stems = [flag.replace("_", "-") for flag in shown]
    assert len(stems) == len(set(stems)), f"ranklog {name}: a flag is listed twice"


@pytest.mark.parametrize("name", ["agent", "archive"])
def test_defaults_are_in_human_units(name):
    text = " ".join(parser_of(name).format_help().split())
    defaults = re.findall(r"\(default: ([^)]*)\)", text)
    assert defaults
    for value in defaults:
        assert not re.fullmatch(r"\d+\.\d+|\d{6,}", value), f"ranklog {name}: default {value!r} is not human"
    if name == "archive":
        assert "keep records this long (default: 30d)" in text and "(default: 256MiB)" in text
    else:
        assert "(default: 4MB)" in text and "(default: 250ms)" in text
