"""Validate a ranklog service's YAML config exactly as the service will load it.

Used by the roles' `validate:` so a bad key fails the play (naming the key) before the file
replaces a working one:  ranklog-check-config agent|archive FILE
The archive's tokens file is checked the same way (``tokens FILE``: the archive's own parser; the
error names the line, never a token).
"""

from __future__ import annotations

import importlib
import sys

CONFIG_CLASSES = {
    "agent": ("ranklog.agent.agent_config", "AgentConfig"),
    "archive": ("ranklog.archive.archive_config", "ArchiveConfig"),
}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in (*CONFIG_CLASSES, "tokens"):
        print(f"usage: ranklog-check-config {{{'|'.join(CONFIG_CLASSES)}|tokens}} FILE", file=sys.stderr)
        return 2
    component, path = argv
    if component == "tokens":
        from ranklog.archive.auth import TokenStore

        try:
            TokenStore(path)
        except OSError as exc:
            print(f"ranklog tokens: {exc}", file=sys.stderr)
            return 1
        return 0
    from ranklog.config_loader import load_config
    from ranklog.errors import UserError

    module_name, class_name = CONFIG_CLASSES[component]
    config_class = getattr(importlib.import_module(module_name), class_name)
    try:
        config = load_config(config_class, path)
    except UserError as exc:
        print(f"ranklog {component} config: {exc}", file=sys.stderr)
        return 1
    # Values the service would reject only once running (an agent's source format, options, glob, preset).
    problems = [why for _, why in getattr(config, "source_problems", list)()]
    if problems:
        print(f"ranklog {component} config: {path}: {'; '.join(problems)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
