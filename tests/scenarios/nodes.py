"""Nodes on one machine for the generators: a process in UTS and mount namespaces of its own.

The node's host name is what the tool sees (``socket.gethostname()``, torch's rendezvous, Ray's
node name), and it resolves to a loopback address of its own through a private ``/etc/hosts``
(torch connects to the master node by name). Needs root and util-linux's ``unshare``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def hosts_file(hosts: Sequence[str]) -> Iterator[Path]:
    """A temporary hosts file giving each host a loopback address (127.0.1.N) of its own."""
    folder = Path(tempfile.mkdtemp(prefix="ranklog-scenario-"))
    path = folder / "hosts"
    path.write_text("".join(f"127.0.1.{i + 1} {h}\n" for i, h in enumerate(hosts)) + "127.0.0.1 localhost\n")
    try:
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def on_node(host: str, hosts: Path, argv: Sequence[str], tmpfs: dict[str, str] | None = None) -> list[str]:
    """`argv` run as node `host` (its own host name, the shared hosts file bound over /etc/hosts);
    `tmpfs` mounts a small file system of its own at each path (path → size, e.g. ``{"/x": "96k"}``:
    a disk that fills up), visible to this node only."""
    mounts = "".join(f"mount -t tmpfs -o size={size} tmpfs '{path}' && " for path, size in (tmpfs or {}).items())
    script = f'mount --bind "$0" /etc/hosts && {mounts}hostname {host} && exec "$@"'
    return ["unshare", "--uts", "--mount", "sh", "-c", script, str(hosts), *argv]


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc), parents first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        out.append(current)
        todo.extend(children.get(current, []))
    return out


def shown(host: str, argv: Sequence[str]) -> str:
    """The command as a README shows it: repository paths shortened to file names."""
    return f"[host {host}] " + " ".join(a if "/" not in a or a.startswith("out/") else Path(a).name for a in argv)
