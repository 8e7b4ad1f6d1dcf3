"""`ranklog archive`: the central Parquet archive service (see ranklog.archive)."""

from __future__ import annotations

import argparse


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ..archive.archive_config import ArchiveConfig
    from ..config_loader import add_config_flags

    parser = argparse.ArgumentParser(
        prog=prog, description="Durable, exactly-once ingest of log records into hive-partitioned Parquet.")
    parser.add_argument("--config", metavar="FILE", help="YAML file with the keys below (flags override it)")
    add_config_flags(parser, ArchiveConfig)
    return parser


def main(args: argparse.Namespace) -> int:
    from ..archive.archive_config import ArchiveConfig
    from ..config_loader import flag_overrides, load_config

    config = load_config(ArchiveConfig, args.config, flag_overrides(args))
    from ..archive.service import run

    return run(config)
