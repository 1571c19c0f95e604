"""A normalized margin over an n-sweep: the slope rule, and the finite-sample prediction (P).

The one-step claim (docs/theory.md §11.1, part (b)) is that the normalized NTK margin
``γ̄(n) = γ(n) / max_i ||g_i||`` does not shrink as n grows. Per seed s and grid point
``n_j`` the sweep gives ``Γ [S, m]``; the statistic is the log-log slope b of the
seed-mean curve (:func:`mhajax.analysis.rates.bootstrap_slope`, percentile CI over seeds)::

    log ȳ_j ≈ a + b log n_j,        ȳ_j = (1/S) Σ_s Γ[s, j]

**Slope rule** (:func:`slope_rule`), with the tolerance τ = :data:`SLOPE_TOLERANCE` = −0.1
fixed before any data were looked at: *holds* when the whole CI lies above τ (the margin
does not shrink faster than n^τ), *violated* when the whole CI lies below τ, *unresolved*
when the CI contains τ, *undefined* without a CI.

**Why a noisy margin falls with n anyway.** The empirical margin is a minimum over n
samples. To first order in the token noise σ the margin of sample i along a fixed unit
direction w is ``m_i = m⁰(c_i) + σ s_w ξ_i``, ``ξ_i ~ N(0, 1)``, where ``m⁰(c_i)`` is the
noiseless margin of the sample's configuration and ``s_w`` the standard deviation of
``(m_i(σ) − m_i(0))/σ``; the feature norms move the same way with ``s_g``. The minimum over
n samples is then ``γ₀ − σ s_w a_n`` and the largest norm ``G₀ + σ s_g a_n``, with
``a_n = E max_{i<=n} ξ_i`` (:func:`expected_max_normal`; ≈ √(2 ln n)). The prediction::

    γ̄_pred(n) = (γ₀ − σ s_w a_n) / (G₀ + σ s_g a_n)                                  (P)

(:func:`predicted_margin`): γ₀, G₀ the raw margin and the largest feature norm of the
noiseless data (σ = 0, the same draw), s_w, s_g from a paired draw
(:func:`paired_spreads`). The **excess slope** (:func:`excess_slope`) is the slope of
``Γ / Γ_pred`` (per seed, then the seed mean): what the noise does not explain. It is
judged by the same rule. At fixed σ > 0, (P) reaches 0 at ``a_n = γ₀/(σ s_w)``: a Gaussian
mixture is eventually not separable, so "does not shrink" can only mean the noiseless
margin, or the margin up to the extreme-value term (P).

Everything here is NumPy/SciPy float64 post-processing of numbers already computed.
"""
from __future__ import annotations

import math

import numpy as np

from mhajax.analysis.rates import bootstrap_slope, loglog_fit
from mhajax.errors import InputError

#: τ: a normalized margin "does not shrink with n" when its slope CI lies above this
#: (stated before looking at any sweep).
SLOPE_TOLERANCE = -0.1

#: the rule's outcomes
HOLDS, VIOLATED, UNRESOLVED, UNDEFINED = "holds", "violated", "unresolved", "undefined"


def expected_max_normal(n: int) -> float:
    """``a_n = E max_{i<=n} ξ_i`` for ξ_i iid N(0, 1): ``∫ x · n φ(x) Φ(x)^{n−1} dx`` by
    adaptive quadrature (float64, absolute error < 1e-10). ``a_1 = 0``, ``a_2 = 1/√π``,
    ``a_4096 = 3.6261``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n must be an integer >= 1, got {n!r}")
    n = int(n)
    if n == 1:
        return 0.0
    # imported here, not at module level: scipy.integrate adds ~0.17 s and scipy.special
    # ~0.15 s to the start of every command (measured), and only this
    # function needs them
    from scipy import integrate, special
    # density of the maximum: n φ(x) Φ(x)^{n-1}, evaluated in logs (no underflow for large n)
    dens = lambda x: n * math.exp(-0.5 * x * x - 0.5 * math.log(2 * math.pi)
                                  + (n - 1) * float(special.log_ndtr(x)))
    lo, hi = -8.0, 3.0 + math.sqrt(2.0 * math.log(n)) + 3.0
    val, _ = integrate.quad(lambda x: x * dens(x), lo, hi, limit=400, epsabs=1e-12, epsrel=1e-12)
    return float(val)


def predicted_margin(gamma0, G0, sigma, s_w, s_g, n):
    """(P): ``(γ₀ − σ s_w a_n) / (G₀ + σ s_g a_n)`` for scalar or array inputs (broadcast;
    ``n`` an int or a sequence of ints). Non-positive where the noise term reaches γ₀
    (the prediction says: not separable at that n)."""
    ns = np.atleast_1d(np.asarray(n))
    a = np.array([expected_max_normal(int(k)) for k in ns.ravel()]).reshape(ns.shape)
    out = (np.asarray(gamma0, float) - sigma * np.asarray(s_w, float) * a) / \
          (np.asarray(G0, float) + sigma * np.asarray(s_g, float) * a)
    return float(out.ravel()[0]) if np.ndim(n) == 0 and out.size == 1 else out


def paired_spreads(margins_noisy, margins_clean, norms_noisy, norms_clean, sigma: float) -> tuple:
    """``(s_w, s_g)``: per-unit-σ standard deviations (ddof = 1) of ``m_i(σ) − m_i(0)`` and of
    ``||g_i(σ)|| − ||g_i(0)||`` over the n samples ``[n]`` of a paired draw (the same draw
    with and without noise, features at the same θ, margins along the same direction w);
    ``(None, None)`` for σ = 0."""
    if not sigma > 0:
        return None, None
    dm = np.asarray(margins_noisy, float) - np.asarray(margins_clean, float)
    dg = np.asarray(norms_noisy, float) - np.asarray(norms_clean, float)
    return float(np.std(dm, ddof=1) / sigma), float(np.std(dg, ddof=1) / sigma)


def slope_rule(ci, tol: float = SLOPE_TOLERANCE) -> str:
    """Where a slope CI ``[lo, hi]`` sits against τ: :data:`HOLDS` (lo > τ), :data:`VIOLATED`
    (hi < τ), :data:`UNRESOLVED` (the CI contains τ), :data:`UNDEFINED` (no CI)."""
    if ci is None or any(v is None or not np.isfinite(v) for v in ci):
        return UNDEFINED
    lo, hi = ci
    if lo > tol:
        return HOLDS
    if hi < tol:
        return VIOLATED
    return UNRESOLVED


def n_slope(ns, Y, **boot) -> dict:
    """:func:`~mhajax.analysis.rates.bootstrap_slope` of ``Y [S, m]`` against ``ns [m]``
    plus ``rule`` (:func:`slope_rule` at :data:`SLOPE_TOLERANCE`) and ``tolerance``."""
    fit = bootstrap_slope(np.asarray(ns, float), np.asarray(Y, float), **boot)
    return dict(fit._asdict(), rule=slope_rule(fit.ci), tolerance=SLOPE_TOLERANCE)


def excess_slope(ns, measured, predicted, **boot) -> dict:
    """The slope of ``measured / predicted`` (both ``[S, m]``; per seed, then the seed mean)
    with its bootstrap CI and the rule (:func:`n_slope`), beside ``predicted_slope`` (the
    plain fit of the seed-mean prediction). Undefined (``rule`` ``undefined``) where a
    prediction is not positive."""
    M, P = np.asarray(measured, float), np.asarray(predicted, float)
    if M.shape != P.shape:
        raise InputError(f"measured {M.shape} and predicted {P.shape} must have the same shape")
    pm = P.mean(axis=0)
    pred = loglog_fit(np.asarray(ns, float), pm).slope if np.all(pm > 0) else float("nan")
    if not np.all(P > 0):
        return dict(slope=None, ci=None, rule=UNDEFINED, tolerance=SLOPE_TOLERANCE,
                    predicted_slope=None, note="(P) is not positive at some (seed, n)")
    out = n_slope(ns, M / P, **boot)
    out["predicted_slope"] = float(pred) if np.isfinite(pred) else None
    return out


__all__ = ["SLOPE_TOLERANCE", "HOLDS", "VIOLATED", "UNRESOLVED", "UNDEFINED", "expected_max_normal",
           "predicted_margin", "paired_spreads", "slope_rule", "n_slope", "excess_slope"]
