"""Command-line plumbing shared by every command: a parser whose errors are bad input,
one error-to-exit-code rule, and the run-then-save step with provenance."""
from __future__ import annotations

import argparse
import inspect
import sys

from mhajax.errors import InputError
from mhajax.runtime.io import prepare_out_dir, run_metadata, write_json_atomic
from mhajax.runtime.lock import OutLock
from mhajax.runtime.progress import Status, enabled
from mhajax.runtime.resume import ProgressStore
from mhajax.verdict import EXIT_BAD_INPUT, EXIT_INTERRUPTED


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises :class:`InputError` instead of exiting, so every bad input ends
    the same way (one line, exit 2, no traceback)."""

    def error(self, message):
        """Raise :class:`InputError` with the parser's message (exit 2 through :func:`run_main`)."""
        raise InputError(f"{self.prog}: {message}")


def run_main(fn, argv=None) -> int:
    """Call ``fn(argv)``; :class:`InputError` -> its message and exit 2, Ctrl-C -> exit 130."""
    try:
        return fn(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run_and_save(run, cfg, out_dir, *, command: str | None = None, fresh: bool = False,
                 show_progress: bool = False, label: str | None = None, argv=None):
    """Prepare ``out_dir`` (refusing a file), lock it (:class:`mhajax.runtime.lock.OutLock`:
    a second process on the same ``out_dir`` is refused with one line naming the holder;
    ``argv`` is the command recorded for that message), run ``run(cfg)``, attach the
    provenance block (``meta``: config, seeds, versions, dtype, backend) and write
    ``out_dir/summary.json`` atomically. Returns ``(summary, path)``.

    With ``command`` the run is resumable: ``run`` is called with
    ``store=ProgressStore(out_dir, {command, config}, fresh)`` and keeps each finished unit
    there (a different config on the same ``out_dir`` is refused; ``fresh`` discards saved
    progress). ``show_progress`` draws a status line (elapsed time, last finished unit,
    through ``run``'s ``progress`` callback) when stdout is a terminal."""
    out = prepare_out_dir(out_dir)
    # the lock comes before the progress store: --fresh must not wipe a running run's progress
    with OutLock(out, command=argv if argv is not None else sys.argv):
        kw = {}
        if command is not None:
            kw["store"] = ProgressStore(out, dict(command=command, **cfg.to_dict()), fresh=fresh)
        show = enabled(not show_progress)
        with Status(label or f"verify {command or ''}".strip(), show=show) as status:
            if show and "progress" in inspect.signature(run).parameters:
                kw["progress"] = status
            summary = run(cfg, **kw)
        summary = dict(summary, meta=run_metadata(cfg.to_dict(), summary["seeds"]))
        return summary, write_json_atomic(out / "summary.json", summary)


__all__ = ["ArgumentParser", "run_main", "run_and_save"]
