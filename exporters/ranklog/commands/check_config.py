"""`ranklog check-config FILE`: load an agent or archive config exactly as the service will, say what is wrong.

Exit 0 when the file (with the ``RANKLOG_AGENT_*`` / ``RANKLOG_ARCHIVE_*`` environment applied, as
the service would) loads and every value is one the service accepts at run time too — for the agent,
each source's format, options and glob and each preset (``AgentConfig.source_problems``: what the
agent would skip); exit 2 with one line naming the offending keys and why otherwise. The
kind comes from ``--kind``, else a top-level ``agent:``/``archive:`` key, else the file name, else
the one kind the file loads as. Only the configuration is checked: files it names (token file,
state directory) are checked by the service at start, on the host where it runs.
"""

from __future__ import annotations

import argparse

KINDS = {
    "agent": ("ranklog.agent.agent_config", "AgentConfig"),
    "archive": ("ranklog.archive.archive_config", "ArchiveConfig"),
}


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Check an agent or archive YAML config as the service would load it "
                               "(exit 0 when good, 2 naming the offending key).",
        epilog=f"examples:\n  {prog} /etc/ranklog/agent.yaml\n  {prog} --kind archive archive.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", metavar="FILE", help="the YAML config to check")
    parser.add_argument("--kind", choices=sorted(KINDS),
                        help="which service the file configures (default: guessed from its keys and name)")
    parser.add_argument("--ignore-env", action="store_true",
                        help="check the file alone, without RANKLOG_AGENT_*/RANKLOG_ARCHIVE_* variables")
    return parser


def _config_class(kind: str) -> type:
    import importlib

    module_name, class_name = KINDS[kind]
    return getattr(importlib.import_module(module_name), class_name)


def _guess(path: str) -> list[str]:
    """Candidate kinds, most likely first."""
    from pathlib import Path

    from ..config_loader import read_yaml

    data = read_yaml(path)
    by_section = [kind for kind in KINDS if isinstance(data.get(kind), dict)]
    if len(by_section) == 1:
        return by_section
    by_name = [kind for kind in KINDS if kind in Path(path).name.lower()]
    if len(by_name) == 1:
        return by_name
    import dataclasses

    keys = {str(key).replace("-", "_") for key in data}
    fits = [kind for kind in KINDS if keys <= {f.name for f in dataclasses.fields(_config_class(kind))}]
    return fits if len(fits) == 1 else list(KINDS)


def main(args: argparse.Namespace) -> int:
    from ..config_loader import load_config
    from ..errors import ConfigError

    environ = {} if args.ignore_env else None
    candidates = [args.kind] if args.kind else _guess(args.file)
    errors = []
    for kind in candidates:
        try:
            config = load_config(_config_class(kind), args.file, environ=environ)
        except ConfigError as exc:
            errors.append((kind, exc))
            continue
        problems = [why for _, why in getattr(config, "source_problems", list)()]
        if problems:  # the agent would skip these sources: fail here, where the typo was made
            raise ConfigError(f"{args.file}: {'; '.join(problems)}")
        print(f"{args.file}: OK ({kind} config)")
        return 0
    if len(errors) == 1:
        raise errors[0][1]
    detail = "; ".join(f"as {kind}: {exc}" for kind, exc in errors)
    raise ConfigError(f"{args.file}: neither an agent nor an archive config (give --kind): {detail}")
