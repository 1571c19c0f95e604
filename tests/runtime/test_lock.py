"""mhajax.runtime.lock: a second process on a held --out is refused with one line naming the
holder; a SIGKILLed holder does not leave the directory stuck; concurrent processes never
both proceed; a second lock in the same process is refused too; released on exceptions. Helper processes (_lock_worker.py) start in well under a second."""
import os
import signal
import subprocess
import sys
import time

import pytest

from mhajax.errors import InputError
from mhajax.runtime.lock import LOCK_NAME, OutDirBusy, OutLock, describe_holder, read_holder

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lock_worker.py")


def spawn(d, hold, barrier=None):
    args = [sys.executable, WORKER, str(d), str(hold)] + ([str(barrier)] if barrier else [])
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_acquired(p):
    line = p.stdout.readline()  # blocks until the worker prints
    assert line.startswith("ACQUIRED"), (line, p.stderr.read() if p.poll() is not None else "")
    return int(line.split()[1])


def test_second_process_refused_with_one_line_naming_the_holder(tmp_path):
    a = spawn(tmp_path, 30)
    try:
        pid = wait_acquired(a)
        b = spawn(tmp_path, 0)
        _, err = b.communicate(timeout=30)
        assert b.returncode == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        assert f"pid {pid}" in lines[0] and "in use by" in lines[0] and "--out" in lines[0]
        assert "verify weak-convexity --heads 4" in lines[0] and "started" in lines[0]
    finally:
        a.kill()
        a.wait()


def test_sigkilled_holder_does_not_leave_it_stuck(tmp_path):
    a = spawn(tmp_path, 60)
    pid_a = wait_acquired(a)
    assert read_holder(tmp_path / LOCK_NAME)["pid"] == pid_a
    os.kill(pid_a, signal.SIGKILL)
    a.wait(timeout=10)
    assert read_holder(tmp_path / LOCK_NAME)["pid"] == pid_a   # stale details stay...
    lk = OutLock(tmp_path).acquire()                            # ...but the lock is free
    assert read_holder(tmp_path / LOCK_NAME)["pid"] == os.getpid()
    lk.release()
    assert (tmp_path / LOCK_NAME).exists()                      # never deleted
    assert read_holder(tmp_path / LOCK_NAME) == {}              # truncated on release


@pytest.mark.slow
def test_concurrent_processes_do_not_both_proceed(tmp_path):
    barrier = tmp_path / "go"
    d = tmp_path / "out"
    d.mkdir()
    ps = [spawn(d, 1.5, barrier=barrier) for _ in range(4)]
    time.sleep(1.0)             # let every interpreter start and spin on the barrier
    barrier.touch()
    codes = [p.wait(timeout=60) for p in ps]
    outs = [p.stdout.read() for p in ps]
    assert sum("ACQUIRED" in o for o in outs) == 1, (codes, outs)
    assert sorted(codes) == [0, 2, 2, 2]


def test_a_second_lock_in_the_same_process_is_refused(tmp_path):
    """Two locks of one directory never both hold, even in one process (`verify all` locks its
    parent directory and each check its own OUT/NAME, never the same file twice)."""
    outer = OutLock(tmp_path).acquire()
    with pytest.raises(OutDirBusy, match=f"pid {os.getpid()}"):
        OutLock(tmp_path).acquire()
    assert outer.held
    b = spawn(tmp_path, 0)                   # the outer hold is still there
    _, err = b.communicate(timeout=30)
    assert b.returncode == 2 and f"pid {os.getpid()}" in err
    outer.release()
    assert not outer.held
    c = spawn(tmp_path, 0)
    assert c.wait(timeout=30) == 0


def test_holder_details_and_message(tmp_path):
    with OutLock(tmp_path, command=["python", "-m", "verify", "weak-convexity", "--heads", "4"]):
        h = read_holder(tmp_path / LOCK_NAME)
        assert set(h) == {"pid", "host", "command", "started"}
        msg = describe_holder(h)
        assert "verify weak-convexity --heads 4" in msg and f"pid {os.getpid()}" in msg
    assert describe_holder({}).startswith("another process")
    assert issubclass(OutDirBusy, InputError)


def test_context_manager_releases_on_exception(tmp_path):
    with pytest.raises(RuntimeError):
        with OutLock(tmp_path):
            raise RuntimeError("boom")
    p = spawn(tmp_path, 0)
    assert p.wait(timeout=30) == 0
