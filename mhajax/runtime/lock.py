"""One run at a time per results directory (``--out``): an exclusive lock on ``OUT/.lock``.

:func:`mhajax.cli.common.run_and_save` takes it right after creating ``OUT`` and before the
progress store (so ``--fresh`` can never wipe a running run's progress); ``verify all``
takes it on its parent directory. Design:

* **Mechanism**: ``fcntl.flock(fd, LOCK_EX | LOCK_NB)`` on ``OUT/.lock``, opened with
  ``O_CLOEXEC``. The kernel drops a flock when the last descriptor of its open file
  description is closed — in particular when the holder dies, however it dies (SIGKILL,
  OOM killer, segfault): a killed run never leaves the directory stuck, and no stale-lock
  heuristics (pid files, timeouts) are needed to decide whether the lock is held.
* **The file is never deleted.** Unlinking a lock file races: a waiter that opened the old
  inode would lock a file no one else sees, while a newcomer creates and locks a new one
  — two holders. The file stays; only its content changes.
* **Content**: the holder writes one JSON line after it has the lock — ``pid``, ``host``,
  ``command`` (argv), ``started`` (UTC, ISO 8601) — used only to write the refusal message
  (never to decide anything). On release it truncates the file *before* unlocking.
* **Waiting or refusing**: ``wait=0`` (default) refuses at once with :class:`OutDirBusy`
  (an ``InputError``: the CLI exits 2 with one line naming the holder); ``wait=seconds``
  polls until then; ``wait=None`` waits forever.
* **Re-entrant within a process**: flock locks belong to open file descriptions, so a
  second ``open()`` + ``flock`` of the same file by the same process would conflict with
  itself (``verify all`` runs its checks in-process). Held locks are registered per
  process by the file's ``(st_dev, st_ino)``; a nested acquire increments a count and the
  outermost release unlocks. (On NFS, where Linux emulates flock with POSIX locks, closing
  *any* descriptor of the file releases the process's lock — the registry also ensures the
  holder never opens the file a second time.)
* **fork**: a child created by ``fork()`` without ``exec`` shares the descriptor, so the lock
  stays held until the child exits too (``O_CLOEXEC`` covers ``exec``'d children).

NFS caveats: Linux (>= 2.6.12) implements ``flock`` on NFS as a whole-file POSIX lock through
the NFS lock manager (NLM for v3, built into v4), so it works across clients when locking
works at all; with the ``nolock``/``local_lock=flock`` mount options it is local to each
client, and two hosts could both hold it. A client that dies holding the lock keeps it until
the server notices (NFSv4 lease, ~90 s; NLM on the client's reboot). The refusal message
shows the holder's host, so a user can tell. :func:`filesystem_type` reports NFS so a caller
can warn.
"""
from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from mhajax.errors import InputError

LOCK_NAME = ".lock"


class OutDirBusy(InputError):
    """Another process holds the results directory (an InputError: exit 2)."""

    def __init__(self, message, holder=None):
        super().__init__(message)
        self.holder = holder or {}


_HELD: dict = {}            # (st_dev, st_ino) -> [fd, count, path]
_HELD_GUARD = threading.Lock()


def holder_info(command=None) -> dict:
    """What the holder writes into the lock file."""
    return dict(pid=os.getpid(), host=socket.gethostname(),
                command=list(command) if command is not None else list(sys.argv),
                started=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))


def read_holder(path) -> dict:
    """The holder's JSON from a lock file (``{}`` if empty, unreadable or half-written)."""
    try:
        with open(path) as fh:          # another process's file: reading it is harmless
            text = fh.read()
        return json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}


def _pid_alive(pid) -> Optional[bool]:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return None
    return True


def describe_holder(h: dict, now: Optional[_dt.datetime] = None) -> str:
    """``pid 1234 on node7 (verify weak-convexity --heads 4, started 2024-05-01T10:00:00+00:00,
    3 min ago)``; a generic phrase when the holder has not written yet."""
    if not h.get("pid"):
        return "another process (it has not written its details yet)"
    cmd = h.get("command") or []
    if len(cmd) >= 2 and cmd[0].endswith(("python", "python3")) or cmd[:1] == ["-m"]:
        cmd = cmd[1:]
    shown = " ".join(str(c) for c in cmd)
    if shown.startswith("-m "):
        shown = shown[3:]
    if len(shown) > 120:
        shown = shown[:117] + "..."
    age = ""
    try:
        t0 = _dt.datetime.fromisoformat(h["started"])
        secs = ((now or _dt.datetime.now(_dt.timezone.utc)) - t0).total_seconds()
        age = f", {int(secs // 60)} min ago" if secs >= 60 else f", {int(secs)} s ago"
    except (KeyError, ValueError, TypeError):
        pass
    dead = ""
    if h.get("host") == socket.gethostname() and _pid_alive(h["pid"]) is False:
        dead = "; that pid has exited, so a child process it forked still holds the lock"
    return (f"pid {h['pid']} on {h.get('host', '?')} ({shown or '?'}, started {h.get('started', '?')}"
            f"{age}){dead}")


def filesystem_type(path) -> str:
    """``"nfs"`` when ``path`` is on NFS (by ``/proc/self/mounts``), else the fs name or ``"?"``."""
    try:
        p = os.path.realpath(path)
        best, fstype = "", "?"
        with open("/proc/self/mounts") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3 and (p == parts[1] or p.startswith(parts[1].rstrip("/") + "/")) \
                        and len(parts[1]) > len(best):
                    best, fstype = parts[1], parts[2]
        return "nfs" if fstype.startswith("nfs") else fstype
    except OSError:
        return "?"


class OutLock:
    """Exclusive, re-entrant (per process) lock of a results directory.

    ``with OutLock(out, wait=0): ...`` — ``wait``: seconds to wait for a holder to finish
    (0: refuse at once; ``None``: forever). ``flag`` names the option in messages.
    The directory must exist (:func:`mhajax.io.prepare_out_dir` creates it)."""

    def __init__(self, out_dir, *, wait: Optional[float] = 0.0, poll: float = 0.2, command=None,
                 flag: str = "--out"):
        self.dir = Path(out_dir)
        self.path = self.dir / LOCK_NAME
        self.wait, self.poll, self.command, self.flag = wait, poll, command, flag
        self._key = None

    # -- acquire / release -------------------------------------------------------------
    def acquire(self) -> "OutLock":
        """Take the lock, waiting up to ``wait`` seconds; :class:`OutDirBusy` (one line naming
        the holder) when it stays held. Returns self."""
        try:                                     # nested acquire in this process: stat, never open
            st0 = os.stat(self.path)             # (on NFS, closing a second descriptor of the file
            key0 = (st0.st_dev, st0.st_ino)      # would drop the process's lock)
        except FileNotFoundError:
            key0 = None
        with _HELD_GUARD:
            if key0 is not None and key0 in _HELD:
                _HELD[key0][1] += 1
                self._key = key0
                return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        deadline = None if self.wait is None else time.monotonic() + max(0.0, self.wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
            if deadline is not None and time.monotonic() >= deadline:
                os.close(fd)
                h = read_holder(self.path)
                waited = f" (waited {self.wait:g} s)" if self.wait else ""
                raise OutDirBusy(f"{self.flag} {str(self.dir)!r} is in use by {describe_holder(h)}{waited}; "
                                 f"wait for it to finish, or choose another {self.flag}", h)
            time.sleep(self.poll if deadline is None else max(0.0, min(self.poll, deadline - time.monotonic())))
        # The lock is ours. The inode may have been replaced since open() only if someone
        # deleted the file, which this module never does; check anyway.
        try:
            if os.stat(self.path).st_ino != st.st_ino:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                return self.acquire()
        except FileNotFoundError:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            return self.acquire()
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder_info(self.command)) + "\n").encode(), 0)
        try:
            os.fsync(fd)
        except OSError:
            pass
        with _HELD_GUARD:
            _HELD[key] = [fd, 1, str(self.path)]
        self._key = key
        return self

    def release(self) -> None:
        """Give the lock back (the outermost release of this process truncates and unlocks)."""
        if self._key is None:
            return
        with _HELD_GUARD:
            entry = _HELD.get(self._key)
            if entry is None:
                self._key = None
                return
            entry[1] -= 1
            if entry[1] > 0:
                self._key = None
                return
            del _HELD[self._key]
        fd = entry[0]
        try:
            os.ftruncate(fd, 0)                  # before unlocking: never erase a successor's details
        except OSError:
            pass
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        self._key = None

    @property
    def held(self) -> bool:
        """Whether this object holds (a count of) the lock."""
        return self._key is not None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False


def lock_out_dir(out_dir, **kw) -> OutLock:
    """Acquire and return the lock of ``out_dir`` (release with ``.release()`` or ``with``)."""
    return OutLock(out_dir, **kw).acquire()


__all__ = ["OutLock", "OutDirBusy", "lock_out_dir", "read_holder", "describe_holder", "holder_info",
           "filesystem_type", "LOCK_NAME"]
