"""Every command's ``--help``: one spelling per flag, help on every flag, defaults in human units."""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from ranklog.cli import COMMANDS


def parser_of(name: str) -> argparse.ArgumentParser:
    module_name = COMMANDS[name][0]
    return importlib.import_module(f"ranklog.commands.{module_name}").build_parser(f"ranklog {name}")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_flag_has_help_and_is_listed_once(name):
    parser = parser_of(name)
    text = parser.format_help()
    listed = [action for action in parser._actions if action.help is not argparse.SUPPRESS]
    for action in listed:
        assert action.help and action.help.strip(), f"ranklog {name}: {action.option_strings or action.dest} has no help"
    shown = re.findall(r"^\s{2}(-[-\w]+)", text, re.M)
    assert len(shown) == len(set(shown)), f"ranklog {name}: a flag is listed twice"
    stems = [flag.replace("_", "-") for flag in shown]
    assert len(stems) == len(set(stems)), f"ranklog {name}: both --a-b and --a_b listed"


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
