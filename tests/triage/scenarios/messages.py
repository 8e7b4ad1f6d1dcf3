"""Real failure messages, as torch, NCCL, gloo, Ray, verl and the torchrun launcher print them.

Copied from real runs and the projects' sources (ProcessGroupNCCL.cpp, ray/exceptions.py,
verl's dp_actor, torch.distributed.elastic); only ids, sizes and paths are filled in per rank.
"""

from __future__ import annotations


def traceback(frames: list[tuple[str, int, str, str]], last: str) -> str:
    """A Python traceback: frames are (file, line, function, code)."""
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        lines += [f'  File "{path}", line {line}, in {func}', f"    {code}"]
    return "\n".join([*lines, last])


TRAIN_FRAMES = [
    ("/workspace/train.py", 212, "<module>", "main()"),
    ("/workspace/train.py", 188, "main", "loss = train_step(model, batch)"),
    ("/workspace/train.py", 141, "train_step", "out = model(**batch)"),
    ("/usr/local/lib/python3.11/site-packages/torch/nn/modules/module.py", 1751, "_wrapped_call_impl",
     "return self._call_impl(*args, **kwargs)"),
    ("/usr/local/lib/python3.11/site-packages/transformers/models/qwen2/modeling_qwen2.py", 243, "forward",
     "attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))"),
]


def cuda_oom(gpu: int, tried_gib: float = 2.0, pid: int = 48213) -> str:
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU {gpu} has a "
            f"total capacity of 79.15 GiB of which 1.06 GiB is free. Process {pid} has 78.08 GiB memory in use. "
            "Of the allocated memory 74.21 GiB is allocated by PyTorch, and 2.37 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def nccl_watchdog_timeout(rank: int, seq: int, timeout_ms: int = 600000, ran_ms: int = 600081,
                          numel: int = 262144) -> str:
    return (f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
            f"NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms}) ran for {ran_ms} milliseconds before "
            "timing out.")


def nccl_watchdog_detail(rank: int, seq: int) -> str:
    return (f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by "
            f"watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.")


def nccl_taking_down(rank: int) -> str:
    return (f"[Rank {rank}] To avoid data inconsistency, we are taking the entire process down.")


def nccl_terminate(rank: int, seq: int) -> str:
    return ("terminate called after throwing an instance of 'c10::DistBackendError'\n"
            f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with "
            f"exception: {nccl_watchdog_timeout(rank, seq)}")


def gloo_timeout(timeout_ms: int = 5000) -> str:
    return (f"RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
            f"{timeout_ms}ms for recv operation to complete")


def ray_oom_kill(ip: str, pid: int, used_gb: float = 61.35) -> str:
    return ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
            f"Memory on the node (IP: {ip}, ID: 9a3c51b2f0e84d7e8c1b2a3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b) where the "
            f"task (actor ID: 5e6f7a8b9c0d1e2f3a4b5c6d01000000, name=WorkerDict.__init__, pid={pid}, memory used="
            f"{used_gb}GB) was running was 118.22GB / 124.00GB (0.953387), which exceeds the memory usage threshold "
            "of 0.95. Ray killed this worker (ID: ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34) because "
            "it was the most recently scheduled task; to see more information about memory usage on this node, use "
            f"`ray logs raylet.out -ip {ip}`.")


def ray_actor_died(actor: str, pid: int, ip: str, reason: str) -> str:
    return ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
            "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
            "\tactor_id: 5e6f7a8b9c0d1e2f3a4b5c6d01000000\n"
            f"\tpid: {pid}\n\tname: {actor}\n\tnamespace: 2f1c5d3e-9a8b-4c7d-8e6f-1a2b3c4d5e6f\n\tip: {ip}\n"
            f"The actor is dead because its worker process has died. {reason}")


OOM_EXIT = ("Worker exit type: NODE_OUT_OF_MEMORY Worker exit detail: Task was killed due to the node running low "
            "on memory.")
SIGKILL_EXIT = ("Worker exit type: SYSTEM_ERROR Worker exit detail: The leased worker has unrecoverable failure. "
                "Worker is requested to be destroyed when it is returned. RPC Error message: Socket closed")


def raylet_oom_summary(ip: str) -> str:
    return ("node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed "
            f"due to other reasons at node (ID: 9a3c51b2f0e84d7e8c1b2a3f4e5d6c7b, IP: {ip}) over the last time "
            "period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip "
            f"{ip}`")


def verl_grad_norm_not_finite(rank: int) -> str:
    return f"WARN: rank {rank} grad_norm is not finite: nan"


def verl_console(step: int, metrics: dict[str, float | str]) -> str:
    return f"step:{step} - " + " - ".join(f"{k}:{v}" for k, v in metrics.items())


def elastic_failed(local_rank: int, pid: int, exitcode: int = 1) -> str:
    return (f"failed (exitcode: {exitcode}) local_rank: {local_rank} (pid: {pid}) of binary: "
            "/usr/local/bin/python3.11")


def elastic_closing(pid: int) -> str:
    return f"Sending process {pid} closing signal SIGTERM"


BENIGN_WARNING = ("UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                  "In version 2.5 we will raise an exception if use_reentrant is not passed.")
