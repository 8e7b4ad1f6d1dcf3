"""The verdict in the page: Alertmanager's webhook (and agents' suspects) in, triage's verdict out.

One module per step: :mod:`.routes` (HTTP), :mod:`.service` (triggers → triage → deliveries),
:mod:`.incidents` (one incident per failing job), :mod:`.judge` (triage over the recent window),
:mod:`.document` (the verdict as receivers get it), :mod:`.receivers` (webhook, Slack, Grafana),
:mod:`.config` (the archive's ``verdict:`` section). The wire shape of ``/v1/alerts`` is
:mod:`ranklog.alert_notifications`, shared with the agent. docs/verdict.md has the whole picture.
"""
