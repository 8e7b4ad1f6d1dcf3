"""Where a verdict is delivered: a generic JSON webhook, a Slack-compatible webhook, a Grafana annotation.

- ``webhook``: ``POST url`` with the verdict document (:mod:`.document`) as JSON, ``Authorization:
  Bearer`` when a token file is set. An update is the same document with ``kind: "update"`` and
  the same ``incident`` id (a pager keys its de-duplication on it).
- ``slack``: ``POST url`` with ``{"text": …}`` in Slack's mrkdwn (``*bold*``, ``<url|label>``, ``&amp;``
  escapes), which Slack's incoming webhooks and the Slack-compatible ones of Mattermost, Rocket.Chat
  and Discord (``/slack``) take. An incoming webhook cannot edit a message, so an update is a new
  message that says what changed.
- ``grafana``: Grafana's annotations HTTP API as documented (``POST /api/annotations`` with ``time``
  in epoch ms, ``tags``, ``text`` and optionally ``dashboardUID``; its answer ``{"id": N, "message":
  "Annotation added"}``; an update is ``PATCH /api/annotations/N`` with ``text`` and ``tags``, answered
  ``{"message": "Annotation patched"}``; a 404 there — the annotation was deleted — posts a new one).
  Authorization is a service account token (``Authorization: Bearer``). No Grafana server can be
  installed where ranklog is tested, so the tests replay this documented wire format against a
  recording server; the request shapes were checked against Grafana's API reference and the
  ``PostAnnotationsCmd`` / ``PatchAnnotationsCmd`` fields of its source.

A receiver raises :class:`DeliveryError` (one line) when the far end refuses or does not answer; the
service counts it, logs it and tries again later (:mod:`.service`).
"""

from __future__ import annotations

import html
import ssl
from typing import Any

from .config import ReceiverConfig
from .document import decisive_line, headline, previous_headline, trigger_names


class DeliveryError(Exception):
    pass


class Receiver:
    def __init__(self, config: ReceiverConfig) -> None:
        self.config = config
        self.name = config.name

    def deliver(self, doc: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """Send `doc`; returns this receiver's state for the incident (kept between deliveries)."""
        raise NotImplementedError

    def _request(self, method: str, url: str, body: dict[str, Any]):
        import httpx

        headers = {"Content-Type": "application/json", "User-Agent": "ranklog-archive"}
        token = self.config.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        verify: Any = self.config.tls_verify
        if self.config.tls_verify and self.config.tls_ca:
            verify = ssl.create_default_context(cafile=self.config.tls_ca)
        try:
            with httpx.Client(timeout=self.config.timeout, verify=verify) as client:
                return client.request(method, url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise DeliveryError(f"{method} {_redacted(url)}: {type(exc).__name__}: {exc}") from None

    def _checked(self, method: str, url: str, body: dict[str, Any]):
        answer = self._request(method, url, body)
        if not 200 <= answer.status_code < 300:
            raise DeliveryError(f"{method} {_redacted(url)} answered {answer.status_code}: {answer.text[:200]}")
        return answer


def _redacted(url: str) -> str:
    """A URL fit for a log line: Slack-style webhook URLs carry their secret in the path."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    return f"{scheme}://{host}/…" if "/" in rest else url


class WebhookReceiver(Receiver):
    def deliver(self, doc: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        self._checked("POST", self.config.endpoint(), doc)
        return state


def slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_text(doc: dict[str, Any]) -> str:
    """The message: what failed first and why, the decisive line, the report link, what paged."""
    job = slack_escape(doc["training_job"] or "(no job id)")
    if doc["kind"] == "update":
        lines = [f":arrows_counterclockwise: *ranklog verdict updated* · job `{job}` (revision {doc['revision']})",
                 f"*{slack_escape(headline(doc))}*", f"_was: {slack_escape(previous_headline(doc))}_"]
    else:
        lines = [f":rotating_light: *ranklog verdict* · job `{job}`", f"*{slack_escape(headline(doc))}*"]
    if doc.get("decisive"):
        lines.append("> " + slack_escape(doc["decisive"]["line"]))
    lines.append(f"<{doc['report_url']}|Open the report> · triggered by {slack_escape(trigger_names(doc))}")
    return "\n".join(lines)


class SlackReceiver(Receiver):
    def deliver(self, doc: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        self._checked("POST", self.config.endpoint(), {"text": slack_text(doc)})
        return state


def grafana_text(doc: dict[str, Any]) -> str:
    """Annotation text (Grafana shows it as sanitized HTML in the tooltip)."""
    parts = [f"<b>ranklog verdict</b>: {html.escape(headline(doc))}"]
    if doc.get("decisive"):
        parts.append(html.escape(decisive_line(doc["decisive"]["line"], None)))
    if doc["kind"] == "update":
        parts.append(f"(revision {doc['revision']}; was {html.escape(previous_headline(doc))})")
    parts.append(f'<a href="{html.escape(doc["report_url"], quote=True)}">report</a>')
    return "<br>".join(parts)


def grafana_tags(config: ReceiverConfig, doc: dict[str, Any]) -> list[str]:
    tags = [*config.tags, f"training_job:{doc['training_job'] or '-'}"]
    if doc.get("category"):
        tags.append(doc["category"])
    return list(dict.fromkeys(tags))


class GrafanaReceiver(Receiver):
    def deliver(self, doc: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        base = self.config.endpoint().rstrip("/")
        text, tags = grafana_text(doc), grafana_tags(self.config, doc)
        annotation = state.get("annotation_id")
        if annotation is not None:
            answer = self._request("PATCH", f"{base}/api/annotations/{annotation}", {"text": text, "tags": tags})
            if 200 <= answer.status_code < 300:
                return state
            if answer.status_code != 404:
                raise DeliveryError(f"PATCH {base}/api/annotations/{annotation} answered {answer.status_code}: "
                                    f"{answer.text[:200]}")
        body: dict[str, Any] = {"time": _annotation_ms(doc), "tags": tags, "text": text}
        if self.config.dashboard_uid:
            body["dashboardUID"] = self.config.dashboard_uid
        answer = self._checked("POST", f"{base}/api/annotations", body)
        try:
            annotation = answer.json()["id"]
        except (ValueError, KeyError, TypeError):
            raise DeliveryError(f"POST {base}/api/annotations answered without an id: {answer.text[:200]}") from None
        return {**state, "annotation_id": annotation}


def _annotation_ms(doc: dict[str, Any]) -> int:
    """The failure's time on the dashboard: the decisive record's, else when triage ran."""
    from ...record import parse_ts

    stamp = parse_ts((doc.get("decisive") or {}).get("ts")) or parse_ts(doc["triaged_at"]) or 0
    return stamp // 1_000_000


def build(config: ReceiverConfig) -> Receiver:
    return {"webhook": WebhookReceiver, "slack": SlackReceiver, "grafana": GrafanaReceiver}[config.type](config)
