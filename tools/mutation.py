"""Mutation testing of mhajax's math core, each module against its OWN tests (docs/testing.md).

    pip install -e ".[test,mutation]"                   # mutmut==3.8.1 (not a runtime dependency)
    python tools/mutation.py --module bounds            # one module (table name or path)
    python tools/mutation.py --all                      # every core module, one after another
    python tools/mutation.py --module bounds --rerun    # incremental: re-test what was not killed
    python tools/mutation.py --report-only --all        # re-score existing runs (after editing
                                                        # the equivalents file), no mutmut run
    python tools/mutation.py --module bounds --smoke    # a few functions' mutants only

Engine: mutmut 3 (pinned below). For every module a scratch copy of the package and the tests
is made under build/mutation/<name>/, a [tool.mutmut] section restricted to that module and its
test files is appended to the copy's pyproject.toml, and `mutmut run` is started there. Nothing
in the repository itself is ever mutated. Results: build/mutation/results.json
(machine-readable) and a Markdown table on stdout for docs/testing.md; every mutant that was not
killed, with its diff, in build/mutation/<name>/survivors.md.

Equivalent mutants are listed, with a reason each, in tools/mutation_equivalents.toml:

    [[bounds]]
    function = "l21_norms"
    diff = ["-    return ...", "+    return ..."]   # the exact changed lines
    reason = "..."

An entry matches a mutant of that module by function name and its changed lines (not by
mutmut's numeric suffix, which shifts when code changes). Entries that match nothing, or match
a mutant that was killed, are reported as stale. The score is
(killed + timeout) / (checked − equivalent); "no tests", crashes and "suspicious" count as not
killed.

Why this setup (docs/testing.md): JAX and fork. mutmut forks a worker per mutant. A process
whose XLA CPU backend is initialized deadlocks when forked (mutmut counts the hang as a
"timeout", i.e. killed), so the fork server only *imports* modules (the preload list), never
collects or runs tests (that creates arrays). Each worker starts with empty JAX caches, so a
mutant inside jitted code is traced and compiled afresh. The stats run (which tests reach which
function) clears the JAX caches before every test; otherwise a jitted function traced by an
earlier test hides its callees from later tests, and those tests are never selected.

mutmut mutates only inside functions and skips decorated ones. A second pass here mutates the
UPPER_CASE numeric module constants (float x10 and /10, int +1 and -1) and runs the module's
test files on each (pytest -x).
"""
from __future__ import annotations

import argparse
import ast
import datetime as _dt
import filecmp
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

MUTMUT_VERSION = "3.8.1"

# -- the explicit table: core module -> its own test files ------------------------------------
# The key is the stable name used on the command line, in the results file, in the equivalents
# file and in docs/testing.md. Tests mirror the package (docs/architecture.md). Order: cheapest
# first, so `--all` reports the quick modules early (spectrum and chain last: they change most).
CORE = {
    "validate": ("mhajax/validate.py", ["tests/test_validate.py"]),
    "model_base": ("mhajax/models/base.py", ["tests/models/test_base.py"]),
    "softmax_head": ("mhajax/models/softmax/head.py", ["tests/models/softmax/test_head.py"]),
    "bounds": ("mhajax/models/softmax/bounds.py", ["tests/models/softmax/test_bounds.py"]),
    "softmax_hessian": ("mhajax/models/softmax/hessian.py", ["tests/models/softmax/test_hessian.py"]),
    "losses": ("mhajax/losses.py", ["tests/test_losses.py", "tests/test_losses_extra.py"]),
    "margin": ("mhajax/analysis/margin.py", ["tests/analysis/test_margin.py"]),
    "operators": ("mhajax/curvature/operators.py", ["tests/curvature/test_operators.py"]),
    "krylov": ("mhajax/curvature/krylov.py", ["tests/curvature/test_krylov.py"]),
    "ntk": ("mhajax/analysis/ntk.py", ["tests/analysis/test_ntk.py"]),
    "spectrum": ("mhajax/curvature/spectrum.py", ["tests/curvature/test_spectrum.py"]),
    "chain": ("mhajax/analysis/chain.py", ["tests/analysis/test_chain.py"]),
}
#: the verdict rules of several experiments on hand-made records (fast: no GD run)
VERDICT_RULES = "tests/experiments/test_verdict_rules.py"
# Modules that decide: the verdict vocabulary, the analysis that judges, the
# experiments' verdict code. Not part of the core list, so not in `--all`; run each with
# `--module NAME` (inertia and memory are slow: `--rerun` after a first full run).
EXTRA = {
    "verdict": ("mhajax/verdict.py", ["tests/test_verdict.py"]),
    "rates": ("mhajax/analysis/rates.py", ["tests/analysis/test_rates.py"]),
    "gap": ("mhajax/analysis/gap.py", ["tests/analysis/test_gap.py"]),
    "finite_sample": ("mhajax/analysis/finite_sample.py", ["tests/analysis/test_finite_sample.py"]),
    "width": ("mhajax/analysis/width.py", ["tests/analysis/test_width.py"]),
    "applicability": ("mhajax/analysis/applicability.py", ["tests/analysis/test_applicability.py"]),
    "kappa": ("mhajax/analysis/kappa.py", ["tests/analysis/test_kappa.py"]),
    "witness": ("mhajax/analysis/witness.py", ["tests/analysis/test_witness.py"]),
    "inertia": ("mhajax/curvature/inertia.py", ["tests/curvature/test_inertia.py"]),
    "memory": ("mhajax/runtime/memory.py", ["tests/runtime/test_memory.py"]),
    "step_premise": ("mhajax/analysis/step_premise.py", ["tests/analysis/test_step_premise.py"]),
    "quasi_convexity": ("mhajax/analysis/quasi_convexity.py", ["tests/analysis/test_quasi_convexity.py"]),
    "experiments_base": ("mhajax/experiments/base.py", ["tests/experiments/test_base.py"]),
    "api": ("mhajax/api.py", ["tests/test_public_entries.py"]),
    # The judges of these experiments and their feeders, on hand-made typed records (no GD).
    "experiments_weak_convexity": ("mhajax/experiments/weak_convexity.py",
                                   ["tests/experiments/test_weak_convexity_judge.py"]),
    "experiments_convergence": ("mhajax/experiments/convergence.py",
                                ["tests/experiments/test_convergence_judge.py"]),
    "experiments_variants": ("mhajax/experiments/variants.py", ["tests/experiments/test_variants_judge.py"]),
    "experiments_census": ("mhajax/experiments/census.py", ["tests/experiments/test_census_judge.py"]),
    # The judge and feeders of these experiments are measured against their judge tests on
    # hand-made typed records only (tests/experiments/test_<module>_judge.py): their mirror files
    # (test_generalization.py, test_heads.py, ...) run whole GD experiments, about a minute per
    # mutant, and are not listed.
    "experiments_generalization": ("mhajax/experiments/generalization.py",
                                   ["tests/experiments/test_generalization_judge.py"]),
    "experiments_heads": ("mhajax/experiments/heads.py", ["tests/experiments/test_heads_judge.py"]),
    "experiments_ntk_margin": ("mhajax/experiments/ntk_margin.py", ["tests/experiments/test_ntk_margin_judge.py"]),
    "experiments_one_step": ("mhajax/experiments/one_step.py", ["tests/experiments/test_one_step_judge.py"]),
    "experiments_quasi_convexity": ("mhajax/experiments/quasi_convexity.py",
                                    ["tests/experiments/test_quasi_convexity_judge.py"]),
}
TABLE = {**CORE, **EXTRA}
# Modules that may not exist yet: skipped (with a note) while their file is missing.
OPTIONAL = {"inertia"}

# A function filter: only these functions of the module are mutated, on every run (full and
# --rerun), and only the UPPER_CASE constants named here get the constants pass. For modules
# whose other functions are slow to test (an experiment runs GD): the verdict and threshold
# code is measured, the rest is not; the score is over these functions' mutants only.
FUNCTIONS = {"step_premise": ["step_premise", "_finite", "premise_from_records", "premise_line", "_g",
                              "premise_violated"],
             "experiments_base": ["verdict_fields", "judged_enough", "MIN_JUDGED_FRACTION", "not_judged"],
             "experiments_weak_convexity": ["judge", "_classify", "width_status", "width_outcome", "_slope_text",
                                            "WIDTH_POINTS", "WIDTH_SPAN", "WIDTH_TOL"],
             "experiments_convergence": ["judge"],
             "experiments_generalization": ["judge", "resolved_points", "gap_fitted", "MIN_RESOLVED",
                                            "slope_verdict"],
             "experiments_heads": ["judge", "reaches", "regime", "threshold", "tightness", "growth",
                                   "contradictions"],
             "experiments_ntk_margin": ["judge", "passes", "init_holds", "margin_checks"],
             "experiments_one_step": ["judge", "separability", "init_condition", "INIT_CONST", "parts",
                                      "_slope_rule"],
             "quasi_convexity": ["finalize", "REL_TOL", "judged_pair"],
             "experiments_quasi_convexity": ["judge", "summarize", "_max"],
             "experiments_variants": ["judge", "_diverged_runs", "_loss_defined", "_fit_slope", "survival",
                                      "SURVIVES_BELOW"],
             "experiments_census": ["judge", "checkpoint"]}


def function_globs(name: str) -> list[str]:
    """The mutant-name globs (mutmut's) for the functions of FUNCTIONS[name] ([] without a filter)."""
    mod = TABLE[name][0].removesuffix(".py").replace("/", ".")
    return [f"{mod}.x_{f}__mutmut_*" for f in FUNCTIONS.get(name, []) if not f.isupper()]


def _in_filter(name: str, key: str) -> bool:
    """Whether mutant ``key`` is measured: every mutant without a filter; with one, the listed
    functions' mutants and the constants pass (which run_constants restricts itself)."""
    return name not in FUNCTIONS or "::constant_" in key or any(
        re.fullmatch(re.escape(g).replace(r"\*", ".*"), key) for g in function_globs(name))


# --smoke: the mutants of these functions only (mutmut globs on the mutant name).
SMOKE = {"bounds": ["mhajax.models.softmax.bounds.x_beta3__mutmut_*",
                    "mhajax.models.softmax.bounds.x_output_bound__mutmut_*"],
         "operators": ["mhajax.curvature.operators.x_block_lambda_min__mutmut_*"],
         # the small deciding pieces of the certified count: tolerances, the widening δ(λ),
         # which bracket end a count confirms or refutes, the Ritz radius, input checks
         "inertia": [f"mhajax.curvature.inertia.x_{f}__mutmut_*" for f in (
             "gamma", "asym_tolerance", "widening", "_groups", "_is_min", "_sel", "_end_status",
             "ritz_radius", "check_inputs")],
         # the closed forms of H_theory (width_constants runs GD and the NTK margin per mutant)
         "width": [f"mhajax.analysis.width.x_{f}__mutmut_*" for f in (
             "condition_level", "distance_bound", "h_theory", "kappa_apriori", "_tree_dist")]}

STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no_tests", 33: "no_tests", 34: "skipped",
          36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout",
          -11: "crash", -9: "crash", None: "not_checked"}
KILLED = ("killed", "timeout")

PLUGIN = '''"""Loaded by tools/mutation.py into mutmut's pytest runs (-p mutation_jax_plugin)."""
import json
import os


def pytest_runtest_setup(item):
    # stats run: every test traces afresh, so trampoline hits inside jitted code are recorded
    # for every test that reaches them, not only for the first test of a shape.
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        import jax
        jax.clear_caches()


def pytest_collection_modifyitems(session, config, items):
    # mutant runs stop at the first failure (-x): run the cheapest tests first, so a killed
    # mutant costs as little as possible (durations from mutmut's stats run).
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if mutant in ("", "stats", "fail", "list_all_tests", "mutant_generation"):
        return
    try:
        with open("mutmut-stats.json") as f:  # mutmut runs pytest inside mutants/
            dur = json.load(f)["duration_by_test"]
    except (OSError, ValueError, KeyError):
        return
    items.sort(key=lambda it: dur.get(it.nodeid, float("inf")))
'''

# Imported by the fork server before it forks one worker per mutant. NOTHING here may
# initialize the XLA backend (no array creation at import time): see the module docstring.
PRELOAD = ["numpy", "scipy.linalg", "hypothesis", "jax", "jax.numpy", "optax", "chex", "mhajax",
           "mhajax.testing.plugin"]


#: what every mutant run passes to pytest: no cache files, both tiers, in one process (the project's
#: addopts start two xdist workers; mutmut's runs and the constants pass need the tests in-process)
PYTEST_ARGS = ["-p", "no:cacheprovider", "-m", "slow or not slow", "-n", "0"]


def mutmut_section(path: str, tests: list[str]) -> str:
    """The [tool.mutmut] section of the scratch copy: one module, its own test files."""
    q = lambda xs: "[" + ", ".join(json.dumps(x) for x in xs) + "]"  # noqa: E731
    return f"""

[tool.mutmut]
source_paths = ["{path.split('/')[0]}"]
only_mutate = [{json.dumps(path)}]
also_copy = ["mutation_jax_plugin.py"]
pytest_add_cli_args_test_selection = {q(tests)}
pytest_add_cli_args = {q(PYTEST_ARGS + ["-p", "mutation_jax_plugin"])}
process_isolation = "forkserver"
forkserver_warmup = "import"
preload_modules_file = "preload_modules.txt"
timeout_constant = 10.0
timeout_multiplier = 10.0
use_git_change_detection = false
"""


def _git_revision(root: Path) -> str | None:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def check_table(name: str, root: Path) -> bool:
    """Whether the table entry exists (False: an OPTIONAL module not written yet); exits on a
    missing path otherwise."""
    path, tests = TABLE[name]
    missing = [p for p in [path, *tests] if not (root / p).exists()]
    if missing and name in OPTIONAL and not (root / path).exists():
        return False
    if missing:
        sys.exit(f"{name}: {', '.join(missing)} does not exist (fix the table in tools/mutation.py)")
    return True


def _sync_tree(src: Path, dst: Path) -> None:
    """Make ``dst`` a copy of ``src`` (mtimes kept: mutmut compares them), leaving unchanged
    files alone and removing files that are gone from ``src``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    if not dst.exists():
        shutil.copytree(src, dst, ignore=ignore)
        return
    for p in sorted(dst.rglob("*"), reverse=True):
        rel = p.relative_to(dst)
        if "__pycache__" in rel.parts:
            continue
        if not (src / rel).exists():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    for p in src.rglob("*"):
        rel = p.relative_to(src)
        if "__pycache__" in rel.parts or p.suffix == ".pyc":
            continue
        q = dst / rel
        if p.is_dir():
            q.mkdir(parents=True, exist_ok=True)
        elif not q.exists() or not filecmp.cmp(p, q, shallow=False):
            q.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, q)


def prepare(name: str, root: Path, work: Path, *, keep: bool) -> bool:
    """Set up (or, with ``keep``, refresh) the scratch copy. Returns whether the mutated
    module's source differs from the copy mutmut last saw (always True for a fresh copy)."""
    path, tests = TABLE[name]
    pkg = path.split("/")[0]
    if work.exists() and not keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    changed = not (work / path).exists() or not filecmp.cmp(root / path, work / path, shallow=False)
    _sync_tree(root / pkg, work / pkg)
    _sync_tree(root / "tests", work / "tests")
    if (work / "mutants" / pkg).exists():
        # mutmut copies the package into mutants/ once and never refreshes the files it does
        # not mutate: keep them current (the mutated file is regenerated by mutmut itself when
        # its source is newer than the trampolined copy).
        for p in (root / pkg).rglob("*.py"):
            rel = p.relative_to(root)
            q = work / "mutants" / rel
            if str(rel) != path and (not q.exists() or not filecmp.cmp(p, q, shallow=False)):
                q.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, q)
    text = (root / "pyproject.toml").read_text()
    text = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", text)  # never two sections
    new = text + mutmut_section(path, tests)
    if not (work / "pyproject.toml").exists() or (work / "pyproject.toml").read_text() != new:
        (work / "pyproject.toml").write_text(new)
    (work / "mutation_jax_plugin.py").write_text(PLUGIN)
    (work / "preload_modules.txt").write_text("\n".join(PRELOAD) + "\n")
    # mutants run with the copy, never with an installed (e.g. editable) mhajax
    probe = subprocess.run([sys.executable, "-c", f"import {pkg}; print({pkg}.__file__)"], cwd=work,
                           capture_output=True, text=True)
    if not probe.stdout.strip().startswith(str(work.resolve())):
        sys.exit(f"{name}: `import {pkg}` in {work} gives {probe.stdout.strip() or probe.stderr}")
    return changed


def _env(jax_cache: Path | None) -> dict:
    # MHAJAX_TEST_XLA_DEFAULTS=1: tests/conftest.py then skips its probe of XLA flags, a
    # subprocess that imports JAX (~1.5 s CPU) at the start of every pytest session, i.e. once
    # per mutant; the tests run with XLA's default compile options, a supported mode of the suite.
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MHAJAX_TEST_XLA_DEFAULTS="1")
    if jax_cache is not None:
        # XLA executables on disk, keyed by the HLO: a mutant that changes a computation gets
        # a new key, every computation it leaves alone is not compiled again.
        env.update(JAX_COMPILATION_CACHE_DIR=str(jax_cache.resolve()),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    return env


def run_mutmut(work: Path, names: list[str], jobs: int, nice: int, jax_cache: Path | None,
               log_name: str = "mutmut.log") -> dict:
    """``mutmut run`` in ``work`` (all mutants, or the ``names``/globs given); rc, wall, CPU."""
    mutmut = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or shutil.which("mutmut")
    if mutmut is None:
        sys.exit(f"mutmut not found: pip install mutmut=={MUTMUT_VERSION} (or .[mutation])")
    cmd = [mutmut, "run", "--max-children", str(jobs)] + names
    if nice:
        cmd = ["nice", "-n", str(nice)] + cmd
    t0, r0 = time.time(), os.times()
    with open(work / log_name, "a") as log:
        log.write(f"\n$ {' '.join(cmd[:8])}{' ...' if len(cmd) > 8 else ''}  ({len(names)} names)\n")
        log.flush()
        rc = subprocess.call(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT, env=_env(jax_cache))
    r1 = os.times()
    cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    return {"rc": rc, "wall_s": round(time.time() - t0, 1), "cpu_s": round(cpu, 1)}


def constant_mutants(src: str) -> list[tuple[str, int, int, str, str]]:
    """Mutants of module constants: mutmut 3 mutates only inside functions. Module-level numeric constants (tolerances,
    limits such as margin.GAP_TOL) get two mutants each here: a float x10 and /10, an int
    +1 and -1. Returns (name, start offset, end offset, original text, mutant text)."""
    tree = ast.parse(src)
    starts = [0]
    for line in src.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    out = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper()):
            continue
        try:
            value = eval(compile(ast.Expression(node.value), "<const>", "eval"), {"__builtins__": {}})
        except Exception:
            continue  # not a plain arithmetic constant (calls, names)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        a = starts[node.value.lineno - 1] + node.value.col_offset
        b = starts[node.value.end_lineno - 1] + node.value.end_col_offset
        new = [repr(value * 10), repr(value / 10)] if isinstance(value, float) else \
            [repr(value + 1), repr(value - 1)]
        out += [(node.targets[0].id, a, b, src[a:b], n) for n in new]
    return out


def run_constants(name: str, work: Path, nice: int, equivalents: list[dict], previous: list[dict]) -> list[dict]:
    """Each constant mutant: patch the plain copy of the module, run its test files
    (pytest -x, a fresh process) and restore. Mutants listed as equivalent are not run, and
    neither are those killed in ``previous`` (an incremental rerun)."""
    path, tests = TABLE[name]
    f = work / path
    src = f.read_text()
    done = {tuple(c["diff"]): c for c in previous if c["status"] == "killed"}
    eq = {tuple(e["diff"]) for e in equivalents if e["function"] == "<module>"}
    res = []
    try:
        for const, a, b, old, new in constant_mutants(src):
            if name in FUNCTIONS and const not in FUNCTIONS[name]:
                continue
            diff = [f"-{const} = {old}", f"+{const} = {new}"]
            if tuple(diff) in done:
                res.append(done[tuple(diff)])
                continue
            if tuple(diff) in eq:
                res.append({"function": "<module>", "diff": diff, "status": "not_run_equivalent"})
                continue
            f.write_text(src[:a] + new + src[b:])
            cmd = [sys.executable, "-m", "pytest", "-x", "-q", *PYTEST_ARGS, *tests]
            cmd = (["nice", "-n", str(nice)] if nice else []) + cmd
            t0 = time.time()
            rc = subprocess.call(cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 env=_env(None))
            res.append({"function": "<module>", "diff": diff,
                        "status": "killed" if rc == 1 else "survived" if rc == 0 else f"rc{rc}",
                        "wall_s": round(time.time() - t0, 1)})
    finally:
        f.write_text(src)
    return res


def mutant_diffs(work: Path, path: str) -> dict[str, tuple[str, list[str]]]:
    """Mutant key -> (function name, changed lines) from the trampolined copy of the module."""
    from mutmut.configuration import reset_config
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    meta = json.loads((work / "mutants" / (path + ".meta")).read_text())
    out = {}
    cwd = os.getcwd()
    os.chdir(work)
    reset_config()
    try:
        for key in meta["exit_code_by_key"]:
            diff = get_diff_for_mutant(key, path=path)
            lines = [l for l in diff.splitlines() if l[:1] in "+-" and l[:3] not in ("+++", "---")]
            func = re.sub(r"__mutmut_\d+$", "", key.rpartition(".")[2])
            func = func[2:] if func.startswith("x_") else func.replace("xǁ", "").replace("ǁ", ".")
            out[key] = (func, lines)
    finally:
        os.chdir(cwd)
    return out


def load_equivalents(file: Path) -> dict[str, list[dict]]:
    """The reviewed equivalent mutants, per module name."""
    if not file.exists():
        return {}
    import tomllib
    return tomllib.loads(file.read_text())


def statuses(work: Path, path: str) -> dict[str, str]:
    """Mutant key -> status (killed, survived, no_tests, timeout, ...) from mutmut's .meta."""
    meta = json.loads((work / "mutants" / (path + ".meta")).read_text())
    return {k: STATUS.get(v, "suspicious") for k, v in meta["exit_code_by_key"].items()}


def equivalent_keys(diffs: dict, equivalents: list[dict]) -> set[str]:
    """The mutant keys that an equivalents entry matches (function and changed lines)."""
    return {k for e in equivalents for k, (f, lines) in diffs.items()
            if f == e["function"] and lines == e["diff"]}


def score(name: str, work: Path, equivalents: list[dict], extra: dict) -> dict:
    """One module's counts and score; writes its survivors.md."""
    path, tests = TABLE[name]
    status = {k: v for k, v in statuses(work, path).items() if _in_filter(name, k)}
    diffs = {k: v for k, v in mutant_diffs(work, path).items() if _in_filter(name, k)}
    cfile = work / "constants.json"
    for i, c in enumerate(json.loads(cfile.read_text()) if cfile.exists() else []):
        k = f"{path}::constant_{i + 1}"
        diffs[k] = (c["function"], c["diff"])
        status[k] = c["status"] if c["status"] in ("killed", "survived", "not_run_equivalent") else "suspicious"
    used, equivalent, stale = set(), [], []
    for i, e in enumerate(equivalents):
        hits = [k for k, (f, lines) in diffs.items() if f == e["function"] and lines == e["diff"]]
        if not hits:
            stale.append({"entry": i, "why": "matches no mutant", **e})
            continue
        for k in hits:
            if status[k] in KILLED:
                stale.append({"entry": i, "why": f"{k} was killed", **e})
            elif status[k] != "not_checked":
                equivalent.append(k)
                used.add(k)
    counts = {s: sum(1 for k in status if status[k] == s and k not in used)
              for s in ("killed", "timeout", "survived", "no_tests", "crash", "suspicious",
                        "skipped", "not_checked")}
    total = len(status)
    checked = total - counts["not_checked"]
    denom = checked - len(equivalent)
    killed = counts["killed"] + counts["timeout"]
    res = {"module": name, "path": path, "tests": tests, "mutants": total,
           "killed": counts["killed"], "timeout": counts["timeout"], "equivalent": len(equivalent),
           "survived": counts["survived"], "no_tests": counts["no_tests"],
           "other": counts["crash"] + counts["suspicious"] + counts["skipped"],
           "not_checked": counts["not_checked"],
           # an interrupted full run has no score (a --smoke run checks a subset on purpose)
           "score": round(100.0 * killed / denom, 1) if denom and not (
               counts["not_checked"] and not _subset(extra)) else None,
           "stale_equivalents": stale, **extra}
    with open(work / "survivors.md", "w") as f:
        f.write(f"# {name}: mutants not killed ({path} against {', '.join(tests)})\n\n")
        for k, s in sorted(status.items()):
            if s in KILLED or k in used:
                continue
            func, lines = diffs[k]
            f.write(f"## {k} ({s}) in {func}\n\n```diff\n" + "\n".join(lines) + "\n```\n\n")
    return res


def _subset(r: dict) -> bool:
    """A run that checks a subset of the mutants on purpose (--smoke, a function filter)."""
    return r.get("mode") == "smoke" or bool(r.get("functions"))


def table(results: list[dict]) -> str:
    """The per-module Markdown table of docs/testing.md."""
    rows = ["| module | mutants | killed | equivalent | not killed | score |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        k = r["killed"] + r["timeout"]
        s = r["survived"] + r["no_tests"] + r["other"]
        sc = "-" if r["score"] is None else f"{r['score']:.1f} %"
        n = r["mutants"] - r["not_checked"]  # a --smoke run checks a subset
        if r["not_checked"] and not _subset(r):   # an interrupted run: no score
            sc = f"partial: {n} of {r['mutants']} checked, no score"
        rows.append(f"| {r['module']} | {n} | {k} | {r['equivalent']} | {s} | {sc} |")
    return "\n".join(rows)


def _add_cost(total: dict, part: dict) -> None:
    for k in ("wall_s", "cpu_s"):
        total[k] = round((total.get(k) or 0) + part[k], 1)
    total["rc"] = part["rc"] if part["rc"] != 0 else total.get("rc", 0)


def workdir(a, name: str) -> Path:
    """The scratch copy of one module: a --smoke run has its own, so it never replaces the
    full run's verdicts."""
    return a.out / (f"{name}-smoke" if a.smoke else name)


def run_module(name: str, a, root: Path, eq: list[dict], old: dict) -> dict:
    """A full, smoke or incremental (--rerun) run of one module, and its constants pass."""
    path, _ = TABLE[name]
    work = workdir(a, name)
    jax_cache = None if a.no_jax_cache else a.out / "jax-cache"
    keep = a.rerun and (work / "mutants" / (path + ".meta")).exists()
    source_changed = prepare(name, root, work, keep=keep)
    extra = {"wall_s": 0.0, "cpu_s": 0.0, "rc": 0, "date": _dt.date.today().isoformat(),
             "revision": _git_revision(root), "mutmut": MUTMUT_VERSION,
             "mode": "smoke" if a.smoke else "rerun" if keep else "full",
             "functions": FUNCTIONS.get(name)}
    if keep:
        # every test is mapped afresh (edited tests may reach new functions); verdicts are kept
        (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
        if source_changed:   # new or changed functions: mutmut runs exactly those
            _add_cost(extra, run_mutmut(work, function_globs(name), a.jobs, a.nice, jax_cache))
        diffs = mutant_diffs(work, path)
        skip = equivalent_keys(diffs, eq)
        names = [k for k, s in statuses(work, path).items()
                 if s not in KILLED and k not in skip and _in_filter(name, k)
                 and (not a.smoke or any(fnmatch.fnmatchcase(k, g) for g in SMOKE[name]))]
        if names:
            _add_cost(extra, run_mutmut(work, names, a.jobs, a.nice, jax_cache))
    else:
        _add_cost(extra, run_mutmut(work, SMOKE.get(name, []) if a.smoke else function_globs(name),
                                    a.jobs, a.nice, jax_cache))
    prev = old.get(name, {})
    if keep:   # the cost of a whole module stays that of its last full run
        extra.update(full_wall_s=prev.get("full_wall_s"), full_cpu_s=prev.get("full_cpu_s"),
                     full_date=prev.get("full_date"))
    elif not a.smoke:
        extra.update(full_wall_s=extra["wall_s"], full_cpu_s=extra["cpu_s"], full_date=extra["date"])
    if extra["rc"] != 0:
        print(f"[{name}] mutmut exited {extra['rc']}, see {work / 'mutmut.log'}")
    if not a.smoke and not a.no_constants:
        t0 = time.time()
        cfile = work / "constants.json"
        prev = json.loads(cfile.read_text()) if (keep and cfile.exists()) else []
        consts = run_constants(name, work, a.nice, eq, prev)
        cfile.write_text(json.dumps(consts, indent=1))
        extra["constants_wall_s"] = round(time.time() - t0, 1)
    return extra


def main(argv=None) -> int:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", action="append", default=[], help="core module name or path (repeatable)")
    ap.add_argument("--all", action="store_true", help="every module of the table, in table order")
    ap.add_argument("--smoke", action="store_true", help="only SMOKE's functions (a quick check)")
    ap.add_argument("--rerun", action="store_true",
                    help="incremental: keep build/mutation/<name>, re-map the tests, and re-test only "
                         "the mutants not killed before (and those of changed functions)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--nice", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("build/mutation"))
    ap.add_argument("--equivalents", type=Path, default=Path("tools/mutation_equivalents.toml"))
    ap.add_argument("--no-constants", action="store_true",
                    help="skip the module-level constants pass (mutmut does not mutate them)")
    ap.add_argument("--no-jax-cache", action="store_true", help="no persistent XLA cache")
    ap.add_argument("--report-only", action="store_true", help="re-score existing runs")
    ap.add_argument("--min-score", type=float, default=None, help="exit 1 below this score")
    a = ap.parse_args(argv)
    by_path = {p: n for n, (p, _) in TABLE.items()}
    names = list(CORE) if a.all else [by_path.get(m, m) for m in a.module]
    unknown = [n for n in names if n not in TABLE]
    if not names or unknown:
        ap.error(f"unknown module(s) {unknown}; known: {', '.join(TABLE)}")
    if a.smoke and [n for n in names if n not in SMOKE]:
        ap.error(f"--smoke is defined for {', '.join(SMOKE)} only")
    root = Path.cwd()
    if not (root / "tools" / "mutation.py").exists():
        ap.error("run from the repository root")
    present = [n for n in names if check_table(n, root)]
    for n in sorted(set(names) - set(present)):
        print(f"[{n}] {TABLE[n][0]} does not exist (yet): skipped")
    names = present
    eq = load_equivalents(a.equivalents)
    results_file = a.out / ("results-smoke.json" if a.smoke else "results.json")
    old = {r["module"]: r for r in json.loads(results_file.read_text())["modules"]} \
        if results_file.exists() else {}
    for name in names:
        work = workdir(a, name)
        keys = ("rc", "wall_s", "cpu_s", "constants_wall_s", "date", "revision", "mutmut", "mode",
                "functions", "full_wall_s", "full_cpu_s", "full_date")
        extra = {k: old.get(name, {}).get(k) for k in keys}
        if not a.report_only:
            print(f"[{name}] mutmut on {TABLE[name][0]} against {' '.join(TABLE[name][1])}", flush=True)
            extra = run_module(name, a, root, eq.get(name, []), old)
        if not (work / "mutants" / (TABLE[name][0] + ".meta")).exists():
            print(f"[{name}] no results in {work}")
            continue
        old[name] = score(name, work, eq.get(name, []), extra)
        r = old[name]
        print(f"[{name}] {r['mutants']} mutants, score {r['score']} %, {r.get('wall_s')} s wall, "
              f"{r.get('cpu_s')} s CPU; not killed: {work / 'survivors.md'}", flush=True)
        for s in r["stale_equivalents"]:
            print(f"[{name}] stale equivalent entry #{s['entry']} ({s['function']}): {s['why']}")
        # merge into the file as it is now (another module may have finished meanwhile)
        now = {r["module"]: r for r in json.loads(results_file.read_text())["modules"]} \
            if results_file.exists() else {}
        now[name] = r
        old.update({k: v for k, v in now.items() if k not in names or k == name})
        results_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = results_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"mutmut": MUTMUT_VERSION, "modules": [now[n] for n in TABLE if n in now]},
                                  indent=1))
        os.replace(tmp, results_file)
    results = [old[n] for n in TABLE if n in old]
    print(table(results))
    partial = [n for n in names if n in old and old[n]["not_checked"] and not _subset(old[n])]
    if a.min_score is not None and (partial or any((old[n]["score"] or 0) < a.min_score
                                                   for n in names if n in old)):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
