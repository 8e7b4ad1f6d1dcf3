"""The archive's ``verdict:`` section fails fast naming the offending key; the document and texts a
receiver gets are built from triage's fields."""

from __future__ import annotations

import pytest
import yaml

from ranklog.archive.archive_config import ArchiveConfig
from ranklog.archive.verdicts.receivers import slack_escape, slack_text
from ranklog.config_loader import load_config
from ranklog.errors import ConfigError


def _load(tmp_path, verdict: dict) -> ArchiveConfig:
    path = tmp_path / "archive.yaml"
    path.write_text(yaml.safe_dump({"root": str(tmp_path), "token_file": "t", "verdict": verdict}))
    return load_config(ArchiveConfig, path, environ={})


@pytest.mark.parametrize("receiver, message", [
    ({"type": "pagerduty", "url": "https://x"}, "verdict.receivers[0].type: 'pagerduty' is not one of"),
    ({"type": "webhook"}, "verdict.receivers[0]: give exactly one of url and url_file"),
    ({"type": "slack", "url": "https://x", "url_file": "/f"}, "give exactly one of url and url_file"),
    ({"type": "webhook", "url": "ftp://x"}, "is not an http(s) URL"),
    ({"type": "grafana", "url": "https://g", "token_file": "/nonexistent/token"}, "token_file: cannot read"),
    ({"type": "webhook", "url": "https://x", "colour": "red"}, "verdict.receivers[0].colour: unknown key"),
])
def test_a_bad_receiver_fails_naming_its_key(tmp_path, receiver, message) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, {"receivers": [receiver]})
    assert message in str(caught.value)


def test_receivers_get_names_and_secrets_stay_in_files(tmp_path) -> None:
    url = tmp_path / "slack.url"
    url.write_text("https://hooks.slack.com/services/T0/B0/secret\n")
    config = _load(tmp_path, {"receivers": [{"type": "webhook", "url": "https://a"},
                                            {"type": "slack", "url_file": str(url)}], "lookback": "30m"})
    assert [r.name for r in config.verdict.receivers] == ["webhook0", "slack1"]
    assert config.verdict.receivers[1].endpoint() == "https://hooks.slack.com/services/T0/B0/secret"
    assert config.verdict.lookback == 1800
    with pytest.raises(ConfigError, match="names must be distinct"):
        _load(tmp_path, {"receivers": [{"type": "webhook", "url": "https://a", "name": "x"},
                                       {"type": "webhook", "url": "https://b", "name": "x"}]})
    with pytest.raises(ConfigError, match="verdict: report_url"):
        _load(tmp_path, {"report_url": "archive:8470"})


def test_slack_text_escapes_the_log_line_and_links_the_report() -> None:
    doc = {"kind": "verdict", "training_job": "ppo<7b>", "revision": 1, "ranks": [3], "hosts": ["node0"],
           "category": "uncaught exception", "status": "failure", "step": 12, "confidence": "high",
           "decisive": {"line": "ValueError: a < b & c > d"}, "report_url": "https://archive:8470/v1/reports/x",
           "triggers": [{"alertname": "RanklogRankFailed"}], "previous": None}
    text = slack_text(doc)
    assert "job `ppo&lt;7b&gt;`" in text and "> ValueError: a &lt; b &amp; c &gt; d" in text
    assert "*rank 3 on node0: uncaught exception at step 12 (confidence high)*" in text
    assert "<https://archive:8470/v1/reports/x|Open the report> · triggered by RanklogRankFailed" in text
    assert slack_escape("<&>") == "&lt;&amp;&gt;"
