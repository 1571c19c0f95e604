"""``REPORT.md``: every check's verdict and key numbers (from its summary.json),
the figures, and the exact commands and versions that produced them (from the
"meta" blocks). Written by ``python -m figures``; ``python -m figures.report``
writes it alone, from the files as they are (never running a check)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from . import FIGURES
from .data import CHECKS, read, summary_path

ROOT = Path(__file__).resolve().parent.parent


def _f(x, prec=3):
    if x is None:
        return "undef"
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{prec - 1}e}" if x != 0 and (abs(x) >= 1e4 or abs(x) < 1e-2) else f"{x:.{prec}g}"
    if isinstance(x, list):
        return "[" + ", ".join(_f(v, prec) for v in x) + "]"
    return str(x)


def _ci(fit):
    if not fit:
        return "undef"
    ci = fit.get("ci")
    return _f(fit.get("slope")) + (f" [{_f(ci[0])}, {_f(ci[1])}]" if ci else "")


def _cell(c) -> str:
    """A table cell: numbers through ``_f``; a literal ``|`` escaped so it cannot split the row."""
    return (c if isinstance(c, str) else _f(c)).replace("|", "\\|")


def _table(head, rows):
    out = ["| " + " | ".join(_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def command(summary, check):
    """The command line recorded in the meta block (``python -m verify ...``)."""
    argv = ((summary or {}).get("meta") or {}).get("argv") or []
    if argv and argv[0].endswith(os.path.join("verify", "__main__.py")):
        return "python -m verify " + " ".join(argv[1:])
    if argv and argv[0].endswith(".py") and "verify" in argv[0]:
        return "python -m verify." + Path(argv[0]).stem + " " + " ".join(argv[1:])
    return " ".join(argv) if argv else f"python -m verify {check} (argv not recorded)"


# ---------------------------------------------------------------- per-check key numbers

def weak_convexity(s):
    rows = [[H, v["P"], v["method"], v["checkpoints"], v["max_kappa_emp"], v["max_kappa_block"],
             v.get("max_kappa_mid"), v.get("max_kappa_phi"), v["max_kappa_bound"], v["bound_over_emp"],
             v["all_hold"]] for H, v in s["by_heads"].items()]
    return _table(["H", "P", "method", "ckpts", "max κ_emp", "max κ_blk", "max κ_mid", "max κ_Φ",
                   "max κ(θ)", "κ(θ)/κ_emp", "chain + self-bounded checks hold"], rows) + (
        f"\n\nviolations: {len(s['violations'])}, diverged: {len(s['diverged'])}, "
        f"undefined (L̂ underflow): {s['undefined']}.")


def convergence(s):
    def test_final(v):
        tb = v["curves"].get("test_loss_band")
        return tb["mean"][-1] if tb else None

    rows = [[H, v["P"], min(v["witness"]["gamma_bar"]) if v.get("witness") else "n/a",
             sum(v["final_loss"]) / len(v["final_loss"]), test_final(v),
             _ci(v["loss_slope"]), _ci(v["loss_slope_log_corrected"]), v["classification"], v["holds"],
             v["curves"]["distance_band"]["mean"][-1]] for H, v in s["by_heads"].items()]
    p = next(iter(s["by_heads"].values()))["loss_slope_log_corrected"].get("log_power", "p")
    return _table(["H", "P", "min γ̄_w", "mean L̂(θ_K)", "mean test L(θ_K)", "slope of L̂ vs K [CI]",
                   f"slope of L̂/log^{_f(p)} K", "vs −1", "Õ(1/K) holds", "‖θ_K−θ₀‖"], rows) + (
        f"\n\nfit window K ∈ {s['window']}, diverged: {len(s['diverged'])}."
        + (f" {s['test_note']}." if s.get("test_note") else ""))


def generalization(s):
    b = s["bands"]
    rows = [[n, s["steps"][j], b["train"]["mean"][j], b["test"]["mean"][j], b["gap"]["mean"][j],
             s["resolved"][j]] for j, n in enumerate(s["ns"])]
    t1 = _table(["n", "K", "train L̂", "test L", "gap", "gap resolved"], rows)
    rows = [[k, _ci(s["fits"].get(k)), s["verdicts"][k]["classification"], s["verdicts"][k]["holds"]]
            for k in ("test", "gap", "train")]
    return t1 + "\n\n" + _table(["slope over n of", "slope [CI]", "vs −1", "Õ(1/n) not contradicted"], rows)


def heads(s):
    Hs = s["heads"]
    rows = [[n, v["steps"], v["threshold"]] + [v["by_heads"][str(H)]["mean_test"] for H in Hs]
            + [v["smallest_heads"] if v["smallest_heads"] is not None else f"> {max(Hs)}", v["log6"]]
            for n, v in s["by_n"].items()]
    return _table(["n", "K", "c·log(n)/n"] + [f"test L, H={H}" for H in Hs] + ["H_min", "log⁶ n"], rows) + (
        f"\n\nrule: {s['regime_rule']}.")


def ntk_margin(s):
    rows = [[H, v["P"], f"{v['separable']}/{v['seeds']}", v["gamma_bar_mean"], v["gamma_bar_min"],
             v["phi0_max"], v["loss_star_max"], v["passed"]] for H, v in s["by_heads"].items()]
    return _table(["H", "P", "separable", "mean γ̄", "min γ̄", "max |Φ(θ₀)|", "max L̂(θ*)", "passed"], rows) + (
        "\n\ncriteria: " + "; ".join(f"{k}: {v}" for k, v in s["criteria"].items()) + ".")


def one_step(s):
    rows = [[c["signal"], c["zeta"], c["heads"], c["best_lr0"], c["best_ratio_lin_min"], c["holds"],
             c["holds_with_init"]] for c in s["cells"]]
    judged = "" if s.get("passed") is not None else " The claim was not judged for this data model (informational)."
    return _table(["s", "ζ", "H", "best η₀", "min γ̄_attn/γ̄_lin", "claim holds", "…with init condition"],
                  rows) + (f"\n\n{s['criterion']}.{judged} Holding: {s['cells_holding']}/{len(s['cells'])} cells "
                           f"({s['cells_holding_with_init']} with the initialization condition).")


def quasi_convexity(s):
    keys = ["pairs", "holds", "certified_violations", "inconclusive", "convex", "max_kappa_need",
            "max_kappa_bar", "looseness", "max_wc_ratio", "wc_holds"]
    rows = [[v.get("heads"), v.get("reference")] + [v.get(k) for k in keys] for v in s["summary"].values()]
    out = _table(["H", "θ*"] + keys, rows)
    if s.get("notes"):
        out += "\n\nnotes: " + "; ".join(s["notes"][:10]) + ("; …" if len(s["notes"]) > 10 else "")
    return out


def _judged(flags):
    """yes if every judged flag is true, **no** if one is false, 'not judged' if none was."""
    flags = [f for f in flags if f is not None]
    return "not judged" if not flags else ("yes" if all(flags) else "**no**")


def variants(s):
    """Per head model: the largest κ over H, the slope of log max κ_emp vs log H, and
    whether every implied inequality held; inequalities a (model, loss) pair does
    not imply are informational (mhajax.applicability.judge)."""
    rows = []
    for name, m in s["by_model"].items():
        bh = m["by_heads"].values()
        info = {k for r in bh for k, v in (r.get("not_implied_held") or {}).items() if not v}
        rows.append([name, ",".join(m["by_heads"]), max((r["final_loss"] for r in bh
                                                          if r.get("final_loss") is not None), default=None),
                     max((r["max_kappa_emp"] for r in bh if r.get("max_kappa_emp") is not None), default=None),
                     m.get("slope_kappa_emp"), {True: "yes", False: "**no**", None: "undef"}[m.get("survives")],
                     _judged([r.get("passed") for r in bh]),
                     ", ".join(sorted(info)) or "-"])
    cfg = s.get("config") or (s.get("meta") or {}).get("config") or {}
    return _table(["model", "H", "max final L̂", "max κ_emp", "slope log κ_emp vs log H", "1/√H gain survives",
                   "implied inequalities hold", "not implied, failed (info)"], rows) + (
        f"\n\nloss: {cfg.get('loss', '?')}; judged checkpoints: {s.get('judged')}, violations: "
        f"{len(s['failures'])}, diverged: {len(s['diverged'])}, undefined: {s['undefined']}. "
        f"'survives' = slope < {s.get('survives_below')}.")


DETAIL = {"weak-convexity": weak_convexity, "convergence": convergence, "generalization": generalization,
          "heads": heads, "ntk-margin": ntk_margin, "one-step": one_step, "quasi-convexity": quasi_convexity,
          "variants": variants}
FIGURE_CAPTIONS = {
    "fig1_loss": "Training and test loss vs GD iteration K for H = 1, 2, 4, 8, 16, 32 (mean ± bootstrap band).",
    "fig2_weak_convexity": "The weak-convexity chain κ_emp ≤ κ_blk ≤ κ_mid ≤ κ_Φ ≤ κ(θ) along GD.",
    "fig3_self_bounded": "λ_min and λ_max of ∇²L̂ against L̂ with the self-bounded bounds.",
    "fig4_generalization": "Generalization gap vs n with the fitted slope and slope −1.",
    "fig5_ntk_margin": "NTK margin after one step vs at init and the linear margins.",
    "fig6_heads_distance": "Smallest H in the Õ(1/n) regime vs log⁶ n; ‖θ_K − θ₀‖ vs K.",
}


def _revision() -> str:
    """The code revision the report was written at: ``git describe`` (with ``-dirty``), or 'unknown'."""
    import subprocess
    try:
        r = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=Path(__file__).resolve().parent,
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _where(path, base) -> str:
    """``path`` relative to ``base`` (the repository root) when inside it, else absolute."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(base))
    except ValueError:
        return str(p)


def render(results_dir, report_path, figures_dir) -> str:
    report_path = Path(report_path).resolve()
    base = report_path.parent
    lines = ["# mhajax results report", "",
             "Generated by `python -m figures` (report alone: `python -m figures.report`) from "
             f"`{_where(results_dir, ROOT)}/<check>/summary.json`. Every number "
             "below is copied from those files; rerun the commands in *Provenance* to reproduce them "
             f"(then `python -m figures --from {_where(results_dir, ROOT)}`). Code revision when this report "
             f"was written: `{_revision()}`.", "",
             "## Verdicts", ""]
    summaries = {c: read(results_dir, c) for c in CHECKS}
    rows = []
    for c, s in summaries.items():
        if s is None:
            rows.append([c, "not run", "-", "-", "-"])
        else:
            verdict = {True: "passed", False: "**FAILED**", None: "informational (not judged)"}[
                s.get("passed") if s.get("passed") in (True, False) else None]
            rows.append([c, verdict, f"{s.get('wall_time_s', 0):.1f}",
                         (s.get("meta") or {}).get("created", "?"), f"`{command(s, c)}`"])
    lines += [_table(["check", "verdict", "wall time (s)", "created", "command"], rows), ""]
    for c, s in summaries.items():
        lines += [f"### {c}", ""]
        if s is None:
            lines += [f"No result file (`{summary_path(results_dir, c)}`): run `python -m verify {c}`.", ""]
            continue
        try:
            lines += [DETAIL[c](s), ""]
        except (KeyError, TypeError, IndexError) as e:  # a schema this report does not know yet
            lines += [f"passed: {_f(s.get('passed'))} (key numbers not rendered: missing key {e})", ""]
    lines += ["## Figures", ""]
    fdir = Path(figures_dir).resolve()
    for name in FIGURES:
        png = fdir / f"{name}.png"
        if png.is_file():
            rel = os.path.relpath(png, base)
            lines += [f"**{name}** — {FIGURE_CAPTIONS[name]} ([PDF]({rel[:-4]}.pdf))", "",
                      f"![{name}]({rel})", ""]
        else:
            lines += [f"**{name}** — not built.", ""]
    lines += ["## Provenance", "",
              "Each check's meta block: the command, the config hash, the seeds, dtype and backend, and the "
              "package versions.", ""]
    rows = []
    for c, s in summaries.items():
        m = (s or {}).get("meta")
        if not m:
            continue
        v = m.get("versions", {})
        rows.append([c, f"`{command(s, c)}`", m.get("config_hash", "?"), _f(m.get("seeds")),
                     f"{m.get('dtype')} / {m.get('backend')}",
                     ", ".join(f"{k} {val}" for k, val in v.items() if val is not None),
                     m.get("platform", "?")])
    lines += [_table(["check", "command", "config hash", "seeds", "dtype / backend", "versions", "platform"], rows),
              "", "Full configs are in each file's `meta.config`.", ""]
    return "\n".join(lines)


def write_report(results_dir="results", report_path="REPORT.md", figures_dir="figures") -> Path:
    text = render(results_dir, report_path, figures_dir)
    p = Path(report_path)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, p)
    return p


def main(argv=None) -> int:
    import argparse
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(prog="python -m figures.report", description="write REPORT.md only")
    ap.add_argument("--from", dest="results", default="results")
    ap.add_argument("--out", default=str(root / "REPORT.md"))
    ap.add_argument("--figures", default=str(root / "figures"))
    a = ap.parse_args(argv)
    print(f"report -> {write_report(a.results, a.out, a.figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
