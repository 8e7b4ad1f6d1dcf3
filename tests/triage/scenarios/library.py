"""The scenario library: failures of distributed jobs, each with the verdict triage must reach.

Every scenario is built from real message strings (:mod:`.messages`) with the consequences real
jobs show: when one rank dies, the others print NCCL watchdog timeouts ten minutes later.
:mod:`tests.triage.scenarios.layouts` writes them as real log files (ranklog JSON, torchrun, Ray)..
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import messages as m
from .builder import Job

TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Expected:
    status: str  # "failure" | "no failure"
    category: str | None = None
    ranks: tuple[int, ...] = ()
    step: int | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    job: Job
    expected: Expected


def _timeouts(job: Job, t_s: float, ranks: list[int], seq: int) -> None:
    """What healthy ranks print when a peer never joins collective `seq`."""
    for rank in ranks:
        t = t_s + 0.002 * rank
        job.emit(rank, t, m.nccl_watchdog_timeout(rank, seq), level="ERROR", logger="torch.distributed")
        job.emit(rank, t + 0.001, m.nccl_watchdog_detail(rank, seq), level="ERROR", logger="torch.distributed")
        job.emit(rank, t + 0.002, m.nccl_taking_down(rank), level="ERROR", logger="torch.distributed")
        job.emit(rank, t + 0.003, m.nccl_terminate(rank, seq), level="UNKNOWN", logger=None)


def oom_one_rank() -> Scenario:
    job = Job("oom-one-rank", nodes=4, ranks_per_node=4)
    job.start()
    t = job.train(1, 20)
    oom_t = t + 1.2
    job.emit(5, oom_t, m.cuda_oom(gpu=1, pid=job.pid(5)), level="ERROR", step=21,
             exc=m.traceback(m.TRAIN_FRAMES, m.cuda_oom(gpu=1, pid=job.pid(5))))
    _timeouts(job, oom_t + TIMEOUT_S, [r for r in range(job.world_size) if r != 5], seq=4821)
    return Scenario("oom_one_rank", "CUDA OOM on rank 5; the 15 others die with NCCL watchdog timeouts",
                    job, Expected("failure", "CUDA OOM", (5,), 21))


def hang_one_rank() -> Scenario:
    job = Job("hang-one-rank", nodes=2, ranks_per_node=4)
    job.start()
    t = job.train(1, 30)
    healthy = [r for r in range(job.world_size) if r != 6]
    t = job.train(31, 31, t0=t, ranks=healthy)  # rank 6 never finishes step 31
    _timeouts(job, t + TIMEOUT_S, healthy, seq=1203)
    return Scenario("hang_one_rank", "rank 6 hangs (prints nothing more); the others time out on SeqNum 1203",
                    job, Expected("failure", "hang/silence", (6,)))


def ray_oom_killer() -> Scenario:
    job = Job("ray-oom-kill", nodes=2, ranks_per_node=4)
    job.start()
    t = job.train(1, 12)
    victim = 3
    ip, pid = job.ip(job.node_of(victim)), job.pid(victim)
    kill_t = t + 0.8
    job.emit_node(job.node_of(victim), kill_t, "(raylet) " + m.raylet_oom_summary(ip), level="ERROR", role="raylet",
                  pid=900)
    job.emit_node(0, kill_t + 2.0, m.ray_oom_kill(ip, pid), level="ERROR", role="driver", pid=1200,
                  exc=m.traceback([("/workspace/verl/trainer/main_ppo.py", 64, "main", "run_ppo(config)")],
                                  m.ray_actor_died(f"WorkerDict_0:{victim}", pid, ip, m.OOM_EXIT)))
    _timeouts(job, kill_t + TIMEOUT_S, [r for r in range(job.world_size) if r != victim], seq=377)
    return Scenario("ray_oom_killer", "Ray's memory monitor kills the actor of rank 3; the driver reports "
                    "ActorDiedError and the others time out", job, Expected("failure", "host OOM kill", (victim,)))


def nan_gradients() -> Scenario:
    job = Job("nan-grads", nodes=2, ranks_per_node=4)
    job.start()
    t = job.train(1, 41)
    for step in (42, 43):
        t += job.step_s
        for rank in range(job.world_size):
            job.emit(rank, t + 0.01 * rank, m.verl_grad_norm_not_finite(rank), level="UNKNOWN", step=step, logger=None)
        job.emit(0, t + 0.5, m.verl_console(step, {"actor/pg_loss": "nan", "actor/grad_norm": "nan",
                                                   "perf/throughput": 3050.2}), step=step, logger=None)
    return Scenario("nan_gradients", "gradients turn NaN at step 42 on every rank (verl prints grad_norm is not "
                    "finite)", job, Expected("failure", "non-finite loss/gradients", tuple(range(8)), 42))


def exception_rank0() -> Scenario:
    job = Job("exception-rank0", nodes=2, ranks_per_node=4)
    job.start()
    t = job.train(1, 9)
    err = "KeyError: \"missing field 'input_ids' in sample 18231\""
    job.emit(0, t + 0.3, err, level="ERROR", step=10, exc=m.traceback([
        ("/workspace/train.py", 97, "<module>", "main()"),
        ("/workspace/train.py", 71, "main", "batch = next(loader_iter)"),
        ("/workspace/data.py", 44, "__getitem__", "raise KeyError(f\"missing field 'input_ids' in sample {idx}\")"),
    ], err))
    job.emit_node(0, t + 1.5, m.elastic_failed(0, job.pid(0)), level="ERROR", role="torchrun", pid=1000,
                  logger="torch.distributed.elastic.multiprocessing.api")
    _timeouts(job, t + 0.3 + TIMEOUT_S, list(range(1, job.world_size)), seq=95)
    return Scenario("exception_rank0", "an uncaught KeyError on rank 0 only; the others time out",
                    job, Expected("failure", "uncaught exception", (0,), 10))


def clock_skew() -> Scenario:
    # node2's clock is 12 minutes behind: in raw time its ranks' timeouts come *before* the OOM.
    job = Job("clock-skew", nodes=4, ranks_per_node=4, clock_offsets_s={2: -720.0, 3: 240.0})
    job.start()
    t = job.train(1, 15)
    oom_t = t + 0.7
    job.emit(5, oom_t, m.cuda_oom(gpu=1, pid=job.pid(5)), level="ERROR", step=16,
             exc=m.traceback(m.TRAIN_FRAMES, m.cuda_oom(gpu=1, pid=job.pid(5))))
    _timeouts(job, oom_t + TIMEOUT_S, [r for r in range(job.world_size) if r != 5], seq=3310)
    # A rank on the skewed node also dies of the aftermath, with a non-consequence error text.
    job.emit(9, oom_t + TIMEOUT_S + 2.0, "RuntimeError: NCCL communicator was aborted on rank 9.",
             level="ERROR", exc=m.traceback(m.TRAIN_FRAMES[:2], "torch.distributed.DistBackendError: NCCL "
                                            "communicator was aborted on rank 9."))
    return Scenario("clock_skew", "CUDA OOM on rank 5 (node1) while node2's clock is 12 min behind and node3's "
                    "4 min ahead", job, Expected("failure", "CUDA OOM", (5,), 16))


def healthy_run() -> Scenario:
    job = Job("healthy", nodes=2, ranks_per_node=4)
    job.start()
    for rank in range(job.world_size):
        job.emit(rank, 0.5, m.BENIGN_WARNING, level="WARNING", logger="py.warnings")
    t = job.train(1, 40)
    for rank in range(job.world_size):
        job.emit(rank, t + 1.0, "training finished: 40 steps", step=40)
    return Scenario("healthy_run", "a healthy run with a benign warning", job, Expected("no failure"))


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    fn.__name__: fn for fn in (oom_one_rank, hang_one_rank, ray_oom_killer, nan_gradients, exception_rank0,
                               clock_skew, healthy_run)
}
