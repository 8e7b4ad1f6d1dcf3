"""The checked-in output under dashboards/generated/ is exactly what the code generates."""

from __future__ import annotations

import subprocess
import sys

from dashboards import GENERATED_DIR, PACKAGE_DIR
from dashboards.generate import outputs, stale

REPO = PACKAGE_DIR.parent


def test_checked_in_output_is_up_to_date():
    result = subprocess.run([sys.executable, "-m", "dashboards.generate", "--check"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"run `make dashboards`:\n{result.stderr}"
    assert "up to date" in result.stdout


def test_check_reports_changed_missing_and_orphaned_files():
    files = outputs()
    rules = GENERATED_DIR / "ranklog.rules.yml"
    changed = {**files, rules: files[rules] + "# edited by hand\n"}
    assert stale(changed) == ["out of date: dashboards/generated/ranklog.rules.yml"]
    missing = {**files, GENERATED_DIR / "dashboards" / "new.json": "{}\n"}
    assert stale(missing) == ["missing: dashboards/generated/dashboards/new.json"]
    fewer = {path: text for path, text in files.items() if path != rules}
    assert stale(fewer) == ["no longer generated: dashboards/generated/ranklog.rules.yml"]


def test_generation_is_deterministic():
    assert outputs() == outputs()


def test_expected_files_for_the_deploy_roles_exist():
    for rel in ("ranklog.rules.yml", "prometheus.scrape.yml", "dashboards/training.json", "dashboards/pipeline.json",
                "dashboards/alerts.json", "grafana/provisioning/dashboards/ranklog.yml",
                "grafana/provisioning/datasources/ranklog.yml"):
        assert (GENERATED_DIR / rel).is_file(), rel


def test_provisioning_points_grafana_at_the_dashboards_datasource(generated_dashboards):
    import yaml

    from dashboards import AGENT_JOB, ARCHIVE_JOB, DATASOURCE_UID, LOGS_DATASOURCE_UID

    grafana = GENERATED_DIR / "grafana" / "provisioning"
    source, logs = yaml.safe_load((grafana / "datasources" / "ranklog.yml").read_text())["datasources"]
    assert (source["uid"], source["type"]) == (DATASOURCE_UID, "prometheus")
    assert (logs["uid"], logs["type"]) == (LOGS_DATASOURCE_UID, "loki")
    used = {t["datasource"]["uid"] for d in generated_dashboards.values() for p in d["panels"] for t in p.get("targets", [])}
    assert used == {"${datasource}", "${logs}"}
    (provider,) = yaml.safe_load((grafana / "dashboards" / "ranklog.yml").read_text())["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")
    scrape = yaml.safe_load((GENERATED_DIR / "prometheus.scrape.yml").read_text())["scrape_configs"]
    # no honor_labels: ranklog's series carry no `job` label, the scrape job stays the operator's
    assert {(job["job_name"], job.get("honor_labels", False)) for job in scrape} == {(AGENT_JOB, False),
                                                                                       (ARCHIVE_JOB, False)}
