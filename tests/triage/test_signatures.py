"""The signatures triage added to ranklog.signatures match the real strings they were written for."""

from __future__ import annotations

import pytest

from ranklog import signatures

from .scenarios import messages as m


@pytest.mark.parametrize(("text", "name", "consequence"), [
    # torch 2.13 + gloo, copied from tests/triage/test_torchrun.py's hang run
    ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
     "waiting 5000ms for recv operation to complete", "gloo_timeout", True),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
     "[127.0.0.1]:21446", "collective_peer_lost", True),
    ("(raylet) " + m.raylet_oom_summary("10.0.0.12"), "ray_memory_pressure", False),
    (m.verl_console(42, {"actor/pg_loss": "nan", "perf/throughput": 3050.2}), "nan_metric", False),
    ("torch.distributed.elastic.multiprocessing.api: [ERROR] " + m.elastic_failed(1, 48213), "launcher_child_failed",
     True),
    (m.nccl_watchdog_timeout(3, 4821), "nccl_timeout", True),
    (m.cuda_oom(1), "cuda_oom", False),
    (m.ray_oom_kill("10.0.0.12", 48213), "ray_oom_kill", False),
])
def test_real_strings(text, name, consequence):
    sig = signatures.match(text)
    assert sig is not None and sig.name == name
    assert sig.consequence is consequence
    assert sig.category in signatures.CATEGORIES


@pytest.mark.parametrize("text", ["step:42 - actor/pg_loss:0.4213 - perf/throughput:3050.2",
                                  "loss_scale: 65536.0", "Connection established with peer 3"])
def test_healthy_lookalikes_match_nothing(text):
    assert signatures.match(text) is None
