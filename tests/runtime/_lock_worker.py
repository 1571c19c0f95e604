"""Helper process for test_lock.py and tests/cli/test_guards.py: take the lock of a
directory, report, hold, release.

    python _lock_worker.py DIR HOLD_SECONDS [BARRIER]

BARRIER: a file to wait for before trying (so that many workers try at the same moment). Prints
'ACQUIRED PID' once it holds the lock; exits 2 with the one-line message when refused.
Starts in well under a second: the package's __init__ (JAX) is not imported."""
import os
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pkg = types.ModuleType("mhajax")
pkg.__path__ = [os.path.join(ROOT, "mhajax")]
sys.modules["mhajax"] = pkg
from mhajax.runtime.lock import OutDirBusy, OutLock  # noqa: E402


def main():
    d, hold = sys.argv[1], float(sys.argv[2])
    barrier = sys.argv[3] if len(sys.argv) > 3 else None
    if barrier:
        while not os.path.exists(barrier):
            time.sleep(0.005)
    try:
        lk = OutLock(d, command=["python", "-m", "verify", "weak-convexity", "--heads", "4"]).acquire()
    except OutDirBusy as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    print("ACQUIRED", os.getpid(), flush=True)
    time.sleep(hold)
    lk.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
