"""Figure 5: NTK margin after one GD step vs at initialization and vs the
linear max-margins, across signal s, ζ and H (one-step check).

For each (s, ζ, H) cell the row at the cell's best step size η₀
(``cells[*].best_lr0``) is shown: seed means ``gamma_bar_attn`` (γ̄ after one
step), ``gamma_bar_m1`` (γ̄ at θ₋₁), ``gamma_bar_mean`` and ``gamma_bar_flat``
(linear classifiers on mean-pooled / flattened tokens). Shaded: cells where
the check's claim holds (``cells[*].holds``)."""
from __future__ import annotations

import numpy as np

from mhajax.figures import style

NAME = "fig5_ntk_margin"
SOURCES = ("one-step",)
SERIES = [("gamma_bar_attn", r"$\bar\gamma_{\rm attn}$ after one step", "blue", "o", True),
          ("gamma_bar_m1", r"$\bar\gamma$ at init $\theta_{-1}$", "black", "x", True),
          ("gamma_bar_mean", r"$\bar\gamma_{\rm lin}$ mean-pooled", "orange", "s", False),
          ("gamma_bar_flat", r"$\bar\gamma_{\rm lin}$ flattened", "green", "^", False)]


def best_rows(summary, heads):
    """The rows at each cell's best η₀ for one H, in the cells' order: ``[(cell, row)]``."""
    rows = {(r["signal"], r["zeta"], r["heads"], r["lr0"]): r for r in summary["rows"]}
    return [(c, rows[(c["signal"], c["zeta"], c["heads"], c["best_lr0"])])
            for c in summary["cells"] if c["heads"] == heads]


def _g(v) -> str:
    """A tick label; ``–`` where a knob does not apply (ζ off the mixture, s for npz data)."""
    return "–" if v is None else f"{v:g}"


def plot(results):
    """Figure 5: NTK margins after one step, at init, and the linear margins."""
    s = results["one-step"]
    heads = sorted({c["heads"] for c in s["cells"]})
    fig, axes = style.figure(len(heads), 1, height=1.35 * len(heads) + 1.0, sharex=True)
    handles = []
    for a, H in enumerate(heads):
        ax = axes[a, 0]
        pairs = best_rows(s, H)
        x = np.arange(len(pairs))
        for j, (c, _) in enumerate(pairs):
            if c["holds"]:
                ax.axvspan(j - 0.45, j + 0.45, color=style.OKABE_ITO["green"], alpha=0.12, lw=0,
                                label="claim holds in this cell")
        for key, lab, col, mk, filled in SERIES:
            y = np.array([np.nan if r[key] is None or r[key] <= 0 else r[key] for _, r in pairs], dtype=float)
            ln, = ax.plot(x, y, ls="none", marker=mk, ms=3.5, color=style.OKABE_ITO[col],
                          mfc=style.OKABE_ITO[col] if filled else "none", mew=0.8, label=lab)
            if a == 0:
                handles.append(ln)
        ax.set_yscale("log")
        ax.set_ylabel(r"normalized margin $\bar\gamma$")
        ax.set_title(f"H={H}: claim holds in {sum(c['holds'] for c, _ in pairs)}/{len(pairs)} cells",
                     loc="left", pad=2)
        ax.set_xticks(x, ["\n".join(_g(c[k]) for k in ("signal", "zeta", "best_lr0")) for c, _ in pairs])
        ax.grid(axis="x", visible=False)
    axes[-1, 0].set_xlabel(r"cell: signal $s$ / $\zeta$ / best $\eta_0$ (top to bottom)")
    if any(c["holds"] for c in s["cells"]):
        import matplotlib.patches as mpatches
        handles.append(mpatches.Patch(color=style.OKABE_ITO["green"], alpha=0.25, label="claim holds in this cell"))
    style.legend(axes[-1, 0], handles=handles, outside=True, ncol=2)
    style.caption(fig, "Fig. 5. One-step NTK margin vs init and linear margins (seed means over "
                  f"{len(s['seeds'])} seeds, at each cell's best η₀). Claim: {s['criterion']}. "
                  + style.config_text(s, ["start", "lrs", "data.n", "data.tokens", "data.dim"]) + ".", width=84)
    return fig
