"""Rates from curves: log-log slopes, bootstrap over seeds, mean ± band.

A claim "y = Õ(x^{-1})" is checked by the slope ``b`` of the least-squares line

    log y_j ≈ a + b · log x_j,        j = 1..m                       (1)

over a window of ``x``. Õ hides polylog factors; to see them, the slope can
also be fitted to ``y / (log x)^p`` (``log_power = p``) and reported beside
the plain one: if ``y = C (log x)^p / x`` exactly, the corrected slope is −1
while the plain one is ``−1 + p / log x`` (e.g. −0.71 at x = 1000 for p = 2).

Uncertainty comes from seeds, the only independent replicates we have.
Given per-seed curves ``Y [S, m]``, the *statistic* is the slope of the
seed-mean curve ``ȳ_j = (1/S) Σ_s Y[s, j]`` (well defined even when single
seeds are noisy or cross zero, e.g. a test−train gap). The bootstrap draws
``B`` resamples of the S seeds with replacement (seeded
``numpy.random.Generator(PCG64(seed))``, so a CI is reproducible), recomputes
ȳ and its slope, and reports the percentile interval
``[q_{(1−level)/2}, q_{(1+level)/2}]``. A resample whose mean curve has a
non-positive point has no slope: it is counted as undefined and left out of
the quantiles (the count is reported; a CI with many undefined resamples
should not be trusted). With S seeds there are only ``C(2S−1, S)`` distinct
resamples (35 for S = 4): the percentile CI is coarse for small S and, like
any seed bootstrap, it measures seed-to-seed variation only — not the bias of
fitting a straight line to a curve that bends (see :func:`window_slopes`).

Everything here is NumPy float64 post-processing of numbers already computed.
"""
from __future__ import annotations

from math import comb
from typing import NamedTuple

import numpy as np

from mhajax.analysis.applicability import requirements
from mhajax.errors import InputError

#: the acceptance rule for "slope −1 up to logs": tolerance around −1
RATE_TOLERANCE = 0.3


class SlopeFit(NamedTuple):
    """Least-squares fit of (1): ``slope`` b, ``intercept`` a, ``rms`` residual
    of log y, ``points`` m used. NaN when undefined (some y <= 0 or non-finite)."""

    slope: float
    intercept: float
    rms: float
    points: int


def _check_x(x, log_power: float) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise InputError(f"x must be a vector with at least 2 points, got shape {x.shape}")
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise InputError(f"x must be finite and > 0 for a log-log fit, got {x.tolist()!r}")
    if np.unique(x).size < 2:
        raise InputError(f"x needs at least 2 distinct values for a slope, got {x.tolist()!r}")
    if log_power != 0 and np.any(x <= 1):
        raise InputError(f"a log-factor correction needs x > 1 (log x > 0), got min x = {x.min()!r}")
    return x


def loglog_fit(x, y, log_power: float = 0.0) -> SlopeFit:
    """Fit (1) to ``y [m]`` (or ``y / (log x)^{log_power}``) against ``x [m]``."""
    x = _check_x(x, log_power)
    y = np.asarray(y, dtype=np.float64)
    if y.shape != x.shape:
        raise InputError(f"y has shape {y.shape} but x has shape {x.shape}")
    slope, intercept = _ols(x, y[None], log_power)
    slope, intercept = float(slope[0]), float(intercept[0])
    if not np.isfinite(slope):
        return SlopeFit(float("nan"), float("nan"), float("nan"), int(x.size))
    u = np.log(x)
    v = np.log(y) - log_power * np.log(np.log(x)) if log_power else np.log(y)
    rms = float(np.sqrt(np.mean((v - intercept - slope * u) ** 2)))
    return SlopeFit(slope, intercept, rms, int(x.size))


def loglog_slopes(x, Y, log_power: float = 0.0) -> np.ndarray:
    """Slopes of (1) for every row of ``Y [..., m]`` at once -> ``[...]``; NaN
    where a row has a value <= 0 or non-finite."""
    x = _check_x(x, log_power)
    Y = np.asarray(Y, dtype=np.float64)
    if Y.shape[-1] != x.size:
        raise InputError(f"Y has {Y.shape[-1]} points per curve but x has {x.size}")
    lead = Y.shape[:-1]
    slope, _ = _ols(x, Y.reshape(-1, x.size), log_power)
    return slope.reshape(lead)


def _ols(x, Y, log_power):
    """Closed-form OLS slope/intercept of log Y[r] on log x for each row r."""
    u = np.log(x)
    ok = np.all(np.isfinite(Y) & (Y > 0), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        V = np.log(np.where(ok[:, None], Y, 1.0))
    if log_power:
        V = V - log_power * np.log(np.log(x))[None, :]
    uc = u - u.mean()
    slope = (V - V.mean(axis=-1, keepdims=True)) @ uc / np.dot(uc, uc)
    intercept = V.mean(axis=-1) - slope * u.mean()
    slope = np.where(ok, slope, np.nan)
    intercept = np.where(ok, intercept, np.nan)
    return slope, intercept


class Halves(NamedTuple):
    """Slopes on the lower and upper halves of a fit window (``None``: undefined)."""

    lower: float | None
    upper: float | None


class Slope(NamedTuple):
    """A bootstrap slope (:func:`bootstrap_slope`); ``ci = (lo, hi)`` or ``None``."""

    slope: float | None
    intercept: float | None
    rms: float | None
    ci: tuple[float, float] | None
    level: float
    per_seed: list[float | None]
    undefined_resamples: int
    resamples: int
    distinct_resamples: int
    seeds: int
    log_power: float
    window: Halves | None


class Band(NamedTuple):
    """Per-point seed means with a bootstrap band (:func:`mean_band`), lists of length m."""

    mean: list[float | None]
    lo: list[float | None]
    hi: list[float | None]
    std: list[float | None]
    level: float


def window_slopes(x, y, log_power: float = 0.0) -> Halves:
    """Slopes of (1) on the lower and upper halves of the window (in log x),
    to show whether the curve bends."""
    x = _check_x(x, log_power)
    y = np.asarray(y, dtype=np.float64)
    mid = np.exp(0.5 * (np.log(x.min()) + np.log(x.max())))
    return Halves(*(_nan_to_none(loglog_fit(x[sel], y[sel], log_power).slope) if np.unique(x[sel]).size >= 2
                    else None for sel in (x <= mid, x >= mid)))


def _nan_to_none(v):
    return None if v is None or not np.isfinite(v) else float(v)


def step_slopes(x, y) -> list:
    """Log-log slopes ``log(y_{j+1}/y_j) / log(x_{j+1}/x_j)`` between consecutive points of
    ``y [m]`` against increasing ``x [m]`` (``[m − 1]``; None where a value is not positive):
    where a law holds, bends or breaks along the grid."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    out = []
    for j in range(x.size - 1):
        ok = all(np.isfinite(v) and v > 0 for v in (y[j], y[j + 1])) and x[j + 1] > x[j] > 0
        out.append(float(np.log(y[j + 1] / y[j]) / np.log(x[j + 1] / x[j])) if ok else None)
    return out


def resample_indices(S: int, resamples: int, seed: int) -> np.ndarray:
    """``[B, S]`` seed indices drawn with replacement, reproducibly from ``seed``."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return rng.integers(0, S, size=(resamples, S))


def _check_boot(Y, resamples, level):
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] < 1:
        raise InputError(f"per-seed curves must have shape [S, m], got {Y.shape}")
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise InputError(f"resamples must be an integer >= 1, got {resamples!r}")
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise InputError(f"level must lie in (0, 1), got {level!r}")
    return Y


def bootstrap_slope(x, Y, *, log_power: float = 0.0, resamples: int = 2000,
                    level: float = 0.95, seed: int = 0) -> Slope:
    """Slope of the seed-mean curve of ``Y [S, m]`` against ``x [m]``, with a
    percentile bootstrap CI over seeds (see the module docstring).

    Returns a :class:`Slope`: ``slope`` (point estimate on all seeds; None if undefined),
    ``ci = [lo, hi]`` (None when fewer than half the resamples are defined or
    S = 1), ``per_seed`` slopes (None where a seed's curve is not positive),
    ``undefined_resamples``, ``resamples``, ``distinct_resamples`` = C(2S−1, S),
    ``rms`` of the point fit, and ``window`` (lower/upper half slopes).
    """
    x = _check_x(x, log_power)
    Y = _check_boot(Y, resamples, level)
    if Y.shape[1] != x.size:
        raise InputError(f"Y has {Y.shape[1]} points per curve but x has {x.size}")
    S = Y.shape[0]
    mean = Y.mean(axis=0)
    fit = loglog_fit(x, mean, log_power)
    idx = resample_indices(S, resamples, seed)
    boot = loglog_slopes(x, Y[idx].mean(axis=1), log_power)
    defined = boot[np.isfinite(boot)]
    q = ((1 - level) / 2, (1 + level) / 2)
    ci = None
    if S > 1 and defined.size >= max(1, resamples // 2):
        ci = (float(np.quantile(defined, q[0])), float(np.quantile(defined, q[1])))
    return Slope(slope=_nan_to_none(fit.slope), intercept=_nan_to_none(fit.intercept),
                rms=_nan_to_none(fit.rms), ci=ci, level=level,
                per_seed=[_nan_to_none(s) for s in loglog_slopes(x, Y, log_power)],
                undefined_resamples=int(resamples - defined.size), resamples=int(resamples),
                distinct_resamples=comb(2 * S - 1, S), seeds=S, log_power=log_power,
                window=window_slopes(x, mean, log_power) if np.all(mean > 0) else None)


def mean_band(Y, *, level: float = 0.95, resamples: int = 2000, seed: int = 0) -> Band:
    """Per-point seed mean of ``Y [S, m]`` with a percentile bootstrap band
    (resampling seeds, as in :func:`bootstrap_slope`) and the seed std.

    Returns a :class:`Band`, lists of length m: ``mean``, ``lo``, ``hi``, ``std`` (ddof=1; 0 for S = 1).
    A non-finite entry (a diverged seed) makes its point's values non-finite — ``None``
    in the JSON output, i.e. undefined — without NumPy's inf − inf warnings."""
    Y = _check_boot(Y, resamples, level)
    S = Y.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):
        means = Y[resample_indices(S, resamples, seed)].mean(axis=1)  # [B, m]
        q = ((1 - level) / 2, (1 + level) / 2)
        lo, hi = np.quantile(means, q[0], axis=0), np.quantile(means, q[1], axis=0)
        std = Y.std(axis=0, ddof=1) if S > 1 else np.zeros(Y.shape[1])
        mean = Y.mean(axis=0)
    return Band(mean=mean.tolist(), lo=lo.tolist(), hi=hi.tolist(), std=std.tolist(), level=level)


def classify_slope(ci, slope=None, target: float = -1.0, tol: float = RATE_TOLERANCE) -> str:
    """Where a slope CI sits against ``target`` ± ``tol`` (the band [−1.3, −0.7]
    by default):

    * ``"matches"``  — the CI overlaps the band: −1 up to logs;
    * ``"steeper"``  — the whole CI is below ``target − tol``: faster decay
      than the rate (consistent with an upper bound, which is then loose);
    * ``"shallower"`` — the whole CI is above ``target + tol``: slower decay
      than the rate allows, even up to logs;
    * ``"undefined"`` — no CI (and no point estimate to fall back on).

    Without a CI (one seed) the point ``slope`` is classified instead."""
    lo_band, hi_band = target - tol, target + tol
    if ci is None:
        if slope is None:
            return "undefined"
        ci = [slope, slope]
    lo, hi = ci
    if hi < lo_band:
        return "steeper"
    if lo > hi_band:
        return "shallower"
    return "matches"


def upper_bound_holds(ci, slope=None, target: float = -1.0, tol: float = RATE_TOLERANCE):
    """Acceptance rule for an *upper bound* ``y = Õ(x^{target})``: the data do
    not contradict it unless the whole CI lies above ``target + tol``
    (decay clearly slower than x^{−0.7}). Returns True/False, or None if undefined."""
    c = classify_slope(ci, slope, target, tol)
    return None if c == "undefined" else c != "shallower"


def rule_text(level: float = 0.95, target: float = -1.0, tol: float = RATE_TOLERANCE) -> str:
    """The acceptance rule, in words, for printing beside a verdict."""
    return (f"rule: slope of the seed-mean curve on log-log axes, {100 * level:g}% bootstrap CI over seeds; "
            f"'matches' if the CI overlaps [{target - tol:.1f}, {target + tol:.1f}] (slope {target:g} up to logs), "
            f"'steeper' if the CI is entirely below {target - tol:.1f}, 'shallower' if entirely above "
            f"{target + tol:.1f}; the Õ(x^{target:g}) upper bound counts as violated only when 'shallower'.")


def log_grid(lo: int, hi: int, num: int) -> np.ndarray:
    """Up to ``num`` distinct integers, log-spaced from ``lo`` to ``hi`` inclusive (lo >= 1)."""
    if lo < 1 or hi < lo:
        raise InputError(f"log_grid needs 1 <= lo <= hi, got lo={lo!r}, hi={hi!r}")
    return np.unique(np.round(np.geomspace(lo, hi, max(2, num))).astype(np.int64))


def rate_applies(model, loss) -> tuple:
    """Whether the paper's rate analysis covers a (model, loss) pair: ``(covered, reason)``.

    The Õ(1/K) and Õ(1/n) rates rest on self-bounded weak convexity
    (``λ_min(∇²L̂) >= −(κ(θ)/√H) L̂``) and the self-bounded gradient (``‖∇L̂‖ <= β₂ L̂``),
    i.e. on a closed-form κ and β₂ of the model and ``|ℓ'| <= ℓ``
    (:func:`mhajax.applicability.requirements`). Where either is missing, a measured slope
    is informational: it can neither confirm nor contradict the claim."""
    req = requirements(model, loss)
    need = [k for k in ("weak_convexity", "self_bounded_gradient") if not req[k][0]]
    if not need:
        return True, f"{model.name} has closed-form κ and β₂ and {loss.name} is self-bounded"
    why = {}
    for k in need:
        why.setdefault(req[k][1], []).append(k)
    return False, "; ".join(f"{' and '.join(ks)} not implied: {r}" for r, ks in why.items())
