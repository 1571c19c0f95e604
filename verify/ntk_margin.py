"""``python -m verify ntk-margin``: NTK separability, margin and witness at θ₀ (SPEC §5.4).

For each H and seed: the NTK features g_i = ∇_θΦ(θ₀; X_i), the hard margin
γ = min_{α∈Δ} ||Σ α_i y_i g_i|| (Wolfe's min-norm point), its normalized value
γ̄ = γ / max_i ||g_i||, the duality gap, the witness θ* = θ₀ + (log n/γ) w* with
L̂(θ*) and the linearization error, and the initialization condition
max_i |Φ(θ₀; X_i)| against log n. Writes ``OUT/summary.json``.
"""
from __future__ import annotations

import sys

from .cli import EXIT_OK, EXIT_VIOLATED, ArgumentParser, fmt, run_and_save, run_main, setup_jax, table
from .dataflags import add_data_args, data_config

DEFAULT_OUT = "results/ntk-margin"


def build_parser(prog="python -m verify ntk-margin"):
    p = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--heads", default="1,4,16", help="comma-separated numbers of heads H (default 1,4,16)")
    a("--seeds", type=int, default=4, help="data sets / initializations per H (default 4)")
    add_data_args(p, n=64)  # --n --tokens --dim --zeta ... --seed0 --dtype --quiet
    a("--one-step-lr", type=float, default=0.0,
      help="if > 0, θ₀ is one GD step of this size from the initialization (default 0: θ₀ = init)")
    a("--init-const", type=float, default=1.0,
      help="init condition: max_i |Φ(θ₀;X_i)| <= C · log n with this C (default 1)")
    a("--gap-tol", type=float, default=1e-8, help="largest relative duality gap accepted (default 1e-8)")
    a("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    a("--fresh", action="store_true", help="discard progress saved in --out by an interrupted run")
    return p


def config_from_args(args):
    from mhajax.realizability import NTKMarginConfig
    data = data_config(args, args.n)
    return NTKMarginConfig(heads=args.heads, seeds=args.seeds, seed0=args.seed0,
                           init_const=args.init_const, gap_tol=args.gap_tol,
                           one_step_lr=args.one_step_lr, data=data).validate()


def report(summary) -> str:
    rows = []
    for r in summary["records"]:
        rows.append([r["heads"], r["seed"], r["P"], r["status"], fmt(r["gamma_bar"]), fmt(r["gamma"]),
                     fmt(r["rel_gap"]), r["support_size"], fmt(r["phi0_max"]), fmt(r["step"]),
                     fmt(r["loss0"]), fmt(r["loss_star"]), fmt(r["loss_linear"]), fmt(r["lin_error"]),
                     "yes" if r["passed"] else "NO"])
    head = ["H", "seed", "P", "status", "γ̄", "γ", "rel_gap", "|supp|", "max|Φ₀|", "log n/γ",
            "L̂(θ₀)", "L̂(θ*)", "L̂_lin(θ*)", "lin_err", "pass"]
    c = summary["criteria"]
    out = [table(head, rows),
           f"γ̄ = γ / max_i ||g_i|| (scale-free); γ raw. log n = {summary['log_n']:.3f}.",
           "θ* = θ₀ + (log n/γ) w*;  L̂_lin uses Φ(θ₀;X) + <g, θ*−θ₀>;  lin_err = max_i |Φ(θ*;X_i) − Φ_lin|.",
           "pass = " + "; ".join(f"{k}: {v}" for k, v in c.items()),
           "L̂(θ*), L̂_lin(θ*) and lin_err are reported, not judged (the theory needs them small only for large H)."]
    for H, s in summary["by_heads"].items():
        out.append(f"H={H}: γ̄ mean {fmt(s['gamma_bar_mean'], 0)}, L̂(θ*) max {fmt(s['loss_star_max'], 0)}"
                   f" vs L̂_lin(θ*) max {fmt(s['loss_linear_max'], 0)}, lin_err max {fmt(s['lin_error_max'], 0)}")
    return "\n".join(out)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    setup_jax(args.dtype)
    from mhajax.realizability import run
    cfg = config_from_args(args)
    summary, path = run_and_save(run, cfg, args.out, command="ntk-margin", fresh=args.fresh,
                                 show_progress=not args.quiet)
    if not args.quiet:
        print(report(summary))
    verdict = "PASSED" if summary["passed"] else "FAILED"
    npass = sum(r["passed"] for r in summary["records"])
    problem = "" if cfg.data.is_default_problem() else \
        f"model {cfg.data.model}, loss {cfg.data.loss}, data {cfg.data.dataset}; "
    done = summary["resumed_heads"]
    resumed = f", resumed H={','.join(map(str, done))}" if done else ""
    print(f"ntk-margin: {verdict} ({problem}{npass}/{len(summary['records'])} (H, seed) pass{resumed}, "
          f"{summary['wall_time_s']:.1f} s) -> {path}")
    return EXIT_OK if summary["passed"] else EXIT_VIOLATED


if __name__ == "__main__":
    sys.exit(run_main(main))
