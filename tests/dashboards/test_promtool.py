"""promtool checks the generated rules and runs their unit tests; every alert has a firing and a quiet case."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import defaultdict

import pytest
import yaml

from dashboards import GENERATED_DIR, PACKAGE_DIR, PROMTOOL_TESTS
from dashboards.rules import SIGNATURE_ALERTS, Thresholds, alerts, render
from ranklog.signatures import BY_NAME

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool missing: apt-get install prometheus (make system)")


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=600)


def test_promtool_check_rules():
    result = promtool("check", "rules", str(GENERATED_DIR / "ranklog.rules.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts()) + 2} rules found" in result.stdout


def test_promtool_unit_tests_pass():
    result = promtool("test", "rules", str(PROMTOOL_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_firing_and_a_quiet_case(rules_doc, promtool_doc):
    alert_names = {rule["alert"] for group in rules_doc["groups"] for rule in group["rules"] if "alert" in rule}
    firing, quiet = defaultdict(int), defaultdict(int)
    for test in promtool_doc["tests"]:
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet)[case["alertname"]] += 1
    assert alert_names, "no alerts in the rule file"
    assert {name for name in alert_names if not firing[name]} == set(), "alerts without a firing case"
    assert {name for name in alert_names if not quiet[name]} == set(), "alerts without a must-not-fire case"
    assert set(firing) | set(quiet) <= alert_names, "test cases for alerts that do not exist"


def test_a_broken_expectation_makes_promtool_fail(tmp_path, promtool_doc):
    """The promtool run really checks something: flip one case and it must fail."""
    doc = yaml.safe_load(PROMTOOL_TESTS.read_text())
    group = next(t for t in doc["tests"] if t["alert_rule_test"][0]["exp_alerts"])
    group["alert_rule_test"][0]["exp_alerts"] = []
    doc["tests"] = [group]
    doc["rule_files"] = [str(GENERATED_DIR / "ranklog.rules.yml")]
    path = tmp_path / "broken.test.yml"
    path.write_text(yaml.safe_dump(doc))
    result = promtool("test", "rules", str(path))
    assert result.returncode != 0


def test_every_alert_has_severity_summary_description_and_runbook(rules_doc):
    runbook = (PACKAGE_DIR / "RUNBOOK.md").read_text()
    headings = {line[3:].strip().lower() for line in runbook.splitlines() if line.startswith("## ")}
    for group in rules_doc["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
            notes = rule["annotations"]
            assert notes["summary"] and notes["description"], rule["alert"]
            if rule["labels"]["component"] == "training":
                assert "$labels.rank" in notes["description"] and "$labels.instance" in notes["description"]
            else:
                assert "$labels.instance" in notes["description"]
            anchor = notes["runbook_url"].rsplit("#", 1)[1]
            assert anchor in headings, f"RUNBOOK.md has no '## {rule['alert']}' entry"


def test_signature_alerts_use_real_signature_names():
    for alert in SIGNATURE_ALERTS:
        for name in alert.signatures:
            assert name in BY_NAME, f"{alert.alert}: unknown signature {name!r}"
    covered = [name for alert in SIGNATURE_ALERTS for name in alert.signatures]
    wanted = {"nccl_timeout", "cuda_oom", "cuda_error", "ray_actor_died", "ray_oom_kill", "nonfinite_grad", "nan_loss"}
    assert wanted <= set(covered)
    assert sorted(covered) == sorted(BY_NAME), "every signature is watched by exactly one alert"


def test_thresholds_can_be_overridden_from_the_command_line(tmp_path):
    out = tmp_path / "rules.yml"
    result = subprocess.run([sys.executable, "-m", "dashboards.rules", "--set", "error_burst_errors=7",
                             "--set", "disk_free_min_bytes=2GiB", "--set", "silent_after=90s", "-o", str(out)],
                            cwd=PACKAGE_DIR.parent, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    exprs = {rule["alert"]: " ".join(rule["expr"].split()) for group in yaml.safe_load(text)["groups"]
             for rule in group["rules"] if "alert" in rule}
    assert exprs["RanklogErrorBurst"].endswith("> 7")
    assert exprs["RanklogArchiveDiskLow"].endswith(f"< {2 * 1024**3}")
    assert "> 90 and" in exprs["RanklogRankSilent"]
    assert promtool("check", "rules", str(out)).returncode == 0
    assert text != render(Thresholds())


@pytest.mark.parametrize("setting, message", [("no_such_key=1", "unknown threshold"),
                                              ("silent_after=soon", "not a duration"),
                                              ("error_burst_errors=many", "error_burst_errors")])
def test_bad_threshold_overrides_fail_with_one_line(setting, message):
    result = subprocess.run([sys.executable, "-m", "dashboards.rules", "--set", setting], cwd=PACKAGE_DIR.parent,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
