"""The ``verdict:`` section of the archive's configuration: where verdicts go and how incidents behave.

Receivers are YAML (or ``RANKLOG_ARCHIVE_VERDICT__RECEIVERS='[{type: webhook, url: …}]'``)::

    verdict:
      report_url: https://archive.example:8470      # base of the report links (default: this host, the listen port)
      receivers:
        - {type: webhook, url: https://hooks.example/ranklog}
        - {type: slack, url_file: /etc/ranklog/slack-webhook-url}      # Slack's URL is the secret
        - {type: grafana, url: https://grafana.example, token_file: /etc/ranklog/grafana-token,
           dashboard_uid: ranklog-training}

Secrets (a Slack URL, a Grafana service-account token) are read from files, never from archive.yaml.
Without receivers the archive still answers ``/v1/alerts`` (200) but triages nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RECEIVER_TYPES = ("webhook", "slack", "grafana")


def _read_secret(path: str, key: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            value = handle.read().strip()
    except OSError as exc:
        raise ValueError(f"{key}: cannot read {path}: {exc.strerror}") from None
    if not value:
        raise ValueError(f"{key}: {path} is empty")
    return value.splitlines()[0].strip()


@dataclass
class ReceiverConfig:
    """One place verdicts are delivered to."""

    type: str = field(default="", metadata={"choices": RECEIVER_TYPES, "help": "webhook (JSON), slack (text), grafana"})
    name: str = field(default="", metadata={"help": "label in the metrics and logs (default: the type and position)"})
    url: str = field(default="", metadata={"help": "endpoint (webhook, slack) or Grafana's base URL"})
    url_file: str = field(default="", metadata={"help": "file holding the URL instead (a Slack webhook URL is a secret)"})
    token_file: str = field(default="", metadata={"help": "file holding a bearer token (Grafana: a service account's)"})
    dashboard_uid: str = field(default="", metadata={
        "help": "grafana: the dashboard the annotation belongs to (empty: an organization annotation, shown by tag)"})
    tags: list[str] = field(default_factory=lambda: ["ranklog", "verdict"], metadata={"help": "grafana: annotation tags"})
    timeout: float = field(default=10.0, metadata={"unit": "duration", "help": "one delivery attempt's time limit"})
    tls_ca: str = field(default="", metadata={"help": "CA bundle to verify the receiver's certificate"})
    tls_verify: bool = field(default=True, metadata={"help": "verify the receiver's TLS certificate"})

    def validate(self) -> None:
        if not self.type:
            raise ValueError(f"type: required ({', '.join(RECEIVER_TYPES)})")
        if bool(self.url) == bool(self.url_file):
            raise ValueError("give exactly one of url and url_file")
        if not self.endpoint().startswith(("http://", "https://")):
            raise ValueError(f"url: {'the URL in ' + self.url_file if self.url_file else repr(self.url)} "
                             "is not an http(s) URL")
        if self.token_file:
            self.token()
        if self.timeout <= 0:
            raise ValueError("timeout: must be positive")

    def endpoint(self) -> str:
        """The URL (re-read from `url_file` each time: rotating it needs no restart)."""
        return self.url if self.url else _read_secret(self.url_file, "url_file")

    def token(self) -> str | None:
        return _read_secret(self.token_file, "token_file") if self.token_file else None


@dataclass
class VerdictConfig:
    receivers: list[ReceiverConfig] = field(default_factory=list, metadata={
        "help": "where verdicts go: [{type: webhook|slack|grafana, url|url_file, …}] (YAML / environment only)"})
    report_url: str = field(default="", metadata={
        "help": "base URL of the report links, as the people paged reach this archive (default: http(s)://<host name>"
                ":<listen port>)"})
    lookback: float = field(default=3600.0, metadata={
        "unit": "duration", "help": "triage reads the job's records from this long before its first alert"})
    settle: float = field(default=1.0, metadata={
        "unit": "duration", "help": "after an agent's suspect, wait this long for the records it saw to arrive"})
    suspect_wait: float = field(default=20.0, metadata={
        "unit": "duration", "help": "re-triage a suspect that shows no failure yet for up to this long, then drop it"})
    retriage_interval: float = field(default=5.0, metadata={
        "unit": "duration", "help": "triage one job at most this often, however many alerts arrive"})
    incident_ttl: float = field(default=3600.0, metadata={
        "unit": "duration", "help": "an incident with no alert or suspect for this long is closed; the next one pages"})
    report_retention: float = field(default=30 * 86400.0, metadata={
        "unit": "duration", "help": "delete verdict reports (and forget closed incidents) after this long"})

    def validate(self) -> None:
        for index, receiver in enumerate(self.receivers):  # each already validated itself (config_loader)
            if not receiver.name:
                receiver.name = f"{receiver.type}{index}"
        names = [r.name for r in self.receivers]
        if len(set(names)) != len(names):
            raise ValueError(f"receivers: names must be distinct (got {names})")
        if self.report_url and not self.report_url.startswith(("http://", "https://")):
            raise ValueError(f"report_url: {self.report_url!r} is not an http(s) URL")
        for key in ("lookback", "retriage_interval", "incident_ttl", "report_retention"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key}: must be positive")


def default_report_url(listen_host: str, port: int, tls: bool) -> str:
    """``http(s)://<name>:<port>`` people can open: the listen host, or this machine's name for a wildcard."""
    import socket

    host = listen_host if listen_host not in ("", "0.0.0.0", "::") else socket.getfqdn()
    if ":" in host:
        host = f"[{host}]"
    return f"{'https' if tls else 'http'}://{host}:{port}"


def receivers_summary(config: VerdictConfig) -> str:
    return ", ".join(f"{r.name} ({r.type})" for r in config.receivers) or "none"
