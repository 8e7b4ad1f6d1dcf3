"""``ranklog run -- CMD …``: run a training command and turn its output into ranklog records.

The wrapper starts CMD with its stdout and stderr on pipes, copies every byte to its own stdout
and stderr unchanged (the console looks as without the wrapper), and turns the lines into
records (policy: :mod:`ranklog.log.capture`) written by the in-process library to
``<log_dir>/<job>/<host>/rank-<rank>.pid-<wrapper pid>.<part>.jsonl``; each record's ``pid`` is the
child's. Logger names are ``stdout`` and ``stderr``; records below ``--level`` are not written
(the console copy is complete). The child's environment gets the effective settings
(``RANKLOG_LOG_DIR``, ``RANKLOG_FORMAT``, ``RANKLOG_LEVEL``, ``RANKLOG_ROTATION``,
``RANKLOG_RETENTION``, ``RANKLOG_ENABLED``, and ``RANKLOG_JOB`` when known), so a child that also
uses ``ranklog.get_logger`` writes next to the wrapper's file with the same settings; rank variables and
``RANKLOG_TRACE_CONTEXT`` pass through untouched; ``RANKLOG_CONSOLE=off`` (unless set) keeps the child's
ranklog loggers from echoing warnings that would be captured a second time. ``PYTHONUNBUFFERED=1`` is set unless the
environment sets it: a Python child would otherwise hold stdout in a 8 KiB buffer (its stdout is
a pipe), delaying records, skewing their time and losing the tail when the child is killed.

Signals and exit status. Without a terminal on stdin (batch jobs, torchrun, SLURM) the child runs
in its own process group and SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the
wrapper are forwarded to that group (so data-loader workers get them too), each exactly once; on
Linux the child also gets SIGTERM if the wrapper dies. With a terminal on stdin the child stays in
the wrapper's process group, so Ctrl-C, Ctrl-Z and ``breakpoint()`` work as usual: terminal
signals reach the child directly and the wrapper forwards only SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2.
The wrapper exits with the child's exit status, or 128 + N when the child was killed by signal N;
127/126 when CMD cannot be found/executed. After the child exits, output still held by its
descendants is read for at most ``DRAIN_AFTER_EXIT`` seconds.

``--monitoring-port`` serves ``/metrics`` (prometheus-client, the ``agent`` extra) with
``ranklog_log_records_total{level,job,rank}``, ``ranklog_last_record_timestamp_seconds`` and
``ranklog_failure_signatures_total`` for the captured records.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .errors import UserError
from .log import context
from .log import process_identity as identity
from .log.capture import MAX_LINE_BYTES, Captured, StreamCapture
from .log.log_config import LoggingConfig
from .log.logger import configure, current_sink, shutdown
from .log.render import level_name

DRAIN_AFTER_EXIT = 2.0
_FORWARDED_BATCH = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
_FORWARDED_INTERACTIVE = ("SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")


@dataclass
class RunOptions:
    command: Sequence[str]
    config: LoggingConfig
    monitoring_port: int | None = None
    monitoring_host: str = "127.0.0.1"
    max_line_bytes: int = MAX_LINE_BYTES


class RunMetrics:
    """The wrapper's Prometheus metrics (imported only when --monitoring-port is given)."""

    def __init__(self, host: str, port: int, job: str | None, rank: int | None) -> None:
        try:
            from .metrics_server import serve_metrics
        except ImportError:
            raise UserError("--monitoring-port needs prometheus-client: pip install 'ranklog[agent]'") from None
        from . import metrics, signatures

        self._signatures = signatures
        self.metrics = metrics.create("run")
        self._labels = {"training_job": job or "", "rank": "" if rank is None else str(rank)}
        try:
            self._server = serve_metrics(host, port, self.metrics.registry)
        except OSError as exc:
            raise UserError(f"--monitoring-port: cannot listen on {host}:{port}: {exc.strerror}") from None

    def observe(self, record: Captured, level: str) -> None:
        m = self.metrics
        m.log_records.labels(level=level, **self._labels).inc()
        m.last_record_timestamp_seconds.labels(**self._labels).set(record.ts_ns / 1e9)
        signature = self._signatures.match(record.msg if record.exc is None else f"{record.msg}\n{record.exc}")
        if signature is not None:
            m.failure_signatures.labels(signature=signature.name, **self._labels).inc()
            m.failure_signature_last_timestamp_seconds.labels(signature=signature.name, **self._labels).set(
                record.ts_ns / 1e9)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class _Console:
    """Writes captured bytes to one of the wrapper's own descriptors, unchanged; gives up on EPIPE."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.open = True

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while self.open and view:
            try:
                view = view[os.write(self.fd, view):]
            except InterruptedError:
                continue
            except OSError:
                self.open = False


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _preexec(new_group: bool) -> Any:
    """Runs in the child before exec (the wrapper has no threads yet): own group, die with the parent.

    libc's ``prctl`` is looked up here, in the parent: the child only calls it.
    """
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None

    def setup() -> None:
        if new_group:
            os.setpgid(0, 0)
        if prctl is not None:
            prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: SIGTERM when the wrapper dies
    return setup


class Runner:
    """One wrapped command: spawn, capture, forward signals, exit status."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.config = options.config
        self._interactive = _stdin_is_terminal()
        self._child: subprocess.Popen | None = None
        self._previous_handlers: dict[int, Any] = {}
        self._metrics: RunMetrics | None = None
        self._ident: identity.Identity | None = None
        self._trace_id = context.current_trace_id()

    def child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        config = self.config
        env.update(RANKLOG_LOG_DIR=os.path.abspath(config.log_dir), RANKLOG_FORMAT=config.format,
                   RANKLOG_LEVEL=config.level, RANKLOG_ROTATION=str(config.rotation),
                   RANKLOG_RETENTION=str(config.retention), RANKLOG_ENABLED="true" if config.enabled else "false")
        if config.job:
            env["RANKLOG_JOB"] = config.job
        env.setdefault("PYTHONUNBUFFERED", "1")
        # The child's ranklog loggers write their own records: their console echo would be captured here
        # as a second copy of each warning.
        env.setdefault("RANKLOG_CONSOLE", "off")
        return env

    def run(self) -> int:
        if self.config.enabled:
            configure(self.config)
        try:
            self._child = subprocess.Popen(
                list(self.options.command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.child_env(),
                preexec_fn=_preexec(new_group=not self._interactive), close_fds=True)
        except FileNotFoundError:
            print(f"ranklog run: command not found: {self.options.command[0]}", file=sys.stderr)
            return 127
        except PermissionError:
            print(f"ranklog run: permission denied: {self.options.command[0]}", file=sys.stderr)
            return 126
        base = identity.detect(job=self.config.job)
        self._ident = replace(base, pid=self._child.pid)
        self._install_signal_handlers()
        try:
            if self.options.monitoring_port is not None:
                try:
                    self._metrics = RunMetrics(self.options.monitoring_host, self.options.monitoring_port,
                                               base.job, base.rank)
                except UserError:
                    self._terminate_child()
                    raise
            self._pump()
            returncode = self._child.wait()
        finally:
            self._restore_signal_handlers()
            if self._metrics is not None:
                self._metrics.close()
            if self.config.enabled:
                shutdown()
        return _exit_status(returncode)

    # ---- output ------------------------------------------------------------------------------
    def _pump(self) -> None:
        child = self._child
        assert child is not None and child.stdout is not None and child.stderr is not None
        streams = {
            child.stdout.fileno(): (StreamCapture(20, self.options.max_line_bytes), _Console(1), "stdout"),
            child.stderr.fileno(): (StreamCapture(30, self.options.max_line_bytes), _Console(2), "stderr"),
        }
        selector = selectors.DefaultSelector()
        for fd in streams:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        exited_at: float | None = None
        try:
            while selector.get_map():
                for key, _ in selector.select(timeout=0.05):
                    capture, console, name = streams[key.fd]
                    try:
                        data = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if data:
                        console.write(data)
                        self._emit(name, capture.feed(data))
                    else:
                        selector.unregister(key.fd)
                        self._emit(name, capture.close())
                now = time.monotonic()
                for capture, _console, name in streams.values():
                    self._emit(name, capture.idle(now))
                if exited_at is None and child.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > DRAIN_AFTER_EXIT:
                    break  # descendants still hold the pipes open: stop waiting for them
        finally:
            for fd in list(selector.get_map()):
                selector.unregister(fd)
            selector.close()
            for capture, _console, name in streams.values():
                self._emit(name, capture.close())
            child.stdout.close()
            child.stderr.close()

    def _emit(self, logger_name: str, records: list[Captured]) -> None:
        if not records:
            return
        sink = current_sink()
        for record in records:
            if record.levelno < self.config.levelno:
                continue
            extra = {"truncated": record.truncated} if record.truncated else None
            if sink is not None:
                sink.submit(record.levelno, logger_name, record.msg, (), record.exc, extra, self._trace_id,
                            ident=self._ident, ts_ns=record.ts_ns)
            if self._metrics is not None:
                self._metrics.observe(record, level_name(record.levelno))

    def _terminate_child(self, grace: float = 5.0) -> None:
        """Stop the child (SIGTERM, SIGKILL after `grace` seconds) when the wrapper cannot go on."""
        child = self._child
        if child is None or child.poll() is not None:
            return
        kill = os.kill if self._interactive else os.killpg
        try:
            kill(child.pid, signal.SIGTERM)
            child.wait(grace)
        except subprocess.TimeoutExpired:
            kill(child.pid, signal.SIGKILL)
            child.wait()
        except ProcessLookupError:
            pass

    # ---- signals -----------------------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        """Installed after the child started, so the child keeps default dispositions."""
        names = _FORWARDED_INTERACTIVE if self._interactive else _FORWARDED_BATCH
        for name in names:
            signum = getattr(signal, name, None)
            if signum is not None:
                self._previous_handlers[signum] = signal.signal(signum, self._forward)
        if self._interactive:
            # The terminal delivers Ctrl-C / Ctrl-\ to the child itself; the wrapper must outlive it
            # to capture its last words, whatever the child decides to do with the signal.
            for signum in (signal.SIGINT, signal.SIGQUIT):
                self._previous_handlers[signum] = signal.signal(signum, _ignore)

    def _restore_signal_handlers(self) -> None:
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers.clear()

    def _forward(self, signum: int, _frame: Any) -> None:
        child = self._child
        if child is None or child.returncode is not None:
            return
        try:
            if self._interactive:
                os.kill(child.pid, signum)
            else:
                os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass


def _ignore(_signum: int, _frame: Any) -> None:
    """A no-op handler (not SIG_IGN: a handler keeps select() and the pump loop undisturbed)."""


def _stdin_is_terminal() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def run(options: RunOptions) -> int:
    """Run the command of `options`; returns the exit status the wrapper should exit with."""
    if not options.command:
        raise UserError("no command given (usage: ranklog run [options] -- CMD [ARGS…])")
    return Runner(options).run()
