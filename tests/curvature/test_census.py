"""mhajax.curvature.census (and SLQ beside it): certified counts #{eig < t}, the histogram
and its N₋/tr₋ brackets, against dense ``numpy.linalg.eigvalsh`` of the assembled matrix.

Truth: numpy eigvalsh, allowed its own error 16·√P·u·‖A‖ (``ref_tol``, as in
test_inertia): where a dense eigenvalue lies within it of a threshold the dense count is
itself a bracket, and the census's bracket must meet it; elsewhere an exact census count
must equal the dense count and every bracket must contain it."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jax
import jax.numpy as jnp

from mhajax.curvature import census as C
from mhajax.curvature import inertia as I
from mhajax.curvature.operators import StructuredHessian, dense_hessian
from mhajax.errors import InputError

EPS = np.finfo(np.float64).eps
K = 24                                      # thresholds per hypothesis example: one compile per shape
SHAPES = [(1, 7, 3), (3, 5, 4), (4, 12, 6), (6, 10, 9), (16, 24, 12)]   # (H, p, n); P up to 384

_decompose = jax.jit(I.decompose)
_counts = jax.jit(C.counts_of)


# ---------------------------------------------------------------------------
# adversarial structured matrices (the idea of test_inertia.make) and the dense truth
# ---------------------------------------------------------------------------

def rand_orth(rng, p):
    Q, R = np.linalg.qr(rng.standard_normal((p, p)))
    return Q * np.sign(np.diag(R))


def make(rng, H, p, n, *, cluster=False, tie=None, w_zero=0, w_neg=0, zero_rows=0, dup=False,
         b_exp=0.0, k_exp=0.0):
    """B [H,p,p], J [n,P], w [n]. ``cluster``: B's eigenvalues from 5 values, perturbed by
    0, 1e-13 or 1e-9 (ties and near-ties across heads); ``tie``: the bottom eigenvector of
    each head decoupled from J ('exact') or coupled by a float c; ``dup``: head 1 = head 0."""
    Bs, Us = [], []
    for _ in range(H):
        if cluster:
            ev = rng.choice([-1.0, -0.5, 0.0, 0.25, 1.0], size=p) * (1 + rng.choice([0, 1e-13, 1e-9], size=p))
        else:
            ev = rng.standard_normal(p)
        U = rand_orth(rng, p)
        Bs.append((U * ev) @ U.T)
        Us.append((ev, U))
    if dup and H > 1:
        Bs[1], Us[1] = Bs[0].copy(), Us[0]
    B = np.stack(Bs) * 10.0 ** b_exp
    J = rng.standard_normal((n, H * p)) * 10.0 ** (k_exp / 2)
    w = rng.uniform(0.1, 1.0, n)
    if zero_rows:
        J[rng.choice(n, min(zero_rows, n), replace=False)] = 0.0
    if w_zero:
        w[rng.choice(n, min(w_zero, n), replace=False)] = 0.0
    if w_neg:
        i = rng.choice(n, min(w_neg, n), replace=False)
        w[i] = -0.01 * w[i]
    if tie is not None:
        for h, (ev, U) in enumerate(Us):
            u = U[:, int(np.argmin(ev))]
            sl = slice(h * p, (h + 1) * p)
            J[:, sl] -= np.outer(J[:, sl] @ u, u)
            if tie != "exact":
                J[:, sl] += float(tie) * np.outer(rng.standard_normal(n), u)
    return B, J, w


def dense(B, J, w):
    return np.asarray(StructuredHessian(jnp.asarray(J), jnp.asarray(w), jnp.asarray(B)).dense())


def ref_tol(ev):
    return 16 * np.sqrt(ev.size) * EPS * max(np.abs(ev).max(), 1e-300)


def thresholds_for(rng, ev, lam, k=K):
    """k thresholds of every hard kind, shuffled: dense eigenvalues, B's eigenvalues,
    clusters (three points within 1e-12 of an eigenvalue), 0, midpoints, random."""
    mids = 0.5 * (ev[1:] + ev[:-1])
    e = ev[rng.integers(0, ev.size)]
    pts = np.concatenate([rng.choice(ev, 5), rng.choice(lam, 5), e + np.array([-1e-12, 0.0, 1e-12]) * max(1, abs(e)),
                          [0.0], rng.choice(mids, 5), rng.uniform(ev[0] - 1, ev[-1] + 1, k)])[:k]
    return rng.permutation(pts)


def check_counts(c, ev, ts):
    """Every bracket meets the dense count's own bracket; exact ones equal it where it is
    unambiguous; the bracket is sane. Returns #(exact, unambiguous) and #exact."""
    tol = ref_tol(ev)
    lo, hi = np.asarray(c.lo_count), np.asarray(c.hi_count)
    np.testing.assert_array_equal(np.asarray(c.thresholds), ts)          # the caller's order
    assert np.all(0 <= lo) and np.all(lo <= hi) and np.all(hi <= ev.size)
    np.testing.assert_array_equal(np.asarray(c.exact), lo == hi)
    checked = 0
    for i, t in enumerate(ts):
        t_lo, t_hi = int(np.sum(ev < t - tol)), int(np.sum(ev < t + tol))
        assert lo[i] <= t_hi and t_lo <= hi[i], (t, lo[i], hi[i], t_lo, t_hi, C.REASONS[int(c.reason[i])])
        if lo[i] == hi[i] and t_lo == t_hi:
            assert lo[i] == t_lo, (t, lo[i], t_lo)
            checked += 1
        if lo[i] != hi[i]:
            assert int(c.reason[i]) in (C.WINDOW, C.TIE, C.POLES)
    return checked, int(np.sum(lo == hi))


# ---------------------------------------------------------------------------
# counts
# ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shape", SHAPES[:4])
def test_counts_match_dense(shape, seed):
    rng = np.random.default_rng(seed)
    B, J, w = make(rng, *shape, w_neg=seed % 2)
    ev = np.linalg.eigvalsh(dense(B, J, w))
    s = _decompose(B, J, w)
    ts = thresholds_for(rng, ev, np.asarray(s.lam))
    checked, exact = check_counts(_counts(s, ts), ev, ts)
    assert checked >= K // 2                 # most thresholds are decided and confirmed


def test_generic_thresholds_are_exact():
    """Midpoints of eigenvalue gaps wider than 1e-8·‖A‖ and 0 (no eigenvalue near): every
    bracket is one number, equal to the dense count."""
    rng = np.random.default_rng(5)
    B, J, w = make(rng, 4, 12, 6)
    ev = np.linalg.eigvalsh(dense(B, J, w))
    gap = np.diff(ev) > 1e-8 * np.abs(ev).max()
    ts = np.concatenate([0.5 * (ev[1:] + ev[:-1])[gap], [ev[0] - 1.0, ev[-1] + 1.0]])
    c = _counts(_decompose(B, J, w), ts)
    assert np.all(np.asarray(c.exact)), np.asarray(c.reason)
    np.testing.assert_array_equal(np.asarray(c.lo_count), [np.sum(ev < t) for t in ts])
    assert np.all(np.asarray(c.reason) == C.EXACT) and np.all(np.asarray(c.margin) > 1)


def test_threshold_at_decoupled_eigenvalue_is_a_window_not_a_guess():
    """t equal to an eigenvalue of B whose eigenvector J does not see: an eigenvalue of A
    lies at t, so #{eig < t} cannot be decided within δ(t): an honest bracket of width 1,
    reason WINDOW, and the counts just outside it are exact."""
    rng = np.random.default_rng(11)
    B, J, w = make(rng, 4, 12, 6, tie="exact")
    ev = np.linalg.eigvalsh(dense(B, J, w))
    s = _decompose(B, J, w)
    lam1 = np.linalg.eigvalsh(B)[:, 0]                       # decoupled: eigenvalues of A
    h = int(np.argmin(np.abs(lam1 - np.median(lam1))))
    t = lam1[h]
    d = float(I.widening(s, t))
    ts = np.array([t, t - 1e-6, t + 1e-6])
    c = _counts(s, ts)
    check_counts(c, ev, ts)
    assert int(c.hi_count[0]) - int(c.lo_count[0]) >= 1 and int(c.reason[0]) == C.WINDOW
    assert float(c.delta[0]) == pytest.approx(d, rel=1e-12, abs=0) and d > 0
    assert bool(c.exact[1]) and bool(c.exact[2]) and int(c.lo_count[2]) - int(c.lo_count[1]) >= 1


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), shape=st.sampled_from(SHAPES), cluster=st.booleans(),
       tie=st.sampled_from([None, None, "exact", 1e-6, 1e-9]), w_zero=st.integers(0, 3),
       w_neg=st.sampled_from([0, 0, 1, 2]), zero_rows=st.integers(0, 2), dup=st.booleans(),
       b_exp=st.sampled_from([0.0, -8.0, 6.0]), k_exp=st.sampled_from([0.0, -8.0, 6.0]))
def test_counts_bracket_dense_adversarial(seed, shape, cluster, tie, w_zero, w_neg, zero_rows, dup, b_exp, k_exp):
    rng = np.random.default_rng(seed)
    B, J, w = make(rng, *shape, cluster=cluster, tie=tie, w_zero=w_zero, w_neg=w_neg, zero_rows=zero_rows,
                   dup=dup, b_exp=b_exp, k_exp=k_exp)
    ev = np.linalg.eigvalsh(dense(B, J, w))
    s = _decompose(B, J, w)
    ts = thresholds_for(rng, ev, np.asarray(s.lam))
    check_counts(_counts(s, ts), ev, ts)


@pytest.mark.slow
@pytest.mark.parametrize("shape,k", [((24, 64, 16), 40), ((48, 56, 32), 40)])   # P = 1536, 2688
def test_counts_match_dense_at_thousands(shape, k):
    rng = np.random.default_rng(sum(shape))
    B, J, w = make(rng, *shape, w_zero=1)
    ev = np.linalg.eigvalsh(dense(B, J, w))
    s = _decompose(B, J, w)
    ts = thresholds_for(rng, ev, np.asarray(s.lam), k)
    checked, exact = check_counts(_counts(s, ts), ev, ts)
    assert checked >= k // 2


def test_batches_and_recount_give_the_same_brackets():
    """More thresholds than one batch (lax.map path), and no recount pass: the same
    certified brackets where both are exact, and the recount never loses exactness."""
    rng = np.random.default_rng(2)
    B, J, w = make(rng, 3, 5, 4, cluster=True)
    ev = np.linalg.eigvalsh(dense(B, J, w))
    s = _decompose(B, J, w)
    ts = thresholds_for(rng, ev, np.asarray(s.lam), 20)
    a = _counts(s, ts)
    b = jax.jit(lambda s, t: C.counts_of(s, t, batch=7))(s, ts)
    n = jax.jit(lambda s, t: C.counts_of(s, t, recount=0))(s, ts)
    for c in (a, b, n):
        check_counts(c, ev, ts)
    for f in ("lo_count", "hi_count", "reason"):
        np.testing.assert_array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)))
    assert np.all(np.asarray(a.exact) >= np.asarray(n.exact))
    assert np.all(np.asarray(a.lo_count) >= np.asarray(n.lo_count))
    assert np.all(np.asarray(a.hi_count) <= np.asarray(n.hi_count))


def test_invalid_structure_counts_nothing():
    rng = np.random.default_rng(0)
    B, J, w = make(rng, 3, 5, 4)
    B[1, 0, 2] += 1.0                                          # not symmetric
    c = _counts(_decompose(B, J, w), np.array([0.0, 1.0]))
    np.testing.assert_array_equal(np.asarray(c.lo_count), [0, 0])
    np.testing.assert_array_equal(np.asarray(c.hi_count), [15, 15])
    assert np.all(np.asarray(c.reason) == C.INVALID)


def test_spectral_counts_on_a_model_hessian(small_problem):
    """The params-level API against eigvalsh of jax.hessian (an independent route)."""
    params, X, y = small_problem
    ev = np.linalg.eigvalsh(np.asarray(dense_hessian(params, X, y)))
    ts = np.concatenate([[0.0, ev[0] - 1e-3, ev[-1] + 1e-3], 0.5 * (ev[1:] + ev[:-1])[::3], ev[::7]])
    c = C.spectral_counts(params, X, y, ts)
    assert isinstance(c, C.SpectralCounts)
    checked, _ = check_counts(c, ev, ts)
    assert checked >= ts.size // 2


@pytest.fixture(scope="module")
def small_problem():
    from mhajax.bench.timing import problem
    return problem(3, 4, 4, 12, seed=1)                        # P = 3·(16 + 16) = 96


# ---------------------------------------------------------------------------
# histogram, N₋, tr₋
# ---------------------------------------------------------------------------

def check_histogram(h, ev):
    P = ev.size
    tol = ref_tol(ev)
    assert h.under_lo + int(np.sum(h.counts_lo)) + h.over_lo <= P <= h.under_hi + int(np.sum(h.counts_hi)) + h.over_hi
    if np.all(h.exact) and h.under_lo == h.under_hi and h.over_lo == h.over_hi:
        assert h.under_lo + int(np.sum(h.counts_lo)) + h.over_lo == P             # sums to P
    e = h.edges
    for i in range(e.size - 1):
        t_lo = int(np.sum((ev >= e[i] + tol) & (ev < e[i + 1] - tol)))
        t_hi = int(np.sum((ev >= e[i] - tol) & (ev < e[i + 1] + tol)))
        assert h.counts_lo[i] <= t_hi and t_lo <= h.counts_hi[i], (i, h.counts_lo[i], h.counts_hi[i], t_lo, t_hi)
        if h.exact[i] and t_lo == t_hi:
            assert h.counts_lo[i] == t_lo
    assert h.neg_lo <= int(np.sum(ev < tol)) and int(np.sum(ev < -tol)) <= h.neg_hi
    tr = float(np.sum(np.minimum(ev, 0.0)))
    assert h.trace_lo - P * tol <= tr <= h.trace_hi + P * tol, (h.trace_lo, tr, h.trace_hi)
    assert h.grid[0] <= ev[0] and 0.0 in h.grid and np.all(np.diff(h.grid) > 0)
    assert np.all(np.diff(h.grid_lo) >= 0) and np.all(np.diff(h.grid_hi) >= 0) and np.all(h.grid_lo <= h.grid_hi)


@pytest.mark.parametrize("kind", ["plain", "cluster", "tie", "wneg"])
def test_histogram_brackets_contain_dense(kind):
    rng = np.random.default_rng({"plain": 0, "cluster": 1, "tie": 2, "wneg": 3}[kind])
    opts = {"plain": {}, "cluster": dict(cluster=True), "tie": dict(tie="exact"), "wneg": dict(w_neg=2)}[kind]
    B, J, w = make(rng, 4, 12, 6, **opts)
    ev = np.linalg.eigvalsh(dense(B, J, w))
    s = _decompose(B, J, w)
    bins = np.linspace(ev[0] + 0.3, ev[-1] - 0.3, 9)             # eigenvalues below and above the edges
    h = C.histogram_of(s, bins, rtol=0.0, max_counts=40, refine_batch=8)
    assert isinstance(h, C.SpectralHistogram)
    check_histogram(h, ev)
    assert h.num_counts <= 40 and h.refined == h.num_counts - (np.union1d(bins, [0.0]).size + 1)


@pytest.mark.slow
def test_refinement_narrows_the_negative_trace():
    rng = np.random.default_rng(4)
    B, J, w = make(rng, 6, 10, 9)
    ev = np.linalg.eigvalsh(dense(B, J, w))
    s = _decompose(B, J, w)
    bins = np.linspace(-2.0, 2.0, 5)
    first = np.union1d(bins, [0.0]).size + 1
    h0 = C.histogram_of(s, bins, max_counts=first)
    h1 = C.histogram_of(s, bins, rtol=1e-3, max_counts=first + 16, refine_batch=8)
    h2 = C.histogram_of(s, bins, rtol=1e-3, max_counts=first + 64, refine_batch=16)
    for h in (h0, h1, h2):
        check_histogram(h, ev)
    w0, w1, w2 = (h.trace_hi - h.trace_lo for h in (h0, h1, h2))
    assert h0.refined == 0 and h1.refined == 16 and h2.refined == 64
    assert w1 < 0.7 * w0 and w2 < 0.5 * w1, (w0, w1, w2)
    tight = C.histogram_of(s, bins, rtol=0.05, max_counts=first + 400, refine_batch=32)
    check_histogram(tight, ev)
    assert tight.trace_ok and tight.trace_hi - tight.trace_lo <= 0.05 * abs(tight.trace_lo)


def test_negative_trace_is_the_lower_and_upper_sums():
    """Exact counts on a grid: the bracket is Σ c_b·a_b .. Σ c_b·b_b over the bins left of 0."""
    ev = np.array([-3.0, -2.5, -0.4, -0.1, 0.2, 1.0])
    grid = np.array([-4.0, -2.0, -1.0, 0.0, 1.5])
    N = np.array([np.sum(ev < g) for g in grid])
    lo, hi, wid = C.negative_trace(grid, N, N)
    assert lo == pytest.approx(2 * -4.0 + 0 * -2.0 + 2 * -1.0)        # each at its bin's left edge
    assert hi == pytest.approx(2 * -2.0 + 0 * -1.0 + 2 * 0.0)
    assert lo <= np.sum(np.minimum(ev, 0)) <= hi
    np.testing.assert_allclose(wid, [2 * 2.0, 0.0, 2 * 1.0, 0.0])
    lo2, _, _ = C.negative_trace(grid, N, N + np.array([1, 0, 0, 0, 0]))    # N(grid_0) not certified 0
    assert lo2 == -np.inf


def test_spectral_histogram_on_a_model_hessian(small_problem):
    params, X, y = small_problem
    ev = np.linalg.eigvalsh(np.asarray(dense_hessian(params, X, y)))
    bins = np.linspace(ev[0] / 2, ev[-1] / 2, 7)
    h = C.spectral_histogram(params, X, y, bins, rtol=0.01, max_counts=60, refine_batch=16)
    check_histogram(h, ev)
    assert np.all(h.exact)


# ---------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("bad,match", [([], "thresholds is empty"), ([0.0, np.nan], r"thresholds\[1\] = nan"),
                                        ([np.inf], r"thresholds\[0\] = inf"), (np.zeros((2, 2)), "1-D")])
def test_bad_thresholds_refused(small_problem, bad, match):
    params, X, y = small_problem
    with pytest.raises(InputError, match=match):
        C.spectral_counts(params, X, y, bad)


@pytest.mark.parametrize("bad,match", [([], "bins is empty"), ([1.0], "at least two edges"),
                                        ([0.0, 1.0, 1.0], r"strictly increasing: bins\[1\] = 1.0"),
                                        ([0.0, -1.0], r"bins\[0\] = 0.0 >= bins\[1\] = -1.0"),
                                        ([0.0, np.nan, 1.0], r"bins\[1\] = nan")])
def test_bad_bins_refused(small_problem, bad, match):
    params, X, y = small_problem
    with pytest.raises(InputError, match=match):
        C.spectral_histogram(params, X, y, bad)


def test_bad_refinement_settings_refused(small_problem):
    """Each knob by name and value; a fraction is no count (``int()`` used to truncate 2.5 to 2,
    and ``num_near`` 0 or below failed inside the count)."""
    params, X, y = small_problem
    for kw, msg in ((dict(rtol=-1.0), "rtol must be a finite number >= 0, got -1.0"),
                    (dict(refine_batch=0), "refine_batch must be an integer >= 1, got 0"),
                    (dict(refine_batch=2.5), "refine_batch must be an integer >= 1, got 2.5"),
                    (dict(max_counts=-2), "max_counts must be an integer >= 0, got -2"),
                    (dict(num_near=0), "num_near must be an integer >= 1, got 0"),
                    (dict(num_near=1.5), "num_near must be an integer >= 1, got 1.5")):
        with pytest.raises(InputError) as e:
            C.spectral_histogram(params, X, y, [0.0, 1.0], **kw)
        assert str(e.value) == msg
    with pytest.raises(InputError, match=r"^num_near must be an integer >= 1, got -1$"):
        C.spectral_counts(params, X, y, [0.0], num_near=-1)
    from mhajax.curvature import slq
    for kw, msg in ((dict(num_probes=2.5), "num_probes must be an integer >= 1, got 2.5"),
                    (dict(num_steps=0), "num_steps must be an integer >= 1, got 0")):
        with pytest.raises(InputError) as e:
            slq.slq_histogram(params, X, y, [0.0, 1.0], **kw)
        assert str(e.value) == msg


def test_non_finite_params_refused(small_problem):
    params, X, y = small_problem
    bad = jax.tree_util.tree_map(lambda a: a.at[0].set(jnp.nan), params)
    with pytest.raises(InputError):
        C.spectral_counts(bad, X, y, [0.0])


# ---------------------------------------------------------------------------
# SLQ beside the census
# ---------------------------------------------------------------------------

def test_slq_weights_sum_to_P_and_track_the_bulk(small_problem):
    pytest.importorskip("matfree")
    from mhajax.curvature import slq
    params, X, y = small_problem
    ev = np.linalg.eigvalsh(np.asarray(dense_hessian(params, X, y)))
    bins = np.linspace(ev[0] - 1e-9, ev[-1] + 1e-9, 5)
    r = slq.slq_histogram(params, X, y, bins, num_probes=10, num_steps=40)
    total = float(r.under) + float(np.sum(r.counts)) + float(r.over)
    assert total == pytest.approx(ev.size, rel=1e-9, abs=0)          # Σ τ_k = 1 per probe, ‖v‖² = P
    assert float(r.under) == pytest.approx(0.0, abs=1e-9) and float(r.over) == pytest.approx(0.0, abs=1e-9)
    assert r.num_probes == 10 and r.num_steps == 40


@pytest.mark.slow
def test_census_catches_a_negative_cluster_that_slq_misses():
    """A Hessian-like spectrum: a positive bulk dense near 0 (λ = u², u uniform) and 6
    eigenvalues in [−6e-5, −1e-5], on the head structure (12 heads, P = 1500, rank-8
    coupling that does not see the 6 directions). SLQ at the defaults of spectral-density
    codes (10 probes × 100 Lanczos steps, key 0): its usual error, measured on the bulk
    bins here, is a few percent; on the negative bin it reports 0 ± 0 — off by 100 %, with
    a standard error that hides it. The census counts 6, exactly, as eigvalsh does."""
    pytest.importorskip("matfree")
    from mhajax.curvature import slq
    rng = np.random.default_rng(0)
    H, p, n = 12, 125, 8
    P = H * p
    evs = rng.uniform(0, 1, P) ** 2
    neg_at = rng.choice(P, 6, replace=False)
    evs[neg_at] = -np.arange(1, 7) * 1e-5
    evs = evs.reshape(H, p)
    Us = [rand_orth(rng, p) for _ in range(H)]
    B = np.stack([(U * e) @ U.T for U, e in zip(Us, evs)])
    J = 0.3 * rng.standard_normal((n, P))
    for h in range(H):                                          # J does not see the 6 directions
        for i in np.flatnonzero(evs[h] < 0):
            u = Us[h][:, i]
            J[:, h * p:(h + 1) * p] -= np.outer(J[:, h * p:(h + 1) * p] @ u, u)
    w = rng.uniform(0.1, 1.0, n) / n
    A = dense(B, J, w)
    ev = np.linalg.eigvalsh(A)
    assert int(np.sum(ev < 0)) == 6
    edges = np.array([-1e-3, 0.0, 1e-3, 0.01, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 4.0])
    truth = np.histogram(ev, edges)[0]
    # the census: exact and equal to the dense counts at every edge
    c = _counts(_decompose(B, J, w), edges)
    assert np.all(np.asarray(c.exact))
    np.testing.assert_array_equal(np.asarray(c.lo_count), [np.sum(ev < e) for e in edges])
    # SLQ on the same operator
    S = StructuredHessian(jnp.asarray(J), jnp.asarray(w), jnp.asarray(B))      # the census's operator
    r = slq.slq_counts(S.matvec, P, edges, jax.random.PRNGKey(0), num_probes=10, num_steps=100)
    est, sem = np.asarray(r.counts), np.asarray(r.sem)
    bulk = truth >= 50
    bulk_err = np.max(np.abs(est[bulk] - truth[bulk]) / truth[bulk])      # SLQ's usual (relative) error
    tail_err = abs(est[0] - truth[0]) / truth[0]
    print(f"SLQ bulk rel. error <= {bulk_err:.3f}; negative bin: SLQ {est[0]:.2f} ± {sem[0]:.2f}, truth {truth[0]}, "
          f"census {int(c.lo_count[1]) - int(c.lo_count[0])}; SLQ N₋ {float(r.negative):.2f} ± {float(r.negative_sem):.2f}")
    assert bulk_err < 0.2                                       # SLQ does its job on the bulk
    assert tail_err > 3 * bulk_err                              # ... and not on the tail cluster
    assert abs(est[0] - truth[0]) > 3 * sem[0]                 # beyond its own error bar
    assert int(c.lo_count[1]) - int(c.lo_count[0]) == truth[0] == 6


def test_slq_without_matfree_names_the_extra(monkeypatch):
    from mhajax.curvature import slq
    monkeypatch.setitem(sys.modules, "matfree", None)
    with pytest.raises(ImportError, match=r"mhajax\[census\]"):
        slq.slq_counts(lambda v: v, 4, [0.0, 1.0], jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def model_1792():
    from mhajax.bench.timing import problem
    return problem(16, 6, 8, 64, seed=0)                       # P = 16·(64 + 48) = 1792, n = 64


@pytest.mark.slow
def test_census_catches_what_slq_misplaces_on_a_model_hessian(model_1792):
    """The softmax model's Hessian (H = 16, T = 6, d = 8, n = 64, P = 1792): half its
    eigenvalues lie within 1e-3 of 0. SLQ at 10 probes × 100 steps (key 0) tracks the bins
    away from 0 within ~10 % (its usual error, measured here), but puts no weight at all in
    [−3e-4, 0), where ~290 eigenvalues lie (error 100 %, standard error 0), and misses N₋ by
    well over its standard error. The census's counts are exact and equal eigvalsh's."""
    pytest.importorskip("matfree")
    from mhajax.curvature import slq
    from mhajax.curvature.operators import assemble_hessian
    params, X, y = model_1792
    ev = np.linalg.eigvalsh(np.asarray(jax.jit(assemble_hessian)(params, X, y)))
    edges = np.array([-0.02, -5e-3, -1e-3, -3e-4, 0.0, 3e-4, 1e-3, 5e-3, 0.02, 10.0])
    truth = np.histogram(ev, edges)[0]
    c = C.spectral_counts(params, X, y, edges)
    assert np.all(c.exact)
    np.testing.assert_array_equal(c.lo_count, [np.sum(ev < e) for e in edges])
    r = slq.slq_histogram(params, X, y, edges, key=jax.random.PRNGKey(0), num_probes=10, num_steps=100)
    est, sem = np.asarray(r.counts), np.asarray(r.sem)
    far = (np.abs(edges[:-1]) >= 5e-3) & (np.abs(edges[1:]) >= 5e-3)            # bins away from 0
    bulk_err = np.max(np.abs(est[far] - truth[far]) / truth[far])
    near = int(np.flatnonzero(edges == -3e-4)[0])                               # [−3e-4, 0)
    near_err = abs(est[near] - truth[near]) / truth[near]
    n_neg = int(np.sum(ev < 0))
    print(f"SLQ bins away from 0: rel. error <= {bulk_err:.3f}; [-3e-4, 0): SLQ {est[near]:.1f} ± {sem[near]:.1f}, "
          f"truth {truth[near]}; N₋: SLQ {float(r.negative):.1f} ± {float(r.negative_sem):.1f}, census "
          f"{int(c.lo_count[edges == 0.0][0])}, eigvalsh {n_neg}")
    assert bulk_err < 0.15 and truth[near] >= 100
    assert near_err > 3 * bulk_err and abs(est[near] - truth[near]) > 3 * sem[near]
    assert abs(float(r.negative) - n_neg) > 5 * float(r.negative_sem)
    assert int(c.lo_count[edges == 0.0][0]) == n_neg


def test_counts_of_vmaps_over_structures():
    """``vmap`` of the pure core over a batch of structures (the recount's ``cond`` becomes
    a select): the same brackets as one structure at a time."""
    rng = np.random.default_rng(9)
    mats = [make(rng, 3, 5, 4, cluster=True) for _ in range(2)]
    sts = [_decompose(*m) for m in mats]
    batched = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *sts)
    ts = np.array([-1.0, -0.5, 0.0, 0.1, 0.25, 2.0])
    cv = jax.jit(jax.vmap(C.counts_of, in_axes=(0, None)))(batched, ts)
    for i, (m, s) in enumerate(zip(mats, sts)):
        one = _counts(s, ts)
        check_counts(one, np.linalg.eigvalsh(dense(*m)), ts)
        for f in ("lo_count", "hi_count", "reason"):
            np.testing.assert_array_equal(np.asarray(getattr(cv, f))[i], np.asarray(getattr(one, f)))
