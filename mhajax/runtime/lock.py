"""One run at a time per results directory (``--out``): an exclusive ``flock`` on ``OUT/.lock``.

The kernel drops a ``flock`` when its holder dies, however it dies (SIGKILL, OOM), so a killed
run never leaves the directory stuck. The file is never deleted (unlinking a lock file races:
two processes could then hold locks on two inodes); the holder writes one JSON line (pid,
host, command, start time) that serves only the refusal message, and truncates it before it
unlocks. A second process is refused at once with :class:`OutDirBusy` (exit 2, one line).
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import socket
import sys
from pathlib import Path

from mhajax.errors import InputError

LOCK_NAME = ".lock"


class OutDirBusy(InputError):
    """Another process holds the results directory (an InputError: exit 2)."""


def read_holder(path) -> dict:
    """The holder's JSON from a lock file (``{}`` if empty, unreadable or half-written)."""
    try:
        text = Path(path).read_text()
        return json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}


def describe_holder(h: dict) -> str:
    """``pid 1234 on node7 (verify weak-convexity --heads 4, started <UTC start, ISO 8601>)``,
    or a generic phrase when the holder has not written its details yet."""
    if not h.get("pid"):
        return "another process (it has not written its details yet)"
    cmd = [str(c) for c in h.get("command") or []]
    if cmd[:1] and cmd[0].endswith(("python", "python3")):
        cmd = cmd[1:]
    if cmd[:1] == ["-m"]:
        cmd = cmd[1:]
    shown = " ".join(cmd)
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    return f"pid {h['pid']} on {h.get('host', '?')} ({shown or '?'}, started {h.get('started', '?')})"


class OutLock:
    """``with OutLock(out): ...``: hold ``out/.lock`` exclusively, or raise :class:`OutDirBusy`
    naming the holder. ``command`` (default ``sys.argv``) is what the message shows of this run;
    ``flag`` names the option. The directory must exist."""

    def __init__(self, out_dir, *, command=None, flag: str = "--out"):
        self.dir = Path(out_dir)
        self.path = self.dir / LOCK_NAME
        self.command = list(command) if command is not None else list(sys.argv)
        self.flag = flag
        self._fd = None

    def acquire(self) -> "OutLock":
        """Take the lock at once or raise :class:`OutDirBusy`. Returns self."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutDirBusy(f"{self.flag} {str(self.dir)!r} is in use by "
                             f"{describe_holder(read_holder(self.path))}; wait for it to finish, "
                             f"or choose another {self.flag}") from None
        started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(dict(pid=os.getpid(), host=socket.gethostname(),
                                       command=self.command, started=started)) + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Truncate the details (before unlocking: never erase a successor's) and unlock."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False


__all__ = ["OutLock", "OutDirBusy", "read_holder", "describe_holder", "LOCK_NAME"]
