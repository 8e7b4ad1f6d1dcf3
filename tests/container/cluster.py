"""A cluster of systemd containers on an internal Docker network, driven by Ansible over SSH.

Everything is created per run under one name prefix and removed by id in `destroy()`:
containers (systemd as PID 1 with exactly the flags in DESIGN.md; `--privileged` fails here), the
`--internal` network, and a temp directory holding the SSH key pair, the generated inventory and
Ansible's control sockets. The controller reaches the containers directly on the bridge address.
Playbooks run by FQCN (`ranklog.stack.site`) from the collection installed out of its built tarball
(`collections_path`), never from the source tree.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.container.docker_env import docker
from tests.helpers import collection

# CAP_DAC_READ_SEARCH: a real host's systemd holds every capability, Docker's default set lacks this
# one, and the agent's unit grants it to the agent (roles/ranklog_agent/README.md).
SYSTEMD_FLAGS = [
    "--cap-add", "SYS_ADMIN", "--cap-add", "DAC_READ_SEARCH", "--security-opt", "seccomp=unconfined", "--cgroupns=host",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock",
]
CALLBACK_PLUGINS = Path(__file__).parent / "ansible_plugins" / "callback"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"
                   r"\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)", re.M)


@dataclass
class Node:
    name: str
    container_id: str
    ip: str


@dataclass
class PlaybookRun:
    """An ansible-playbook run: exit status, full output, and the PLAY RECAP per host."""

    rc: int
    output: str
    recap: dict[str, dict[str, int]] = field(default_factory=dict)
    # [{"play", "task", "seconds"}] from the task_timings callback (also kept next to the log), to see
    # where a slow run spent its time.
    task_seconds: list[dict] = field(default_factory=list)

    def total(self, key: str) -> int:
        return sum(counts[key] for counts in self.recap.values())

    def changed_tasks(self) -> list[str]:
        """Lines naming changed tasks (`changed: [host]` under a `TASK [...]` header), for messages."""
        out, task = [], ""
        for line in self.output.splitlines():
            if line.startswith("TASK ["):
                task = line
            elif line.startswith("changed:"):
                out.append(f"{task} {line}")
        return out


class Cluster:
    """Containers `names` from `image` on a fresh internal network; `destroy()` removes them by id."""

    def __init__(self, run_dir: Path, image: str, names: list[str], collections_path: Path,
                 node_images: dict[str, str] | None = None, node_args: dict[str, list[str]] | None = None) -> None:
        self.run_dir = run_dir
        self.collections_path = collections_path
        self.image = image
        # Per-node image (built FROM `image`) and extra `docker run` flags, e.g. a training node.
        self.node_images = node_images or {}
        self.node_args = node_args or {}
        self.prefix = f"rl-{secrets.token_hex(3)}"
        self.network_id = ""
        self.nodes: dict[str, Node] = {}
        self.extra_containers: list[str] = []
        self.webhook_id = ""
        self._names = names
        self.key = run_dir / "id_ed25519"
        self.inventory = run_dir / "inventory" / "hosts.yml"

    # -- lifecycle -----------------------------------------------------------------------------
    def create(self) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.prefix, "-f", str(self.key)],
                       check=True)
        self.network_id = docker("network", "create", "--internal", f"{self.prefix}-net")
        for name in self._names:
            cid = docker("run", "-d", *SYSTEMD_FLAGS, *self.node_args.get(name, []), "--network", self.network_id,
                         "--hostname", name, "--name", f"{self.prefix}-{name}", self.node_images.get(name, self.image),
                         "/lib/systemd/systemd")
            self.nodes[name] = Node(name, cid, "")
        for node in self.nodes.values():
            node.ip = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                             node.container_id)
            docker("exec", "-i", node.container_id, "sh", "-c",
                   "install -d -m 700 /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys",
                   input_text=(self.key.with_suffix(".pub")).read_text())
        for node in self.nodes.values():
            self.wait_for_boot(node)
            # On a host, systemd makes / shared, so a mount made later (a user's FUSE, an NFS automount)
            # also appears inside services' private namespaces (ProtectSystem=…). Docker leaves the
            # container's root a slave only; make it shared like a host's before any unit starts.
            docker("exec", node.container_id, "mount", "--make-rshared", "/")

    def wait_for_boot(self, node: Node, timeout: float = 120.0) -> None:
        """Until systemd finished booting and sshd accepts our key."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = docker("exec", node.container_id, "systemctl", "is-system-running", check=False)
            if state in ("running", "degraded") and self.ssh(node.name, "true").returncode == 0:
                return
            time.sleep(1)
        failed = docker("exec", node.container_id, "systemctl", "--failed", "--no-legend", check=False)
        raise RuntimeError(f"{node.name} did not boot within {timeout}s (state {state!r}; failed units: {failed})")

    def run_container(self, *args: str) -> str:
        """`docker run -d ARGS…` on the cluster network; the container is removed in destroy()."""
        cid = docker("run", "-d", "--network", self.network_id, *args)
        self.extra_containers.append(cid)
        return cid

    def destroy(self) -> None:
        for cid in [*self.extra_containers, *(n.container_id for n in self.nodes.values())]:
            docker("rm", "-f", "-v", cid, check=False, timeout=120)
        if self.network_id:
            docker("network", "rm", self.network_id, check=False)

    # -- access --------------------------------------------------------------------------------
    def ip(self, name: str) -> str:
        return self.nodes[name].ip

    def ssh(self, name: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ssh", "-i", str(self.key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR",
             f"root@{self.ip(name)}", command], capture_output=True, text=True, timeout=timeout)

    def exec(self, name: str, *argv: str, timeout: float = 300, check: bool = True) -> str:
        return docker("exec", self.nodes[name].container_id, *argv, timeout=timeout, check=check)

    # -- Ansible -------------------------------------------------------------------------------
    def write_inventory(self, groups: dict[str, list[str]], host_vars: dict[str, dict],
                        all_vars: dict) -> Path:
        """A YAML inventory of the cluster (group_vars/ of playbooks/ still apply)."""
        base = {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.key),
            # No `-C`: the payload is mostly wheels (already compressed) and the CPU is scarce.
            "ansible_ssh_args": "-o ControlMaster=auto -o ControlPersist=300s",
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
            "ansible_python_interpreter": "/usr/bin/python3",
        }
        children = {
            group: {"hosts": {h: {"ansible_host": self.ip(h), **host_vars.get(h, {})} for h in hosts}}
            for group, hosts in groups.items()
        }
        self.inventory.parent.mkdir(parents=True, exist_ok=True)
        self.inventory.write_text(yaml.safe_dump({"all": {"vars": {**base, **all_vars}, "children": children}},
                                                 sort_keys=False))
        return self.inventory

    def ansible_env(self) -> dict[str, str]:
        bin_dir = str(Path(sys.executable).parent)
        return {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
            "ANSIBLE_COLLECTIONS_PATH": str(self.collections_path),
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_FORKS": "8",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_LOCAL_TEMP": str(self.run_dir / "ansible-tmp"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.run_dir / "cp"),
            "ANSIBLE_STDOUT_CALLBACK": "default",
            "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml",
            "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACK_PLUGINS),
            "ANSIBLE_CALLBACKS_ENABLED": "task_timings",
        }

    def playbook(self, playbook: str, *args: str, timeout: float = 1800) -> PlaybookRun:
        """Run the installed collection's playbook (`site.yml` → ranklog.stack.site); output kept in run_dir."""
        fqcn = f"{collection.NAMESPACE}.{collection.NAME}.{Path(playbook).stem}"
        cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(self.inventory), fqcn, *args]
        log = self.run_dir / f"ansible-{int(time.time() * 1000)}.log"
        timings = log.with_suffix(".timings.json")
        with open(log, "w+") as out:
            out.write(" ".join(cmd) + "\n")
            out.flush()
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True,
                                    env={**self.ansible_env(), "RANKLOG_TASK_TIMINGS": str(timings)}, cwd=self.run_dir)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out.seek(0)
            output = out.read()
        recap = {m[0]: dict(zip(("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored"),
                                map(int, m[1:]), strict=True)) for m in RECAP.findall(output)}
        task_seconds = json.loads(timings.read_text()) if timings.exists() else []
        return PlaybookRun(proc.returncode, output, recap, task_seconds)
