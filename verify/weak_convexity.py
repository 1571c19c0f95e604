"""``python -m verify weak-convexity``: self-bounded weak convexity along GD.

Checks at every checkpoint the chain κ_emp <= κ_blk <= κ_mid <= κ_Φ <= κ(θ)
(SPEC §4), the self-bounded gradient and smoothness, and writes
``OUT/summary.json``.

``--model`` (softmax, linear, relu, qk, value, causal, cls, or ``two-layer``), ``--loss``
(logistic, exponential, squared_hinge) and ``--data`` (mixture, sparse, npz with
``--data-path``) choose the problem. Only the inequalities the (model, loss) pair implies
(mhajax.applicability) decide the verdict; the others are printed, one line each with
the reason, as *not implied* (informational). A model without a closed-form κ has no
κ(θ) link; ``two-layer`` couples its heads, so only κ_emp is measured (matrix-free
Lanczos) and the run is informational.

``--save-every N`` (a multiple of ``--every``; default ~500, 0 = off) trains each H in segments
of N GD steps and saves the state after each (parameters, optimizer state, checkpoints,
losses, finite flags) under ``OUT/.progress``; finished H are always saved. Rerunning the
same command after a kill resumes from the last saved segment with identical numbers
(``--fresh`` starts over).
"""
from __future__ import annotations

import sys


from .cli import EXIT_OK, EXIT_VIOLATED, ArgumentParser, fmt, run_and_save, run_main, setup_jax, table
from .dataflags import add_data_args, data_config

DEFAULT_OUT = "results/weak-convexity"


def build_parser(prog="python -m verify weak-convexity"):
    p = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--heads", default="1,4,16", help="comma-separated numbers of heads H (default 1,4,16)")
    a("--seeds", type=int, default=2, help="trajectories per H (seeds seed0..seed0+seeds-1)")
    add_data_args(p, n=64)  # --n --tokens --dim --zeta ... --seed0 --dtype --quiet
    a("--steps", type=int, default=200, help="GD steps")
    a("--every", type=int, default=20, help="checkpoint every this many steps")
    a("--lr", type=float, default=1.0, help="GD step size η")
    a("--method", default="auto", help="λmin/λmax solver: auto, dense, lanczos or block")
    a("--links", default="all", help="'all' (full chain) or 'core' (skip κ_mid, κ_Φ)")
    a("--lanczos-steps", type=int, default=64, help="Krylov basis size per Lanczos cycle")
    a("--max-cycles", type=int, default=20, help="Lanczos restarts before giving up")
    a("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    a("--save-every", type=int, default=None,
      help="save the GD state every N steps, a multiple of --every (default: the largest "
           "multiple of --every not above 500, at least --every; 0: save per H only)")
    a("--fresh", action="store_true", help="discard saved progress in --out and start over")
    return p


def config_from_args(args):
    from mhajax.experiment import heads_list
    from mhajax.weak_convexity import WeakConvexityConfig
    data = data_config(args, args.n)  # --model two-layer: WeakConvexityConfig.validate handles it
    return WeakConvexityConfig(heads=tuple(heads_list(args.heads)), seeds=args.seeds,
                               seed0=args.seed0, steps=args.steps, every=args.every, lr=args.lr,
                               method=args.method, links=args.links,
                               lanczos_steps=args.lanczos_steps, max_cycles=args.max_cycles,
                               data=data, save_every=args.save_every).validate()


SYMBOL = {"kappa_emp": "κ_emp", "kappa_block": "κ_blk", "kappa_mid": "κ_mid",
          "kappa_phi": "κ_Φ", "kappa_bound": "κ(θ)"}


def _link_symbol(name: str) -> str:
    """``kappa_mid<=kappa_phi`` -> ``κ_mid<=κ_Φ``; checks keep their names."""
    return "<=".join(SYMBOL.get(k, k) for k in name.split("<="))


def report(summary) -> str:
    """The per-H verdict table (largest κ of each kind, smallest slack of each link), then
    one line per inequality the (model, loss) pair does not imply."""
    by_heads = summary["by_heads"]
    links = []
    for s in by_heads.values():
        links += [l for l in s["min_slack"] if l not in links]
    not_implied = set()
    for s in by_heads.values():
        not_implied |= set(s.get("not_implied", {}))

    def col(l):
        b, a = l.split("/")
        name = "/".join(SYMBOL[k] for k in l.split("/"))
        return name + ("*" if f"{a}<={b}" in not_implied else "")
    rows = []
    for H, s in by_heads.items():
        rows.append([H, s["P"], s["method"], s["checkpoints"]]
                    + [fmt(s[f"max_{k}"]) for k in SYMBOL]
                    + [fmt(s["min_slack"].get(l)) for l in links]
                    + [fmt(s["max_residual"]),
                       "yes" if s["all_hold"] else ("-" if s["all_hold"] is None else "NO")])
    head = (["H", "P", "method", "ckpts"] + list(SYMBOL.values()) + [col(l) for l in links]
            + ["resid", "holds"])
    prob = summary.get("problem") or {}
    out = []
    if prob:
        out.append(f"model {prob['model']}, loss {prob['loss']}, data {prob['data']}: {prob['note']}")
    out += [table(head, rows),
            "κ columns: largest value over checkpoints; x/y columns: smallest ratio over checkpoints"
            " (>= 1 means the link held everywhere; * = not implied, informational); resid: largest "
            "eigen-residual; holds: every implied inequality held ('-': none judged)."]
    agg = {}
    for s in by_heads.values():
        for k, e in s.get("not_implied", {}).items():
            a = agg.setdefault(k, dict(held=0, violated=0, undefined=0, reason=e["reason"]))
            for f in ("held", "violated", "undefined"):
                a[f] += e[f]
    for k, why in (summary.get("not_implied") or {}).items():
        a = agg.get(k)
        tally = (f"held at {a['held']}, violated at {a['violated']} checkpoint(s)"
                 if a and a["held"] + a["violated"] else "not measured")
        out.append(f"not implied (informational): {_link_symbol(k)}: {why}; {tally}")
    unconv = [r for r in summary["records"]
              if r.get("loss_defined") and not r["eig_converged"] and r["num_matvecs"] > 0]
    if unconv:
        worst = max(unconv, key=lambda r: max(r["lambda_min_residual"] or 0, r["lambda_max_residual"] or 0))
        out.append(f"Lanczos did not reach its residual tolerance at {len(unconv)} checkpoint(s) "
                   f"(worst: H={worst['heads']} seed={worst['seed']} step={worst['step']}, residual "
                   f"{worst['lambda_min_residual']:.2e}); there κ_emp is a Ritz (lower) estimate, and the "
                   "weak-convexity verdict rests on the certified κ_blk as everywhere.")
    if summary["undefined"]:
        out.append(f"{summary['undefined']} checkpoint(s) with underflowed L̂: ratios undefined, not counted.")
    for v in summary["violations"][:10]:
        out.append(f"VIOLATED at H={v['heads']} seed={v['seed']} step={v['step']}: {', '.join(v['failed'])}; "
                   + ", ".join(f"{k}={v[k]!r}" for k in ("loss", "kappa_emp", "kappa_block", "kappa_mid",
                                                          "kappa_phi", "kappa_bound")))
    for d in summary["diverged"]:
        out.append(f"DIVERGED: H={d['heads']} seed={d['seed']} became non-finite at step {d['step']}"
                   " (reported, not averaged: try a smaller --lr)")
    if summary.get("resumed_heads"):
        out.append(f"resumed from saved progress: H = {summary['resumed_heads']}")
    for H, step in (summary.get("resumed_from_step") or {}).items():
        out.append(f"resumed H={H} mid-trajectory from the segment saved at step {step}")
    return "\n".join(out)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    setup_jax(args.dtype)
    from mhajax.weak_convexity import run
    cfg = config_from_args(args)
    summary, path = run_and_save(run, cfg, args.out, command="weak-convexity", fresh=args.fresh,
                                 show_progress=not args.quiet)
    if not args.quiet:
        print(report(summary))
    verdict = {True: "PASSED", False: "FAILED",
               None: "INFORMATIONAL (the model/loss pair implies no inequality; nothing judged)"}
    print(f"weak-convexity: {verdict[summary['passed']]} ({len(summary['records'])} checkpoints, "
          f"{summary['judged']} judged, {summary['wall_time_s']:.1f} s) -> {path}")
    return EXIT_VIOLATED if summary["passed"] is False else EXIT_OK


if __name__ == "__main__":
    sys.exit(run_main(main))
