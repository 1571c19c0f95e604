"""Figure 5: the normalized NTK margin after one GD step against n (log-log), per start
(one-step check, docs/theory.md §11.1).

One panel per start θ₋₁ (``by_start``), each at its own η₀. Plotted, per n, seed means over
the seeds of ``by_start[start].curves``: ``noisy`` (γ̄ at the run's noise σ, the judged
margin), ``noiseless`` (the same draw at σ = 0) and ``predicted`` (the finite-sample
prediction (P) ``(γ₀ − σ s_w a_n)/(G₀ + σ s_g a_n)``); and, *comparison, not a claim*, the
seed means ``gamma_bar_mean`` / ``gamma_bar_flat`` of ``by_start[start].comparison``
(linear max-margins on mean-pooled / flattened tokens), drawn grey and open. Panel titles:
the slopes with their CIs and each part's outcome; the caption: the verdict, τ, C, and on
how many (n, seed) the attention margin lost the comparison."""
from __future__ import annotations

import matplotlib.ticker
import numpy as np

from mhajax.figures import style

NAME = "fig5_ntk_margin"
SOURCES = ("one-step",)
#: (curve key, legend label, color, marker, line style)
SERIES = [("noisy", r"$\bar\gamma$ at noise $\sigma$ (judged)", "blue", "o", "-"),
          ("noiseless", r"$\bar\gamma$ noiseless ($\sigma=0$, same draw)", "vermillion", "s", "-"),
          ("predicted", r"finite-sample prediction (P)", "black", "none", "--")]
#: (comparison key, legend label, marker): comparison, not a claim
LINEAR = [("gamma_bar_mean", r"$\bar\gamma_{\rm lin}$ mean-pooled (comparison, not a claim)", "^"),
          ("gamma_bar_flat", r"$\bar\gamma_{\rm lin}$ flattened (comparison, not a claim)", "v")]
START_TEXT = {"zero": r"$\theta_{-1}=0$", "zero-signs": r"$\theta_{-1}=0$, random head signs",
              "random-u": r"$W=0$, $U$ random"}


def seed_mean(curve) -> np.ndarray:
    """Per n, the mean over seeds of ``curve [S, m]`` (None -> NaN; NaN where no seed is defined)."""
    a = np.array([[np.nan if v is None else v for v in row] for row in curve], dtype=float)
    out = np.full(a.shape[1], np.nan)
    ok = np.isfinite(a).any(axis=0)
    out[ok] = np.nanmean(a[:, ok], axis=0)
    return out


def _ci(f) -> str:
    if not f or f.get("slope") is None:
        return "undef"
    ci = f.get("ci")
    return f"{f['slope']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def plot(results):
    """Figure 5: γ̄ against n per start, with the noiseless sweep, (P) and the linear margins."""
    s = results["one-step"]
    ns = np.asarray(s["ns"], dtype=float)
    starts = list(s["by_start"])
    fig, axes = style.figure(len(starts), 1, height=2.2 * len(starts) + 1.3, sharex=True)
    handles = []
    lost = total = 0
    for a, start in enumerate(starts):
        ax = axes[a, 0]
        an = s["by_start"][start]
        pos = lambda v: np.where(v > 0, v, np.nan)
        for key, lab, col, mk, ls in SERIES:
            if an["curves"].get(key) is None:     # no noiseless sweep (null; absent in older files)
                continue
            ln, = ax.plot(ns, pos(seed_mean(an["curves"][key])), ls=ls, marker=mk, ms=3.5,
                          color=style.OKABE_ITO[col], label=lab)
            if lab not in [h.get_label() for h in handles]:
                handles.append(ln)
        for key, lab, mk in LINEAR:
            y = np.array([np.nan if r[key] is None else r[key] for r in an["comparison"]], dtype=float)
            ln, = ax.plot(ns, pos(y), ls=":", marker=mk, ms=3.2, mfc="none", color="0.55", lw=0.8, label=lab)
            if lab not in [h.get_label() for h in handles]:
                handles.append(ln)
        lost += sum(r["lost"] for r in an["comparison"])
        total += sum(r["seeds"] for r in an["comparison"])
        sl, p = an["slopes"], an["parts"]
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ns, [f"{n:g}" for n in ns])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_ylabel(r"normalized margin $\bar\gamma$")
        ax.set_title(f"{START_TEXT.get(start, start)}, $\\eta_0$={an['lr0']:g}: slope at σ {_ci(sl['noisy'])},\n"
                     f"noiseless {_ci(sl.get('noiseless'))}, excess over (P) {_ci(sl.get('excess'))}\n"
                     + ", ".join(f"({k}) {p[k]['rule']}" for k in ("a", "b1", "b2", "c"))
                     + f"; lost to linear on {sum(r['lost'] for r in an['comparison'])}/"
                     f"{sum(r['seeds'] for r in an['comparison'])} (n, seed)", loc="left", pad=2, fontsize=6.5)
    axes[-1, 0].set_xlabel("training samples $n$")
    style.legend(axes[-1, 0], handles=handles, outside=True, ncol=2)
    style.caption(fig, f"Fig. 5. One-step NTK margin vs n (seed means over {len(s['seeds'])} seeds, "
                  f"H={s['heads']}, σ={s['sigma']:g}); verdict {s['verdict'].upper()}. Rule: {s['criterion']}. "
                  f"Linear margins: comparison, not a claim — the attention margin lost it on {lost}/{total} "
                  f"(start, n, seed). " + style.config_text(s, ["starts", "lr_zero", "lr_random", "data.tokens",
                                                                  "data.dim"]) + ".", width=84)
    return fig
