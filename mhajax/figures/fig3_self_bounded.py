"""Figure 3: self-bounded curvature over all weak-convexity checkpoints.

(a) −λ_min(∇²L̂) against L̂ (checkpoints with λ_min < 0; log-log) with the
weak-convexity bound κ(θ)/√H · L̂ drawn per checkpoint; (b) λ_max(∇²L̂) against
L̂ with the smoothness bound (β₂(θ)² + κ(θ)/√H) · L̂ per checkpoint. The bound
points are products of one record's own numbers (``kappa_bound``, ``beta2``,
``heads``, ``loss``) — the right-hand sides of (6.7) and (6.8) of docs/theory.md, not a re-analysis.
"""
from __future__ import annotations

import math

import numpy as np

from mhajax.figures import style

NAME = "fig3_self_bounded"
SOURCES = ("weak-convexity",)
BOUND_LABELS = (r"bound $\kappa(\theta)\,\hat L/\sqrt{H}$",
                r"bound $(\beta_2(\theta)^2+\kappa(\theta)/\sqrt{H})\,\hat L$")


def usable(r):
    """Whether a record can be plotted (L̂ defined, λ_min and λ_max present)."""
    return r.get("loss") is not None and r["loss"] > 0 and r.get("lambda_min") is not None


def wc_bound(r):
    """κ(θ)/√H · L̂ of a record (docs/theory.md (6.7), self-bounded weak convexity); NaN (not
    drawn) when the record has no κ(θ) (a model or loss it does not apply to)."""
    if r.get("kappa_bound") is None:
        return math.nan
    return r["kappa_bound"] / math.sqrt(r["heads"]) * r["loss"]


def smooth_bound(r):
    """(β₂(θ)² + κ(θ)/√H) · L̂ of a record (docs/theory.md (6.8), self-bounded smoothness); NaN when
    κ(θ) or β₂(θ) is absent."""
    if r.get("kappa_bound") is None or r.get("beta2") is None:
        return math.nan
    return (r["beta2"] ** 2 + r["kappa_bound"] / math.sqrt(r["heads"])) * r["loss"]


def points(records, heads):
    """Per H: dict of arrays loss, neg_lmin (λ_min < 0 only), loss_neg, lmax, wc, smooth."""
    rs = [r for r in records if int(r["heads"]) == int(heads) and usable(r)]
    neg = [r for r in rs if r["lambda_min"] < 0]
    return dict(loss=np.array([r["loss"] for r in rs]), lmax=np.array([r["lambda_max"] for r in rs]),
                smooth=np.array([smooth_bound(r) for r in rs]),
                loss_neg=np.array([r["loss"] for r in neg]),
                neg_lmin=np.array([-r["lambda_min"] for r in neg]),
                wc=np.array([wc_bound(r) for r in neg]), nonneg=len(rs) - len(neg))


def plot(results):
    """Figure 3: λ_min and λ_max of ∇²L̂ against L̂ with the self-bounded bounds."""
    wc = results["weak-convexity"]
    recs = wc["records"]
    heads = [int(H) for H in wc["by_heads"]]
    fig, axes = style.figure(2, 1, height=4.3, sharex=True)
    nonneg = {}
    for i, H in enumerate(heads):
        p = points(recs, H)
        col = style.color(i)
        axes[0, 0].scatter(p["loss_neg"], p["neg_lmin"], s=9, color=col, marker=style.marker(i),
                           label=f"$-\\lambda_{{\\min}}$, H={H}", zorder=3)
        axes[0, 0].scatter(p["loss_neg"], p["wc"], s=11, facecolors="none", edgecolors=col,
                           marker=style.marker(i), lw=0.6,
                           label=f"{BOUND_LABELS[0]}, H={H}", zorder=2)
        axes[1, 0].scatter(p["loss"], p["lmax"], s=9, color=col, marker=style.marker(i),
                           label=f"$\\lambda_{{\\max}}$, H={H}", zorder=3)
        axes[1, 0].scatter(p["loss"], p["smooth"], s=11, facecolors="none", edgecolors=col,
                           marker=style.marker(i), lw=0.6,
                           label=f"{BOUND_LABELS[1]}, H={H}", zorder=2)
        if p["nonneg"]:
            nonneg[H] = p["nonneg"]
    from matplotlib.lines import Line2D
    proxy = lambda filled, lab: Line2D([], [], ls="none", marker="o", ms=4, color=style.GREY,
                                       markerfacecolor=style.GREY if filled else "none", label=lab)
    for ax, (meas, bound) in zip(axes[:, 0], ((r"measured $-\lambda_{\min}$", BOUND_LABELS[0]),
                                               (r"measured $\lambda_{\max}$", BOUND_LABELS[1]))):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.add_artist(style.legend(ax, handles=[proxy(True, meas), proxy(False, bound)], loc="upper left"))
    hh = [Line2D([], [], ls="none", marker=style.marker(i), color=style.color(i), label=f"H={H}")
          for i, H in enumerate(heads)]
    style.legend(axes[1, 0], handles=hh, outside=True, ncol=len(heads))
    axes[0, 0].set_ylabel(r"$-\lambda_{\min}(\nabla^2\hat L)$ and bound")
    axes[1, 0].set_ylabel(r"$\lambda_{\max}(\nabla^2\hat L)$ and bound")
    axes[1, 0].set_xlabel(r"training loss $\hat L(\theta)$ (nats)")
    axes[0, 0].set_title("(a) self-bounded weak convexity", loc="left", pad=2)
    axes[1, 0].set_title("(b) self-bounded smoothness", loc="left", pad=2)
    cap = ("Fig. 3. Hessian extremes vs loss at every checkpoint (filled: measured; open: the bound "
           "of the same checkpoint, docs/theory.md §6); " + style.config_text(wc, ["heads", "seeds", "steps", "every"])
           + ".")
    if nonneg:
        cap += " λ_min ≥ 0 (locally convex, left out of (a)): " + ", ".join(f"H={H}: {k}" for H, k in nonneg.items()) + "."
    style.caption(fig, cap, width=84)
    return fig
