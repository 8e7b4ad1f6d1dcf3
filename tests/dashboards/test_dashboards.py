"""The generated dashboards are valid Grafana dashboards and hold together as a set."""

from __future__ import annotations

import copy

import jsonschema
import pytest

from dashboards import DASHBOARD_TAG, DATASOURCE_UID, LOGS_DATASOURCE_UID
from dashboards.queries import dashboard_queries

EXPECTED = {"training", "pipeline", "alerts"}


def validator(schema):
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def panels(dashboard):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def test_three_dashboards(generated_dashboards):
    assert set(generated_dashboards) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dashboard_validates_against_grafana_schema(name, generated_dashboards, dashboard_schema):
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator(dashboard_schema).iter_errors(
        generated_dashboards[name])]
    assert errors == []


@pytest.mark.parametrize("mutation, where", [
    (lambda d: d["panels"][1]["gridPos"].update(w=30), "w"),
    (lambda d: d["panels"][1]["targets"][0].pop("refId"), "refId"),
    (lambda d: d["panels"][1].update(type="graphh"), "type"),
    (lambda d: d["templating"]["list"][0].update(refresh=5), "refresh"),
    (lambda d: d["links"][0].update(type="dashboard"), "type"),
    (lambda d: d["panels"][1]["fieldConfig"]["defaults"]["thresholds"].update(mode="relative"), "mode"),
    (lambda d: d.pop("uid"), "uid"),
])
def test_schema_rejects_broken_dashboards(mutation, where, generated_dashboards, dashboard_schema):
    broken = copy.deepcopy(generated_dashboards["training"])
    mutation(broken)
    errors = list(validator(dashboard_schema).iter_errors(broken))
    assert errors, f"schema accepted a dashboard with a broken {where}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_panels_do_not_overlap_and_fit_the_grid(name, generated_dashboards):
    taken: dict[tuple[int, int], str] = {}
    for panel in panels(generated_dashboards[name]):
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in taken, f"{panel['title']!r} overlaps {taken[(x, y)]!r}"
                taken[(x, y)] = panel["title"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_panel_has_unit_description_and_the_ranklog_datasource(name, generated_dashboards):
    for panel in panels(generated_dashboards[name]):
        if panel["type"] == "row":
            continue
        assert panel.get("description"), f"{panel['title']!r} has no description"
        assert panel["targets"], f"{panel['title']!r} has no query"
        # metric panels read the Prometheus variable's datasource, log panels the archive's (logs variable)
        variable = "${logs}" if panel["datasource"]["type"] == "loki" else "${datasource}"
        assert panel["datasource"]["uid"] == variable
        if panel["type"] != "logs":
            assert panel["fieldConfig"]["defaults"].get("unit"), f"{panel['title']!r} has no unit"
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == variable


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_variables_and_links(name, generated_dashboards):
    dashboard = generated_dashboards[name]
    source, logs_source, *filters = dashboard["templating"]["list"]
    # the viewer picks the Prometheus and the logs (Loki) datasources; the provisioned ones are the defaults
    assert (source["name"], source["type"], source["query"]) == ("datasource", "datasource", "prometheus")
    assert source["current"]["value"] == DATASOURCE_UID
    assert (logs_source["name"], logs_source["type"], logs_source["query"]) == ("logs", "datasource", "loki")
    assert logs_source["current"]["value"] == LOGS_DATASOURCE_UID
    assert [v["name"] for v in filters] == ["training_job", "node", "rank"]
    assert all(v["includeAll"] and v["allValue"] == ".*" for v in filters)
    assert all(v["datasource"]["uid"] == "${datasource}" for v in filters)
    assert DASHBOARD_TAG in dashboard["tags"]
    link = dashboard["links"][0]
    assert link["type"] == "dashboards" and link["tags"] == [DASHBOARD_TAG]
    assert link["includeVars"] and link["keepTime"]


def test_uids_are_unique_and_stable(generated_dashboards):
    uids = {d["uid"] for d in generated_dashboards.values()}
    assert uids == {"ranklog-training", "ranklog-pipeline", "ranklog-alerts"}


def test_alert_thresholds_are_drawn_on_the_panels_they_watch(generated_dashboards):
    from dashboards.rules import Thresholds

    t = Thresholds()
    pipeline = {p["title"]: p for p in panels(generated_dashboards["pipeline"])}
    values = lambda title: [s["value"] for s in pipeline[title]["fieldConfig"]["defaults"]["thresholds"]["steps"]]  # noqa: E731
    assert t.disk_free_min_bytes in values("Free disk")
    assert t.backlog_min_bytes in values("Agent backlog")
    assert t.seconds("oldest_unshipped_max") in values("Oldest unshipped")


def test_queries_use_the_variables(generated_dashboards):
    per_rank = [q for q in dashboard_queries() if "ranklog_log_records_total" in q.expr]
    assert per_rank and all('rank=~"$rank"' in q.expr and 'instance=~"$node"' in q.expr for q in per_rank)


def test_training_dashboard_logs_panel_links_and_triage_annotations(generated_dashboards):
    """The log panel, the data links to Explore and the triage annotations (their LogQL runs against a
    live archive in tests/dashboards/test_logs_live.py)."""
    import json
    from urllib.parse import parse_qs, urlsplit

    training = generated_dashboards["training"]
    by_title = {p["title"]: p for p in panels(training)}
    errors = by_title["Errors of the selected jobs and ranks"]
    assert errors["type"] == "logs"
    assert errors["targets"][0]["expr"] == '{job=~"$training_job", rank=~"$rank", level=~"ERROR|CRITICAL"}'
    (annotation,) = training["annotations"]["list"]
    assert annotation["datasource"] == {"type": "loki", "uid": "${logs}"}
    assert annotation["expr"] == '{format="triage", job=~"$training_job"}' and annotation["enable"]
    linked = [p for p in panels(training) if p.get("fieldConfig", {}).get("defaults", {}).get("links")]
    assert {"Step per rank", "Loss per rank", "Seconds since last record"} <= {p["title"] for p in linked}
    for panel in linked:
        assert all("rank" in t.get("legendFormat", "") for t in panel["targets"]), panel["title"]
        (link,) = panel["fieldConfig"]["defaults"]["links"]
        url = urlsplit(link["url"])
        assert url.path == "/explore"
        (pane,) = json.loads(parse_qs(url.query)["panes"][0]).values()
        assert pane["range"] == {"from": "${__from}", "to": "${__to}"}
        assert pane["queries"][0]["expr"] == ('{job="${__field.labels.training_job:percentencode}", '
                                              'rank="${__field.labels.rank:percentencode}"}')
        assert pane["datasource"] == pane["queries"][0]["datasource"]["uid"] == "${logs:percentencode}"


def test_provisioned_loki_datasource_points_at_the_archive_with_the_token_header():
    from dashboards import ARCHIVE_TOKEN_ENV, ARCHIVE_URL
    from dashboards.provisioning import datasource

    prometheus, loki = datasource()["datasources"]
    # Not the default datasource: a Grafana that already runs keeps its own (#16; the role can opt in).
    assert prometheus["type"] == "prometheus" and prometheus["isDefault"] is False
    assert (loki["type"], loki["uid"], loki["url"]) == ("loki", LOGS_DATASOURCE_UID, ARCHIVE_URL)
    assert loki["jsonData"]["httpHeaderName1"] == "Authorization"
    assert loki["secureJsonData"] == {"httpHeaderValue1": f"Bearer ${{{ARCHIVE_TOKEN_ENV}}}"}
