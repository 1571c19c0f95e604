"""Shared CLI plumbing: argument types, error handling, output, exit codes."""
from __future__ import annotations

import argparse
import os
import sys
import time

from mhajax.errors import InputError

EXIT_OK, EXIT_VIOLATED, EXIT_BAD_INPUT = 0, 1, 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises :class:`InputError` instead of exiting, so every
    bad input ends the same way (message + exit 2, no traceback)."""

    def error(self, message):
        raise InputError(f"{self.prog}: {message}")


def setup_jax(dtype: str = "float64"):
    """Enable float64 (the default for checks) before any array is created,
    and JAX's persistent compilation cache (see :func:`compile_cache_dir`)."""
    import jax
    if dtype not in ("float64", "float32"):
        raise InputError(f"--dtype must be float64 or float32, got {dtype!r}")
    jax.config.update("jax_enable_x64", dtype == "float64")
    single_threaded_blas()
    cache = compile_cache_dir()
    try:  # off means off, even if an earlier call in this process turned the cache on
        jax.config.update("jax_enable_compilation_cache", bool(cache))
    except (AttributeError, KeyError):  # an older jax without the switch
        pass
    if cache:
        try:
            os.makedirs(cache, exist_ok=True)
            jax.config.update("jax_compilation_cache_dir", cache)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        except (OSError, AttributeError):  # read-only home, or an older jax: run without it
            pass


def single_threaded_blas() -> bool:
    """Best effort: make NumPy's OpenBLAS single-threaded for this process.

    On CPU the eigensolvers of :mod:`mhajax.linalg` run NumPy's LAPACK on batches of small
    matrices; OpenBLAS threads buy nothing there and, on 2 cores shared with other work,
    cost a lot (measured here: 2048 ``eigvalsh`` of 96×96 took 45 s with the default
    threads and 0.9 s with one). ``OPENBLAS_NUM_THREADS`` is read only when NumPy loads,
    which has happened by now, so the library's own setter is called through ``ctypes``.
    Returns whether it was found; numbers are unchanged either way (only speed)."""
    import ctypes
    import re
    try:
        with open("/proc/self/maps") as fh:
            libs = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", fh.read())))
    except OSError:
        return False
    done = False
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                    "openblas_set_num_threads64_", "openblas_set_num_threads"):
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn(ctypes.c_int(1))
                done = True
                break
    return done


def compile_cache_dir():
    """Where compiled XLA programs are cached between runs: ``$MHAJAX_CACHE_DIR``,
    else ``~/.cache/mhajax/xla``; ``MHAJAX_CACHE_DIR=off`` disables the cache.
    Caching changes compile time only, never a computed number."""
    env = os.environ.get("MHAJAX_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else env
    return os.path.join(os.path.expanduser("~"), ".cache", "mhajax", "xla")


def run_main(fn, argv=None) -> int:
    """Call ``fn(argv)``; turn :class:`InputError` into a message and exit code 2."""
    try:
        return fn(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run_and_save(run, cfg, out_dir, *, command: str | None = None, fresh: bool = False,
                 show_progress: bool = False, label: str | None = None):
    """Prepare ``out_dir`` (refusing a file), run ``run(cfg)``, attach the
    provenance block (``meta``: config, seeds, versions, dtype, backend) and
    write ``out_dir/summary.json`` atomically. Returns ``(summary, path)``.

    With ``command`` (the subcommand's name) the run is resumable: ``run`` is called as
    ``run(cfg, store=ProgressStore(out_dir, {command, config}, fresh))`` and keeps each
    finished unit there (a different config on the same ``out_dir`` is refused;
    ``fresh`` discards saved progress).

    ``show_progress`` draws a ticking status line (elapsed time and the last finished
    unit, via ``run``'s ``progress`` callback) while the run lasts — only when stdout is
    a terminal (:func:`verify.progress.enabled`); pass ``not args.quiet``."""
    import inspect

    from mhajax.io import prepare_out_dir, run_metadata, write_json_atomic

    from .progress import Status, enabled
    out = prepare_out_dir(out_dir)
    kw = {}
    if command is not None:
        from mhajax.resume import ProgressStore
        kw["store"] = ProgressStore(out, dict(command=command, **cfg.to_dict()), fresh=fresh)
    show = enabled(not show_progress)
    with Status(label or f"verify {command or ''}".strip(), show=show) as status:
        if show and "progress" in inspect.signature(run).parameters:
            kw["progress"] = status
        summary = run(cfg, **kw)
    summary = dict(summary, meta=run_metadata(cfg.to_dict(), summary["seeds"]))
    return summary, write_json_atomic(out / "summary.json", summary)


def diverged_lines(diverged) -> list[str]:
    """One ``DIVERGED: ...`` line per record of a summary's ``diverged`` list, naming
    whichever of model, n, H and seed the record holds, and the step."""
    names = (("model", "model="), ("n", "n="), ("heads", "H="), ("seed", "seed="))
    return ["DIVERGED: " + " ".join(f"{lab}{d[k]}" for k, lab in names if k in d)
            + f" became non-finite at step {d['step']}" for d in diverged]


def fmt(x, width=9, prec=3) -> str:
    """Format a number for a table; ``None`` prints as 'undef'."""
    if x is None:
        return "undef".rjust(width)
    if isinstance(x, bool):
        return ("yes" if x else "NO").rjust(width)
    if isinstance(x, int):
        return str(x).rjust(width)
    if x != 0 and (abs(x) >= 1e4 or abs(x) < 1e-2):
        return f"{x:.{prec - 1}e}".rjust(width)
    return f"{x:.{prec}g}".rjust(width)


def table(headers, rows) -> str:
    widths = [max([len(str(h))] + [len(str(r[i])) for r in rows]) for i, h in enumerate(headers)]
    line = "  ".join(str(h).rjust(w) for h, w in zip(headers, widths))
    out = [line, "-" * len(line)]
    out += ["  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


class Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *a):
        self.seconds = time.perf_counter() - self.t0
