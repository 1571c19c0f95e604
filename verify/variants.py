"""``python -m verify variants``: the weak-convexity chain and its 1/√H behaviour for
attention variants, losses and data models beyond the paper.

For each model (--models) and H (--heads), GD trajectories are trained and the κ chain
κ_emp <= κ_blk <= κ_mid <= κ_Φ <= κ(θ) is measured at every checkpoint, each link judged
only where the (model, loss) pair implies it (mhajax.applicability). Per model, the slope
of log max κ_emp against log H says whether λ_min(∇²L̂) >= −(c/√H)·L̂ survives (slope ~0)
or not (slope ~1/2). Writes OUT/summary.json.
"""
from __future__ import annotations

import sys

from .cli import EXIT_OK, EXIT_VIOLATED, ArgumentParser, fmt, run_and_save, run_main, setup_jax, table

DEFAULT_OUT = "results/variants"


def build_parser(prog="python -m verify variants"):
    from mhajax.variant_sweep import ALL_MODELS, VariantsConfig
    c = VariantsConfig()
    p = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--models", default=",".join(ALL_MODELS),
      help=f"comma-separated models (default all: {','.join(ALL_MODELS)})")
    a("--heads", default="1,2,4,8,16,32,64", help="comma-separated numbers of heads H (default 1,2,4,...,64)")
    a("--seeds", type=int, default=c.seeds, help=f"trajectories per (model, H) (default {c.seeds})")
    a("--seed0", type=int, default=c.seed0, help="first seed")
    a("--n", type=int, default=c.n, help=f"training samples (default {c.n})")
    a("--tokens", type=int, default=c.tokens, help=f"tokens per sequence T (default {c.tokens})")
    a("--dim", type=int, default=c.dim, help=f"token dimension d (default {c.dim})")
    a("--steps", type=int, default=c.steps, help=f"GD steps (default {c.steps})")
    a("--every", type=int, default=c.every, help=f"checkpoint every this many steps (default {c.every})")
    a("--lr", type=float, default=c.lr, help=f"GD step size η (default {c.lr})")
    a("--loss", default=c.loss, help="logistic (default), exponential or squared_hinge")
    a("--data", default=c.data, help="data model: mixture (default), sparse or npz")
    a("--data-path", default=None, help="the .npz file (X [n,T,d], y [n] in ±1) for --data npz")
    a("--zeta", type=float, default=c.zeta, help="mixture: fraction of relevant tokens ζ")
    a("--clusters", type=int, default=c.clusters, help="mixture: irrelevant clusters K (d >= K + 2)")
    a("--signal", type=float, default=c.signal, help="mixture/sparse: signal strength s")
    a("--sigma", type=float, default=c.sigma, help="mixture/sparse: token noise σ")
    a("--k-signal", type=int, default=c.k_signal, help="sparse: signal positions per positive sequence")
    a("--u-scale", type=float, default=c.u_scale, help=f"init std of readout entries (default {c.u_scale})")
    a("--w-scale", type=float, default=c.w_scale,
      help=f"init std of key-query entries times sqrt(d) (default {c.w_scale}; 0 leaves relu dead "
           "and linear at Φ ≡ 0)")
    a("--method", default=c.method, help="λmin/λmax solver for per-head models: auto, dense, lanczos or block")
    a("--links", default=c.links, help="'all' (full chain) or 'core' (skip κ_mid, κ_Φ)")
    a("--lanczos-steps", type=int, default=c.lanczos_steps, help="Krylov basis size per Lanczos cycle")
    a("--max-cycles", type=int, default=c.max_cycles, help="Lanczos restarts before giving up")
    a("--dtype", default="float64", help="float64 (default) or float32")
    a("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    a("--fresh", action="store_true", help="discard saved progress in --out and start over")
    a("--quiet", action="store_true", help="print only the verdict")
    return p


def config_from_args(args):
    from mhajax.variant_sweep import VariantsConfig
    return VariantsConfig(
        models=args.models, heads=args.heads, seeds=args.seeds, seed0=args.seed0, n=args.n,
        tokens=args.tokens, dim=args.dim, steps=args.steps, every=args.every, lr=args.lr,
        loss=args.loss, data=args.data, data_path=args.data_path, zeta=args.zeta,
        clusters=args.clusters, signal=args.signal, sigma=args.sigma, k_signal=args.k_signal,
        u_scale=args.u_scale, w_scale=args.w_scale, method=args.method, links=args.links,
        lanczos_steps=args.lanczos_steps, max_cycles=args.max_cycles).validate()


SYMBOL = {"kappa_emp": "κ_emp", "kappa_block": "κ_blk", "kappa_mid": "κ_mid",
          "kappa_phi": "κ_Φ", "kappa_bound": "κ(θ)"}


def _verdict(v):
    return {True: "yes", False: "NO", None: "-"}[v]


def report(summary) -> str:
    rows = []
    for name, m in summary["by_model"].items():
        for H, r in m["by_heads"].items():
            ni = r["not_implied_held"]
            rows.append([name, H, r["P"], r["method"], fmt(r["final_loss"])]
                        + [fmt(r[f"max_{k}"]) for k in SYMBOL]
                        + [_verdict(r["passed"]),
                           ",".join(f"{k.replace('kappa_', '')}:{'ok' if v else 'FAIL'}" for k, v in ni.items()) or "-"])
    head = ["model", "H", "P", "method", "final L̂"] + list(SYMBOL.values()) + ["implied held", "not implied (info)"]
    out = [table(head, rows),
           "κ columns: largest value over checkpoints and seeds; 'undef' = does not apply or L̂ underflowed. "
           "'implied held': every inequality the (model, loss) pair implies held at every checkpoint."]
    srows = []
    for name, m in summary["by_model"].items():
        ps = [s for s in m["slope_kappa_emp_per_seed"] if s is not None]
        spread = f"{min(ps):+.2f}..{max(ps):+.2f}" if len(ps) > 1 else "-"
        srows.append([name, fmt(m["slope_kappa_emp"]), spread, fmt(m["slope_kappa_block"]),
                      {True: "yes", False: "NO", None: "undef"}[m["survives"]]])
    out.append("")
    out.append(table(["model", "slope κ_emp", "per-seed", "slope κ_blk", "1/√H survives"], srows))
    out.append(f"slope of log(max κ_emp) vs log H: 0 = the paper's λ_min >= −(c/√H)L̂ with c flat in H; "
               f"1/2 = no multi-head gain. 'survives' = slope < {summary['survives_below']}.")
    for name, m in summary["by_model"].items():
        out.append(f"  {name}: {m['statement']}")
    for f in summary["failures"][:10]:
        out.append(f"VIOLATED: {f['model']} H={f['heads']} seed={f['seed']} step={f['step']}: {', '.join(f['failed'])}")
    for d in summary["diverged"]:
        out.append(f"DIVERGED: {d['model']} H={d['heads']} seed={d['seed']} (non-finite iterate)")
    if summary["undefined"]:
        out.append(f"{summary['undefined']} checkpoint(s) with L̂ underflowed or not finite: ratios undefined, not judged.")
    return "\n".join(out)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    setup_jax(args.dtype)
    from mhajax.variant_sweep import run
    cfg = config_from_args(args)
    summary, path = run_and_save(run, cfg, args.out, command="variants", fresh=args.fresh,
                                 show_progress=not args.quiet)
    if not args.quiet:
        print(report(summary))
        if summary.get("resumed"):
            print(f"resumed from saved progress: {', '.join(summary['resumed'])}")
    verdict = "PASSED" if summary["passed"] else "FAILED"
    print(f"variants: {verdict} ({summary['judged']} judged checkpoints of {len(summary['records'])}, "
          f"{summary['wall_time_s']:.1f} s) -> {path}")
    return EXIT_OK if summary["passed"] else EXIT_VIOLATED


if __name__ == "__main__":
    sys.exit(run_main(main))
