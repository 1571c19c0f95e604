"""The generalization gap with a control variate, and its jackknife standard error.

S seeds give S independent training sets and S models: model s is trained on set s
(``θ_s``) and tested on its own held-out set. The plain per-seed gap is

    gap_s = L(θ_s) − L̂_s(θ_s)                     (L: held-out loss, L̂_s: loss on training set s)

Its seed-to-seed spread at large n is dominated by how "hard" training set s is: the
deviation of an average over n samples from L, which has either sign. Every *other*
model measures that deviation without bias, since ``θ_{s'}`` (s' ≠ s) is independent of
training set s. With the cross matrix ``C [S, S]``,

    C[s, s'] = L̂_s(θ_{s'}) − L(θ_{s'})             (model s' on training set s, minus its held-out loss)

the control variate of seed s is ``c_s = mean_{s' ≠ s} C[s, s']``, and ``E[c_s] = 0``
exactly (given θ_{s'}, both terms estimate the same risk from independent samples). The
estimator (coefficient 1, no fitted β that would bias it)::

    est_s = gap_s + c_s,       ĝ = (1/S) Σ_s est_s,        E[ĝ] = E[gap_s]

The c_s share models, so the est_s are not independent: the standard error is the
delete-one jackknife over seeds (:func:`control_variate_gap`), which drops seed j's
training set *and* model j, recomputing every c_s from the remaining S − 2 models::

    ĝ_(j) = (1/(S−1)) Σ_{s≠j} (gap_s + mean_{s'∉{s,j}} C[s, s']),
    se_J  = √( (S−1)/S · Σ_j (ĝ_(j) − mean_j ĝ_(j))² )

The jackknife is exact in expectation for the part of ĝ that is a mean over seeds, and
conservative for the part that averages pair terms C[s, s'] (a U-statistic): independent
pair noise of variance σ² contributes ``σ²/(S(S−1))`` to Var ĝ but ``2σ²/(S(S−2))`` to
E[se_J²] (tests/analysis/test_gap.py). It never understates the se on that account.

A grid point n is *resolved* when ``ĝ > 2 se_J`` (:data:`RESOLVED_SE`). Where it is not,
:func:`seeds_needed` says how many seeds would resolve it at the measured spread
(``S' = S (2 se / g)²``, se ∝ 1/√S), and ``ĝ + 2 se`` bounds the gap from above.

The slope of ĝ(n) against n gets the same jackknife (:func:`jackknife_slope`): the
leave-one-seed-out means ``ĝ_(j)(n)`` of every n, one log-log slope per j.

NumPy float64 post-processing of numbers already computed.
"""
from __future__ import annotations

import math

import numpy as np

from mhajax.analysis.rates import loglog_fit, loglog_slopes
from mhajax.errors import InputError

#: a gap is resolved when its estimate exceeds RESOLVED_SE standard errors
RESOLVED_SE = 2.0


def _cv(gap, C, keep):
    """Per-seed ``gap_s + mean_{s' in keep, s' != s} C[s, s']`` for s in ``keep`` (boolean [S])."""
    idx = np.flatnonzero(keep)
    sub = C[np.ix_(idx, idx)]
    off = ~np.eye(idx.size, dtype=bool)
    c = np.where(off, sub, 0.0).sum(axis=1) / (idx.size - 1)
    return gap[idx] + c, c


def control_variate_gap(gap, cross) -> dict:
    """The control-variate gap from ``gap [S]`` (plain per-seed gaps) and ``cross [S, S]``
    (see the module docstring; the diagonal is ignored). Needs S >= 3 (the jackknife drops
    two models per c_s).

    Returns ``mean`` (ĝ), ``se`` (jackknife), ``per_seed`` (est_s), ``control`` (c_s),
    ``leave_one_out`` (ĝ_(j), [S]), ``plain_mean``, ``plain_se`` (std(gap)/√S, ddof 1) and
    ``corr`` (the correlation of gap_s with −c_s: how much of the plain gap's spread the
    control variate explains; None when undefined)."""
    g = np.asarray(gap, dtype=np.float64)
    C = np.asarray(cross, dtype=np.float64)
    S = g.size
    if g.ndim != 1 or C.shape != (S, S):
        raise InputError(f"gap must be [S] and cross [S, S], got {g.shape} and {C.shape}")
    if S < 3:
        raise InputError(f"the control-variate gap needs at least 3 seeds, got {S}")
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(C[~np.eye(S, dtype=bool)]))):
        return dict(mean=None, se=None, per_seed=None, control=None, leave_one_out=None, plain_mean=None,
                    plain_se=None, corr=None, seeds=S)
    est, c = _cv(g, C, np.ones(S, bool))
    loo = np.empty(S)
    for j in range(S):
        keep = np.ones(S, bool)
        keep[j] = False
        loo[j] = _cv(g, C, keep)[0].mean()
    se = math.sqrt((S - 1) / S * float(np.sum((loo - loo.mean()) ** 2)))
    sd_g, sd_c = float(np.std(g)), float(np.std(c))
    corr = float(np.corrcoef(g, -c)[0, 1]) if sd_g > 0 and sd_c > 0 else None
    return dict(mean=float(est.mean()), se=se, per_seed=est.tolist(), control=c.tolist(),
                leave_one_out=loo.tolist(), plain_mean=float(g.mean()), plain_se=float(np.std(g, ddof=1) / math.sqrt(S)),
                corr=corr, seeds=S)


def seeds_needed(mean, se, seeds: int):
    """Seeds that would put ``mean`` at :data:`RESOLVED_SE` standard errors, with the
    standard error scaling like ``1/√S`` from ``se`` at ``seeds``: ``S (RESOLVED_SE·se/mean)²``
    rounded up; when ``mean <= 0`` the gap is taken at half its upper bound,
    ``(mean + RESOLVED_SE·se)/2`` (None when that is not positive either)."""
    if mean is None or se is None or not (math.isfinite(mean) and math.isfinite(se)):
        return None
    g = mean if mean > 0 else (mean + RESOLVED_SE * se) / 2
    if g <= 0:
        return None
    return int(math.ceil(seeds * (RESOLVED_SE * se / g) ** 2))


def jackknife_slope(x, full, loo, *, level: float = 0.95) -> dict:
    """Delete-one jackknife of the log-log slope of ``full [m]`` (the all-seed estimates
    ĝ(x_k)) against ``x [m]``; ``loo [S, m]`` holds the leave-one-seed-out estimates
    ĝ_(j)(x_k) (``leave_one_out`` of :func:`control_variate_gap` at every x_k). Row j gives a
    slope b_j, ``se = √((S−1)/S · Σ_j (b_j − b̄)²)`` and ``ci = slope ± z_{(1+level)/2}·se``
    with ``slope`` the fit of ``full``. Every value None when a curve has a non-positive point."""
    L = np.asarray(loo, dtype=np.float64)
    f = np.asarray(full, dtype=np.float64)
    if L.ndim != 2 or L.shape[0] < 2 or f.shape != L.shape[1:]:
        raise InputError(f"loo must be [S, m] with S >= 2 and full [m], got {L.shape} and {f.shape}")
    S = L.shape[0]
    b = loglog_slopes(x, L)
    slope = loglog_fit(x, f).slope
    if not (np.all(np.isfinite(b)) and math.isfinite(slope)):
        return dict(slope=None, se=None, ci=None, level=level,
                    per_leave_out=[float(v) if np.isfinite(v) else None for v in b])
    se = math.sqrt((S - 1) / S * float(np.sum((b - b.mean()) ** 2)))
    z = _normal_quantile((1 + level) / 2)
    return dict(slope=float(slope), se=se, ci=[float(slope - z * se), float(slope + z * se)],
                per_leave_out=b.tolist(), level=level)


def _normal_quantile(p: float) -> float:
    """Standard normal quantile by bisection on ``erf`` (float64, |error| < 1e-12)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


__all__ = ["RESOLVED_SE", "control_variate_gap", "seeds_needed", "jackknife_slope"]
