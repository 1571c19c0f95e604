"""``python -m verify quasi-convexity``: local quasi-convexity along GD (SPEC §5.6).

At every checkpoint θ_k of ``--seeds`` GD runs per H and for each reference θ*
(the final iterate, the explicit NTK witness), checks

    ⟨∇L̂(θ_k), θ_k − θ*⟩ >= L̂(θ_k) − L̂(θ*) − (κ̄/(2√H)) · max_seg L̂ · ‖θ_k − θ*‖²

with κ̄ = max of κ(θ) over the segment (exact: at an endpoint) and max_seg L̂
sampled on a grid (certified upper bound beside it), and writes ``OUT/summary.json``.
Resumable per H (``--fresh`` starts over). With ``--model``, κ and β₂ are that model's
closed forms; with a loss that is not self-bounded the verdict is informational.
"""
from __future__ import annotations

import sys

from .cli import EXIT_OK, EXIT_VIOLATED, ArgumentParser, diverged_lines, fmt, run_and_save, run_main, setup_jax, table
from .dataflags import add_data_args, data_config, name_list

DEFAULT_OUT = "results/quasi-convexity"


def build_parser(prog="python -m verify quasi-convexity"):
    from mhajax.quasi_convexity import REFERENCES
    p = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--heads", default="1,4,16", help="comma-separated numbers of heads H (default 1,4,16)")
    a("--seeds", type=int, default=2, help="GD runs per H")
    a("--steps", type=int, default=200, help="GD steps")
    a("--every", type=int, default=20, help="checkpoint (θ_k) every this many steps")
    a("--lr", type=float, default=1.0, help="GD step size η")
    a("--grid", type=int, default=128, help="segment grid intervals for max_seg L̂ and κ_dir")
    a("--references", default=",".join(REFERENCES),
      help=f"comma-separated θ* choices from {', '.join(REFERENCES)} (default all)")
    add_data_args(p, n=64)
    a("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    a("--fresh", action="store_true", help="discard saved progress in --out and start over")
    return p


def config_from_args(args):
    from mhajax.experiment import heads_list
    from mhajax.quasi_convexity import REFERENCES, QuasiConvexityConfig
    return QuasiConvexityConfig(heads=tuple(heads_list(args.heads)), seeds=args.seeds, seed0=args.seed0,
                                steps=args.steps, every=args.every, lr=args.lr, grid=args.grid,
                                references=tuple(name_list("--references", args.references, REFERENCES)),
                                data=data_config(args, args.n)).validate()


def report(summary, cfg) -> str:
    rows = []
    for key, s in summary["summary"].items():
        if not s["pairs"]:
            rows.append([s["heads"], s["reference"], 0] + ["n/a" if s.get("note") else "-"] * 11)
            continue
        rows.append([s["heads"], s["reference"], s["pairs"], f"{s['holds']}/{s['pairs']}",
                     s["certified_violations"], s["inconclusive"], f"{s['convex']}/{s['pairs']}",
                     fmt(s["max_kappa_need"]), fmt(s["max_kappa_dir"]), fmt(s["max_kappa_bar"]),
                     fmt(s["max_wc_ratio"]), fmt(s["max_cert_factor"]), fmt(s["max_loss_star"]),
                     fmt(s["max_dist"])])
    if not rows:
        return "\n".join(["nothing checked: " + summary["theory_note"]]
                         + [f"note: {n}" for n in summary["notes"]])
    out = [table(["H", "θ*", "pairs", "QC holds", "cert. viol.", "inconcl.", "convex", "max κ_need",
                  "max κ_dir", "max κ̄", "max κ_dir/κ", "M_cert/M_s", "max L̂(θ*)", "max ‖Δ‖"], rows),
           "QC holds: the inequality with the sampled max_seg L̂ (M_s <= true max, so 'holds' is certified); "
           "cert. viol.: fails even with the certified upper bound M_cert = M_s·exp(β̄₂‖Δ‖/(2·grid)); "
           "inconcl.: fails with M_s only (refine --grid).",
           ("κ̄ = max(κ(θ_k), κ(θ*)) is exact (the closed form is convex along the segment). "
            if summary.get("kappa_bar_exact", True) else
            "κ̄ = max of κ over the grid (κ is not convex along segments for this model: sampled). ") +
           "κ_need: smallest κ̄ that makes QC hold (<= 0: plain convexity holds on the pair, counted in 'convex'); "
           "κ_dir: largest −√H·ΔᵀHessΔ/(‖Δ‖²L̂) on the grid (directional weak-convexity constant, sampled); "
           "κ_dir/κ must be <= 1 (SPEC §4, checked at each grid point)."]
    out.append(f"problem: --model {cfg.data.model} --loss {cfg.data.loss} --data {cfg.data.dataset}.")
    if summary.get("resumed_heads"):
        out.append(f"resumed from saved progress: H = {summary['resumed_heads']}")
    for H, m in summary.get("margins", {}).items():
        gw = m["gamma_w"]
        line = f"H={H}: witness margin γ_w per seed {[round(g, 4) for g in gw] if gw is not None else 'n/a'}"
        if "ntk" in m:
            line += f"; NTK max-margin γ per seed {[None if i.get('gamma') is None else round(i['gamma'], 4) for i in m['ntk']]}"
        out.append(line)
    out.extend(f"note: {n}" for n in summary["notes"])
    out.extend(diverged_lines(summary["diverged"]))
    return "\n".join(out)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    setup_jax(args.dtype)
    from mhajax.quasi_convexity import run
    cfg = config_from_args(args)
    summary, path = run_and_save(run, cfg, args.out, command="quasi-convexity", fresh=args.fresh,
                                 show_progress=not args.quiet)
    if not args.quiet:
        print(report(summary, cfg))
    recs = summary["records"]
    held = sum(r["holds"] for r in recs)
    viol = sum(r["certified_violation"] for r in recs)
    conv = sum(r["convex"] for r in recs)
    if summary["passed"]:
        verdict = "PASSED"
    elif summary["passed"] is None:
        verdict = ("NOT APPLICABLE" if not summary["applicable"] else "INFORMATIONAL") + \
            f" ({summary['theory_note']})"
    elif viol or summary["diverged"] or not all(r["wc_holds"] for r in recs):
        verdict = "FAILED"
    else:
        verdict = "INCONCLUSIVE" if recs else "FAILED (nothing checked)"
    print(f"quasi-convexity: {verdict} — QC held on {held}/{len(recs)} pairs ({viol} certified violations); "
          f"plain convexity on {conv}/{len(recs)} ({summary['wall_time_s']:.1f} s) -> {path}")
    return EXIT_VIOLATED if summary["passed"] is False else EXIT_OK


if __name__ == "__main__":
    sys.exit(run_main(main))
