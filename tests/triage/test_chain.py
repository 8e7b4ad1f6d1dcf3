"""The decisive cause of a chained traceback comes from every exception of the chain, and the new
signatures match the strings the real tools print (read from the scenario library's real output, or
printed by torch 2.13 here: torch.save into a full tmpfs by path, torch.load of a truncated file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ranklog import signatures
from ranklog.triage.chain import classify, links

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _traceback_of(path_glob: str, scenario: str) -> str:
    """The first chained traceback of a file the scenario's real run wrote (prefixes like ``[rank3]: `` kept)."""
    path = next((SCENARIOS / scenario / "out").glob(path_glob))
    text = path.read_text()
    start = text.index("Traceback (most recent call last):")
    return text[start:]


def test_full_disk_outranks_the_checkpoint_writer_that_met_it():
    text = _traceback_of("node0/job_*/attempt_0/0/stderr.log", "torchrun_disk_full")
    chain = links(text)
    assert "No space left on device" in chain[0] and "unexpected pos" in chain[1]  # the last line is torch's
    sig, context = classify(text)
    assert (sig.name, sig.category) == ("disk_full", "disk full/quota")
    assert context == ("checkpoint save failed",)


def test_a_killed_data_loader_worker_is_the_cause_not_its_waiting_rank():
    text = _traceback_of("node1/job_*/attempt_0/1/stderr.log", "torchrun_loader_killed")
    sig, _ = classify(text)
    assert sig.name == "dataloader_worker_died"
    assert "is killed by signal: Killed" in text and "The above exception was the direct cause" in text


@pytest.mark.parametrize(("text", "name"), [
    # torch 2.13: torch.save(state, "/full/tmpfs/ckpt.pt") (by path, no Python file: no ENOSPC in the text)
    ("RuntimeError: basic_ios::clear: iostream error\n\nDuring handling of the above exception, another exception "
     "occurred:\n\nRuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 832 vs 726",
     "checkpoint_save_failed"),
    # torch 2.13: torch.load of a checkpoint cut in half
    ("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory. This is an "
     "internal miniz error.", "checkpoint_load_failed"),
    ("RuntimeError: Error(s) in loading state_dict for Linear:\n\tsize mismatch for weight: copying a param with "
     "shape torch.Size([3, 4]) from checkpoint, the shape in current model is torch.Size([2, 4]).",
     "checkpoint_load_failed"),
    ("OSError: [Errno 122] Disk quota exceeded: '/home/u/ckpt/step-000600.pt'", "disk_full"),
    # the kernel (dmesg / journal) and the container runtime
    ("Out of memory: Killed process 48213 (python) total-vm:183921044kB, anon-rss:125938712kB", "kernel_oom_kill"),
    ("Memory cgroup out of memory: Killed process 48213 (pt_main_thread)", "kernel_oom_kill"),
    # network file systems and object stores (Python's errno texts, botocore's exception)
    ("OSError: [Errno 116] Stale file handle: '/mnt/nfs/data/shard-00017.bin'", "storage_connection_lost"),
    ("OSError: [Errno 107] Transport endpoint is not connected: '/mnt/s3fs/ckpt'", "storage_connection_lost"),
    ('botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL: "http://s3:9000/ckpt"',
     "storage_connection_lost"),
])
def test_real_strings(text, name):
    sig, _ = classify(text)
    assert sig is not None and sig.name == name
    assert sig.category in signatures.CATEGORIES and not sig.consequence


def test_a_plain_message_is_its_own_chain():
    assert links("just one line") == ["just one line"]
    assert classify("step 12 loss 0.31 compute_time=0.41") == (None, ())
