"""``python -m figures [--preset P] [--only NAME] [--from DIR] [--quiet] [--out DIR] [--no-report]``."""
from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt

from mhajax.cli.common import ArgumentParser, run_main
from mhajax.errors import InputError
from mhajax.experiments.registry import QUICK, preset
from mhajax.figures import FIGURES, style
from mhajax.figures.data import CHECKS, load
from mhajax.figures.report import write_report
from mhajax.runtime.progress import Bar, enabled

#: where figures and REPORT.md go by default: the current directory's ``figures/`` and
#: ``REPORT.md`` (the repository root when run from a checkout).
ROOT = Path.cwd()


def build_parser():
    """The parser of ``python -m figures``."""
    p = ArgumentParser(prog="python -m figures",
                                description="Paper-style figures and REPORT.md from the results files.")
    p.add_argument("--only", default=None, help="comma-separated figure names or numbers "
                   f"(e.g. fig2_weak_convexity or 2); default all: {', '.join(FIGURES)}")
    p.add_argument("--preset", default=QUICK,
                   help=f"preset of the checks run for missing results (default {QUICK}; 'paper': the "
                        "paper-scale sizes, results in results-paper/)")
    p.add_argument("--from", dest="results", default=None,
                   help="results directory holding <check>/summary.json (default results, or "
                        "results-P with --preset P)")
    p.add_argument("--out", default=str(ROOT / "figures"), help="where the PNG/PDF go (default figures/)")
    p.add_argument("--report", default=str(ROOT / "REPORT.md"), help="report path (default REPORT.md)")
    p.add_argument("--no-report", action="store_true", help="do not write the report")
    p.add_argument("--no-run", action="store_true", help="never run a missing check; skip its figures")
    p.add_argument("--quiet", action="store_true", help="no progress display, only errors")
    return p


def select(only):
    """Figure names from ``--only`` (names, prefixes or numbers); all when empty."""
    if not only:
        return list(FIGURES)
    out = []
    for tok in (t.strip() for t in only.split(",") if t.strip()):
        hit = [f for f in FIGURES if f == tok or f.startswith(tok) or f.split("_")[0] == f"fig{tok}"]
        if not hit:
            raise InputError(f"--only: unknown figure {tok!r}; choose from {', '.join(FIGURES)}")
        out += [h for h in hit if h not in out]
    return out


def preset_dir(results_dir, name: str) -> Path:
    """``results-<name>`` beside ``results_dir`` (``results`` or ``results-<other>``)."""
    return Path(results_dir).with_name(f"results-{name}")


def build(name, results_dir, outdir, *, run_missing=True, show=False, cache=None, preset=QUICK):
    """Build one figure: load its sources (running missing checks), plot, save.
    Returns ``(paths, fig)``; ``paths`` is None when a source is unavailable."""
    mod = importlib.import_module(f"mhajax.figures.{name}")
    cache = {} if cache is None else cache
    own = getattr(mod, "PRESET", None)
    if own is not None and own != preset:      # the figure of one preset: its own results directory
        results_dir, preset = preset_dir(results_dir, own), own
    for src in mod.SOURCES:
        if (results_dir, src) not in cache:
            cache[(results_dir, src)] = load(results_dir, src, run_missing=run_missing, show=show, preset=preset)
    results = {s: cache[(results_dir, s)] for s in mod.SOURCES}
    if all(v is None for v in results.values()):
        return None, None
    fig = mod.plot(results)
    paths = style.save(fig, outdir, mod.NAME)
    plt.close(fig)
    return paths, fig


def main(argv=None) -> int:
    """Build the chosen figures (running missing checks) and REPORT.md; 1 if one could not be
    drawn (its results not plottable, or its check did not produce them). With ``--no-run`` and
    no ``--only``, a figure whose check has no results is listed as not run and does not count;
    one asked for by ``--only`` does."""
    args = build_parser().parse_args(argv)
    names = select(args.only)
    for check in CHECKS:
        preset(CHECKS[check], args.preset)  # an unknown preset: InputError before anything runs
    if args.results is None:
        args.results = "results" if args.preset == QUICK else f"results-{args.preset}"
    show = enabled(args.quiet)
    cache, made, skipped, not_run = {}, [], [], []
    t0 = time.perf_counter()
    # The full report needs every check: without --only, missing ones are run too.
    extra = [] if (args.only or args.no_report) else list(CHECKS)
    with Bar(len(names) + len(extra), "figures", show=show) as bar:
        for check in extra:
            cache[(args.results, check)] = load(args.results, check, run_missing=not args.no_run, show=show,
                                                preset=args.preset)
            bar.update(check)
        for name in names:
            try:
                paths, _ = build(name, args.results, args.out, run_missing=not args.no_run, show=show,
                                 cache=cache, preset=args.preset)
            except (KeyError, TypeError, ValueError, IndexError) as e:  # a result schema it cannot plot
                print(f"\nerror: {name}: cannot plot the results in {args.results} "
                      f"({type(e).__name__}: {e}); figure not written", file=sys.stderr)
                skipped.append(name)
            else:
                (made if paths else not_run if args.no_run and args.only is None else skipped).append(name)
            bar.update(name)
    if not args.no_report:
        write_report(args.results, args.report, figures_dir=args.out)
    if not args.quiet:
        print(f"figures: {len(made)} written to {args.out}"
              + (f"; not run (no results, --no-run): {', '.join(not_run)}" if not_run else "")
              + (f"; skipped (not plottable or not produced): {', '.join(skipped)}" if skipped else "")
              + ("" if args.no_report else f"; report -> {args.report}")
              + f" ({time.perf_counter() - t0:.1f} s)")
    return 0 if not skipped else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
