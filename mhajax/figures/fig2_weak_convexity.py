"""Figure 2: the weak-convexity chain κ_emp ≤ κ_blk ≤ κ_mid ≤ κ_Φ ≤ κ(θ) along
GD, one panel per H (weak-convexity ``records``: one line per seed and kind,
the record's value at each checkpoint step; a kind the run did not compute
(null, e.g. ``--links core``) is said so in the legend; κ ≤ 0 (locally convex)
cannot sit on the log axis and is left out, with a count)."""
from __future__ import annotations

import numpy as np

from mhajax.figures import style

NAME = "fig2_weak_convexity"
SOURCES = ("weak-convexity",)
KINDS = [("kappa_emp", r"$\kappa_{\rm emp}=-\sqrt{H}\lambda_{\min}/\hat L$", "blue", "-"),
         ("kappa_block", r"$\kappa_{\rm blk}$ (certified)", "skyblue", "--"),
         ("kappa_mid", r"$\kappa_{\rm mid}$", "green", "-."),
         ("kappa_phi", r"$\kappa_\Phi$", "orange", ":"),
         ("kappa_bound", r"$\kappa(\theta)=\max_h\beta_3(\theta_h)$", "vermillion", "-")]

PLAIN = {"kappa_emp": "κ_emp", "kappa_block": "κ_blk", "kappa_mid": "κ_mid", "kappa_phi": "κ_Φ",
         "kappa_bound": "κ(θ)"}


def series(records, heads, seed, key):
    """(steps, values) of one trajectory; values are the records' numbers, NaN
    where null or <= 0."""
    rs = sorted((r for r in records if int(r["heads"]) == int(heads) and r["seed"] == seed),
                key=lambda r: r["step"])
    x = np.array([r["step"] for r in rs], dtype=float)
    v = np.array([np.nan if r.get(key) is None else r[key] for r in rs], dtype=float)
    return x, np.where(v > 0, v, np.nan)


def plot(results):
    """Figure 2 from the weak-convexity summary: the κ chain along GD."""
    wc = results["weak-convexity"]
    recs = wc["records"]
    heads = [int(H) for H in wc["by_heads"]]
    seeds = sorted({r["seed"] for r in recs})
    fig, axes = style.figure(len(heads), 1, height=1.05 * len(heads) + 1.0, sharex=True,
                             sharey=True)
    handles, labels = [], []
    notes = []
    for a, H in enumerate(heads):
        ax = axes[a, 0]
        for key, lab, col, ls in KINDS:
            vals = [r.get(key) for r in recs if int(r["heads"]) == H]
            if all(v is None for v in vals):
                if a == 0:
                    notes.append(PLAIN[key])
                continue
            nonpos = sum(1 for v in vals if v is not None and v <= 0)
            if nonpos:
                notes.append(f"H={H}: {nonpos} checkpoint(s) with {key} <= 0 (convex) omitted")
            for j, sd in enumerate(seeds):
                x, y = series(recs, H, sd, key)
                ln, = ax.plot(x, y, color=style.OKABE_ITO[col], ls=ls, marker=style.marker(j),
                              markevery=1, ms=2.2, lw=0.9, label=lab)
                if a == 0 and j == 0:
                    handles.append(ln)
                    labels.append(lab)
        ax.set_yscale("log")
        bh = wc["by_heads"][str(H)]
        ax.set_title(f"H={H} (P={bh['P']}, {bh['method']}): chain holds: "
                     + {True: "yes", False: "NO", None: "undef"}[bh["all_hold"]], loc="left", pad=2)
        ax.set_ylabel(r"$\kappa$")
    axes[-1, 0].set_xlabel("GD step $k$")
    style.legend(axes[0, 0], handles=handles, labels=labels, outside=True, ncol=2)
    skip = [n for n in notes if not n.startswith("H=")]
    cap = (f"Fig. 2. Weak-convexity chain along GD, one line per seed and kind ({len(seeds)} seeds, marker = "
           "seed), log y; κ_emp measured, the others its certified upper bounds. "
           + style.config_text(wc, ["heads", "steps", "every", "lr", "links", "data.n", "data.tokens",
                                    "data.dim", "data.model", "data.loss"]) + ".")
    if skip:
        cap += " Not computed in this run: " + ", ".join(skip) + " (rerun with --links all)."
    cap += " " + "; ".join(n for n in notes if n.startswith("H="))
    style.caption(fig, cap, width=84)
    return fig
