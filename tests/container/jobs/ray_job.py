"""A small real Ray job for the container test: tasks and an actor that print, run as a normal user.

Ray writes every worker's stdout/stderr to /tmp/ray/session_*/logs/worker-*.{out,err} (plus its
own raylet, GCS and core-worker logs); the script shuts Ray down at the end so the files are final.
"""

import sys

import ray


@ray.remote
def square(i: int) -> int:
    print(f"task {i} computing {i}*{i}", flush=True)
    print(f"task {i} note on stderr", file=sys.stderr, flush=True)
    return i * i


@ray.remote
class Counter:
    def __init__(self) -> None:
        self.total = 0

    def add(self, k: int) -> int:
        self.total += k
        print(f"counter at {self.total} after adding {k}", flush=True)
        return self.total


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024**2, log_to_driver=False)
    print("sum of squares", sum(ray.get([square.remote(i) for i in range(20)])))
    counter = Counter.remote()
    print("counter total", ray.get([counter.add.remote(k) for k in range(10)])[-1])
    ray.shutdown()


if __name__ == "__main__":
    main()
