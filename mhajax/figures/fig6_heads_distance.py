"""Figure 6: (a) the smallest H on the grid that reaches the Õ(1/n) regime vs n,
beside log⁶ n and the sufficient condition H_theory(n) (heads check:
``by_n[n].smallest_heads``, ``by_n[n].log6``, ``by_n[n].H_theory``; an n reached at no H
on the grid is drawn as an up-triangle at the grid's largest H; the tightness
H_theory/H_min is written in the panel's title and the caption); (b) ‖θ_K − θ₀‖ vs K for several H (convergence check:
``curves.checkpoints`` (K >= 1) against ``curves.distance_band`` mean, lo..hi)."""
from __future__ import annotations

import matplotlib.ticker
import numpy as np

from mhajax.figures import style

NAME = "fig6_heads_distance"
SOURCES = ("heads", "convergence")


def plot(results):
    """Figure 6: H_min vs log⁶ n, and ‖θ_K − θ₀‖ vs K."""
    hd, conv = results.get("heads"), results.get("convergence")
    fig, axes = style.figure(1, 2, height=2.5)
    ax = axes[0, 0]
    if hd is not None:
        ns = np.array([int(n) for n in hd["by_n"]], dtype=float)
        v = list(hd["by_n"].values())
        hmin = np.array([np.nan if x["smallest_heads"] is None else x["smallest_heads"] for x in v], dtype=float)
        miss = np.isnan(hmin)
        ax.plot(ns, [x["log6"] for x in v], color=style.OKABE_ITO["black"], ls=":", label=r"$\log^6 n$")
        ax.plot(ns, hmin, color=style.color(0), marker="o", label=r"$H_{\min}(n)$")
        ht = np.array([np.nan if x.get("H_theory") is None else x["H_theory"] for x in v], dtype=float)
        if np.isfinite(ht).any():
            ax.plot(ns, ht, color=style.color(2), marker="s", ls="--", label=r"$H_{\rm theory}(n)$")
        if miss.any():
            ax.plot(ns[miss], np.full(miss.sum(), float(max(hd["heads"]))), ls="none", marker="^",
                    mfc="none", color=style.color(1), label=f"not reached for $H\\leq{max(hd['heads'])}$")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ns, [f"{n:g}" for n in ns])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        style.legend(ax, loc="best")
    else:
        ax.text(0.5, 0.5, "no heads results", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("training samples $n$")
    ax.set_ylabel("number of heads $H$")
    tight = [] if hd is None else [x["tightness"] for x in hd["by_n"].values() if x.get("tightness") is not None]
    ax.set_title(r"(a) smallest $H$ in the $\tilde O(1/n)$ regime"
                 + ("\n" + r"$H_{\rm theory}/H_{\min}$" + f" = {min(tight):.1e}…{max(tight):.1e}" if tight else ""),
                 fontsize=6.5)

    ax = axes[0, 1]
    if conv is not None:
        for i, (H, s) in enumerate(conv["by_heads"].items()):
            c = s["curves"]
            K = np.asarray(c["checkpoints"], dtype=float)
            keep = K >= 1
            b = c["distance_band"]
            col = style.color(i)
            ax.fill_between(K[keep], np.asarray(b["lo"], float)[keep], np.asarray(b["hi"], float)[keep],
                            color=col, alpha=0.2 if len(conv["by_heads"]) <= 3 else 0.1, lw=0)
            ax.plot(K[keep], np.asarray(b["mean"], float)[keep], color=col, label=f"H={H}")
        ax.set_xscale("log")
        style.legend(ax, loc="upper left", ncol=2 if len(conv["by_heads"]) > 3 else 1, columnspacing=0.8)
    else:
        ax.text(0.5, 0.5, "no convergence results", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("GD iteration $K$")
    ax.set_ylabel(r"$\|\theta_K-\theta_0\|_2$")
    ax.set_title(r"(b) distance travelled", fontsize=6.5)
    parts = []
    if hd is not None:
        parts.append(f"(a) heads: grid H = {hd['heads']}, {len(hd['seeds'])} seeds, rule: {hd['regime_rule']}"
                     + ("; H_theory = (81/64)κ̄²D_K⁴ measured on one run per n (docs/theory.md §14)"
                        + (f", tightness H_theory/H_min = {min(tight):.2g}…{max(tight):.2g}" if tight else "")
                        if any(x.get("H_theory") is not None for x in hd["by_n"].values()) else "") + ".")
    if conv is not None:
        lvl = next(iter(conv["by_heads"].values()))["curves"]["distance_band"]["level"]
        parts.append(f"(b) convergence: mean over {len(conv['seeds'])} seeds, band = {100 * lvl:g}% bootstrap "
                     "over seeds; " + style.config_text(conv, ["steps", "lr", "data.n", "data.tokens", "data.dim"])
                     + ".")
    style.caption(fig, "Fig. 6. Width and distance. " + " ".join(parts), width=84)
    return fig
