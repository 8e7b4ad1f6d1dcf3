"""`ranklog agent`: tail this node's training logs, ship them to the archive, export /metrics.

Runs in the foreground until SIGTERM/SIGINT (systemd and containers manage it); on stop, what was
already read is given ``--shutdown-timeout`` to be acknowledged and the checkpoint is written.
"""

from __future__ import annotations

import argparse


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ..agent.agent_config import AgentConfig
    from ..config_loader import add_config_flags

    parser = argparse.ArgumentParser(
        prog=prog, description="Tail every training log on this node, ship it to the ranklog archive with "
                               "end-to-end acknowledgement, and export Prometheus metrics.")
    parser.add_argument("--config", metavar="FILE", help="agent YAML (top level, or under an 'agent:' key)")
    add_config_flags(parser, AgentConfig)
    return parser


def _load(args: argparse.Namespace):
    from ..agent.agent_config import AgentConfig
    from ..config_loader import flag_overrides, load_config

    return load_config(AgentConfig, args.config, flag_overrides(args))


def _raise_open_files_limit() -> None:
    """Every tracked file stays open (rotation safety): lift the soft descriptor limit to the hard one."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))
        except (ValueError, OSError):
            pass


def _skip_bad_sources(cfg) -> list[str]:
    """Sources (and presets) with a value that cannot work are skipped, one error line each: a typo in
    one source must not stop the others on every node. With none left, the config is an error (exit 2)."""
    import logging

    from ..errors import ConfigError

    problems = cfg.source_problems()
    for _, why in problems:
        logging.getLogger("ranklog.agent").error("skipping a source: %s (ranklog check-config finds this before a "
                                                 "rollout); the other sources are shipped", why)
    cfg.skip({key for key, _ in problems})
    if problems and not cfg.sources and not cfg.preset:
        raise ConfigError("no source left to read: " + "; ".join(why for _, why in problems))
    return [key for key, _ in problems]


def main(args: argparse.Namespace) -> int:
    import logging
    import threading

    from ..errors import ConfigError, UserError
    from ..log import service_logging

    cfg = _load(args)
    try:
        cfg.token()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    service_logging.configure(cfg.log_level, cfg.log_format)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    skipped = _skip_bad_sources(cfg)

    from ..agent import huge_pages, stop_signals
    from ..agent.runner import Agent

    _raise_open_files_limit()
    huge_pages.disable()  # before the first piece is read; the parse workers inherit it

    try:
        agent = Agent(cfg)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    for key in skipped:
        agent.metrics.agent_source_errors.labels(source=key).set(1)
    server = None
    if cfg.metrics_listen:
        from ..metrics_server import serve_metrics

        host, _, port = cfg.metrics_listen.rpartition(":")
        try:
            server = serve_metrics(host.strip("[]") or "0.0.0.0", int(port), agent.metrics.registry)
        except (OSError, ValueError) as exc:
            raise UserError(f"metrics_listen: cannot listen on {cfg.metrics_listen}: {exc}") from None
    stop = threading.Event()
    stop_signals.install(stop, cfg.shutdown_timeout)
    logging.getLogger("ranklog.agent").info(
        "agent started: host=%s sources=%d archives=%s state=%s", cfg.host, len(agent.discovery.discovery.specs),
        ",".join(cfg.archive), cfg.state_dir)
    try:
        agent.run(stop)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    return 0
