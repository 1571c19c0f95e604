"""The one shared figure style: Okabe–Ito colour-blind-safe palette, mathtext
labels, single-column paper size, legends that do not hide data, a
caption-like title stating the config, and saving to PNG + PDF."""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

#: Okabe & Ito (2008), colour-blind safe; black first for references.
OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "skyblue": "#56B4E9", "green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7",
}
#: order used for series (H values, kinds): readable on white, yellow last.
CYCLE = [OKABE_ITO[k] for k in ("blue", "vermillion", "green", "orange", "purple", "skyblue", "yellow")]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
GREY = "#7f7f7f"

WIDTH = 3.4          # inches: single column
DPI = 200            # PNG resolution

RC = {
    "font.size": 7, "axes.titlesize": 7, "axes.labelsize": 7, "legend.fontsize": 6,
    "xtick.labelsize": 6, "ytick.labelsize": 6, "figure.titlesize": 6.5,
    "mathtext.fontset": "dejavusans", "axes.prop_cycle": matplotlib.cycler(color=CYCLE),
    "lines.linewidth": 1.1, "lines.markersize": 3.2, "axes.linewidth": 0.6,
    "grid.linewidth": 0.4, "grid.alpha": 0.35, "axes.grid": True, "legend.framealpha": 0.85,
    "legend.borderpad": 0.3, "legend.handlelength": 1.6, "legend.labelspacing": 0.25,
    "savefig.bbox": "tight", "savefig.pad_inches": 0.03, "pdf.fonttype": 42,
}


def color(i: int) -> str:
    """The i-th color of the palette (cycling)."""
    return CYCLE[i % len(CYCLE)]


def marker(i: int) -> str:
    """The i-th marker (cycling)."""
    return MARKERS[i % len(MARKERS)]


def use():
    """Apply the shared rc settings (labels and legends read them when created)."""
    matplotlib.rcParams.update(RC)


def figure(nrows=1, ncols=1, height=2.4, **kw):
    """A single-column figure (``WIDTH`` wide) with the shared rc settings."""
    use()
    fig, axes = plt.subplots(nrows, ncols, figsize=(WIDTH, height), squeeze=False,
                             layout="constrained", **kw)
    return fig, axes


def caption(fig, text: str, width: int = 78):
    """A caption-like suptitle (wrapped, left-aligned) stating what and which config."""
    fig.suptitle("\n".join(textwrap.wrap(text, width)), x=0.0, ha="left",
                 fontsize=RC["figure.titlesize"])


def legend(ax, **kw):
    """A legend at the best place with a translucent frame (``outside=True``:
    a figure legend below all axes, where it can hide nothing; pass ``handles``
    and ``labels``)."""
    outside = kw.pop("outside", False)
    if outside:
        kw.setdefault("loc", "outside lower center")
        kw.setdefault("ncol", 3)
        kw.setdefault("frameon", False)
        return ax.figure.legend(**kw)
    kw.setdefault("loc", "best")
    return ax.legend(**kw)


def config_text(summary: dict, keys=None) -> str:
    """A short ``k=v`` rendering of a result file's config (its meta block)."""
    cfg = (summary.get("meta") or {}).get("config") or {}
    data = cfg.get("data") or {}
    flat = {**{k: v for k, v in cfg.items() if k != "data"}, **{f"data.{k}": v for k, v in data.items()}}
    if keys is not None:
        flat = {k: flat[k] for k in keys if k in flat}

    def fmt(v):
        if isinstance(v, (list, tuple)):
            return "{" + ",".join(fmt(x) for x in v) + "}"
        if isinstance(v, float):
            return f"{v:g}"
        return str(v)
    return ", ".join(f"{k.split('.')[-1]}={fmt(v)}" for k, v in flat.items())


def save(fig, outdir, name: str):
    """Write ``outdir/name.png`` and ``outdir/name.pdf``; returns both paths."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        p = outdir / f"{name}.{ext}"
        fig.savefig(p, dpi=DPI, metadata={"CreationDate": None} if ext == "pdf" else None)
        paths.append(p)
    return paths
