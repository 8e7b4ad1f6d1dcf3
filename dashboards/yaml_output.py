"""YAML the way the repository's yamllint config wants it (``---``, indented sequences, <= 130 columns).

Multi-line strings (wrapped PromQL) are literal blocks (``|-``); long single-line strings are
wrapped by the emitter at spaces, which YAML reads back as the same string.
"""

from __future__ import annotations

from typing import Any

import yaml

WIDTH = 72


class _IndentedDumper(yaml.SafeDumper):
    """Indents block sequences under their key (yamllint's default ``indent-sequences: true``)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text and text == text.strip() else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_IndentedDumper.add_representer(str, _string)


def dump(data: Any, header: str = "") -> str:
    """`data` as a YAML document, preceded by `header` (comment lines ending in a newline)."""
    body = yaml.dump(data, Dumper=_IndentedDumper, sort_keys=False, width=WIDTH, allow_unicode=True,
                     explicit_start=True, default_flow_style=False)
    return header + body
