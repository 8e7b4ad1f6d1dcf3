"""site.yml converges onto fresh nodes, a second run changes nothing, and --check agrees."""

from __future__ import annotations

import stat

import pytest

from tests.container.cluster import Cluster, PlaybookRun
from tests.container.conftest import MONITORING_HOST, TRAINING_NODES, Timer

pytestmark = [pytest.mark.container, pytest.mark.slow]


@pytest.mark.timeout(1500)
def test_site_converges_on_every_host(converged: PlaybookRun) -> None:
    assert set(converged.recap) == {*TRAINING_NODES, MONITORING_HOST}
    for host, counts in converged.recap.items():
        assert counts["failed"] == 0 and counts["unreachable"] == 0, (host, counts)
        assert counts["changed"] > 0, f"{host}: a first rollout must change something"


def test_second_run_changes_nothing(cluster: Cluster, converged: PlaybookRun) -> None:
    with Timer("site.yml second run"):
        run = cluster.playbook("site.yml")
    assert run.rc == 0, run.output[-4000:]
    assert run.total("changed") == 0, "\n".join(run.changed_tasks())


def test_check_mode_reports_no_changes(cluster: Cluster, converged: PlaybookRun) -> None:
    with Timer("site.yml --check --diff"):
        run = cluster.playbook("site.yml", "--check", "--diff")
    assert run.rc == 0, run.output[-4000:]
    assert run.total("changed") == 0, "\n".join(run.changed_tasks())


def test_generated_token_is_owner_only_on_the_controller(token_file) -> None:
    mode = stat.S_IMODE(token_file.stat().st_mode)
    assert mode & 0o077 == 0, f"{token_file} has mode {oct(mode)}"
    assert len(token_file.read_text().split()[0]) == 40
