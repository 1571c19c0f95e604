"""``python -m verify all``: every check on its defaults, one verdict table.

Runs each subcommand in turn with ``--out OUT/<name>`` (plus ``--quiet``
unless ``--verbose``, and ``--fresh`` with ``--fresh`` to every check that takes it),
then writes ``OUT/summary.json`` with each check's exit code, wall time and verdict;
``passed`` is true when every check passed.

Resumable at two levels: a check that finished with a verdict (exit 0 or 1) is kept
in ``OUT/.progress`` (unit ``check=NAME``) and not rerun by the same ``verify all``
(its ``OUT/NAME/summary.json`` must still be there, unchanged byte for byte); a check interrupted midway
resumes from its own ``OUT/NAME/.progress``. ``--fresh`` discards both.
"""
from __future__ import annotations

import importlib
import sys
import time

from .cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_VIOLATED, ArgumentParser, run_main, setup_jax, table

CHECKS = ["weak-convexity", "convergence", "generalization", "heads", "ntk-margin", "one-step",
          "quasi-convexity"]
DEFAULT_OUT = "results"


def build_parser():
    p = ArgumentParser(prog="python -m verify all", description=__doc__.splitlines()[0])
    p.add_argument("--out", default=DEFAULT_OUT, help=f"parent output directory (default {DEFAULT_OUT})")
    p.add_argument("--only", default=None, help="comma-separated subset of: " + ", ".join(CHECKS))
    p.add_argument("--verbose", action="store_true", help="print every check's full table")
    p.add_argument("--fresh", action="store_true",
                   help="discard saved progress (of this run and of every check) and start over")
    return p


def _summary_passed(path):
    """The ``passed`` field of a check's summary.json (``None`` if absent or unreadable)."""
    import json
    try:
        with open(path) as fh:
            return json.load(fh).get("passed")
    except (OSError, ValueError):
        return None


def _sha(path):
    """SHA-256 of a file's bytes, ``None`` if it is missing (a kept verdict must
    still match the check's summary.json byte for byte)."""
    import hashlib
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def takes_flag(mod, flag: str) -> bool:
    """Whether subcommand module ``mod``'s parser accepts ``flag``."""
    return flag in mod.build_parser()._option_string_actions


def main(argv=None) -> int:
    from .__main__ import SUBCOMMANDS
    args = build_parser().parse_args(argv)
    setup_jax("float64")
    from mhajax.errors import InputError
    from mhajax.io import prepare_out_dir, run_metadata, write_json_atomic
    from mhajax.resume import ProgressStore
    names = CHECKS if args.only is None else [s.strip() for s in args.only.split(",")]
    for nm in names:
        if nm not in CHECKS:
            raise InputError(f"--only: unknown check {nm!r}; choose from {', '.join(CHECKS)}")
    out = prepare_out_dir(args.out)
    store = ProgressStore(out, dict(command="all", only=names), fresh=args.fresh)
    rows, results = [], {}
    for nm in names:
        unit = f"check={nm}"
        sha = _sha(out / nm / "summary.json")
        if sha is not None and store.has(unit) and store.load(unit).get("summary_sha256") == sha:
            results[nm] = dict(store.load(unit), resumed=True)
            r = results[nm]
            print(f"== {nm} (finished earlier: {r['verdict']}, kept)", flush=True)
            rows.append([nm, f"{r['seconds']:.1f}", r["exit_code"], r["verdict"] + " (kept)"])
            continue
        try:
            mod = importlib.import_module(SUBCOMMANDS[nm])
        except ModuleNotFoundError as e:
            if e.name != SUBCOMMANDS[nm]:
                raise
            results[nm] = dict(status="not available", exit_code=None)
            rows.append([nm, "n/a", "-", "not available"])
            continue
        print(f"== {nm}", flush=True)
        t = time.perf_counter()
        argv_nm = ["--out", str(out / nm)] + ([] if args.verbose else ["--quiet"])
        if args.fresh and takes_flag(mod, "--fresh"):
            argv_nm.append("--fresh")
        code = run_main(mod.main, argv_nm)
        dt = time.perf_counter() - t
        verdict = {EXIT_OK: "passed", EXIT_VIOLATED: "FAILED"}.get(code, f"error (exit {code})")
        if code == EXIT_OK and _summary_passed(out / nm / "summary.json") is None:
            verdict = "informational"  # exit 0, but the check judged nothing (see its summary)
        results[nm] = dict(exit_code=code, seconds=dt, verdict=verdict,
                           summary=str(out / nm / "summary.json"))
        if code in (EXIT_OK, EXIT_VIOLATED):
            store.save(unit, dict(results[nm], summary_sha256=_sha(out / nm / "summary.json")))
        rows.append([nm, f"{dt:.1f}", code, verdict])
    ran = [r for r in results.values() if r.get("exit_code") is not None]
    passed = bool(ran) and all(r["exit_code"] == EXIT_OK for r in ran)
    summary = dict(passed=passed, checks=results, meta=run_metadata({"only": names}, [0]))
    path = write_json_atomic(out / "summary.json", summary)
    print(table(["check", "seconds", "exit", "verdict"], rows))
    print(f"all: {'PASSED' if passed else 'FAILED'} -> {path}")
    if any(r.get("exit_code") == EXIT_BAD_INPUT for r in ran):
        return EXIT_BAD_INPUT
    return EXIT_OK if passed else EXIT_VIOLATED


if __name__ == "__main__":
    sys.exit(run_main(main))
