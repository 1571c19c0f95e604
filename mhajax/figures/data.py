"""Reading result files; running a missing check through the registry."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from mhajax.cli.common import run_main
from mhajax.cli.verify import check_main
from mhajax.experiments import CHECKS
from mhajax.experiments.registry import QUICK
from mhajax.runtime.jaxsetup import release_compiled
from mhajax.runtime.progress import Timer

#: flags added when ``python -m figures`` runs a missing check at the quick preset: figure 1
#: plots H = 1, 2, 4, 8, 16, 32 (the convergence check's own default is a shorter grid; its
#: paper preset has this grid already).
RUN_ARGS = {"convergence": ["--heads", "1,2,4,8,16,32"]}


def summary_path(results_dir, check: str) -> Path:
    """``results_dir/check/summary.json``."""
    return Path(results_dir) / check / "summary.json"


def read(results_dir, check: str):
    """The parsed ``results_dir/check/summary.json``, or None when absent."""
    p = summary_path(results_dir, check)
    if not p.is_file():
        return None
    with open(p) as fh:
        return json.load(fh)


def run_check(results_dir, check: str, *, show: bool = False, preset: str = QUICK) -> int:
    """Run ``python -m verify <check> --out results_dir/check --quiet`` with RUN_ARGS (quick)
    or ``--preset P`` in this process; ``sys.argv`` is set to that command while it runs, so the file's meta
    block records it. Returns the exit code."""
    out = str(Path(results_dir) / check)
    argv = ["--out", out, "--quiet"] + (RUN_ARGS.get(check, []) if preset == QUICK else ["--preset", preset])
    saved = sys.argv
    sys.argv = ["python -m verify", check] + argv
    try:
        with Timer(f"running python -m verify {check} --out {out}", show=show):
            return run_main(lambda a: check_main(check, a), argv)
    finally:
        sys.argv = saved
        release_compiled()   # one process may run every check: free their programs' mappings


def load(results_dir, check: str, *, run_missing: bool = True, show: bool = False, preset: str = QUICK):
    """The summary of ``check``, running it first when the file is missing and
    ``run_missing``; None if it is still missing."""
    s = read(results_dir, check)
    if s is None and run_missing:
        run_check(results_dir, check, show=show, preset=preset)
        s = read(results_dir, check)
    return s


__all__ = ["CHECKS", "RUN_ARGS", "summary_path", "read", "run_check", "load"]
