"""fork: the child gets its own file and its own seq; nothing is duplicated or lost."""

from __future__ import annotations

from tests.helpers.log_files import ranklog_files, read_records, run_python


def _by_pid(log_dir):
    out = {}
    for path in ranklog_files(log_dir):
        records = read_records(path)
        out[records[0]["pid"]] = (path, records)
    return out


def test_os_fork_child_gets_own_file_and_seq(tmp_path):
    proc = run_python("""
        for i in range(50):
            log.info("parent before %d", i)   # some of these are still queued at fork time
        pid = os.fork()
        if pid == 0:
            for i in range(30):
                log.info("child %d", i)
            ranklog.flush()
            os._exit(0)
        os.waitpid(pid, 0)
        log.info("parent after")
        print(os.getpid(), pid)
    """, tmp_path, env={"RANK": "1"})
    parent_pid, child_pid = map(int, proc.stdout.split())
    files = _by_pid(tmp_path)
    assert set(files) == {parent_pid, child_pid}
    child_path, child = files[child_pid]
    _parent_path, parent = files[parent_pid]
    assert child_path.name == f"rank-1.pid-{child_pid}.0000.jsonl"
    assert [r["msg"] for r in child] == [f"child {i}" for i in range(30)]
    assert [r["seq"] for r in child] == list(range(1, 31))
    assert [r["msg"] for r in parent] == [f"parent before {i}" for i in range(50)] + ["parent after"]
    assert [r["seq"] for r in parent] == list(range(1, 52))


def test_multiprocessing_fork_children_flush_on_exit(tmp_path):
    proc = run_python("""
        import multiprocessing as mp

        def work(n):
            for i in range(100):
                log.info("worker %d record %d", n, i)
            # no explicit flush: the worker leaves through os._exit

        log.info("parent")
        ctx = mp.get_context("fork")
        workers = [ctx.Process(target=work, args=(n,)) for n in range(3)]
        [w.start() for w in workers]
        [w.join() for w in workers]
        print(" ".join(str(w.pid) for w in workers), [w.exitcode for w in workers])
    """, tmp_path)
    pids = [int(p) for p in proc.stdout.split("[")[0].split()]
    files = _by_pid(tmp_path)
    assert set(pids) <= set(files)
    for pid in pids:
        _, records = files[pid]
        assert len(records) == 100 and [r["seq"] for r in records] == list(range(1, 101))


def test_records_logged_just_before_exit_are_written(tmp_path):
    run_python("""
        for i in range(1000):
            log.info("last words %d", i)
        sys.exit(3)
    """, tmp_path, check=False)
    (path,) = ranklog_files(tmp_path)
    assert len(read_records(path)) == 1000


def test_sigterm_flushes_before_the_process_dies(tmp_path):
    proc = run_python("""
        import signal
        for i in range(500):
            log.info("before sigterm %d", i)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
        log.info("never reached")
    """, tmp_path, check=False)
    assert proc.returncode == -15  # still killed by SIGTERM, as without ranklog
    (path,) = ranklog_files(tmp_path)
    assert [r["msg"] for r in read_records(path)] == [f"before sigterm {i}" for i in range(500)]


def test_an_application_sigterm_handler_is_left_alone(tmp_path):
    proc = run_python("""
        import signal
        signal.signal(signal.SIGTERM, lambda s, f: sys.exit(5))
        log.info("configured after the application's handler")
        assert signal.getsignal(signal.SIGTERM).__name__ == "<lambda>"
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
    """, tmp_path, check=False)
    assert proc.returncode == 5, proc.stderr
    (path,) = ranklog_files(tmp_path)
    assert len(read_records(path)) == 1
