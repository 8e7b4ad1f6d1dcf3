"""LogQL's pieces one by one — the parser, the parsers, label filters, templates, drop/keep — each
checked against the examples of Loki's own documentation (docs/sources/query/log_queries/_index.md,
template_functions.md and metric_queries.md of grafana/loki), whose expected outputs are quoted here:
the ground truth is Loki's, not this code's."""

from __future__ import annotations

import pytest

from ranklog.archive.loki.pipeline import Entry, Pipeline
from ranklog.query.logql import LogQLError, parse
from ranklog.query.logql import syntax as s
from ranklog.query.logql.extract import LinePattern, ParseFailure, json_fields, json_selected, logfmt_fields
from ranklog.query.logql.parser import MAX_MATCHERS
from ranklog.query.logql.template import Template, TemplateError

# docs/sources/query/log_queries/_index.md, "JSON"
DOC_JSON = ('{"protocol": "HTTP/2.0", "servers": ["129.0.1.1","10.2.1.3"], "request": {"time": "6.032", "method": "GET", '
            '"host": "foo.grafana.net", "size": "55", "headers": {"Accept": "*/*", "User-Agent": "curl/7.68.0"}}, '
            '"response": {"status": 401, "size": "228", "latency_seconds": "6.031"}}')
DOC_LOGFMT = 'at=info method=GET path=/ host=grafana.net fwd="124.133.124.161" service=8ms status=200'
DOC_NGINX = ('0.191.12.2 - - [10/Jun/2021:09:14:29 +0000] "GET /api/plugins/versioncheck HTTP/1.1" 200 2 "-" '
             '"Go-http-client/2.0" "13.76.247.102, 34.120.177.193" "TLSv1.2" "US" ""')


def run(query: str, line: str, stream: dict[str, str] | None = None, meta: dict[str, str] | None = None) -> Entry | None:
    selector = parse(query)
    assert isinstance(selector, s.LogSelector)
    entry = Entry(0, line, dict(stream or {"job": "varlogs"}), dict(meta or {}))
    return entry if Pipeline(selector.stages).run(entry) else None


def test_json_parser_matches_the_documentation():
    assert json_fields(DOC_JSON) == {
        "protocol": "HTTP/2.0", "request_time": "6.032", "request_method": "GET", "request_host": "foo.grafana.net",
        "request_size": "55", "request_headers_Accept": "*/*", "request_headers_User_Agent": "curl/7.68.0",
        "response_status": "401", "response_size": "228", "response_latency_seconds": "6.031"}
    assert json_selected(DOC_JSON, (("first_server", "servers[0]"), ("ua", 'request.headers["User-Agent"]'))) == {
        "first_server": "129.0.1.1", "ua": "curl/7.68.0"}
    assert json_selected(DOC_JSON, (("server_list", "servers"),)) == {"server_list": '["129.0.1.1","10.2.1.3"]'}
    with pytest.raises(ParseFailure) as failure:
        json_fields("INFO GET / loki.net 200")
    assert failure.value.error == "JSONParserErr"
    assert json_fields('{"a.b": {"c": "d"}, "e": "f"}') == {"a_b_c": "d", "e": "f"}  # the doc's sanitizing example


def test_logfmt_parser_matches_the_documentation():
    assert logfmt_fields(DOC_LOGFMT, (), False, False) == {
        "at": "info", "method": "GET", "path": "/", "host": "grafana.net", "fwd": "124.133.124.161", "service": "8ms",
        "status": "200"}
    assert logfmt_fields(DOC_LOGFMT, (("host", "host"), ("fwd_ip", "fwd")), False, False) == {
        "host": "grafana.net", "fwd_ip": "124.133.124.161"}
    for bad in ("=value", "foo=bar=buzz", 'fo"o=bar'):  # the doc's invalid pairs: skipped, or an error with --strict
        assert logfmt_fields(f"ok=1 {bad} next=2", (), False, False) == {"ok": "1", "next": "2"}
        with pytest.raises(ParseFailure):
            logfmt_fields(f"ok=1 {bad}", (), True, False)
    assert logfmt_fields("a=1 lonely", (), False, True) == {"a": "1", "lonely": ""}


def test_pattern_parser_and_filter_match_the_documentation():
    pattern = LinePattern('<ip> - - <_> "<method> <uri> <_>" <status> <size> <_> "<agent>" <_>', parser=True)
    assert pattern.matches(DOC_NGINX) == {"ip": "0.191.12.2", "method": "GET", "uri": "/api/plugins/versioncheck",
                                          "status": "200", "size": "2", "agent": "Go-http-client/2.0"}
    line = ('level=debug ts=2021-06-10T09:24:13.472094048Z caller=logging.go:66 traceID=0568b66ad2d9294c '
            'msg="POST /loki/api/v1/push (204) 16.652862ms"')
    assert LinePattern('<_> msg="<method> <path> (<status>) <latency>"', parser=True).matches(line) == {
        "method": "POST", "path": "/loki/api/v1/push", "status": "204", "latency": "16.652862ms"}
    # pkg/logql/log/pattern Test: "foo bar baz" does not match "<_> bar" but "<_> baz" and "foo <_>"
    assert not LinePattern("<_> bar", parser=False).test("foo bar baz")
    assert LinePattern("<_> baz", parser=False).test("foo bar baz")
    assert LinePattern("foo <_>", parser=False).test("foo bar baz")
    assert not LinePattern("<_> bar <_>", parser=False).test(" bar ")
    for bad, parser in (("<a><b>", True), ("no captures", True), ("<named> x", False)):
        with pytest.raises(ValueError):
            LinePattern(bad, parser=parser)


def test_label_filters_with_types_and_precedence():
    """The doc's equivalent spellings of `duration >= 20ms or size == 20KB and method!~"2.."`."""
    spellings = ['| duration >= 20ms or size == 20KB and method!~"2.."', '| duration >= 20ms or size == 20KB , method!~"2.."',
                 '| duration >= 20ms or size == 20KB  method!~"2.."', '| duration >= 20ms or (size == 20KB and method!~"2..")']
    cases = [({"duration": "30ms", "size": "1KB", "method": "200"}, True),
             ({"duration": "1ms", "size": "20KB", "method": "404"}, True),
             ({"duration": "1ms", "size": "20KB", "method": "201"}, False),
             ({"duration": "1ms", "size": "21KB", "method": "404"}, False)]
    for spelling in spellings:
        for labels, kept in cases:
            assert (run("{job=\"varlogs\"} | logfmt " + spelling, " ".join(f"{k}={v}" for k, v in labels.items()))
                    is not None) == kept, (spelling, labels)
    grouped = '{job="varlogs"} | logfmt | (duration >= 20ms or size == 20KB) and method!~"2.."'
    assert run(grouped, "duration=30ms size=1KB method=200") is None
    # a missing label drops the line; a value that does not convert keeps it with __error__
    assert run('{job="varlogs"} | status > 200', "x") is None
    kept = run('{job="varlogs"} | logfmt | status > 200', "status=abc")
    assert kept is not None and kept.parsed["__error__"] == "LabelFilterErr"
    # structured metadata needs no parser
    assert run('{job="varlogs"} | step > 25', "x", meta={"step": "26"}) is not None
    assert run('{job="varlogs"} | step > 25', "x", meta={"step": "25"}) is None


def test_line_format_label_format_drop_keep():
    entry = run('{job="varlogs"} | logfmt | line_format "{{.ip}} {{.status}} {{div .duration 1000}}"',
                "ip=1.1.1.1 status=200 duration=3000")
    assert entry is not None and entry.line == "1.1.1.1 200 3"  # the doc's math example
    entry = run('{job="varlogs"} | logfmt | label_format dst=src, both="{{.keep}}-{{.src}}"', "src=a keep=k")
    assert entry is not None and "src" not in entry.all_labels() and entry.parsed == {"dst": "a", "keep": "k", "both": "k-a"}
    # drop and keep: the documentation's examples and their results
    line = '{"app": "some-api-service", "level": "info", "method": "GET", "path": "/", "host": "grafana.net", "status": "200"}'
    other = line.replace("some-api-service", "other-service")
    dropped = [run('{job="varlogs"}|json|drop level, path, app=~"some-api.*"', text) for text in (line, other)]
    assert [e.all_labels() for e in dropped if e] == [
        {"host": "grafana.net", "job": "varlogs", "method": "GET", "status": "200"},
        {"app": "other-service", "host": "grafana.net", "job": "varlogs", "method": "GET", "status": "200"}]
    kept = [run('{job="varlogs"}|json|keep level, tenant, app=~"some-api.*"', text) for text in (line, other)]
    assert [e.all_labels() for e in kept if e] == [{"app": "some-api-service", "level": "info"}, {"level": "info"}]
    errored = run('{job="varlogs"}|json|drop __error__', "INFO GET / loki.net 200")
    assert errored is not None and errored.all_labels() == {"job": "varlogs", "__error_details__": errored.parsed[
        "__error_details__"]}


def test_templates_follow_go_and_lokis_functions():
    labels = {"level": "ERROR", "step": "7", "loss": "0.12345", "path": "/a/b"}
    render = lambda text: Template(text).render(labels, "hello world", 1_700_000_000_123_456_789)  # noqa: E731
    assert render('{{ if eq .level "ERROR" }}E{{ else if gt .step 5 }}big{{ else }}other{{ end }}') == "E"
    assert render("{{ __line__ | ToUpper }} {{ .missing | default \"none\" }}") == "HELLO WORLD none"
    assert render('{{ printf "%.2f" .loss }} {{ .path | trimPrefix "/a" }} {{ __timestamp__ | unixEpoch }}') == \
        "0.12 /b 1700000000"
    assert render("{{- .level -}}   !   {{- .step }}") == "ERROR!7"
    for bad in ("{{range .x}}{{end}}", "{{ .a | nosuch }}", "{{if .a}}x"):
        with pytest.raises(TemplateError):
            Template(bad)
    with pytest.raises(TemplateError):
        Template('{{ repeat 100000000 "x" }}').render({}, "", 0)


@pytest.mark.parametrize("query", [
    'sum by (host) (rate({job="mysql"} |= "error" != "timeout" | json | duration > 10s [1m]))',  # metric_queries.md
    'count_over_time({job="mysql"}[5m] offset 5m)',
    'quantile_over_time(0.99, {cluster="ops-tools1",container="ingress-nginx"} | json | __error__ = "" '
    '| unwrap request_time [1m]) by (path)',  # query_examples.md
    'sum(count_over_time({namespace="traefik"}[5m])) or vector(0)',
    'sum by (org_id) (sum_over_time({cluster="ops-tools1",container="loki-dev"} |= "metrics.go" | logfmt '
    '| unwrap bytes_processed [1m]))',
    '{job="mysql"} |= "error" or "fatal" | pattern "<_> <level> <_>" | level != "debug" | line_format "{{.level}}"',
    'topk(3, sum by (a) (rate({x="y"}[1m]))) / on(a) group_left sum by (a) (rate({x="y"}[1m])) > bool 2',
    'label_replace(rate({a="b"}[1m]), "dst", "$1", "src", "(.*)")',
    '{x="y"} |> "<_> foo <_>" !> "bar <_>" # a comment',
])
def test_grammar_accepts_lokis_examples(query):
    parse(query)


@pytest.mark.parametrize(("query", "message"), [
    ('{job="x"} | ip("192.168.0.0/16")', "not supported by the ranklog archive"),
    ('rate_counter({job="x"} | unwrap a [1m])', "not supported by the ranklog archive"),
    ('sum_over_time({job="x"}[1m])', "requires an unwrap expression"),
    ('count_over_time({job="x"} | unwrap a [1m])', "invalid aggregation count_over_time with unwrap"),
    ('sum_over_time({job="x"} | unwrap a [1m]) by (b)', "grouping not allowed"),
    ('{job="x"} | unwrap a', "unexpected unwrap"),
    ('{job="x"} | line_format "{{range .a}}{{end}}"', "invalid template"),
    ('{job="x"} | regexp "(a)"', "named capture"),
    ("1 > 2", "bool modifier"),
    ('{job="x"} | json | a > "text"', "compares numbers"),
])
def test_grammar_refuses_with_lokis_messages(query, message):
    with pytest.raises(LogQLError) as refused:
        parse(query)
    assert message in str(refused.value) and str(refused.value).startswith("parse error")


def test_abusive_queries_are_bounded():
    many = "{" + ", ".join(f'l{i}="{i}"' for i in range(5000)) + "}"
    with pytest.raises(LogQLError, match="too many label matchers"):
        parse(many)
    assert len(parse("{" + ", ".join(f'l{i}="{i}"' for i in range(MAX_MATCHERS)) + "}").matchers) == MAX_MATCHERS
    with pytest.raises(LogQLError, match="nests deeper"):
        parse("(" * 500 + "vector(1)" + ")" * 500)
    with pytest.raises(LogQLError, match="pipeline stages"):
        parse('{a="b"}' + ' |= "x"' * 1000)
