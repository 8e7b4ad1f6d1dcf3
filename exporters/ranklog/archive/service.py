"""`ranklog archive`: wire storage, WAL, pipeline, maintenance and the HTTP app, and serve.

The listener comes up at once (so /healthz answers during a long WAL replay); /readyz and ingest
say 503 until recovery is done. One instance owns a state directory at a time (an flock on
``<state>/lock``, released by the kernel even after kill -9). SIGTERM/SIGINT stop accepting
requests, let in-flight ones finish, flush the WAL to Parquet and write a dedup snapshot, so a
clean restart replays nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import threading
import time

import uvicorn

from ..errors import UserError
from ..log import service_logging
from ..metrics import create
from .allocator import return_large_blocks
from .app import ArchiveState, create_app
from .archive_config import ArchiveConfig
from .auth import TokenStore
from .http_limits import guarded_protocol
from .ingest_budget import IngestBudget
from .leases import lease_store
from .maintenance import Maintenance
from .pipeline import Pipeline
from .storage import Clock, DiskProbe, Storage
from .verdicts.routes import attach as attach_verdicts

log = logging.getLogger("ranklog.archive")


def state_directory(config: ArchiveConfig, storage: Storage) -> str:
    if config.state_dir:
        return os.path.abspath(config.state_dir)
    return os.path.join(storage.base, "_ranklog", config.archive_id)


def _lock_state_dir(state_dir: str) -> int:
    os.makedirs(state_dir, exist_ok=True)
    fd = os.open(os.path.join(state_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UserError(f"another archive instance is using {state_dir} (give each instance its own "
                        "archive_id or state_dir)") from None
    return fd


def run(config: ArchiveConfig) -> int:
    service_logging.configure(config.log_level, config.log_format)
    return_large_blocks()
    storage = Storage(config.root, config.archive_id, config.s3.settings())
    state_dir = state_directory(config, storage)
    lock_fd = _lock_state_dir(state_dir)
    metrics = create("archive")
    try:
        tokens = TokenStore(config.token_file, exposed_gauge=metrics.token_file_insecure)
    except OSError as exc:
        raise UserError(str(exc)) from None
    disk = DiskProbe(storage.local_base, config.free_space_file)
    pipeline = Pipeline(config, storage, state_dir, metrics)
    maintenance = Maintenance(config, storage, state_dir, metrics, Clock(config.clock_file), disk,
                              lease_store(storage, config.root, config.s3.settings()))
    budget = IngestBudget(config.ingest_memory_budget, config.ingest_memory_per_token, config.max_request_records,
                          metrics.archive_ingest_memory_bytes)
    state = ArchiveState(config, storage, pipeline, tokens, metrics, disk, budget)
    server: uvicorn.Server | None = None
    fatal: list[str] = []

    def end_process(reason: str) -> None:
        """A failure that sticks (pipeline.fatal): /readyz says why for `fatal_exit_delay`, then the
        server stops and the process exits non-zero, so systemd (Restart=always) starts it again."""
        fatal.append(reason)

        def stop() -> None:
            time.sleep(config.fatal_exit_delay)
            if server is not None:
                server.should_exit = True

        threading.Thread(target=stop, name="archive-fatal-exit", daemon=True).start()

    pipeline.on_fatal = end_process

    def recover() -> None:
        try:
            pipeline.recover()
            maintenance.owner.recover()
        except Exception as exc:
            log.exception("recovery failed")
            pipeline.fatal(f"recovery failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            return
        pipeline.start()
        maintenance.start()
        state.ready = True
        log.info("archive %s ready (root %s, state %s)", config.archive_id, config.root, state_dir)

    recovery = threading.Thread(target=recover, name="archive-recovery", daemon=True)
    recovery.start()
    host, port = config.listen_address()

    def count_refusal(reason: str) -> None:
        metrics.archive_rejected_requests.labels(reason=reason).inc()

    app = create_app(state)
    verdicts = attach_verdicts(app, config, pipeline, state_dir, metrics)
    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, loop="uvloop",
        http=guarded_protocol(config.header_timeout, config.max_header_size, count_refusal), lifespan="off", timeout_graceful_shutdown=10, server_header=False,
        ssl_certfile=config.tls_cert or None, ssl_keyfile=config.tls_key or None,
    ))
    # uvicorn re-raises the signal that stopped it once it has shut down; with these handlers in
    # place that lands here instead of killing the process before the final flush below.
    stopped_by: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda number, frame: stopped_by.append(number))
    try:
        server.run()
    finally:
        recovery.join()
        verdicts.stop()
        maintenance.stop()
        if state.ready:
            pipeline.close()
        os.close(lock_fd)
    if fatal:
        log.critical("archive %s exits after a failure that sticks: %s", config.archive_id, fatal[0])
        return 1
    log.info("archive %s stopped%s", config.archive_id, " (signal)" if stopped_by else "")
    return 0 if server.started else 1
