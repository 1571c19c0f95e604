"""Figure 4: generalization gap L − L̂ after K = round(c·n) GD steps vs n (log-log).

Plotted: ``generalization.ns`` against the gap estimate the check fits —
``bands.gap_cv`` (the control-variate gap, :mod:`mhajax.analysis.gap`) when present, else
``bands.gap`` (plain) — as seed mean with its lo..hi bootstrap band (n whose gap is not
resolved — ``resolved`` false — drawn open), the fitted line ``exp(fits.gap.intercept) · n^fits.gap.slope`` over the
resolved n (the check's own fit: log y = a + b log n, natural logs), and a
reference slope −1 through the fitted line's value at the smallest resolved n.
"""
from __future__ import annotations

import matplotlib.ticker
import numpy as np

from mhajax.figures import style

NAME = "fig4_generalization"
SOURCES = ("generalization",)


def _arr(v):
    return np.array([np.nan if x is None else x for x in v], dtype=float)


def plot(results):
    """Figure 4: the generalization gap and the test loss vs n with their fits."""
    gen = results["generalization"]
    ns = np.asarray(gen["ns"], dtype=float)
    cv = "gap_cv" in gen["bands"]
    b = gen["bands"]["gap_cv" if cv else "gap"]
    mean, lo, hi = _arr(b["mean"]), _arr(b["lo"]), _arr(b["hi"])
    res = np.asarray(gen["resolved"], dtype=bool)
    pos = lambda a: np.where(a > 0, a, np.nan)
    fig, axes = style.figure(1, 1, height=3.1)
    ax = axes[0, 0]
    col = style.color(0)
    ax.fill_between(ns, pos(lo), pos(hi), color=col, alpha=0.2, lw=0,
                    label=f"{100 * b['level']:g}% bootstrap band")
    ax.plot(ns[res], pos(mean[res]), ls="none", marker="o", color=col, label="gap $L-\\hat L$ (seed mean" + (", control variate)" if cv else ")"))
    if (~res).any():
        hidden = [f"{n:g}" for n, m in zip(ns[~res], mean[~res]) if not m > 0]
        ax.plot(ns[~res], pos(mean[~res]), ls="none", marker="o", mfc="none", color=col,
                label="gap not resolved (left out of fit)"
                + (f";\nmean gap $\\leq 0$ at n={','.join(hidden)} (not drawn)" if hidden else ""))
    f = gen["fits"].get("gap")
    if f is not None and f.get("slope") is not None:
        xr = ns[res]
        yfit = np.exp(f["intercept"]) * xr ** f["slope"]
        ci = f.get("ci")
        cis = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
        ax.plot(xr, yfit, color=style.OKABE_ITO["vermillion"], ls="--",
                label=f"fit: slope {f['slope']:.2f}{cis}")
        ax.plot(xr, yfit[0] * (xr / xr[0]) ** -1.0, color=style.OKABE_ITO["black"], ls=":",
                label="reference slope $-1$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(ns, [f"{n:g}" for n in ns])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("training samples $n$ (GD steps $K=n$)")
    ax.set_ylabel("test $-$ train logistic loss (nats)")
    style.legend(ax, outside=True, ncol=2)
    v = gen["verdicts"]["gap"]
    style.caption(fig, f"Fig. 4. Generalization gap vs n, H={(gen.get('meta') or {}).get('config', {}).get('heads')}, "
                  f"{len(gen['seeds'])} seeds; slope CI {100 * f['level'] if f else 95:g}% bootstrap over seeds; "
                  f"vs −1: {v['classification']}, Õ(1/n) not contradicted: {v['holds']}. "
                  + style.config_text(gen, ["n_test", "steps_per_n", "lr"]) + ".", width=70)
    return fig
