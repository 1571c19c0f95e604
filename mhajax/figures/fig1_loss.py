"""Figure 1: training and test loss along GD for H ∈ {1, 2, 4, 8, 16, 32}.

(a) ``convergence.by_heads[H].curves.steps`` (K >= 1; K = 0 cannot sit on a
log axis) against ``curves.loss_band.mean`` (training loss L̂(θ_K), seed mean)
with the ``lo``..``hi`` bootstrap band over seeds.
(b) ``curves.test_checkpoints`` (K >= 1) against ``curves.test_loss_band``
(test loss L(θ_K) on the check's held-out sample; mean, lo..hi).
A convergence file without test curves (older schema) gets, in (b), the
generalization check's train / test loss after K = n steps instead
(``generalization.steps`` against ``bands.train`` / ``bands.test``), said so
in the panel title. Both panels share the y axis.
"""
from __future__ import annotations

import matplotlib.ticker
import numpy as np

from mhajax.figures import style

NAME = "fig1_loss"
SOURCES = ("convergence", "generalization")
ISSUE_HEADS = (1, 2, 4, 8, 16, 32)


def _pos(v):
    """Float array of a JSON list: null -> NaN, <= 0 -> NaN (not drawable on a log axis)."""
    a = np.array([np.nan if x is None else x for x in v], dtype=float)
    return np.where(a > 0, a, np.nan)


def test_heads(conv) -> list:
    """The H (keys of ``by_heads``) whose curves carry a test-loss band (null when the
    run had no held-out data or a test loss was not finite)."""
    if conv is None:
        return []
    return [H for H, s in conv["by_heads"].items()
            if s["curves"].get("test_loss_band") is not None and s["curves"].get("test_checkpoints") is not None]


def _curve(ax, K, b, col, label, alpha=0.18):
    K = np.asarray(K, dtype=float)
    keep = K >= 1
    ax.fill_between(K[keep], _pos(b["lo"])[keep], _pos(b["hi"])[keep], color=col, alpha=alpha, lw=0)
    ax.plot(K[keep], _pos(b["mean"])[keep], color=col, label=label)


def plot(results):
    """Figure 1 from the convergence summary: train and test loss vs K per H."""
    conv, gen = results.get("convergence"), results.get("generalization")
    fig, axes = style.figure(1, 2, height=2.75, sharey=True)
    ax_a, ax_b = axes[0]
    heads = []
    alpha = 0.18 if conv is None or len(conv["by_heads"]) <= 3 else 0.1
    if conv is not None:
        for i, (H, s) in enumerate(conv["by_heads"].items()):
            _curve(ax_a, s["curves"]["steps"], s["curves"]["loss_band"], style.color(i), f"H={H}", alpha)
            heads.append(int(H))
        ax_a.set_xscale("log")
    else:
        ax_a.text(0.5, 0.5, "no convergence results", ha="center", va="center", transform=ax_a.transAxes)
    ax_a.set_yscale("log")
    ax_a.set_xlabel("GD iteration $K$")
    ax_a.set_ylabel("logistic loss (nats)")
    ax_a.set_title(r"(a) train $\hat L(\theta_K)$", loc="left", pad=2)

    with_test = test_heads(conv)
    test_curves = bool(with_test)
    if test_curves:
        for i, (H, s) in enumerate(conv["by_heads"].items()):
            if H not in with_test:
                continue
            c = s["curves"]
            _curve(ax_b, c["test_checkpoints"], c["test_loss_band"], style.color(i), f"H={H}", alpha)
        ax_b.set_xscale("log")
        ax_b.set_title(r"(b) test $L(\theta_K)$", loc="left", pad=2)
        ax_b.set_xlabel("GD iteration $K$")
        style.legend(ax_a, handles=ax_a.get_lines(), outside=True, ncol=min(6, max(1, len(heads))))
    elif gen is not None:
        K = np.asarray(gen["steps"], dtype=float)
        for j, (key, lab) in enumerate((("train", r"train $\hat L$"), ("test", "test $L$"))):
            b = gen["bands"][key]
            col = style.OKABE_ITO[("orange", "purple")[j]]
            ax_b.fill_between(K, _pos(b["lo"]), _pos(b["hi"]), color=col, alpha=0.2, lw=0)
            ax_b.plot(K, _pos(b["mean"]), color=col, marker=style.marker(j), label=lab)
        ax_b.set_xscale("log")
        ax_b.set_xticks(K, [f"{k:g}" for k in K])
        ax_b.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        hg = (gen.get("meta") or {}).get("config", {}).get("heads")
        style.legend(ax_b, title=f"generalization, H={hg}", title_fontsize=6, loc="lower left")
        ax_b.set_title("(b) train / test after $K=n$\n(no test curves in convergence file)", loc="left",
                       pad=2, fontsize=6)
        ax_b.set_xlabel("GD iteration $K$ $(=n)$")
        if heads:
            style.legend(ax_a, handles=ax_a.get_lines(), outside=True, ncol=min(6, len(heads)))
    else:
        ax_b.text(0.5, 0.5, "no test-loss results", ha="center", va="center", transform=ax_b.transAxes)
        ax_b.set_xlabel("GD iteration $K$")

    parts = []
    if conv is not None:
        S = len(conv["seeds"])
        first = next(iter(conv["by_heads"].values()))["curves"]["loss_band"]
        missing = [H for H in ISSUE_HEADS if H not in heads]
        parts.append(f"mean over {S} seeds, band = {100 * first['level']:g}% bootstrap over seeds; "
                     f"H = {heads}" + (f" (H = {missing} not in this run)" if missing else "")
                     + "; " + style.config_text(conv, ["steps", "lr", "n_test", "data.n", "data.tokens",
                                                        "data.dim", "data.model", "data.loss"]) + ".")
        no_test = [int(H) for H in conv["by_heads"] if H not in with_test]
        if test_curves and no_test:
            parts.append(f"No test curve recorded for H = {no_test}.")
    if not test_curves and gen is not None:
        parts.append(f"(b) generalization check: n = {gen['ns']}, {len(gen['seeds'])} seeds, "
                     + style.config_text(gen, ["n_test", "steps_per_n"]) + ".")
    style.caption(fig, "Fig. 1. Train and test loss along GD (convergence check), log-log; " + " ".join(parts),
                  width=84)
    return fig
