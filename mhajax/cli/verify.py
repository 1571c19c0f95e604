"""``python -m verify [CHECK] [FLAGS]``: every registered check through one ``main``.

``python -m verify CHECK`` parses the flags generated from the check's config, runs the
experiment, saves ``summary.json``, prints the table and one verdict line, and exits with
the verdict's code (:mod:`mhajax.verdict`). ``python -m verify`` alone (or ``all``) runs
every check of the registry and exits with the worst verdict.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mhajax.cli.common import ArgumentParser, run_and_save, run_main
from mhajax.cli.flags import build_parser, config_from_args, default_out, option_flags, unvalidated_config
from mhajax.errors import InputError
from mhajax.experiments import CHECKS, get_check
from mhajax._version import __version__
from mhajax.experiments.base import door_premises
from mhajax.experiments.configs import options, updated
from mhajax.experiments.registry import QUICK
from mhajax.runtime.format import table
from mhajax.runtime.io import prepare_out_dir, run_metadata, write_json_atomic
from mhajax.runtime.lock import OutLock
from mhajax.runtime import memory
from mhajax.runtime.jaxsetup import release_compiled, setup_jax
from mhajax.runtime.records import encode
from mhajax.runtime.resume import ProgressStore
from mhajax.verdict import EXIT_BAD_INPUT, Verdict, all_exit_code, from_exit_code, worst

ALL = "all"


def memory_guard(entry, cfg, *, dtype: str = "float64", force: bool = False, lenient: bool = False):
    """The check's dominant arrays (``entry.memory(cfg)``: ``[(label, shape), ...]``, b bytes
    per entry of ``dtype``) against the memory available (:func:`mhajax.runtime.memory.guard`):
    :class:`~mhajax.runtime.memory.MemoryGuardError` (exit 2, one line naming the flags to
    blame, each against its default in ``entry.config()``) when they do not fit, unless
    ``force``. Returns the estimate (``None`` for a check without one). ``lenient``: ``cfg``
    is not validated yet, and a value the estimator cannot read is left to validation (``None``)."""
    if entry.memory is None or memory.forced(force):
        return None
    flags = option_flags(entry)
    values = {path: v for path, _, v in options(cfg)}
    sizes = {flag: values[path] for flag, path, _, _ in flags}
    paths = {flag: path for flag, path, _, _ in flags}
    itemsize = np.dtype(dtype).itemsize

    def estimate(s):
        changed = updated(cfg, {paths[f]: v for f, v in s.items() if v is not sizes[f]})
        return memory.Estimate(f"verify {entry.name}", tuple(entry.memory(changed)), itemsize)
    try:
        estimate(sizes)
    except Exception:   # noqa: BLE001 — lenient: a malformed value is validation's to report
        if not lenient:
            raise
        return None
    return memory.guard(estimate, sizes, {flag: default for flag, _, _, default in flags})


def check_main(name: str, argv=None) -> int:
    """Run the registered check ``name`` with command-line ``argv``; returns its exit code.

    Order: parse, validate the config (fitted to a data set of fixed size, one line per change),
    check its memory estimate (:func:`memory_guard`), check a user's model and loss against
    autodiff (:func:`mhajax.experiments.base.door_premises`), then create and lock ``--out`` and
    run; a refusal at any step writes nothing."""
    entry = get_check(name)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(entry).parse_args(argv)
    setup_jax(args.dtype)
    # absurd sizes are refused before validation too: some checks' validation probes the model
    # (e.g. a gradient at T tokens) or lists the seeds, which an absurd size would make explode
    memory_guard(entry, unvalidated_config(entry, args), dtype=args.dtype, force=args.force, lenient=True)
    notes: list = []
    cfg = config_from_args(entry, args, notes)
    memory_guard(entry, cfg, dtype=args.dtype, force=args.force)
    inputs = dict(cfg.inputs(args.dtype), premises=door_premises(cfg))
    for line in notes:
        print(line, flush=True)
    out = args.out or default_out(entry, args.preset)
    summary, path = run_and_save(entry.run, cfg, out, command=entry.name, fresh=args.fresh,
                                 show_progress=not args.quiet, argv=["python", "-m", "verify", entry.name] + argv,
                                 inputs=inputs, notes=notes)
    if not args.quiet:
        print(entry.report(summary))
    fields = encode(summary)
    verdict = Verdict(fields["verdict"])
    reason = "" if verdict is Verdict.PASSED else f" — {fields['verdict_reason']}"
    print(f"{entry.name}: {verdict.label}{reason} ({entry.headline(summary)}; "
          f"{fields['wall_time_s']:.1f} s) -> {path}")
    return verdict.exit_code


def _sha(path: Path):
    """SHA-256 of a file's bytes, ``None`` if it is missing."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _verdict_of(path: Path):
    """The ``verdict`` recorded in a check's summary.json, or ``None``."""
    try:
        return json.loads(path.read_text()).get("verdict")
    except (OSError, ValueError):
        return None


def all_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m verify all",
                       description="every registered check on its defaults (or a preset), one verdict table")
    p.add_argument("--out", default=None, help="parent output directory (default results, or "
                                               "results-P with --preset P)")
    p.add_argument("--only", default=None, help="comma-separated subset of: " + ", ".join(CHECKS))
    p.add_argument("--preset", default=QUICK, help=f"preset passed to every check (default {QUICK})")
    p.add_argument("--verbose", action="store_true", help="print every check's full table")
    p.add_argument("--fresh", action="store_true",
                   help="discard saved progress (of this run and of every check) and start over")
    p.add_argument("--force", action="store_true",
                   help="passed to every check: run even when a check's memory estimate exceeds what "
                        "the device has")
    p.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4),
                   help="checks run at once, each in a process of its own (default: the CPU count, "
                        "at most 4; 1: one after another in this process)")
    p.add_argument("--strict", action="store_true",
                   help="exit non-zero on any verdict other than passed (by default not reached and "
                        "informational checks do not count)")
    return p


def all_main(argv=None) -> int:
    """Run every check (``in_all``) in registry order with ``--out OUT/<check>``; write
    ``OUT/summary.json`` (each check's verdict, exit code, wall time) and exit with
    :func:`mhajax.verdict.all_exit_code` (``--strict``: every verdict but passed counts). A check that finished earlier with a
    verdict (its summary.json unchanged byte for byte) is kept, not rerun; ``--fresh`` reruns."""
    args = all_parser().parse_args(argv)
    if args.jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {args.jobs}")
    setup_jax("float64")
    names = [c.name for c in CHECKS.values() if c.in_all] if args.only is None else \
        [s.strip() for s in args.only.split(",")]
    for nm in names:
        if nm not in CHECKS:
            raise InputError(f"--only: unknown check {nm!r}; choose from {', '.join(CHECKS)}")
        if args.preset != QUICK and args.preset not in CHECKS[nm].presets:
            raise InputError(f"--preset {args.preset!r} is not a preset of {nm}; choose from "
                             f"{', '.join(CHECKS[nm].presets)}")
    out = prepare_out_dir(args.out or ("results" if args.preset == QUICK else f"results-{args.preset}"))
    lock = OutLock(out, command=["python", "-m", "verify", ALL] + list(sys.argv[1:] if argv is None else argv))
    with lock:   # before the progress store: --fresh must not wipe a running `verify all`
        return _all_locked(args, names, out)


def _check_argv(nm: str, args, out: Path) -> list:
    """The flags ``verify all`` passes to check ``nm``."""
    argv = ["--out", str(out / nm), "--preset", args.preset] + ([] if args.verbose else ["--quiet"])
    return argv + (["--fresh"] if args.fresh else []) + (["--force"] if args.force else [])


def _run_in_process(nm: str, argv: list):
    """One check in this process: ``(exit code, seconds, its output)`` (printed as it comes)."""
    t = time.perf_counter()
    code = run_main(lambda a: check_main(nm, a), argv)
    release_compiled()   # one process runs every check: free their programs' mappings
    return code, time.perf_counter() - t, None


def _run_as_process(nm: str, argv: list):
    """One check as a process of its own: ``(exit code, seconds, its stdout and stderr)``."""
    t = time.perf_counter()
    code = "import sys; from mhajax.cli.verify import main; sys.exit(main(sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", code, nm, *argv], capture_output=True, text=True)
    return r.returncode, time.perf_counter() - t, r.stdout + r.stderr


def _all_locked(args, names, out) -> int:
    """The body of :func:`all_main` once ``out`` is locked: the checks not kept from an
    earlier run go to ``--jobs`` processes at a time (1: in this process, one after another)."""
    store = ProgressStore(out, dict(command=ALL, only=names, preset=args.preset, version=__version__,
                                    dtype="float64"), fresh=args.fresh)
    rows, results, todo = {}, {}, []
    for nm in names:
        unit = f"check={nm}"
        sha = _sha(out / nm / "summary.json")
        if sha is not None and store.has(unit) and store.load(unit).get("summary_sha256") == sha:
            r = results[nm] = dict(store.load(unit), resumed=True)
            print(f"== {nm} (finished earlier: {r['verdict']}, kept)", flush=True)
            rows[nm] = [nm, f"{r['seconds']:.1f}", r["exit_code"], r["verdict"] + " (kept)"]
        else:
            todo.append(nm)
    jobs = max(1, min(args.jobs, len(todo)))
    if jobs > 1:
        print(f"== {', '.join(todo)} ({jobs} at a time)", flush=True)

    def one(nm):
        if jobs == 1:
            print(f"== {nm}", flush=True)
            return nm, _run_in_process(nm, _check_argv(nm, args, out))
        return nm, _run_as_process(nm, _check_argv(nm, args, out))

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for nm, (code, dt, text) in (pool.map(one, todo) if jobs > 1 else map(one, todo)):
            if text is not None:
                print(text.rstrip(), flush=True)
            summary = out / nm / "summary.json"
            v = from_exit_code(code)
            verdict = v.value if v is not None else f"error (exit {code})"
            if v is not None and _verdict_of(summary) != v.value:
                verdict = f"error (exit {code}, summary disagrees)"
                v = None
            results[nm] = dict(exit_code=code, seconds=dt, verdict=verdict, summary=str(summary))
            if v is not None:
                store.save(f"check={nm}", dict(results[nm], summary_sha256=_sha(summary)))
            rows[nm] = [nm, f"{dt:.1f}", code, verdict]
    rows = [rows[nm] for nm in names]
    results = {nm: results[nm] for nm in names}
    judged = [Verdict(r["verdict"]) for r in results.values() if from_exit_code(r["exit_code"]) is not None]
    overall = worst(judged)
    bad_input = any(r["exit_code"] == EXIT_BAD_INPUT for r in results.values())
    failed_other = any(from_exit_code(r["exit_code"]) is None and r["exit_code"] != EXIT_BAD_INPUT
                       for r in results.values())
    code = all_exit_code(judged, strict=args.strict, bad_input=bad_input, errors=failed_other)
    summary = dict(verdict=overall.value, exit_code=code, strict=args.strict,
                   passed=overall is Verdict.PASSED and not (bad_input or failed_other),
                   preset=args.preset, checks=results,
                   meta=run_metadata({"only": names, "preset": args.preset, "strict": args.strict}, [0]))
    path = write_json_atomic(out / "summary.json", summary)
    print(table(["check", "seconds", "exit", "verdict"], rows))
    rule = "every verdict other than passed counts" if args.strict else \
        "not reached and informational do not count"
    print(f"all: exit {code} (worst verdict {overall.label}; {rule}) -> {path}")
    return code


def usage() -> str:
    width = max(len(n) for n in list(CHECKS) + [ALL])
    lines = [f"  {name:<{width}}  {entry.claim}" for name, entry in CHECKS.items()]
    lines.append(f"  {ALL:<{width}}  {sum(c.in_all for c in CHECKS.values())} checks of the paper's claims on their defaults (also: no check named)")
    return ("usage: mhajax verify [CHECK] [FLAGS]   (from a checkout also: python -m verify ...)\n\nchecks:\n"
            + "\n".join(lines) + "\n\nmhajax verify CHECK --help lists a check's flags; "
            "--model and --loss take your own as package.module:NAME")


def main(argv=None) -> int:
    """Dispatch ``mhajax verify [CHECK|all] [FLAGS]`` (no check: ``all``)."""
    return run_main(_dispatch, list(sys.argv[1:] if argv is None else argv))


def _dispatch(argv) -> int:
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = [ALL] + argv
    if argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name == ALL:
        return all_main(rest)
    if name not in CHECKS:
        raise InputError(f"unknown check {name!r}; choose from {', '.join(list(CHECKS) + [ALL])}")
    return check_main(name, rest)


__all__ = ["main", "check_main", "all_main", "memory_guard", "ALL"]
