"""Units, the one metrics module and the failure signatures."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from ranklog import metrics, signatures
from ranklog.units import parse_duration, parse_size


@pytest.mark.parametrize(("text", "expected"), [("1GB", 10**9), ("512MiB", 512 << 20), ("64k", 64000), (4096, 4096)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(("text", "expected"), [("7d", 604800), ("250ms", 0.25), ("2h", 7200), ("30", 30)])
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["1XB", "", "ten", True])
def test_bad_units_raise(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


@pytest.mark.parametrize("component", ["agent", "archive", "run"])
def test_each_component_exports_its_metrics(component):
    m = metrics.create(component)
    exposed = generate_latest(m.registry).decode()
    wanted = {"agent": {"agent", "run", "all"}, "archive": {"archive", "all"}, "run": {"run", "all"}}[component]
    for spec in metrics.METRICS.values():
        if spec.component in wanted and not spec.labels:
            base = spec.name if spec.kind != "histogram" else spec.name + "_count"
            assert f"\n{base}" in exposed or exposed.startswith(base), spec.name
    assert 'ranklog_build_info{component="' + component + '"' in exposed


def test_label_budget_folds_overflow_into_other():
    m = metrics.create("run")
    budget = metrics.LabelBudget(m.metric_label_overflow, max_jobs=2)
    assert [budget("training_job", j) for j in ("a", "b", "a", "c")] == ["a", "b", "a", "other"]
    assert m.metric_label_overflow.labels(label="training_job")._value.get() == 1


REAL_LINES = {
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600011 milliseconds before timing out.": "nccl_timeout",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.15 GiB of which 1.02 GiB is free.": "cuda_oom",
    "RuntimeError: CUDA error: an illegal memory access was encountered": "cuda_error",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
    "remote process exited or there was a network error, NCCL version 2.21.5 ncclRemoteError": "nccl_error",
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.": "ray_actor_died",
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.": "ray_oom_kill",
    "WARNING: grad_norm is not finite: nan, skipping step": "nonfinite_grad",
    "step:12 - loss: nan - lr: 1e-5": "nan_loss",
    "Traceback (most recent call last):\n  File \"train.py\", line 3\nValueError: bad": "python_exception",
}


@pytest.mark.parametrize(("line", "name"), REAL_LINES.items())
def test_real_failure_strings_match_their_signature(line, name):
    assert signatures.match(line).name == name


@pytest.mark.parametrize("line", ["step:12 - loss:0.25 - perf/throughput:1532.1", "INFO all good", "", None])
def test_healthy_lines_match_nothing(line):
    assert signatures.match(line) is None


def test_timeouts_are_consequences_and_oom_is_not():
    assert signatures.BY_NAME["nccl_timeout"].consequence
    assert not signatures.BY_NAME["cuda_oom"].consequence
    assert {s.category for s in signatures.SIGNATURES} <= set(signatures.CATEGORIES)
