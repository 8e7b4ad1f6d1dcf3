"""Build the records of a simulated distributed job, deterministically, for the scenario library.

A :class:`Job` has `nodes` × `ranks_per_node` ranks; every node may have its own clock offset (the
times its records carry are off by that much, as with a drifting NTP-less node). Scenario code
trains for a few steps, then makes things go wrong with the real messages of :mod:`.messages`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ranklog.record import format_ts, rows_to_table

START_NS = 1_796_212_800 * 1_000_000_000  # 2026-12-02T12:00:00Z
SECOND = 1_000_000_000


@dataclass
class Job:
    name: str
    nodes: int = 2
    ranks_per_node: int = 4
    step_s: float = 2.0
    clock_offsets_s: dict[int, float] = field(default_factory=dict)  # node index -> seconds its clock is off
    records: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 7

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._offsets: dict[str, int] = {}

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    def node_of(self, rank: int) -> int:
        return rank // self.ranks_per_node

    def host(self, node: int) -> str:
        return f"node{node}"

    def ip(self, node: int) -> str:
        return f"10.0.0.{11 + node}"

    def pid(self, rank: int) -> int:
        return 48200 + rank * 13

    def _ts(self, node: int, t_s: float) -> int:
        return START_NS + int((t_s + self.clock_offsets_s.get(node, 0.0)) * SECOND)

    def emit(self, rank: int, t_s: float, msg: str, level: str = "INFO", exc: str | None = None,
             step: int | None = None, logger: str | None = "train", **extra: Any) -> None:
        """A record written by `rank` at true time `t_s` (seconds after the job start)."""
        node = self.node_of(rank)
        self._add(node, t_s, {"level": level, "msg": msg, "exc": exc, "logger": logger, "rank": rank,
                              "local_rank": rank % self.ranks_per_node, "pid": self.pid(rank),
                              "role": f"WorkerDict_0:{rank}", "step": step, "source": f"/logs/rank{rank}.jsonl",
                              **extra})

    def emit_node(self, node: int, t_s: float, msg: str, level: str = "ERROR", exc: str | None = None,
                  role: str = "driver", pid: int = 1200, logger: str | None = None) -> None:
        """A record of a rank-less process on `node` (driver, raylet, launcher, kernel)."""
        self._add(node, t_s, {"level": level, "msg": msg, "exc": exc, "logger": logger, "pid": pid, "role": role,
                              "source": f"/logs/{role}.log"})

    def _add(self, node: int, t_s: float, fields: dict[str, Any]) -> None:
        source = fields["source"] + f"@{self.host(node)}"
        offset = self._offsets.get(source, 0)
        self._offsets[source] = offset + 100 + len(fields["msg"])
        self.records.append({"ts": format_ts(self._ts(node, t_s)), "host": self.host(node), "ip": self.ip(node),
                             "job": self.name, "source_id": source, "offset": offset, "format": "ranklog",
                             **fields})

    def start(self, t_s: float = 0.0) -> None:
        for rank in range(self.world_size):
            self.emit(rank, t_s + 0.01 * rank, f"initialized process group: rank {rank}, world_size "
                                              f"{self.world_size}, backend nccl")

    def train(self, first: int, last: int, t0: float = 1.0, ranks: list[int] | None = None) -> float:
        """Steps first..last on `ranks` (all by default); returns the true time after the last step."""
        ranks = list(range(self.world_size)) if ranks is None else ranks
        t = t0
        for step in range(first, last + 1):
            t = t0 + (step - first + 1) * self.step_s
            for rank in ranks:
                loss = 2.5 / (1 + 0.05 * step) + self._rng.uniform(-0.02, 0.02)
                tput = 3100 + self._rng.uniform(-60, 60)
                self.emit(rank, t + self._rng.uniform(0, 0.05), f"step {step} loss {loss:.4f} "
                          f"throughput {tput:.1f} tokens/s", step=step, loss=round(loss, 4),
                          throughput=round(tput, 1))
        return t

    def table(self) -> pa.Table:
        return rows_to_table(sorted(self.records, key=lambda r: r["ts"]))
