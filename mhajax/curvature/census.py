"""Certified spectral census of ``∇²L̂ = blockdiag(B) + Jᵀ diag(w) J`` (docs/theory.md §3.5).

For thresholds t_1..t_k (any order, finite) the number of eigenvalues of the Hessian A
below each, *certified*: a bracket ``lo_count <= #{eig(A) < t} <= hi_count`` per threshold,
from one decomposition (:func:`mhajax.curvature.inertia.decompose`) and one n×n Schur
complement per threshold, all thresholds in one batched product (O(kn²P/2) at
matrix-multiply speed). On top of it, a certified histogram with brackets of the negative
count N₋ = #{eig < 0} and of the negative trace tr(A)₋ = Σ_{λ<0} λ.

Notation as in :mod:`~mhajax.curvature.inertia`: Ã = Λ + K̃ΣK̃ᵀ [P, P] is the model matrix
built from the computed decomposition, δ(t) = :func:`~mhajax.curvature.inertia.widening`,
N = the r rows kept in Z (``num_near``), F = the other coupled rows (‖k_j‖ > 0), G partial
sums, u = eps/2, γ_m = mu/(1 − mu).

**The certificate (per threshold t).** (1) A to Ã: Q̂ᵀ(A − t)Q̂ = Ã − t + E(t) with
‖E(t)‖ <= δ(t) (inertia's item 2; Q̂ is nonsingular), so by Sylvester and Weyl
#{eig(Ã) < t − δ} <= #{eig(A) < t} <= #{eig(Ã) < t + δ}. The two points are taken as
x₋ = nextafter(fl(t − δ'), −∞) <= t − δ, x₊ = nextafter(fl(t + δ'), +∞) >= t + δ
(δ' = δ(1 + 2⁻⁴⁰) covers the rounding of δ; x± = t when δ = 0). (2) Ã at x±, from one
Schur complement at t: the count primitive :func:`mhajax.curvature.inertia.schur` on the
window [x₋, x₊] (its docstring has the proof and the one rounding bound err), so

    lo_count = #{j ∉ N: λ_j < x₋} + #{ζ < −err} − n₊,
    hi_count = #{j ∉ N: λ_j < x₊} + #{ζ <= err} − n₊,

intersected with the interlacing bracket [#{λ_j < x₋} − n₊, #{λ_j < x₊} + n₋] (Ã is Λ plus a
rank-n₊ PSD and a rank-n₋ NSD term), which is all that is used when more than r coupled
poles lie within δ(t) of t. (3) Recount: the window bound of (2) is loose next to a
cluster of poles much closer than δ/u to t, so up to ``recount`` thresholds whose bracket is
not exact (widest first) get the model's own brackets at x₋ and at x₊ (two plain counts of
the primitive, h = 0): lo_count = lower(x₋), hi_count = upper(x₊), intersected with (2).
Comparisons of floating-point numbers are exact; values in the subnormal range (which XLA
may flush to zero) are not covered.

**What a count rests on** (``reason``, with sizes): ``EXACT`` (lo = hi); ``WINDOW``: an
eigenvalue of Ã within δ(t) of t — the decomposition's backward error (``delta``) cannot place
it on one side of t; ``TIE``: a Schur eigenvalue within the rounding bound (``err``) of 0
(``unsure`` of them, ``margin`` = min|ζ|/err); ``POLES``: more than r coupled poles within
δ(t) (the interlacing bracket only); ``INVALID``: the structure is not valid (non-finite or
non-symmetric factors): [0, P].

**Histogram and the negative trace.** With N(x) = #{eig(A) < x}, nondecreasing, and L a
certified lower bound of λmin(A) (N(L) = 0), integration by parts gives
tr(A)₋ = Σ_i min(λ_i, 0) = −∫_L^0 N(x) dx. On a grid L = g_0 < ... < g_s = 0 with certified
brackets N(g_i) ∈ [lo_i, hi_i] (made monotone: running max of lo, running min of hi from the
right), N(x) ∈ [lo_i, hi_{i+1}] on [g_i, g_{i+1}], so
tr(A)₋ ∈ [−Σ_i (g_{i+1} − g_i)·hi_{i+1}, −Σ_i (g_{i+1} − g_i)·lo_i] — the bins' lower and
upper sums (each eigenvalue in [g_i, g_{i+1}) contributes between g_i and g_{i+1}). 0 is
always a grid point (so no bin straddles it, and N₋ = N(0)); L = the theorem lower bound
of λmin(Ã) (inertia.initial_bracket) less 2δ and a relative 10⁻⁶, itself counted. The two
sums are rounded outward by a relative 2⁻³⁰. Refinement cuts the grid bins left of 0 with
the widest contributions (g_{i+1} − g_i)(hi_{i+1} − lo_i) into q_i equal parts (q_i by the
greedy gain w_i/q − w_i/(q + 1)), ``refine_batch`` new points a round, until the tr₋ bracket
is within ``rtol`` of its size or ``max_counts`` counts are spent.
"""
from __future__ import annotations

import heapq
import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.curvature import inertia
from mhajax.curvature.inertia import Structure, inflation, schur, top_rows, widening
from mhajax.curvature.operators import hessian_parts
from mhajax.curvature.premises import checked
from mhajax.errors import InputError
from mhajax.losses import LOGISTIC, Loss
from mhajax.models.base import HeadModel
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime.jaxsetup import sized_jit
from mhajax.validate import positive_int

#: ``SpectralCounts.reason`` codes (index into :data:`REASONS`)
EXACT, WINDOW, TIE, POLES, INVALID = range(5)
REASONS = ("exact", "window", "tie", "poles", "invalid")

_DELTA_PAD = 1.0 + 2.0 ** -40    # δ' = δ·(1 + 2^-40) covers the rounding of δ(t) itself


def _delta_pad(dtype) -> float:
    """1 + 2⁻⁴⁰ in float64; 1 + 16·eps in a shorter float (where that rounds to 1)."""
    return max(_DELTA_PAD, 1.0 + 16 * float(jnp.finfo(dtype).eps))


class SpectralCounts(NamedTuple):
    """Certified counts at k thresholds (all arrays [k], in the thresholds' order).

    thresholds: t; lo_count, hi_count: lo_count <= #{eig(∇²L̂) < t} <= hi_count (int);
    exact: lo_count == hi_count; reason: what an inexact count rests on (:data:`REASONS`:
    exact, window, tie, poles, invalid); delta: δ(t), the radius within which an eigenvalue
    cannot be placed by the decomposition's backward error; err: the rounding bound on the
    Schur eigenvalues (the tie band); unsure: Schur eigenvalues within err + the window's
    perturbation of 0; margin: min|ζ|/(that total) (> 1: no Schur tie)."""

    thresholds: jax.Array
    lo_count: jax.Array
    hi_count: jax.Array
    exact: jax.Array
    reason: jax.Array
    delta: jax.Array
    err: jax.Array
    unsure: jax.Array
    margin: jax.Array


def _window(st: Structure, t):
    """``(δ(t), x₋, x₊)``: x₋ <= t − δ(t), x₊ >= t + δ(t) (x± = t when δ = 0)."""
    dtype = st.Kt.dtype
    delta = widening(st, t)
    dp = delta * _delta_pad(dtype)
    x_lo = jnp.where(dp > 0, jnp.nextafter(t - dp, jnp.asarray(-jnp.inf, dtype)), t)
    x_hi = jnp.where(dp > 0, jnp.nextafter(t + dp, jnp.asarray(jnp.inf, dtype)), t)
    return delta, x_lo, x_hi


def _points_of(st: Structure, t, *, r: int, groups, widen: bool = True):
    """The certified brackets at thresholds ``t [k]`` (module docstring), as the tuple of
    :class:`SpectralCounts` fields after ``thresholds``. ``widen=False``: the brackets of
    #{eig(Ã) < t} for the model matrix itself (x± = t)."""
    P, n = st.Kt.shape
    dtype = st.Kt.dtype
    if widen:
        delta, x_lo, x_hi = jax.vmap(partial(_window, st))(t)
    else:
        delta, x_lo, x_hi = jnp.zeros_like(t), t, t
    s = schur(st, t, x_lo, x_hi, num_near=r, groups=groups)
    lo_s = s.below_lo + s.neg - st.n_pos
    hi_s = s.below_hi + s.neg + s.unsure - st.n_pos
    # interlacing: Λ plus a rank-n₊ PSD and a rank-n₋ NSD term
    b_lo = jax.vmap(lambda x: jnp.sum(st.lam < x))(x_lo) - st.n_pos
    b_hi = jax.vmap(lambda x: jnp.sum(st.lam < x))(x_hi) + st.n_neg
    lo = jnp.where(s.ok, jnp.maximum(lo_s, b_lo), b_lo)
    hi = jnp.where(s.ok, jnp.minimum(hi_s, b_hi), b_hi)
    lo = jnp.where(st.valid, jnp.clip(lo, 0, P), 0)
    hi = jnp.where(st.valid, jnp.clip(hi, 0, P), P)
    exact = lo == hi
    window = ((s.below_lo != s.below_hi) | (s.amin > s.err_round)) & widen
    reason = jnp.where(~st.valid, INVALID, jnp.where(exact, EXACT, jnp.where(
        ~s.ok, POLES, jnp.where(window, WINDOW, TIE))))
    tiny = jnp.finfo(dtype).tiny
    r_ = s.idx.shape[-1]
    return (lo.astype(jnp.int32), hi.astype(jnp.int32), exact, reason.astype(jnp.int32), delta,
            s.err_round, jnp.where(s.ok, s.unsure, r_ + n).astype(jnp.int32),
            jnp.where(s.ok, s.amin / jnp.maximum(s.err, tiny), 0.0))


def batch_size(P: int) -> int:
    """Thresholds counted at once by :func:`counts_of` by default: ``2**25 // P`` (the
    ``[k, P]`` arrays of one batch stay near 256 MiB in float64), between 8 and 256."""
    return int(max(8, min(256, 2 ** 25 // max(1, P))))


def _batched(fn, t, batch: int):
    """``fn(t)`` over ``t [k]``, ``batch`` points at a time (``lax.map``; padded with the last point)."""
    k = t.shape[0]
    if k <= batch:
        return fn(t)
    nb = -(-k // batch)
    tp = jnp.concatenate([t, jnp.broadcast_to(t[-1:], (nb * batch - k,))]).reshape(nb, batch)
    return jax.tree_util.tree_map(lambda a: a.reshape((nb * batch,) + a.shape[2:])[:k], jax.lax.map(fn, tp))


def _recount(st: Structure, t, first, *, r: int, groups, s: int, batch: int):
    """Second pass: up to ``s`` thresholds whose first bracket is not exact (widest first)
    get the model's own brackets at x₋ and x₊ (two direct counts each, no window bound):
    lo' = lower(x₋), hi' = upper(x₊), intersected with the first bracket."""
    lo, hi, exact, reason = first[:4]
    flagged = ~exact & (reason != INVALID)
    idx = top_rows(jnp.where(flagged, 1.0 + (hi - lo), 0.0), s)
    use = flagged[idx]
    _, x_lo, x_hi = jax.vmap(partial(_window, st))(t[idx])
    m = _batched(partial(_points_of, st, r=r, groups=groups, widen=False), jnp.concatenate([x_lo, x_hi]), batch)
    mlo, mhi, mex, mrs = m[0], m[1], m[2], m[3]
    nlo = jnp.maximum(lo[idx], mlo[:s])
    nhi = jnp.minimum(hi[idx], mhi[s:])
    # both model counts decided but different: an eigenvalue of Ã lies in [x₋, x₊)
    nrs = jnp.where(nlo == nhi, EXACT, jnp.where(mex[:s] & mex[s:], WINDOW, jnp.maximum(mrs[:s], mrs[s:])))
    lo = lo.at[idx].set(jnp.where(use, nlo, lo[idx]))
    hi = hi.at[idx].set(jnp.where(use, nhi, hi[idx]))
    reason = reason.at[idx].set(jnp.where(use, nrs, reason[idx]).astype(reason.dtype))
    return (lo, hi, lo == hi, reason) + tuple(first[4:])


def counts_of(st: Structure, thresholds, *, num_near: int = 8, groups: int | None = None,
              batch: int | None = None, recount: int = 16) -> SpectralCounts:
    """Certified ``#{eig(A) < t}`` brackets at ``thresholds [k]`` from a decomposed
    :class:`~mhajax.curvature.inertia.Structure` (module docstring). Pure; ``jit``/``vmap``-
    friendly (``num_near``, ``groups``, ``batch``, ``recount`` static). Cost
    O(k(n²P/2 + rP + (r+n)³)): one batched GEMM per partial sum over ``batch`` thresholds at
    a time (default :func:`batch_size`); then, if any bracket is not exact, up to ``recount``
    of them (widest first) are recounted by two direct counts of Ã at x₋ and x₊ (the window
    bound of one Schur complement is loose next to a cluster of poles)."""
    P, n = st.Kt.shape
    r = int(min(num_near, P))
    batch = batch_size(P) if batch is None else int(batch)
    t = jnp.asarray(thresholds, st.Kt.dtype).reshape(-1)
    k = t.shape[0]
    out = _batched(partial(_points_of, st, r=r, groups=groups), t, batch)
    s = int(min(recount, k))
    if s > 0:
        out = jax.lax.cond(jnp.any(~out[2] & (out[3] != INVALID)),
                           lambda o: _recount(st, t, o, r=r, groups=groups, s=s, batch=batch), lambda o: o, out)
    return SpectralCounts(t, *out)


# ---------------------------------------------------------------------------
# host-side entry points
# ---------------------------------------------------------------------------

def checked_points(values, name: str, *, increasing: bool = False) -> np.ndarray:
    """``values`` as a float64 1-D array, or an InputError naming the value."""
    a = np.asarray(values, dtype=np.float64)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise InputError(f"{name} must be a 1-D sequence of numbers, got shape {a.shape}")
    if a.size == 0:
        raise InputError(f"{name} is empty: give at least {'two edges' if increasing else 'one threshold'}")
    bad = ~np.isfinite(a)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{name}[{i}] = {float(a[i])!r} is not finite")
    if increasing:
        if a.size < 2:
            raise InputError(f"{name} needs at least two edges, got {a.size}")
        step = np.diff(a)
        if (step <= 0).any():
            i = int(np.argmax(step <= 0))
            raise InputError(f"{name} must be strictly increasing: {name}[{i}] = {float(a[i])!r} >= "
                             f"{name}[{i + 1}] = {float(a[i + 1])!r}")
    return a




def _theta_size(params, *args, **kwargs) -> int:
    return sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(params))


def _factors_size(B, *args, **kwargs) -> int:
    return math.prod(B.shape[:2])


def _structure_size(st, *args, **kwargs) -> int:
    return st.Kt.shape[0]


@sized_jit(size=_theta_size, static_argnames=("model", "loss"))
def _factors(params, X, y, model, loss):
    """The factors (B, J, w) of ∇²L̂(θ), in a program of their own: the decomposition and the
    counts that follow split over the devices when there are several, and these factors stay
    the one-device numbers bit for bit (docs/reliability.md, 'Sharding')."""
    return hessian_parts(params, X, y, model, loss)


@sized_jit(size=_factors_size, static_argnames=("num_near",))
def _structure_and_counts(B, J, w, t, num_near):
    st = inertia.decompose(B, J, w)
    return st, counts_of(st, t, num_near=num_near)


def lower_edge(st: Structure) -> jax.Array:
    """L, a certified lower bound of λmin(A): the theorem bound of λmin(Ã)
    (:func:`~mhajax.curvature.inertia.initial_bracket`) less 2δ and a relative 10⁻⁶ (so
    the count there is decided, not a tie); the census counts it too."""
    lo0, _ = inertia.initial_bracket(st, "min")
    return lo0 - 2 * widening(st, lo0) - 1e-6 * jnp.maximum(jnp.abs(lo0), st.scale)


@sized_jit(size=_factors_size, static_argnames=("num_near",))
def _first_pass(B, J, w, t, num_near):
    """Structure, L and the counts at ``t`` and L (last) in one program."""
    st = inertia.decompose(B, J, w)
    L = lower_edge(st)
    return st, counts_of(st, jnp.concatenate([t, L[None]]), num_near=num_near)


@sized_jit(size=_structure_size, static_argnames=("num_near",))
def _counts_jit(st, t, num_near):
    return counts_of(st, t, num_near=num_near)


def _refuse(st: Structure):
    """InputError when the factors made a certificate impossible (as hessian_extremes)."""
    if bool(st.valid):
        return
    if not bool(st.finite):
        raise InputError("the Hessian's factors (head blocks B, per-sample gradients J, weights ℓ''/n) are not "
                         "finite at this θ: no certified count")
    raise InputError(f"the head blocks B_h are not symmetric: head {int(st.asym_head)} has relative asymmetry "
                     f"{float(st.asym):.3g} > {inertia.asym_tolerance(st.Kt.dtype):.3g}: no certified count")


def _host(c: SpectralCounts) -> SpectralCounts:
    return SpectralCounts(*(np.asarray(a) for a in c))


def spectral_counts(params, X, y, thresholds, *, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
                    num_near: int = 8) -> SpectralCounts:
    """Certified ``#{eig(∇²L̂(θ)) < t}`` for each t in ``thresholds`` (any order, finite):
    the brackets of :class:`SpectralCounts` (numpy arrays [k]). Validates its inputs
    (:class:`~mhajax.errors.InputError` on bad thresholds, θ or data, and on factors that admit
    no certificate); the public entry :func:`mhajax.api.spectral_counts` first checks the sizes
    against memory."""
    t = checked_points(thresholds, "thresholds")
    num_near = positive_int("num_near", num_near)
    model, loss = checked("spectral_counts", params, X, y, model=model, loss=loss, heads=True)
    S = _factors(params, X, y, model, loss)
    st, c = _structure_and_counts(S.B, S.J, S.w, jnp.asarray(t), num_near)
    _refuse(st)
    return _host(c)


class SpectralHistogram(NamedTuple):
    """Certified histogram of eig(∇²L̂) over ``edges [m+1]`` (strictly increasing).

    counts_lo, counts_hi [m]: #{eig ∈ [edges_i, edges_{i+1})} brackets; exact [m]: both
    edges' counts exact; under_lo/under_hi: #{eig < edges_0}; over_lo/over_hi:
    #{eig >= edges_m}; neg_lo/neg_hi: N₋ = #{eig < 0}; trace_lo/trace_hi: tr(∇²L̂)₋ =
    Σ_{λ<0} λ; trace_ok: the tr₋ bracket met ``rtol``; grid [s]: every point counted (sorted:
    the edges, 0, the certified lower bound of λmin (grid[0]) and the refinement points);
    grid_lo/grid_hi [s]: N(grid) brackets made monotone; grid_reason [s]: the counts'
    reasons; refined: refinement points added; num_counts: thresholds counted in all."""

    edges: np.ndarray
    counts_lo: np.ndarray
    counts_hi: np.ndarray
    exact: np.ndarray
    under_lo: int
    under_hi: int
    over_lo: int
    over_hi: int
    neg_lo: int
    neg_hi: int
    trace_lo: float
    trace_hi: float
    trace_ok: bool
    grid: np.ndarray
    grid_lo: np.ndarray
    grid_hi: np.ndarray
    grid_reason: np.ndarray
    refined: int
    num_counts: int


def negative_trace(grid, lo, hi):
    """Certified ``[tr_lo, tr_hi] ∋ tr(A)₋ = −∫ N(x) dx`` over the grid points ``<= 0``
    (``grid [s]`` sorted with grid[0] a certified lower bound of λmin and 0 a point;
    ``lo``, ``hi`` [s] monotone brackets of N there), and the per-bin widths
    ``(g_{i+1} − g_i)(hi_{i+1} − lo_i)`` [s−1] (0 right of 0). Host-side numpy."""
    g = np.asarray(grid, np.float64)
    lo = np.asarray(lo, np.float64)
    hi = np.asarray(hi, np.float64)
    w = np.diff(g)
    left = g[1:] <= 0
    up = -np.sum(np.where(left, w * lo[:-1], 0.0))
    down = -np.sum(np.where(left, w * hi[1:], 0.0))
    pad = inflation(np.float64, 1) - 1.0     # outward, for the rounding of these sums
    down, up = down - pad * abs(down), up + pad * abs(up)
    if hi[0] > 0:      # N(grid[0]) not certified 0: no lower bound
        down = -np.inf
    return down, up, np.where(left, w * (hi[1:] - lo[:-1]), 0.0)


def _splits(grid, wid, m: int) -> list:
    """Up to ``m`` new points: bin i (contribution width ``wid[i]``) is cut into q_i equal
    parts, the q_i chosen greedily by the gain wid_i/q − wid_i/(q + 1) (its contribution
    shrinks ~ 1/q when its eigenvalues are spread); points that do not fall strictly inside
    their bin in floating point are dropped."""
    q = {i: 1 for i in np.flatnonzero(wid > 0)}
    heap = [(-(wid[i] / 2), i) for i in q]
    heapq.heapify(heap)
    for _ in range(m):
        if not heap:
            break
        _, i = heapq.heappop(heap)
        q[i] += 1
        heapq.heappush(heap, (-(wid[i] / q[i] - wid[i] / (q[i] + 1)), i))
    pts = []
    for i, qi in q.items():
        a, b = grid[i], grid[i + 1]
        pts += [x for x in a + (b - a) * np.arange(1, qi) / qi if a < x < b]
    return pts[:m]


def _monotone(lo, hi):
    return np.maximum.accumulate(lo), np.minimum.accumulate(hi[::-1])[::-1]


def check_refine(rtol, refine_batch, max_counts):
    """Validate the refinement knobs of :func:`spectral_histogram` (:class:`~mhajax.errors.InputError`)."""
    if not (isinstance(rtol, (int, float)) and math.isfinite(rtol) and rtol >= 0):
        raise InputError(f"rtol must be a finite number >= 0, got {rtol!r}")
    positive_int("refine_batch", refine_batch)
    if max_counts is not None:
        positive_int("max_counts", max_counts, minimum=0)


def spectral_histogram(params, X, y, bins, *, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
                       rtol: float = 0.05, max_counts: int | None = None, refine_batch: int = 64,
                       num_near: int = 8) -> SpectralHistogram:
    """Certified histogram of the spectrum of ∇²L̂(θ) over the edges ``bins [m+1]``, with
    brackets of N₋ and tr(∇²L̂)₋ (module docstring), the latter refined at its widest
    bins until its width is <= ``rtol``·|tr₋| or ``max_counts`` thresholds are counted in
    all (default: the first pass + one round of ``refine_batch``). Validates its inputs
    (:class:`~mhajax.errors.InputError`); the public entry :func:`mhajax.api.spectral_histogram`
    first checks the sizes against memory."""
    edges = checked_points(bins, "bins", increasing=True)
    check_refine(rtol, refine_batch, max_counts)
    num_near = positive_int("num_near", num_near)
    model, loss = checked("spectral_histogram", params, X, y, model=model, loss=loss, heads=True)
    first = np.union1d(edges, [0.0])
    S = _factors(params, X, y, model, loss)
    st, c = _first_pass(S.B, S.J, S.w, jnp.asarray(first), num_near)
    _refuse(st)
    return _histogram(st, edges, _host(c), rtol=rtol, max_counts=max_counts, refine_batch=refine_batch,
                      num_near=num_near)


def histogram_of(st: Structure, bins, *, rtol: float = 0.05, max_counts: int | None = None,
                 refine_batch: int = 64, num_near: int = 8) -> SpectralHistogram:
    """:func:`spectral_histogram` of a decomposed structure (host-side: numpy results, a
    loop of jitted :func:`counts_of` calls)."""
    edges = checked_points(bins, "bins", increasing=True)
    check_refine(rtol, refine_batch, max_counts)
    _refuse(st)
    first = np.union1d(edges, [0.0])
    c = _host(_counts_jit(st, jnp.concatenate([jnp.asarray(first), lower_edge(st)[None]]), num_near))
    return _histogram(st, edges, c, rtol=rtol, max_counts=max_counts, refine_batch=refine_batch,
                      num_near=num_near)


def _histogram(st, edges, c: SpectralCounts, *, rtol, max_counts, refine_batch, num_near) -> SpectralHistogram:
    """The histogram from the first pass ``c`` (the edges, 0 and L), refined (docstring)."""
    grid, clo, chi, crs = c.thresholds, c.lo_count, c.hi_count, c.reason
    order = np.argsort(grid, kind="stable")
    grid, clo, chi, crs = grid[order], clo[order], chi[order], crs[order]
    keep = np.concatenate([[True], np.diff(grid) > 0])        # L may equal an edge
    grid, clo, chi, crs = grid[keep], clo[keep], chi[keep], crs[keep]
    spent = c.thresholds.size
    budget = spent + int(refine_batch) if max_counts is None else int(max_counts)
    refined = 0
    while True:
        glo, ghi = _monotone(clo, chi)
        tlo, thi, wid = negative_trace(grid, glo, ghi)
        ok = (thi - tlo) <= rtol * max(abs(tlo), abs(thi))
        room = budget - spent
        if ok or room <= 0:
            break
        mids = _splits(grid, wid, min(int(refine_batch), room))
        if not mids:
            break
        pts = np.asarray(mids + [mids[-1]] * (int(refine_batch) - len(mids)))   # one compiled size
        cr = _host(_counts_jit(st, jnp.asarray(pts), num_near))
        q = len(mids)
        grid = np.concatenate([grid, pts[:q]])
        clo = np.concatenate([clo, cr.lo_count[:q]])
        chi = np.concatenate([chi, cr.hi_count[:q]])
        crs = np.concatenate([crs, cr.reason[:q]])
        order = np.argsort(grid, kind="stable")
        grid, clo, chi, crs = grid[order], clo[order], chi[order], crs[order]
        spent += q
        refined += q
    P = int(st.lam.shape[0])
    at = np.searchsorted(grid, edges)
    elo, ehi = glo[at], ghi[at]
    z = int(np.searchsorted(grid, 0.0))
    return SpectralHistogram(
        edges=edges, counts_lo=np.maximum(elo[1:] - ehi[:-1], 0), counts_hi=ehi[1:] - elo[:-1],
        exact=(elo == ehi)[1:] & (elo == ehi)[:-1], under_lo=int(elo[0]), under_hi=int(ehi[0]),
        over_lo=P - int(ehi[-1]), over_hi=P - int(elo[-1]), neg_lo=int(glo[z]), neg_hi=int(ghi[z]),
        trace_lo=float(tlo), trace_hi=float(thi), trace_ok=bool(ok), grid=grid, grid_lo=glo, grid_hi=ghi,
        grid_reason=crs, refined=refined, num_counts=spent)


__all__ = ["EXACT", "WINDOW", "TIE", "POLES", "INVALID", "REASONS", "SpectralCounts", "SpectralHistogram",
           "batch_size", "checked_points", "counts_of", "histogram_of", "lower_edge",
           "negative_trace", "spectral_counts", "spectral_histogram"]
