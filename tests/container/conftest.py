"""Session fixtures of the container test: engine, base image, wheels, cluster, converged rollout.

Four systemd containers (node1–3 training nodes, mon1 archive + monitoring) and a webhook receiver
container share one `--internal` network. The first `site.yml` run happens once per session (in
`converged`); the tests then check idempotence, check mode, the hosts, and the data path.
Timings of each phase are printed at the end of the session (cold vs warm base build).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.container import docker_env
from tests.container.cluster import Cluster, PlaybookRun
from tests.container.image_builds import ImageBuild, build_context
from tests.container.training_image import build_training_image
from tests.helpers import collection

TRAINING_NODES = ["node1", "node2", "node3"]
# The node that runs real torchrun and Ray jobs as an unprivileged user (training image, /dev/fuse).
TRAINING_JOB_NODE = "node1"
TRAINING_USER = "alice"
MONITORING_HOST = "mon1"
WEBHOOK_PORT = 9099
JOBS = Path(__file__).parent / "jobs"
TIMINGS: dict[str, float] = {}


class Timer:
    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        self.start = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        TIMINGS[self.name] = round(time.monotonic() - self.start, 1)


def pytest_terminal_summary(terminalreporter) -> None:
    if TIMINGS:
        terminalreporter.section("container test timings (s)")
        for name, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{name:<34} {seconds:>7.1f}")


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[None]:
    """A Docker engine: the running one, or a dockerd started here (and stopped at the end)."""
    with Timer("dockerd start"):
        proc = docker_env.start_dockerd()
    yield
    docker_env.stop_dockerd(proc)


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="session")
def base_image(docker_engine: None) -> str:
    with Timer("base image (debootstrap or cached)"):
        return docker_env.build_base_image()


@pytest.fixture(scope="session")
def wheels(run_dir: Path) -> Path:
    with Timer("wheels (deps cached by pyproject)"):
        return docker_env.build_wheels(run_dir / "wheels")


@pytest.fixture(scope="session")
def training_image(base_image: str, run_dir: Path) -> str:
    with Timer("training image (torch + Ray, cached)"):
        return build_training_image(base_image, run_dir)


@pytest.fixture(scope="session")
def collections_path(run_dir: Path) -> Path:
    """ranklog.stack built from the working tree and installed from its tarball (what operators get)."""
    with Timer("collection build + install"):
        return collection.install(collection.build(run_dir / "collection"), run_dir / "collections")


@pytest.fixture(scope="session")
def grafana_deb() -> str:
    """GRAFANA_DEB=path/to/grafana_*.deb runs the Grafana service checks; empty means provisioning only."""
    path = os.environ.get("GRAFANA_DEB", "")
    if path and not Path(path).is_file():
        pytest.fail(f"GRAFANA_DEB={path} is not a file")
    return path


@pytest.fixture(scope="session")
def cluster(base_image: str, wheels: Path, run_dir: Path, grafana_deb: str,
            collections_path: Path, training_image: str) -> Iterator[Cluster]:
    cluster = Cluster(run_dir, base_image, [*TRAINING_NODES, MONITORING_HOST], collections_path,
                      node_images={TRAINING_JOB_NODE: training_image},
                      node_args={TRAINING_JOB_NODE: ["--device", "/dev/fuse"]})
    try:
        with Timer("containers up (boot + sshd)"):
            cluster.create()
            receiver = cluster.run_container(
                "--name", f"{cluster.prefix}-webhook", "-v", f"{JOBS}:/jobs:ro", base_image,
                "python3", "-u", "/jobs/webhook_receiver.py", str(WEBHOOK_PORT))
            cluster.webhook_id = receiver
            webhook_ip = docker_env.docker("inspect", "-f",
                                           "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", receiver)
        mon_ip = cluster.ip(MONITORING_HOST)
        # Every training node follows Ray sessions and torchrun trees (the users' own, under /home too).
        host_vars = {name: {"ranklog_agent_metrics_listen": f"{cluster.ip(name)}:9465",
                            "ranklog_agent_presets": ["ranklog", "ray", "torchrun"],
                            "ranklog_agent_config": {"torchrun_log_dirs": ["/var/log/torchrun", "/home/*/torchrun"]}}
                     for name in TRAINING_NODES}
        host_vars[MONITORING_HOST] = {
            "ranklog_archive_listen": f"{mon_ip}:8470",
            "prometheus_web_listen_address": f"{mon_ip}:9090",
            "alertmanager_web_listen_address": f"{mon_ip}:9093",
            "ranklog_archive_report_url": f"http://{mon_ip}:8470",
        }
        cluster.write_inventory(
            groups={"training_nodes": TRAINING_NODES, "ranklog_archive": [MONITORING_HOST],
                    "monitoring": [MONITORING_HOST]},
            host_vars=host_vars,
            all_vars={
                "ranklog_wheel_dir": str(wheels),
                "grafana_install_method": "deb" if grafana_deb else "none",
                "grafana_deb_path": grafana_deb,
                "grafana_admin_password": secrets.token_urlsafe(18),
                "prometheus_scrape_interval": "2s",
                # A real role variable (the rules are rendered again with it): the unreadable-path alert
                # fires within the test instead of after the production default of 10 minutes.
                "prometheus_ranklog_alert_thresholds": {"unreadable_paths_for": "20s"},
                "prometheus_evaluation_interval": "2s",
                "alertmanager_receivers": [{"name": "test-webhook", "webhook_configs": [
                    {"url": f"http://{webhook_ip}:{WEBHOOK_PORT}/alerts", "send_resolved": False}]}],
                "alertmanager_route": {"receiver": "test-webhook", "group_by": ["alertname"], "group_wait": "1s",
                                       "group_interval": "5s", "repeat_interval": "1h"},
                # The verdict in the page: the archive sends verdicts to the same receiver container, and
                # Alertmanager routes root causes to the archive (playbooks/group_vars/all.yml wires both).
                "ranklog_verdict_receivers": [{"name": "e2e", "type": "webhook",
                                               "url": f"http://{webhook_ip}:{WEBHOOK_PORT}/verdict"}],
            },
        )
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def image_builds(run_dir: Path, wheels: Path, base_image: str) -> Iterator[dict[str, ImageBuild]]:
    """The archive and node images, building in the background from here on (collected in test_images)."""
    context = build_context(run_dir, wheels)
    builds = {kind: ImageBuild(context, kind, base_image, run_dir) for kind in ("archive", "node")}
    yield builds
    for kind, build in builds.items():
        build.cancel()
        if build.seconds:
            TIMINGS[f"docker build {kind} (background)"] = round(build.seconds, 1)
            TIMINGS[f"  {kind}: test waited for it"] = round(build.waited, 1)


@pytest.fixture(scope="session")
def converged(cluster: Cluster, image_builds: dict[str, ImageBuild]) -> PlaybookRun:
    """The first site.yml run onto fresh containers (must succeed for anything else to make sense).

    Asks for `image_builds` so that the two image builds overlap with this run.
    """
    with Timer("site.yml first run"):
        run = cluster.playbook("site.yml")
    if run.rc != 0 or not run.recap:
        pytest.fail(f"site.yml failed (rc={run.rc}):\n{run.output[-6000:]}")
    return run


@pytest.fixture(scope="session")
def archive_url(cluster: Cluster) -> str:
    return f"http://{cluster.ip(MONITORING_HOST)}:8470"


@pytest.fixture(scope="session")
def token_file(converged: PlaybookRun, cluster: Cluster) -> Path:
    """The archive token the rollout generated on the controller (owner-only file next to the inventory)."""
    return cluster.inventory.parent / "credentials" / "ranklog-archive-token"
