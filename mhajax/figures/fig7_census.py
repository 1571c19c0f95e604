"""Figure 7: the whole Hessian spectrum, counted (census check).

(a), (b) the certified histogram of eig(∇²L̂) at the first and last checkpoints of the largest H,
seed ``seeds[0]`` (``records[*].histogram``: exact counts as a step line, a bin whose count is
only bracketed drawn at both ends), beside SLQ's estimated counts with ±2 standard errors
(``records[*].slq``); (c) N₋/P against H at the first and last checkpoints (``by_heads[H].steps``
seed means, both ends of the certified bracket); (d) |tr(∇²L̂)₋|/L̂ against H (the bracket's
ends) with the fitted log-log slope and its CI (``trace_slope``).
"""
from __future__ import annotations

import matplotlib.ticker
import numpy as np

from mhajax.figures import style

NAME = "fig7_census"
SOURCES = ("census",)


def kept_records(census):
    """The first- and last-checkpoint records of the largest H at the first seed (the ones
    holding a histogram), in step order."""
    H = max(int(h) for h in census["by_heads"])
    seed = census["seeds"][0]
    recs = [r for r in census["records"] if int(r["heads"]) == H and r["seed"] == seed and "histogram" in r]
    return H, sorted(recs, key=lambda r: r["step"])


def _hist_panel(ax, rec, i):
    h = rec["histogram"]
    e = np.asarray(h["edges"], float)
    lo, hi = np.asarray(h["counts_lo"], float), np.asarray(h["counts_hi"], float)
    mid = 0.5 * (e[1:] + e[:-1])
    ax.step(e, np.append(hi, hi[-1]), where="post", color=style.color(0), lw=1.0, label="census")
    if np.any(lo != hi):
        ax.step(e, np.append(lo, lo[-1]), where="post", color=style.color(0), lw=0.6, ls=":",
                label="census lower end")
    s = rec.get("slq") or {}
    if s.get("available"):
        c, se = np.asarray(s["counts"], float), np.asarray(s["sem"], float)
        ax.vlines(mid, np.maximum(c - 2 * se, 0.0), c + 2 * se, color=style.color(1), lw=0.7)
        ax.plot(mid, c, ls="none", marker="o", ms=2.5, color=style.color(1), label="SLQ ± 2 se")
    ax.axvline(0.0, color=style.GREY, lw=0.5, ls="--", label="λ = 0")
    ax.set_xscale("symlog", linthresh=max(abs(e[0]), 1e-12))
    ax.set_xticks([e[0], 0.0, e[-1]], [f"{e[0]:.2g}", "0", f"{e[-1]:.2g}"])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(r"eigenvalue $\lambda$ of $\nabla^2\hat L$")
    ax.set_ylabel("eigenvalues per bin")
    ax.set_title(f"({'ab'[i]}) step {rec['step']}: N₋ = {rec['neg_lo']}"
                 + ("" if rec["neg_lo"] == rec["neg_hi"] else f"…{rec['neg_hi']}") + f"/{rec['P']}",
                 fontsize=6.5)
    style.legend(ax, loc="upper right", fontsize=4.5)


def plot(results):
    """Figure 7: census histogram beside SLQ, N₋/P and |tr₋|/L̂ against H."""
    census = results["census"]
    fig, axes = style.figure(2, 2, height=5.4)
    H, recs = kept_records(census)
    for i, rec in enumerate(recs[:1] + recs[-1:] if len(recs) > 1 else recs * 2):
        _hist_panel(axes[0, i], rec, i)
    heads = sorted(int(h) for h in census["by_heads"])
    steps = census["checkpoints"]
    for j, step in enumerate((steps[0], steps[-1])):
        for ax, lo_k, hi_k in ((axes[1, 0], "neg_frac_lo", "neg_frac_hi"),
                               (axes[1, 1], "abs_trace_over_loss_lo", "abs_trace_over_loss_hi")):
            lo, hi = [], []
            for h in heads:
                e = census["by_heads"][str(h)]["steps"].get(str(step), {})
                lo.append(np.nan if e.get(lo_k) is None else e[lo_k])
                hi.append(np.nan if e.get(hi_k) is None else e[hi_k])
            col = style.color(j)
            ax.fill_between(heads, lo, hi, color=col, alpha=0.25, lw=0)
            ax.plot(heads, hi, color=col, marker=style.marker(j), ms=3,
                    label=f"step {step}")
    for ax in axes[1]:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("heads $H$")
    bound = [census["by_heads"][str(h)]["bound"] / census["by_heads"][str(h)]["P"] for h in heads]
    axes[1, 0].plot(heads, bound, color=style.OKABE_ITO["black"], ls=":", label=r"$Hd^2/P$")
    axes[1, 0].set_ylabel(r"$N_-/P$")
    axes[1, 0].set_title("(c) $N_-/P$ (shaded: certified bracket)", fontsize=6.5)
    axes[1, 0].set_ylim(0, None)
    axes[1, 1].set_yscale("log")
    axes[1, 1].set_ylabel(r"$|\mathrm{tr}(\nabla^2\hat L)_-|/\hat L$")
    sl = census.get("trace_slope") or {}
    title = "(d) |tr₋|/L̂"
    if sl.get("slope") is not None:
        ci = sl.get("ci")
        title += f": slope {sl['slope']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
    axes[1, 1].set_title(title, fontsize=6.5)
    style.legend(axes[1, 0], loc="lower right", fontsize=4.5)
    style.legend(axes[1, 1], loc="upper left", fontsize=4.5)
    st = census.get("slq_settings", {})
    style.caption(fig, f"Fig. 7. The Hessian spectrum counted along GD. (a, b) H = {H}, seed {census['seeds'][0]}: "
                  f"certified histogram beside SLQ ({st.get('num_probes')} probes × {st.get('num_steps')} Lanczos "
                  f"steps); (c, d) seed means over {len(census['seeds'])} seeds at the first and last checkpoints, "
                  "both ends of the certified brackets; slope of (d) at the last checkpoint with its bootstrap CI; "
                  f"GD steps={steps[-1]}, " + style.config_text(census, ["data.n", "data.tokens", "data.dim"])
                  + ".", width=84)
    return fig
