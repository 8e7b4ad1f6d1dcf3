"""Errors a user can act on: the CLI prints them as one line and exits non-zero, no traceback."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input (flag, file, config, remote answer). Exit status 2."""

    exit_code = 2


class ConfigError(UserError):
    """A bad configuration key or value; the message names the offending key."""


class MissingExtraError(UserError):
    """A command needs an optional dependency group that is not installed."""

    def __init__(self, command: str, extra: str, missing: str) -> None:
        super().__init__(
            f"'ranklog {command}' needs the '{extra}' extra (missing module {missing!r}): "
            f"pip install 'ranklog[{extra}]'"
        )
