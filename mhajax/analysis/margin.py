"""Hard-margin solver: the min-norm point of a convex hull (docs/theory.md §11).

Given signed points ``a_i = y_i g_i ∈ R^D`` (i = 1..n), the hard margin is

    γ = max_{||w|| <= 1} min_i <a_i, w> = min_{α ∈ Δ_n} || Σ_i α_i a_i ||        (*)

(von Neumann's minimax theorem; Δ_n the probability simplex). When γ > 0 the
data are *separable* and the maximizer is ``w* = u / ||u||`` with
``u = Σ_i α*_i a_i`` the min-norm point of ``conv{a_i}``; when the origin lies
in ``conv{a_i}`` the min-norm point is 0, no unit ``w`` has a positive margin
(Gordan's theorem), and the problem with ``||w|| = 1`` has a value <= 0. Only
the n×n signed Gram matrix ``K_ij = <a_i, a_j> = y_i y_j <g_i, g_j>`` is
needed: ``||Σ α_i a_i||² = αᵀKα`` and ``<a_i, u> = (Kα)_i``.

Solver. Wolfe's min-norm-point algorithm (Wolfe 1976), a primal active-set
method on the simplex: it keeps a *corral* S of affinely independent points
whose affine min-norm point has strictly positive weights; a major cycle adds
the point ``j = argmin_i (Kα)_i`` that most violates optimality, minor cycles
move toward the affine minimizer of the new corral (solving the small linear
system ``(K_SS + 11ᵀ) z = 1``, ``μ = z / 1ᵀz``) and drop points whose weight
reaches 0 (the Cholesky factor of ``K_SS + 11ᵀ`` is updated, not recomputed).
It terminates finitely in exact arithmetic with the exact support, so in
float64 the gap falls to rounding level (~1e-14 relative for γ̄ ~ 0.1) rather
than creeping down as Frank–Wolfe's does. The rounding floor is ~ ε/γ̄²
(u is a cancellation of vectors of norm up to max_i ||a_i||): a relative gap
<= 1e-8 needs γ̄ = γ / max_i ||a_i|| >~ 1e-4, and the reported gap shows when
it is not reached. It runs on the host in NumPy (an n×n problem; no LAPACK
kernel inside an XLA program, see :mod:`mhajax.linalg`) — call it outside ``jit``.

Duality gap (the quantity reported). For α ∈ Δ_n, u = Σ α_i a_i:

    primal   p(α) = ||u||² = αᵀKα                    (>= γ², since γ = min ||u||)
    dual     d(α) = ||u|| · m(w) = min_i (Kα)_i,      m(w) = min_i <a_i, w>, w = u/||u||
    gap      p − d = αᵀKα − min_i (Kα)_i   >= 0       (half the Frank–Wolfe gap of αᵀKα)
    rel_gap  (p − d) / p = 1 − m(w)/||u||

Since ``m(w) <= γ <= ||u||`` (w is feasible for the max, α for the min),
``rel_gap`` bounds the relative error of both ends: ``(||u|| − γ)/||u|| <= rel_gap``.
The optimality conditions (KKT) at α* are ``α >= 0``, ``Σα = 1``,
``(Kα)_i >= αᵀKα`` for all i, with equality where ``α_i > 0``: that is ``gap = 0``.

Separability is *certified*, never inferred from γ alone: the result is
``"separable"`` only if the returned direction has a positive margin beyond
rounding: with features, ``u = αᵀA`` is formed and ``min_i <a_i, u>`` must
exceed its own rounding bound ``4 D ε max_i||a_i|| ||u||`` (so the float vector
``w = u/||u||`` provably separates the given points); with a Gram matrix only,
``min_i (Kα)_i > τ · max_i K_ii``, where ``τ`` is the resolution of K (see
:func:`min_norm_point`). It is ``"not_separable"``
when the min-norm point is numerically 0, ``||u||² <= τ · max_i ||a_i||²``,
i.e. ``γ̄ = γ / max_i ||a_i|| <= √τ``: margins below that resolution cannot be
told from 0 and are never reported as positive. Anything else (the iteration
limit reached without either certificate) is ``"undecided"``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from mhajax.errors import InputError

EPS = np.finfo(np.float64).eps
GAP_TOL = 1e-8  # relative duality gap accepted as "converged"


def _solve_triangular(L, b, *, lower: bool):
    """``L⁻¹ b`` for a triangular ``L [k, k]``, ``b [k]`` (SciPy's ``solve_triangular``,
    imported on first use: only the min-norm-point solver needs ``scipy.linalg``)."""
    from scipy.linalg import solve_triangular
    return solve_triangular(L, b, lower=lower, check_finite=False)


@dataclass(frozen=True)
class MarginResult:
    """Output of :func:`hard_margin` / :func:`margin_from_gram`.

    ``gamma``: the margin γ (= ``gamma_upper`` = ||u||) when separable, 0.0 when
    not separable, ``None`` when undecided. ``gamma_lower``: the achieved margin
    ``m(w) = min_i <a_i, w>`` of the returned ``w`` (a certified lower bound on γ;
    ``None`` if u = 0). ``gamma_upper``: ``||u||``, an upper bound on γ.
    ``scale``: ``max_i ||a_i||``; ``gamma_bar = gamma / scale`` (scale-free).
    ``alpha [n]``: simplex weights; ``w [D]``: ``u/||u||`` (only when features
    were given and u ≠ 0). ``gap``/``rel_gap``: see the module docstring.
    ``status``: ``"separable"``, ``"not_separable"`` or ``"undecided"``.
    ``resolution``: τ, the relative level below which ``||u||²/scale²`` and
    ``min_i <a_i,u>/scale²`` are indistinguishable from 0.
    """

    gamma: Optional[float]
    gamma_lower: Optional[float]
    gamma_upper: float
    scale: float
    gamma_bar: Optional[float]
    alpha: np.ndarray
    gap: float
    rel_gap: Optional[float]
    iterations: int
    status: str
    resolution: float
    support: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    w: Optional[np.ndarray] = None

    @property
    def separable(self) -> bool:
        """Whether the solver certified a direction with a positive margin."""
        return self.status == "separable"

    @property
    def converged(self) -> bool:
        """Separable with ``rel_gap <= GAP_TOL``, or certified not separable."""
        if self.status == "not_separable":
            return True
        return self.status == "separable" and self.rel_gap is not None and self.rel_gap <= GAP_TOL

    def summary(self) -> dict:
        """JSON-ready scalars (no α, w)."""
        return dict(gamma=self.gamma, gamma_bar=self.gamma_bar, gamma_lower=self.gamma_lower,
                    gamma_upper=self.gamma_upper, scale=self.scale, gap=self.gap,
                    rel_gap=self.rel_gap, iterations=self.iterations, status=self.status,
                    separable=self.separable, support_size=int(len(self.support)),
                    resolution=self.resolution)


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------

def _as_matrix(name, A):
    try:
        A = np.asarray(A, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a numeric array") from None
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        raise InputError(f"{name} must be a non-empty 2-D array, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(A))[0])
        raise InputError(f"{name} contains non-finite values, first {name}{list(idx)} = {A[idx]}")
    return A


def _check_labels(y, n):
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (n,):
        raise InputError(f"y must have shape ({n},) to match the features, got {y.shape}")
    bad = ~np.isin(y, (-1.0, 1.0))
    if bad.any():
        i = int(np.argwhere(bad)[0][0])
        raise InputError(f"labels must be -1 or +1, got y[{i}] = {y[i].item()!r}")
    return y


def check_options(rtol, resolution, max_iter) -> None:
    """Validate the solver's options: ``rtol`` a finite number >= 0, ``resolution`` τ
    ``None`` or a finite number in [0, 1] (a level relative to max_i K_ii, which the
    normalized ``αᵀKα`` never exceeds), ``max_iter`` ``None`` or an integer >= 0 (0: no cycle)."""
    for name, v, hi in (("rtol", rtol, np.inf), ("resolution", resolution, 1.0)):
        if v is None and name == "resolution":
            continue
        ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        if not ok or not np.isfinite(float(v)) or not (0.0 <= float(v) <= hi):
            rng = "[0, 1]" if hi == 1.0 else ">= 0"
            raise InputError(f"{name} must be a finite number {rng}, got {v!r}")
    if max_iter is not None and (isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer))
                                 or max_iter < 0):
        raise InputError(f"max_iter must be an integer >= 0, got {max_iter!r}")


def check_gram(K, psd_rtol: float = 1e-8) -> np.ndarray:
    """Validate a Gram matrix: square, finite, symmetric and PSD to ``psd_rtol``
    relative to its largest diagonal entry. Returns it as float64."""
    K = _as_matrix("K", K)
    n = K.shape[0]
    if K.shape != (n, n):
        raise InputError(f"K must be square, got shape {K.shape}")
    s2 = float(np.max(np.diag(K))) if n else 0.0
    if np.min(np.diag(K)) < -psd_rtol * max(s2, 0.0) or s2 < 0:
        raise InputError(f"K has a negative diagonal entry {float(np.min(np.diag(K)))!r}: not a Gram matrix")
    asym = float(np.max(np.abs(K - K.T))) if n > 1 else 0.0
    if asym > psd_rtol * max(s2, np.finfo(float).tiny):
        raise InputError(f"K is not symmetric: max |K - Kᵀ| = {asym:.3g} (largest diagonal {s2:.3g})")
    if n > 1:  # s2 = 0 too: a zero diagonal with a nonzero entry is not PSD
        lam = float(np.linalg.eigvalsh(0.5 * (K + K.T))[0])
        if lam < -psd_rtol * s2 * n:
            raise InputError(f"K is not positive semidefinite: smallest eigenvalue {lam:.3g} "
                             f"(largest diagonal {s2:.3g})")
    return 0.5 * (K + K.T)


# ---------------------------------------------------------------------------
# Wolfe's min-norm-point algorithm
# ---------------------------------------------------------------------------

class _GramCorral:
    """The active set S of Wolfe's algorithm with the Cholesky factor ``L`` of
    ``M = K_SS + 11ᵀ`` (positive definite iff the points of S are affinely
    independent), updated in O(|S|²) per insertion (bordering) and deletion
    (Givens rotations). ``K`` is scaled so that max_i K_ii = 1."""

    def __init__(self, Kn, S):
        self.Kn = Kn
        self.S = list(S)
        self.L = np.linalg.cholesky(Kn[np.ix_(self.S, self.S)] + 1.0)

    def products(self, lam):
        """``(Kα, αᵀKα, rounding of Kα)`` for α = λ on S."""
        Ka = self.Kn[:, self.S] @ lam
        return Ka, float(lam @ Ka[self.S]), 8 * self.Kn.shape[0] * EPS

    def add(self, j) -> bool:
        """Append point j; ``False`` (no change) if it is numerically in aff(S)."""
        c = self.Kn[self.S, j] + 1.0
        dj = self.Kn[j, j] + 1.0
        l = _solve_triangular(self.L, c, lower=True)
        r2 = dj - l @ l
        if not np.isfinite(r2) or r2 <= 64 * EPS * dj:
            return False
        k = len(self.S)
        L = np.zeros((k + 1, k + 1))
        L[:k, :k] = self.L
        L[k, :k] = l
        L[k, k] = np.sqrt(r2)
        self.L = L
        self.S.append(j)
        return True

    def remove(self, i: int):
        """Delete position i of S: drop row i of L and restore the lower
        triangle with Givens rotations on columns (i, i+1), (i+1, i+2), ..."""
        L = np.delete(self.L, i, axis=0)  # [k-1, k], bulge above the diagonal from column i
        k = L.shape[1]
        for j in range(i, k - 1):
            a, b = L[j, j], L[j, j + 1]
            r = np.hypot(a, b)
            if r == 0.0:
                continue
            c, s = a / r, b / r
            cj, cj1 = L[j:, j].copy(), L[j:, j + 1].copy()
            L[j:, j] = c * cj + s * cj1
            L[j:, j + 1] = -s * cj + c * cj1
        self.L = L[:, :k - 1]
        del self.S[i]

    def affine_weights(self):
        """Weights ``μ`` (Σμ = 1) of the min-norm point of aff{a_s : s ∈ S}:
        ``M z = 1``, ``μ = z / 1ᵀz``; ``None`` if that fails numerically."""
        z = _solve_triangular(self.L, np.ones(len(self.S)), lower=True)
        z = _solve_triangular(self.L.T, z, lower=False)
        return _normalize(z)


def _normalize(z):
    s = z.sum()
    if not np.all(np.isfinite(z)) or not np.isfinite(s) or s <= 0:
        return None
    return z / s


def _wolfe(corral, lam, *, tau, rtol, max_iter):
    """Wolfe's major/minor cycles from the corral's S with weights ``lam``.
    Returns ``(S, lam, iterations, minor, stop)``."""
    prev = np.inf
    stop, it, minor = "max_iter", 0, 0
    for it in range(1, max_iter + 1):
        Ka, xx, round_gap = corral.products(lam)
        j = int(np.argmin(Ka))
        gap = xx - float(Ka[j])
        if xx <= tau:
            stop = "zero"
            break
        if gap <= rtol * xx + round_gap:
            stop = "optimal"
            break
        if j in corral.S or xx >= prev or not corral.add(j):
            stop = "stalled"  # no strict decrease possible: rounding level reached
            break
        prev = xx
        lam = np.append(lam, 0.0)
        while True:  # minor cycles: move toward the affine minimizer, drop blocking points
            minor += 1
            mu = corral.affine_weights()
            if mu is None:  # new point (last) made the system singular: undo, stop
                corral.remove(len(corral.S) - 1)
                lam = lam[:-1] / lam[:-1].sum()
                return corral.S, lam, it, minor, "stalled"
            if np.all(mu > 0):
                lam = mu
                break
            neg = mu <= 0
            denom = lam[neg] - mu[neg]  # > 0 unless λ_i = μ_i = 0 (then the point goes)
            ratios = np.where(denom > 0, lam[neg] / np.where(denom > 0, denom, 1.0), 0.0)
            theta = float(np.min(ratios))
            lam = (1 - theta) * lam + theta * mu
            drop = np.zeros(len(lam), bool)
            drop[np.flatnonzero(neg)[ratios <= theta]] = True  # the blocking point(s)
            drop |= lam <= 0                                   # and weights rounded to 0
            if drop.all():  # cannot happen in exact arithmetic
                drop[int(np.argmax(lam))] = False
            for i in np.flatnonzero(drop)[::-1]:
                corral.remove(int(i))
            lam = lam[~drop]
            lam = lam / lam.sum()
    return corral.S, lam, it, minor, stop


def min_norm_point(K, *, rtol: float = 1e-13, resolution: Optional[float] = None,
                   max_iter: Optional[int] = None, check: bool = True):
    """Min-norm point of ``conv{a_i}`` from the Gram matrix ``K [n, n]``, ``K_ij = <a_i, a_j>``.

    Returns ``(alpha [n], info)`` with ``info`` a dict: ``iterations`` (major
    cycles), ``minor`` (minor cycles), ``stop`` (``"optimal"``, ``"zero"``,
    ``"stalled"`` or ``"max_iter"``), ``resolution`` τ, ``scale2`` = max_i K_ii.

    Works on ``K / max_i K_ii``. Stops when the gap ``αᵀKα − min_i (Kα)_i`` is
    at most ``rtol·αᵀKα + 8 n ε`` (in those units; the second term is the
    rounding of ``Kα``); when ``αᵀKα <= τ`` (the min-norm point is 0 to the
    resolution τ; default ``τ = 1e-12 + 4 n ε``, i.e. K is taken to be accurate
    to 1e-12 relative to its largest entry — pass a larger τ for a less
    accurate K); or when rounding stops the strict decrease of ``αᵀKα``
    (``"stalled"``). ``max_iter`` bounds the major cycles (default 20 n + 100).
    Cost: O(n |S|) per major cycle plus O(|S|²) per minor cycle.

    Accuracy: the min-norm point u is a cancellation of vectors of size up to
    max_i ||a_i||, so in float64 it carries an error ~ ε·max||a_i||, and the
    relative gap cannot fall below ~ ε / γ̄² (γ̄ = γ / max_i ||a_i||): a relative
    gap <= 1e-8 needs γ̄ >~ 1e-4. Below that the reported gap says so.
    """
    if check:   # (hard_margin and margin_from_gram validate before calling with check=False)
        check_options(rtol, resolution, max_iter)
    K = check_gram(K) if check else np.asarray(K, dtype=np.float64)
    n = K.shape[0]
    sq = np.diag(K)
    tau = (1e-12 + 4 * n * EPS) if resolution is None else float(resolution)
    s2 = float(sq.max())
    info = dict(iterations=0, minor=0, stop="zero", resolution=tau, scale2=s2)
    alpha = np.zeros(n)
    j0 = int(np.argmin(sq))
    if s2 <= 0.0:
        alpha[j0] = 1.0
        return alpha, info
    corral = _GramCorral(K / s2, [j0])
    max_iter = 20 * n + 100 if max_iter is None else int(max_iter)
    S, lam, it, minor, stop = _wolfe(corral, np.ones(1), tau=tau, rtol=rtol, max_iter=max_iter)
    info.update(iterations=it, minor=minor, stop=stop)
    alpha[S] = lam
    return alpha, info


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------

def _finish(alpha, info, Ka, xx, A=None, D=None) -> MarginResult:
    """Build the result from α, ``Kα`` and ``αᵀKα`` (unnormalized), and the
    features ``A`` if known (then the certificate uses them directly)."""
    s2 = info["scale2"]
    scale = float(np.sqrt(max(s2, 0.0)))
    tau = info["resolution"]
    support = np.flatnonzero(alpha > 0)
    w = None
    if A is not None:
        u = alpha @ A
        norm_u = float(np.linalg.norm(u))
        Au = A @ u
        min_au = float(np.min(Au))
        # rounding of <a_i, u> computed from the features: <= D ε ||a_i|| ||u||
        cert_tol = 4 * D * EPS * scale * norm_u
        pp = norm_u ** 2
        if norm_u > 0:
            w = u / norm_u
    else:
        pp = max(float(xx), 0.0)
        norm_u = float(np.sqrt(pp))
        min_au = float(np.min(Ka))
        cert_tol = tau * s2
    gap = max(pp - min_au, 0.0)
    gamma_lower = min_au / norm_u if norm_u > 0 else None
    if s2 > 0 and min_au > cert_tol and min_au > 0:
        status = "separable"
    elif pp <= tau * s2 or s2 <= 0:
        status = "not_separable"
    else:
        status = "undecided"
    # the relative gap measures optimality of a positive margin; at a (numerically)
    # zero min-norm point it is meaningless and reported as undefined
    rel_gap = gap / pp if (pp > 0 and status != "not_separable") else None
    if status == "separable":
        gamma = norm_u
    elif status == "not_separable":
        gamma = 0.0
    else:
        gamma = None
    gamma_bar = (gamma / scale) if (gamma is not None and scale > 0) else (0.0 if gamma == 0.0 else None)
    return MarginResult(gamma=gamma, gamma_lower=gamma_lower, gamma_upper=norm_u, scale=scale,
                        gamma_bar=gamma_bar, alpha=alpha, gap=gap, rel_gap=rel_gap,
                        iterations=int(info["iterations"]), status=status, resolution=tau,
                        support=support, w=w)


def margin_from_gram(K, *, resolution: Optional[float] = None, rtol: float = 1e-13,
                     max_iter: Optional[int] = None) -> MarginResult:
    """Hard margin from the signed Gram matrix ``K [n, n]``, ``K_ij = y_i y_j <g_i, g_j>``.

    ``w`` is not available (only α); the separability certificate is
    ``min_i (Kα)_i > τ · max_i K_ii`` with τ the resolution of K (see
    :func:`min_norm_point`)."""
    check_options(rtol, resolution, max_iter)
    K = check_gram(K)
    alpha, info = min_norm_point(K, rtol=rtol, resolution=resolution, max_iter=max_iter,
                                 check=False)
    Ka = K @ alpha
    return _finish(alpha, info, Ka, float(alpha @ Ka))


def hard_margin(G, y=None, *, resolution: Optional[float] = None, rtol: float = 1e-13,
                max_iter: Optional[int] = None) -> MarginResult:
    """Hard margin of features ``G [n, D]`` with labels ``y [n]`` in {±1}
    (``y=None``: the rows are already signed, ``a_i = G_i``).

    Runs :func:`min_norm_point` on ``K = A Aᵀ`` (``A = y ⊙ G``), then recomputes
    ``u = αᵀA``,
    ``w = u/||u||`` and the margins ``<a_i, w>`` from the features, so the
    separability certificate ``min_i <a_i, u> > 4 D ε max_i||a_i|| ||u||`` is
    checked in the feature space (independent of the Gram's rounding). The
    default resolution τ for "not separable" is ``1e-12 + 4 (n + D) ε``."""
    check_options(rtol, resolution, max_iter)
    A = _as_matrix("G", G)
    n, D = A.shape
    if y is not None:
        A = A * _check_labels(y, n)[:, None]
    tau = (1e-12 + 4 * (n + D) * EPS) if resolution is None else float(resolution)
    K = A @ A.T
    alpha, info = min_norm_point(0.5 * (K + K.T), rtol=rtol, resolution=tau,
                                 max_iter=max_iter, check=False)
    return _finish(alpha, info, None, None, A=A, D=D)


def linear_margin(V, y, *, bias: bool = False, **kw) -> MarginResult:
    """Max-margin of a homogeneous linear classifier ``x -> <w, x>`` on plain
    feature vectors ``V [n, D]`` (``bias=True`` appends a constant feature 1,
    i.e. ``<w, x> + b`` with ``||(w, b)|| <= 1``). ``gamma_bar`` is the margin
    divided by ``max_i ||v_i||`` (of the augmented vectors when ``bias``)."""
    V = _as_matrix("V", V)
    if bias:
        V = np.concatenate([V, np.ones((V.shape[0], 1))], axis=1)
    return hard_margin(V, y, **kw)


def kkt_violation(K, alpha) -> dict:
    """How far α is from optimal for ``min_{α∈Δ} αᵀKα``, relative to max_i K_ii:
    ``neg`` = max(−α_i), ``sum`` = |Σα − 1|, ``dual`` = max(αᵀKα − (Kα)_i)⁺ over
    all i (should be <= 0), ``support`` = max |(Kα)_i − αᵀKα| over α_i > 0."""
    K = np.asarray(K, np.float64)
    alpha = np.asarray(alpha, np.float64)
    s2 = max(float(np.max(np.diag(K))), np.finfo(float).tiny)
    Ka = K @ alpha
    xx = float(alpha @ Ka)
    sup = alpha > 0
    return dict(neg=float(max(0.0, -alpha.min())), sum=abs(float(alpha.sum()) - 1.0),
                dual=float(max(0.0, np.max(xx - Ka))) / s2,
                support=float(np.max(np.abs(Ka[sup] - xx))) / s2 if sup.any() else 0.0)


__all__ = ["MarginResult", "GAP_TOL", "min_norm_point", "margin_from_gram", "hard_margin",
           "linear_margin", "kkt_violation", "check_gram", "check_options"]
