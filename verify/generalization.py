"""``python -m verify generalization``: with K ≈ n GD steps, test − train loss = Õ(1/n).

For each n on a geometric grid, trains ``--seeds`` GD runs for K = round(c·n)
steps, measures the test loss on ``--n-test`` fresh samples (stream 2), fits the
log-log slopes over n of the test loss and of the test − train gap (bootstrap
CI over seeds), and writes ``OUT/summary.json``. Resumable: a rerun with the same flags
and ``--out`` reuses every finished n (``--fresh`` starts over).
"""
from __future__ import annotations

import sys

from .cli import EXIT_OK, EXIT_VIOLATED, ArgumentParser, diverged_lines, fmt, run_and_save, run_main, setup_jax, table
from .dataflags import add_boot_args, add_data_args, data_config, fmt_ci, fmt_window, int_list

DEFAULT_OUT = "results/generalization"


def build_parser(prog="python -m verify generalization"):
    p = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--ns", default="32,64,128,256,512",
      help="comma-separated training-set sizes n, increasing, >= 2, at least 3 (default 32,64,...,512)")
    a("--heads", type=int, default=4, help="number of heads H (default 4)")
    a("--seeds", type=int, default=8, help="GD runs per n (>= 2; default 8)")
    a("--steps-per-n", type=float, default=1.0, help="K = round(steps_per_n · n) GD steps (default 1)")
    a("--lr", type=float, default=1.0, help="GD step size η")
    a("--n-test", type=int, default=32768, help="fresh test samples per seed (stream 2)")
    add_boot_args(p)
    add_data_args(p, n=None)
    a("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    a("--fresh", action="store_true", help="discard saved progress in --out and start over")
    return p


def config_from_args(args):
    from mhajax.generalization import GeneralizationConfig
    ns = int_list("--ns", args.ns)
    return GeneralizationConfig(ns=tuple(ns), heads=args.heads, seeds=args.seeds, seed0=args.seed0,
                                steps_per_n=args.steps_per_n, lr=args.lr, n_test=args.n_test,
                                log_power=args.log_power, resamples=args.resamples,
                                level=args.level, boot_seed=args.boot_seed,
                                data=data_config(args, max(max(ns), 2))).validate()


def report(summary, cfg) -> str:
    from mhajax.rates import rule_text
    b = summary["bands"]
    rows = []
    for j, n in enumerate(summary["ns"]):
        rows.append([n, summary["steps"][j], fmt(b["train"]["mean"][j]), fmt(b["test"]["mean"][j]),
                     fmt(b["gap"]["mean"][j]), fmt(summary["se_gap"][j]), fmt(summary["se_test"][j]),
                     "yes" if summary["resolved"][j] else "no",
                     fmt(sum(summary["per_seed"]["test_error"][s][j] for s in range(len(summary["seeds"])))
                         / len(summary["seeds"]))])
    out = [table(["n", "K", "train L̂", "test L", "gap", "se(gap)", "se(test)", "resolved", "test err"], rows),
           f"seed means over {cfg.seeds} seeds, H={cfg.heads}, n_test={cfg.n_test}; se(gap) = std over seeds / √S "
           f"(includes test sampling); se(test) = test-sampling error alone; {summary['resolved_rule']}."]
    f, v = summary["fits"], summary["verdicts"]
    rows = []
    for name, label in (("test", "test loss L(θ_K)"), ("gap", "gap L − L̂ (resolved n)"),
                        ("train", "train loss L̂(θ_K)")):
        rows.append([label, fmt_ci(f[name]), fmt_window(f[name]), fmt_ci(f[name + "_log_corrected"]),
                     v[name]["classification"],
                     {True: "yes", False: "NO", None: "undef"}[v[name]["holds"]]])
    out += ["", table(["slope over n", f"slope [{100 * cfg.level:g}% CI]", "lower/upper half",
                       f"slope of y/log^{cfg.log_power:g}n", "vs -1", "Õ(1/n) not contradicted"], rows),
            rule_text(cfg.level),
            "verdict uses the test-loss and gap rows; the train row (K = n, so it is the convergence rate) is "
            "informational."]
    out.append(f"problem: --model {cfg.data.model} --loss {cfg.data.loss} --data {cfg.data.dataset}.")
    if not summary["theory_applies"]:
        out.append(f"INFORMATIONAL: the Õ(1/n) rate is not claimed for this (model, loss) pair "
                   f"({summary['theory_note']}); the slopes are reported, not judged.")
    if summary.get("resumed_ns"):
        out.append(f"resumed from saved progress: n = {summary['resumed_ns']}")
    unresolved = [n for n, r in zip(summary["ns"], summary["resolved"]) if not r]
    if unresolved:
        out.append(f"gap not resolved (seed-mean gap <= 2·se(gap)) at n = {unresolved}: excluded from the gap fit.")
    if f["gap"] is not None and f["gap"]["undefined_resamples"]:
        out.append(f"{f['gap']['undefined_resamples']} of {f['gap']['resamples']} bootstrap resamples had a "
                   f"non-positive mean gap somewhere and no slope.")
    out.extend(diverged_lines(summary["diverged"]))
    return "\n".join(out)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    setup_jax(args.dtype)
    from mhajax.generalization import run
    cfg = config_from_args(args)
    summary, path = run_and_save(run, cfg, args.out, command="generalization", fresh=args.fresh,
                                 show_progress=not args.quiet)
    if not args.quiet:
        print(report(summary, cfg))
    f, v = summary["fits"], summary["verdicts"]
    if summary["passed"]:
        verdict = "PASSED"
    elif summary["passed"] is None:
        verdict = "INFORMATIONAL (the rate is not claimed for this model/loss)"
    elif summary["diverged"] or any(v[k]["holds"] is False for k in ("test", "gap")):
        verdict = "FAILED"
    else:
        verdict = "INCONCLUSIVE (a slope is undefined: see the notes above)"
    print(f"generalization: {verdict} — slope over n: test {fmt_ci(f['test'])} ({v['test']['classification']}), "
          f"gap {fmt_ci(f['gap'])} ({v['gap']['classification']}) ({summary['wall_time_s']:.1f} s) -> {path}")
    return EXIT_VIOLATED if summary["passed"] is False else EXIT_OK


if __name__ == "__main__":
    sys.exit(run_main(main))
