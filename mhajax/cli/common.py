"""Command-line plumbing shared by every command: a parser whose errors are bad input,
one error-to-exit-code rule, and the run-then-save step with provenance."""
from __future__ import annotations

import argparse
import inspect
import os
import sys

from mhajax.errors import InputError
from mhajax.runtime.io import prepare_out_dir, run_metadata, write_json_atomic
from mhajax.runtime.lock import OutLock
from mhajax.runtime.progress import Status, enabled
from mhajax.runtime.records import encode
from mhajax.runtime.resume import ProgressStore
from mhajax.verdict import EXIT_BAD_INPUT, EXIT_INTERRUPTED


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises :class:`InputError` instead of exiting, so every bad input ends
    the same way (one line, exit 2, no traceback)."""

    def error(self, message):
        """Raise :class:`InputError` with the parser's message (exit 2 through :func:`run_main`)."""
        raise InputError(f"{self.prog}: {message}")


#: the exit code of a command whose output pipe was closed (128 + SIGPIPE, as a shell reports it)
EXIT_CLOSED_PIPE = 141


def run_main(fn, argv=None) -> int:
    """Call ``fn(argv)``; :class:`InputError` -> its message and exit 2, Ctrl-C -> exit 130, a
    closed output pipe (``mhajax verify --help | head``) -> exit 141 without a word."""
    try:
        return fn(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader is gone: point stdout at /dev/null so the interpreter's last flush is quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_PIPE


def run_and_save(run, cfg, out_dir, *, command: str | None = None, fresh: bool = False,
                 show_progress: bool = False, label: str | None = None, argv=None, inputs: dict | None = None,
                 notes=()):
    """Prepare ``out_dir`` (refusing a file), lock it (:class:`mhajax.runtime.lock.OutLock`:
    a second process on the same ``out_dir`` is refused with one line naming the holder;
    ``argv`` is the command recorded for that message), run ``run(cfg)``, attach the
    provenance block (``meta``: config, seeds, versions, dtype, backend) and write
    ``out_dir/summary.json`` atomically (a typed summary encoded by
    :func:`mhajax.runtime.records.encode`). Returns ``(summary, path)``: ``run``'s result itself.

    With ``command`` the run is resumable: ``run`` is called with
    ``store=ProgressStore(out_dir, {command, config, inputs}, fresh)`` and keeps each finished unit
    there (progress saved for other inputs is discarded, with one line; ``fresh`` discards it
    silently). ``inputs`` (default ``cfg.inputs()``) and ``notes`` (lines on how the config was
    fitted to the data) are recorded in the provenance block. ``show_progress`` draws a status line (elapsed time, last finished unit,
    through ``run``'s ``progress`` callback) when stdout is a terminal."""
    out = prepare_out_dir(out_dir)
    # the lock comes before the progress store: --fresh must not wipe a running run's progress
    with OutLock(out, command=argv if argv is not None else sys.argv):
        kw = {}
        if inputs is None:   # a config without Config.inputs (a bare dataclass) depends on itself alone
            inputs = cfg.inputs() if hasattr(cfg, "inputs") else {}
        if command is not None:
            kw["store"] = ProgressStore(out, dict(command=command, config=cfg.to_dict(), inputs=inputs), fresh=fresh)
        show = enabled(not show_progress)
        with Status(label or f"verify {command or ''}".strip(), show=show) as status:
            if show and "progress" in inspect.signature(run).parameters:
                kw["progress"] = status
            summary = run(cfg, **kw)
        data = encode(summary)
        data = dict(data, meta=dict(run_metadata(cfg.to_dict(), data["seeds"]), inputs=inputs, fitted=list(notes)))
        return summary, write_json_atomic(out / "summary.json", data)


__all__ = ["ArgumentParser", "EXIT_CLOSED_PIPE", "run_main", "run_and_save"]
