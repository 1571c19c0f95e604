"""Figure 1: training loss vs GD iteration K for several H (convergence), and
train / test loss after K = round(c·n) steps vs K (generalization).

Plotted: ``convergence.by_heads[H].curves.steps`` (K >= 1; K = 0 cannot sit on
a log axis) against ``curves.loss_band.mean`` with the ``lo``..``hi`` bootstrap
band; ``generalization.steps`` against ``bands.train`` / ``bands.test`` (mean,
lo..hi). The convergence check records only the training loss along K; the
test loss appears at the K = n of each generalization run.
"""
from __future__ import annotations

import matplotlib.ticker
import numpy as np

from . import style

NAME = "fig1_loss"
SOURCES = ("convergence", "generalization")
ISSUE_HEADS = (1, 2, 4, 8, 16, 32)


def _pos(v):
    a = np.array([np.nan if x is None else x for x in v], dtype=float)
    return np.where(a > 0, a, np.nan)


def plot(results):
    conv, gen = results.get("convergence"), results.get("generalization")
    fig, axes = style.figure(1, 2, height=2.5)
    ax = axes[0, 0]
    heads = []
    if conv is not None:
        for i, (H, s) in enumerate(conv["by_heads"].items()):
            c = s["curves"]
            K = np.asarray(c["steps"], dtype=float)
            keep = K >= 1
            b = c["loss_band"]
            col = style.color(i)
            ax.fill_between(K[keep], _pos(b["lo"])[keep], _pos(b["hi"])[keep], color=col, alpha=0.2,
                            lw=0, label=None)
            ax.plot(K[keep], _pos(b["mean"])[keep], color=col, label=f"H={H}")
            heads.append(int(H))
        ax.set_xscale("log")
        ax.set_yscale("log")
        style.legend(ax, title="train $\\hat L(\\theta_K)$", title_fontsize=6)
    else:
        ax.text(0.5, 0.5, "no convergence results", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("GD iteration $K$")
    ax.set_ylabel("logistic loss (nats)")
    ax.set_title("(a) training loss vs $K$")

    ax = axes[0, 1]
    if gen is not None:
        K = np.asarray(gen["steps"], dtype=float)
        for j, (key, lab) in enumerate((("train", "train $\\hat L$"), ("test", "test $L$"))):
            b = gen["bands"][key]
            col = style.color(j + 3)
            ax.fill_between(K, _pos(b["lo"]), _pos(b["hi"]), color=col, alpha=0.2, lw=0)
            ax.plot(K, _pos(b["mean"]), color=col, marker=style.marker(j), label=lab)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(K, [f"{k:g}" for k in K])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        hg = (gen.get("meta") or {}).get("config", {}).get("heads")
        style.legend(ax, title=f"H={hg}, n=K", title_fontsize=6)
    else:
        ax.text(0.5, 0.5, "no generalization results", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("GD iteration $K$ $(=n)$")
    ax.set_title("(b) train / test after $K=n$")

    parts = []
    if conv is not None:
        S = len(conv["seeds"])
        missing = [H for H in ISSUE_HEADS if H not in heads]
        parts.append(f"(a) convergence: mean over {S} seeds, band = {100 * conv['by_heads'][str(heads[0])]['curves']['loss_band']['level']:g}% "
                     f"bootstrap over seeds; H = {heads}"
                     + (f" (the check's defaults; H = {missing} not run)" if missing else "")
                     + "; " + style.config_text(conv, ["lr", "data.n", "data.tokens", "data.dim"]) + ".")
    if gen is not None:
        parts.append(f"(b) generalization: n = {gen['ns']}, {len(gen['seeds'])} seeds, "
                     + style.config_text(gen, ["n_test", "steps_per_n"]) + ".")
    style.caption(fig, "Fig. 1. Loss along GD. " + " ".join(parts), width=84)
    return fig
