"""Formatting numbers and tables for terminal reports and REPORT.md.

``None`` is printed ``undef`` everywhere (a ratio over an underflowed L̂, a slope
with too few points): never NaN or inf.
"""
from __future__ import annotations


def fmt(x, width: int = 9, prec: int = 3) -> str:
    """A number for a text table, right-aligned in ``width``: ``None`` -> ``undef``, bools
    ``yes``/``NO``, ints as they are, floats with ``prec`` significant digits (scientific
    below 1e-2 or from 1e4 on)."""
    if x is None:
        return "undef".rjust(width)
    if isinstance(x, bool):
        return ("yes" if x else "NO").rjust(width)
    if isinstance(x, int):
        return str(x).rjust(width)
    if x != 0 and (abs(x) >= 1e4 or abs(x) < 1e-2):
        return f"{x:.{prec - 1}e}".rjust(width)
    return f"{x:.{prec}g}".rjust(width)


def table(headers, rows) -> str:
    """A right-aligned text table with a rule under the header."""
    widths = [max([len(str(h))] + [len(str(r[i])) for r in rows]) for i, h in enumerate(headers)]
    line = "  ".join(str(h).rjust(w) for h, w in zip(headers, widths))
    out = [line, "-" * len(line)]
    out += ["  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def md_value(x, prec: int = 3) -> str:
    """A number for a Markdown cell: as :func:`fmt` without padding; ``False`` is bold
    ``**no**`` (a failure must stand out); lists are formatted element by element."""
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    if isinstance(x, list):
        return "[" + ", ".join(md_value(v, prec) for v in x) + "]"
    if x is None or isinstance(x, (int, float)):
        return fmt(x, 0, prec).strip()
    return str(x)


def md_table(headers, rows) -> str:
    """A Markdown table; a literal ``|`` in a cell is escaped so it cannot split the row."""
    def cell(c):
        return (c if isinstance(c, str) else md_value(c)).replace("|", "\\|")
    out = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def fmt_ci(fit, prec: int = 3) -> str:
    """``-1.08 [-1.10, -1.07]`` from a record with ``slope`` and ``ci = (lo, hi)`` (a
    :class:`mhajax.analysis.rates.Slope`; ``None`` or an undefined slope: ``undef``)."""
    if fit is None or fit.slope is None:
        return "undef"
    s = f"{fit.slope:.{prec}g}"
    if fit.ci is None:
        return s + " [no CI]"
    lo, hi = fit.ci
    return f"{s} [{lo:.{prec}g}, {hi:.{prec}g}]"


def fmt_window(fit, prec: int = 3) -> str:
    """``lower / upper``: the slopes of a :class:`~mhajax.analysis.rates.Slope` on the two
    halves of its window."""
    w = fit.window if fit is not None else None
    lo, hi = (w.lower, w.upper) if w is not None else (None, None)
    return f"{fmt(lo, 1, prec).strip()} / {fmt(hi, 1, prec).strip()}"


def diverged_lines(diverged) -> list[str]:
    """One ``DIVERGED: ...`` line per record (a NamedTuple) of a summary's ``diverged`` list,
    naming whichever of model, n, H and seed the record holds, and the step."""
    names = (("model", "model="), ("n", "n="), ("heads", "H="), ("seed", "seed="))
    return ["DIVERGED: " + " ".join(f"{lab}{getattr(d, k)}" for k, lab in names if k in d._fields)
            + (f" became non-finite at step {d.step}" if "step" in d._fields else " became non-finite")
            for d in diverged]


__all__ = ["fmt", "table", "md_value", "md_table", "fmt_ci", "fmt_window", "diverged_lines"]
