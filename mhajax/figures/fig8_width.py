"""Figure 8: the width laws, H = 1 … 4096 (``--preset width``; docs/theory.md §3.6, §15.7).

Read from the width results (``results-width/``, :data:`PRESET`): per checkpoint step (θ₀ and the
last), seed means over H with the seeds' range shaded,

(a) κ_emp and κ(θ) (weak-convexity ``width_law.steps[k].mean``): the lemma's constant measured
    and its bound; the title carries the judged slope of κ_emp/κ(θ) at the last step;
(b) N₋/P (census ``width.steps[k].neg_frac_lo/hi``, certified) beside N₋(B)/P and the bound
    d/(T + d);
(c) |tr₋|/L̂ (census ``width.steps[k].abs_trace_over_loss``) beside the bound d²·κ(θ)·√H of
    (6.7) and (3.6), κ(θ) the seed mean at that step (weak-convexity);
(d) λ_max/L̂ (weak-convexity, certified enclosure's point) beside the bound (6.8)
    β₂² + κ(θ)/√H (seed means of the records' own β₂ and κ(θ)).
"""
from __future__ import annotations

import numpy as np

from mhajax.figures import style

NAME = "fig8_width"
SOURCES = ("weak-convexity", "census")
#: the preset whose results this figure draws (read from ``results-width`` beside the results)
PRESET = "width"


def _arr(v):
    return np.array([np.nan if x is None else x for x in v], dtype=float)


def _stats(rows, i):
    return _arr([None if r is None else r[i] for r in rows])


def _steps(law):
    keys = list(law["steps"])
    return [keys[0], keys[-1]] if len(keys) > 1 else keys


def plot(results):
    """Figure 8 from the weak-convexity and census summaries of the width preset."""
    wc, cs = results.get("weak-convexity"), results.get("census")
    fig, axes = style.figure(2, 2, height=5.4)
    law = (wc or {}).get("width_law") or {}
    width = (cs or {}).get("width") or {}
    heads = np.asarray(law.get("heads") or width.get("heads"), float)
    d = ((cs or wc)["meta"]["config"]["data"])["dim"]
    for j, k in enumerate(_steps(law) if law.get("steps") else []):
        e, col, mk = law["steps"][k], style.color(j), style.marker(j)
        m, lo, hi = e["mean"], e["seed_min"], e["seed_max"]
        ax = axes[0, 0]
        ax.fill_between(heads, _arr(lo["kappa_emp"]), _arr(hi["kappa_emp"]), color=col, alpha=0.25, lw=0)
        ax.plot(heads, _arr(m["kappa_emp"]), color=col, marker=mk, ms=3, label=f"κ_emp, step {k}")
        ax.plot(heads, _arr(m["kappa_bound"]), color=col, ls="--", lw=0.8, label=f"κ(θ), step {k}")
        ax = axes[1, 1]
        ax.fill_between(heads, _arr(lo["lambda_max_over_loss"]), _arr(hi["lambda_max_over_loss"]), color=col,
                        alpha=0.25, lw=0)
        ax.plot(heads, _arr(m["lambda_max_over_loss"]), color=col, marker=mk, ms=3, label=f"λmax/L̂, step {k}")
        ax.plot(heads, _arr(m["smoothness_coefficient"]), color=col, ls="--", lw=0.8,
                label=f"β₂² + κ(θ)/√H, step {k}")
    for j, k in enumerate(list(width.get("steps", {}))[:1] + list(width.get("steps", {}))[-1:]
                          if len(width.get("steps", {})) > 1 else list(width.get("steps", {}))):
        e, col, mk = width["steps"][k], style.color(j), style.marker(j)
        ax = axes[0, 1]
        lo, hi = _stats(e["neg_frac_lo"], 1), _stats(e["neg_frac_hi"], 2)
        ax.fill_between(heads, lo, hi, color=col, alpha=0.25, lw=0)
        ax.plot(heads, _stats(e["neg_frac_hi"], 0), color=col, marker=mk, ms=3, label=f"N₋/P, step {k}")
        ax.plot(heads, _stats(e["neg_B_frac"], 0), color=col, ls="--", lw=0.8, label=f"N₋(B)/P, step {k}")
        ax = axes[1, 0]
        tr = e["abs_trace_over_loss"]
        ax.fill_between(heads, _stats(tr, 1), _stats(tr, 2), color=col, alpha=0.25, lw=0)
        ax.plot(heads, _stats(tr, 0), color=col, marker=mk, ms=3, label=f"|tr₋|/L̂, step {k}")
        kb = (law.get("steps", {}).get(k) or {}).get("mean", {}).get("kappa_bound")
        if kb is not None:
            ax.plot(heads, d ** 2 * _arr(kb) * np.sqrt(heads), color=col, ls="--", lw=0.8,
                    label=f"d²·κ(θ)·√H, step {k}")
    if width:
        axes[0, 1].axhline(width["bound"], color=style.OKABE_ITO["black"], ls=":", lw=0.8, label="d/(T + d)")
    for ax in axes.flat:
        ax.set_xscale("log", base=2)
    for ax in (axes[0, 0], axes[1, 0], axes[1, 1]):
        ax.set_yscale("log")
    axes[1, 0].set_xlabel("heads $H$")
    axes[1, 1].set_xlabel("heads $H$")
    axes[0, 0].set_ylabel(r"$\kappa$")
    axes[0, 1].set_ylabel(r"$N_-/P$")
    axes[1, 0].set_ylabel(r"$|\mathrm{tr}(\nabla^2\hat L)_-|/\hat L$")
    axes[1, 1].set_ylabel(r"$\lambda_{\max}/\hat L$")
    title = "(a) κ_emp and κ(θ)"
    if law.get("steps"):
        last = law["steps"][list(law["steps"])[-1]]["slope_ratio"]
        if last and last.get("slope") is not None:
            ci = last.get("ci")
            title += f"\nslope of κ_emp/κ(θ) {last['slope']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
    axes[0, 0].set_title(title, fontsize=6.5)
    axes[0, 1].set_title("(b) $N_-/P$\n(shaded: certified, seed range)", fontsize=6.5)
    tr_title = "(c) |tr₋|/L̂"
    if width.get("steps"):
        sl = width["steps"][list(width["steps"])[-1]].get("trace_slope") or {}
        if sl.get("slope") is not None:
            ci = sl.get("ci")
            tr_title += f": slope {sl['slope']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
    axes[1, 0].set_title(tr_title, fontsize=6.5)
    axes[1, 1].set_title("(d) $\\lambda_{\\max}/\\hat L$ and (6.8)", fontsize=6.5)
    for ax in axes.flat:
        style.legend(ax, loc="best", fontsize=4.0)
    src = wc or cs
    style.caption(fig, "Fig. 8. The width laws, H = 1 … 4096 (--preset width): seed means over "
                  f"{len(src['seeds'])} seeds, shaded their range (N₋/P: the certified brackets); dashed: "
                  "the bounds. " + style.config_text(src, ["data.n", "data.tokens", "data.dim"]) + ".", width=84)
    return fig
