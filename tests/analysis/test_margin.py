"""The hard-margin solver against independent solutions (mhajax.margin)."""
import itertools
import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mhajax.errors import InputError
from mhajax.analysis.margin import (MarginResult, _GramCorral, _normalize, hard_margin, kkt_violation,
                                    linear_margin, margin_from_gram, min_norm_point)


def enumerate_min_norm(K):
    """Independent solution of min_{α∈Δ} αᵀKα for tiny n: for every support S,
    solve the equality-constrained QP  K_SS α = ν 1, 1ᵀα = 1  (bordered KKT system,
    least squares for singular ones), keep feasible solutions, return the smallest."""
    n = K.shape[0]
    s2 = max(float(np.max(np.diag(K))), np.finfo(float).tiny)
    K = K / s2
    best, best_alpha = np.inf, None
    for r in range(1, n + 1):
        for S in itertools.combinations(range(n), r):
            S = list(S)
            k = len(S)
            M = np.zeros((k + 1, k + 1))
            M[:k, :k] = K[np.ix_(S, S)]
            M[:k, k] = M[k, :k] = 1.0
            b = np.zeros(k + 1)
            b[k] = 1.0
            z = np.linalg.lstsq(M, b, rcond=None)[0]
            if np.linalg.norm(M @ z - b) > 1e-9 or z[:k].min() < -1e-12:
                continue
            a = np.zeros(n)
            a[S] = z[:k]
            v = float(a @ K @ a)
            if v < best:
                best, best_alpha = v, a
    return max(best, 0.0) * s2, best_alpha


small_int_points = st.integers(1, 5).flatmap(
    lambda n: st.integers(1, 3).flatmap(
        lambda D: arrays(np.float64, (n, D), elements=st.integers(-3, 3).map(float))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_int_points)
def test_matches_enumeration_on_tiny_problems(A):
    """Integer points: the squared margin is 0 or a rational bounded away from 0,
    so the two answers can be compared without ambiguity."""
    K = A @ A.T
    v, _ = enumerate_min_norm(K)
    res = hard_margin(A)
    if v <= 1e-12:
        assert res.status == "not_separable"
        assert res.gamma == 0.0 and not res.separable
    else:
        assert res.status == "separable"
        assert abs(res.gamma - np.sqrt(v)) <= 1e-10 * max(1.0, np.sqrt(v))
        assert res.rel_gap <= 1e-8  # the documented acceptance level, as a literal
        assert np.min(A @ res.w) > 0  # the certificate: w separates every point
        assert abs(np.linalg.norm(res.w) - 1) < 1e-12
    g = margin_from_gram(K)
    assert g.status == res.status
    if res.separable:
        assert abs(g.gamma - res.gamma) <= 1e-10 * max(1.0, res.gamma)


@pytest.mark.parametrize("n,D,seed", [(40, 5, 0), (80, 50, 1), (60, 300, 2), (120, 3, 3)])
def test_kkt_on_larger_problems(n, D, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, D))
    A[:, 0] = np.abs(A[:, 0]) + 0.3  # separable along e_1
    res = hard_margin(A)
    assert res.separable
    K = A @ A.T
    kkt = kkt_violation(K, res.alpha)
    assert kkt["neg"] == 0.0 and kkt["sum"] < 1e-12
    assert kkt["dual"] < 1e-12 and kkt["support"] < 1e-12  # relative to max_i K_ii
    assert res.rel_gap <= 1e-8  # the documented acceptance level, as a literal
    assert res.gamma_lower <= res.gamma * (1 + 1e-12)
    # γ lies between the achieved margin of w and ||u||
    assert res.gamma_lower >= res.gamma * (1 - res.rel_gap) - 1e-15
    assert res.gamma_bar == pytest.approx(res.gamma / np.linalg.norm(A, axis=1).max(), rel=1e-14, abs=0)


@pytest.mark.parametrize("n,D,seed", [(30, 4, 0), (50, 20, 1)])
def test_gram_only_route_matches_features(n, D, seed):
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(n, D))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    G[:, 1] = y * (np.abs(G[:, 1]) + 0.5)  # y_i <g_i, e_2> >= 0.5: separable
    r1 = hard_margin(G, y)
    K = (G @ G.T) * np.outer(y, y)
    r2 = margin_from_gram(K)
    assert r1.separable and r2.separable
    assert r2.w is None
    assert r2.gamma == pytest.approx(r1.gamma, rel=1e-9, abs=0)
    assert np.allclose(r1.w, (r1.alpha * y) @ G / np.linalg.norm((r1.alpha * y) @ G))


def test_point_and_its_negation_with_same_label_is_not_separable():
    g = np.array([[1.0, 2.0, -0.5]])
    res = hard_margin(np.concatenate([g, -g]), np.array([1.0, 1.0]))
    assert res.status == "not_separable" and res.gamma == 0.0 and res.gamma_bar == 0.0
    assert res.rel_gap is None


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 12), st.integers(1, 6), st.integers(0, 2 ** 31 - 1))
def test_origin_in_convex_hull_is_never_separable(n, D, seed):
    """Append −Σβ_i a_i / Σβ (β >= 0): the origin is in the hull, so γ = 0;
    the solver must say so, never return a positive margin."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, D)) * rng.choice([1e-3, 1.0, 1e3])
    beta = rng.random(n) * (rng.random(n) < 0.7)
    if beta.sum() == 0:
        beta[0] = 1.0
    A = np.concatenate([A, -(beta @ A)[None] / beta.sum()])
    res = hard_margin(A)
    assert not res.separable
    assert res.status == "not_separable"
    assert res.gamma == 0.0


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 30), st.integers(2, 8), st.integers(0, 2 ** 31 - 1),
       st.floats(1e-6, 1e6))
def test_scale_and_permutation_invariance(n, D, seed, c):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, D))
    A[:, 0] = np.abs(A[:, 0]) + 0.2
    r1 = hard_margin(A)
    r2 = hard_margin(c * A[::-1])
    assert r1.separable and r2.separable
    assert r2.gamma == pytest.approx(c * r1.gamma, rel=1e-9, abs=0)
    assert r2.gamma_bar == pytest.approx(r1.gamma_bar, rel=1e-9, abs=0)


def test_never_a_wrong_positive_margin_at_tiny_scales():
    """Separable with γ̄ ~ 1e-9 is below the resolution: reported as not
    separable or undecided, never as a positive margin that w does not certify."""
    A = np.array([[1.0, 1e-9], [-1.0, 1e-9]])
    res = hard_margin(A)
    if res.separable:
        assert np.min(A @ res.w) > 0
    else:
        assert res.gamma in (0.0, None)


def test_min_norm_point_stops_and_reports():
    K = np.eye(4)
    alpha, info = min_norm_point(K)
    assert np.allclose(alpha, 0.25) and info["stop"] == "optimal"
    alpha, info = min_norm_point(np.zeros((3, 3)))
    assert info["stop"] == "zero" and alpha.sum() == 1.0


def test_linear_margin_known_values_and_bias():
    V = np.array([[1.0, 0.3], [-1.0, 0.2], [2.0, -1.0]])
    y = np.array([1.0, -1.0, 1.0])
    res = linear_margin(V, y)
    assert res.separable
    # exact: the min-norm point of {(1, .3), (1, -.2), (2, -1)} is on the first segment
    u = np.array([1.0, 0.0])
    assert res.gamma == pytest.approx(1.0, rel=1e-12, abs=0)
    assert np.allclose(res.w, u, atol=1e-12)
    # 1-D: x = 2 (+1), x = 1 (−1): no homogeneous separator, but one with a bias
    V1, y1 = np.array([[2.0], [1.0]]), np.array([1.0, -1.0])
    assert linear_margin(V1, y1).status == "not_separable"
    rb = linear_margin(V1, y1, bias=True)
    assert rb.separable
    # max over ||(w, b)|| <= 1 of min(2w + b, −(w + b)): b = −1.5 w, margin 0.5 w, w = 1/√3.25
    assert rb.gamma == pytest.approx(1 / np.sqrt(13), rel=1e-12, abs=0)


@pytest.mark.parametrize("bad,match", [
    (np.array([[np.nan, 1.0]]), "non-finite"),
    (np.zeros((0, 3)), "non-empty"),
    (np.ones(3), "2-D"),
])
def test_bad_features_raise(bad, match):
    with pytest.raises(InputError, match=match):
        hard_margin(bad)


def test_bad_labels_and_gram_raise():
    G = np.ones((3, 2))
    with pytest.raises(InputError, match="labels"):
        hard_margin(G, np.array([1.0, 0.0, -1.0]))
    with pytest.raises(InputError, match="shape"):
        hard_margin(G, np.array([1.0, -1.0]))
    with pytest.raises(InputError, match="symmetric"):
        margin_from_gram(np.array([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(InputError, match="positive semidefinite"):
        margin_from_gram(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(InputError, match="square"):
        margin_from_gram(np.ones((2, 3)))


BAD_OPTIONS = [
    (dict(resolution=-1e-12), "resolution"), (dict(resolution=float("nan")), "resolution"),
    (dict(resolution=1.5), "resolution"), (dict(resolution=float("inf")), "resolution"),
    (dict(resolution="1e-3"), "resolution"), (dict(rtol=-1.0), "rtol"), (dict(rtol=float("nan")), "rtol"),
    (dict(rtol=float("inf")), "rtol"), (dict(rtol=None), "rtol"), (dict(max_iter=-1), "max_iter"),
    (dict(max_iter=2.5), "max_iter"), (dict(max_iter=True), "max_iter"), (dict(max_iter=-3), "max_iter"),
    (dict(rtol=True), "rtol"), (dict(resolution=False), "resolution"),
]
#: the range each option's message states
RANGES = {"rtol": "a finite number >= 0", "resolution": "a finite number [0, 1]", "max_iter": "an integer >= 0"}


@pytest.mark.parametrize("kw, name", BAD_OPTIONS)
def test_bad_solver_options_raise_naming_the_option(kw, name):
    """Every entry point refuses an option that is not a number in its range, naming it and
    its value, before any work (a negative or NaN τ would make every point separable or
    none; a negative or fractional iteration budget has no meaning; 0, no cycle, is allowed)."""
    G = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    for call in (lambda: hard_margin(G, **kw), lambda: margin_from_gram(G @ G.T, **kw),
                 lambda: min_norm_point(G @ G.T, **kw), lambda: linear_margin(G, np.ones(3), **kw)):
        with pytest.raises(InputError, match=f"^{name} must be {re.escape(RANGES[name])}, got {re.escape(repr(kw[name]))}$"):
            call()


def test_solver_options_at_the_ends_of_their_ranges_are_taken():
    """The admissible ends: τ = 0 and τ = 1, rtol = 0, one major cycle, numpy scalars."""
    G = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert hard_margin(G, resolution=0.0, rtol=0.0).status == "separable"
    assert hard_margin(G, resolution=1.0).status == "not_separable"
    assert hard_margin(G, max_iter=np.int64(1), rtol=np.float32(1e-3)).iterations == 1


def _result(status, rel_gap):
    return MarginResult(gamma=1.0 if status == "separable" else None, gamma_lower=1.0, gamma_upper=1.0,
                        scale=1.0, gamma_bar=1.0, alpha=np.ones(1), gap=0.0, rel_gap=rel_gap, iterations=1,
                        status=status, resolution=1e-12)


@pytest.mark.parametrize("rel_gap,converged", [(0.0, True), (9.9e-9, True), (1e-8, True), (1.01e-8, False),
                                               (1e-7, False), (1e-2, False), (None, False)])
def test_converged_means_a_relative_gap_of_at_most_1e_8(rel_gap, converged):
    """``converged``: separable with rel_gap <= 1e-8 (the module docstring's level, a literal
    here), or certified not separable; an undecided result never is."""
    assert _result("separable", rel_gap).converged is converged
    assert _result("undecided", rel_gap).converged is False
    assert _result("not_separable", None).converged is True


# A separable problem (integer points) on which Wolfe's method needs three major cycles:
# it = 1 starts at a_1, adds a_2; it = 2 adds a_3; it = 3 finds the gap at rounding level.
# The answer, by enumeration of supports (enumerate_min_norm), is γ² = 81/514.
THREE_CYCLES = np.array([[0.0, 3.0, 0.0], [-1.0, -4.0, 0.0], [1.0, 2.0, 3.0]])


def test_three_cycle_problem_truth():
    v, alpha = enumerate_min_norm(THREE_CYCLES @ THREE_CYCLES.T)
    assert v == pytest.approx(81 / 514, rel=1e-12, abs=0)
    res = hard_margin(THREE_CYCLES)
    assert res.separable and res.gamma == pytest.approx(np.sqrt(81 / 514), rel=1e-12, abs=0)
    assert res.iterations == 3 and res.converged and res.rel_gap <= 1e-8
    np.testing.assert_allclose(res.alpha, alpha, atol=1e-12)


def test_max_iter_bounds_the_major_cycles_exactly():
    """``max_iter = k`` allows k major cycles: the third one is the one that proves optimality,
    so 3 cycles stop "optimal" and 2 stop at the limit ("max_iter"), reporting 2 iterations."""
    K = THREE_CYCLES @ THREE_CYCLES.T
    _, info = min_norm_point(K, max_iter=3)
    assert info["stop"] == "optimal" and info["iterations"] == 3
    _, info = min_norm_point(K, max_iter=2)
    assert info["stop"] == "max_iter" and info["iterations"] == 2
    _, info = min_norm_point(K)                      # the default limit (20 n + 100) is far off
    assert info["stop"] == "optimal" and info["iterations"] == 3
    tri = np.array([[1.0, 0.0], [-0.5, np.sqrt(3) / 2], [-0.5, -np.sqrt(3) / 2]])   # centroid 0
    _, info = min_norm_point(tri @ tri.T, max_iter=3)
    assert info["stop"] == "zero" and info["iterations"] == 3
    _, info = min_norm_point(tri @ tri.T, max_iter=2)
    assert info["stop"] == "max_iter" and info["iterations"] == 2


def test_undecided_stop_reports_its_gap():
    """One major cycle: α sits on the segment [a_1, a_2], whose min-norm point u does not
    separate a_3 (<a_3, u> < 0). Neither certificate holds: "undecided", no γ, not
    converged, and the reported gap is ||u||² − min_i <a_i, u> of the returned α (computed
    here from the features), a relative gap above 1."""
    A = THREE_CYCLES
    res = hard_margin(A, max_iter=1)
    assert res.status == "undecided" and res.iterations == 1
    assert res.gamma is None and res.gamma_bar is None
    assert not res.separable and not res.converged
    u = res.alpha @ A
    assert np.count_nonzero(res.alpha) == 2 and res.alpha[2] == 0.0
    assert np.min(A @ u) < 0
    assert res.gap == pytest.approx(u @ u - np.min(A @ u), rel=1e-12, abs=0)
    assert res.rel_gap == pytest.approx(res.gap / (u @ u), rel=1e-12, abs=0) and res.rel_gap > 1
    assert res.gamma_upper == pytest.approx(np.linalg.norm(u), rel=1e-12, abs=0)
    assert res.gamma_lower == pytest.approx(np.min(A @ u) / np.linalg.norm(u), rel=1e-12, abs=0)
    s = res.summary()
    assert s["status"] == "undecided" and s["gamma"] is None and s["separable"] is False
    assert s["iterations"] == 1 and s["gap"] == res.gap and s["support_size"] == 2
    g = margin_from_gram(A @ A.T, max_iter=1)                 # the Gram route agrees
    assert g.status == "undecided" and g.gamma is None and g.iterations == 1
    assert g.gap == pytest.approx(res.gap, rel=1e-12, abs=0)


def test_summary_is_the_json_ready_scalars():
    res = hard_margin(THREE_CYCLES)
    s = res.summary()
    assert s == dict(gamma=res.gamma, gamma_bar=res.gamma_bar, gamma_lower=res.gamma_lower,
                     gamma_upper=res.gamma_upper, scale=res.scale, gap=res.gap, rel_gap=res.rel_gap,
                     iterations=3, status="separable", separable=True, support_size=3,
                     resolution=res.resolution)
    assert s["scale"] == pytest.approx(np.sqrt(17.0), rel=1e-15, abs=0)        # max_i ||a_i|| = ||(-1, -4, 0)||
    assert s["gamma_bar"] == pytest.approx(np.sqrt(81 / 514) / np.sqrt(17.0), rel=1e-12, abs=0)
    # the documented default τ = 1e-12 + 4 (n + D) ε (abs=0: approx's default abs is 1e-12)
    assert s["resolution"] == pytest.approx(1e-12 + 4 * (3 + 3) * np.finfo(float).eps, rel=1e-15, abs=0)
    json.dumps(s)
    assert _result("not_separable", None).separable is False and _result("separable", 0.0).separable is True


# --- input checks and options, each with its exact outcome (mutation survivors) --------------

def _msg(fn, *a, **k):
    with pytest.raises(InputError) as e:
        fn(*a, **k)
    return str(e.value)


def test_messages_name_the_argument_and_the_first_bad_entry():
    assert _msg(margin_from_gram, [[1.0, 0.0], [0.0, np.nan]]) == \
        "K contains non-finite values, first K[1, 1] = nan"
    assert _msg(linear_margin, np.ones(3), np.ones(3)) == "V must be a non-empty 2-D array, got shape (3,)"
    assert _msg(hard_margin, np.ones((1, 0))) == "G must be a non-empty 2-D array, got shape (1, 0)"
    msg = _msg(hard_margin, np.ones((3, 2)), [1, 2, -1])      # integer labels: reported as floats
    assert msg.startswith("labels must be -1 or +1, got y[1] = ") and "2.0" in msg
    assert _msg(hard_margin, np.ones((3, 2)), [1.0, -1.0, 0.5]).startswith("labels must be -1 or +1, got y[2] = ")


def test_negative_diagonal_is_refused_relative_to_the_largest_diagonal_entry():
    """A diagonal entry below −1e-8·max_i K_ii is "not a Gram matrix" (before the eigenvalue
    test, which would also refuse it); −1e-9 relative is accepted."""
    assert _msg(margin_from_gram, np.diag([1.0, -1.0])) == \
        "K has a negative diagonal entry -1.0: not a Gram matrix"
    assert _msg(margin_from_gram, np.diag([1e-3, -1e-9])) == \
        "K has a negative diagonal entry -1e-09: not a Gram matrix"
    # −1e-9 relative is accepted; that point is numerically the origin, so: not separable
    assert margin_from_gram(np.diag([1e-3, -1e-12])).status == "not_separable"


def test_margin_from_gram_and_linear_margin_pass_their_options_on():
    """resolution, rtol and max_iter reach the solver from every entry point (the outcomes below differ from the
    defaults', which are 3 cycles, separable, γ² = 81/514)."""
    K = THREE_CYCLES @ THREE_CYCLES.T
    assert margin_from_gram(K).iterations == 3
    # rtol = 10: the first cycle's gap 21/17 is below 10 · 9/17 (K / max K_ii), so it stops there
    loose = margin_from_gram(K, rtol=10.0)
    assert loose.iterations == 1 and loose.status == "undecided"
    # γ̄² = (81/514)/17 ≈ 9.3e-3 is below a resolution of 0.02: not separable
    coarse = margin_from_gram(K, resolution=0.02)
    assert coarse.status == "not_separable" and coarse.resolution == 0.02 and coarse.gamma == 0.0
    assert hard_margin(THREE_CYCLES, rtol=10.0).iterations == 1
    lm = linear_margin(THREE_CYCLES, np.ones(3), max_iter=1)
    assert lm.status == "undecided" and lm.iterations == 1
    assert linear_margin(THREE_CYCLES, np.ones(3), resolution=0.02).status == "not_separable"


def test_kkt_violation_exact_values():
    """K = diag(1, 2) (max K_ii = 2). α = (½, ½): Kα = (½, 1), αᵀKα = ¾, dual = support = ¼/2.
    α = 0: no support (support 0), sum 1. α = (3/2, −½): Kα = (3/2, −1), αᵀKα = 11/4, support
    |3/2 − 11/4|/2 = 5/8 (over α_i > 0 only), neg ½. The optimum (2/3, 1/3): Kα = (2/3, 2/3)."""
    K = np.diag([1.0, 2.0])
    assert kkt_violation(K, [0.5, 0.5]) == dict(neg=0.0, sum=0.0, dual=0.125, support=0.125)
    assert kkt_violation(K, [0.0, 0.0]) == dict(neg=0.0, sum=1.0, dual=0.0, support=0.0)
    v = kkt_violation(K, [1.5, -0.5])
    assert v["neg"] == 0.5 and v["sum"] == 0.0 and v["support"] == 0.625
    opt = kkt_violation(K, [2 / 3, 1 / 3])
    assert opt["dual"] <= 1e-16 and opt["support"] <= 1e-16


def test_kkt_violation_computes_in_float64():
    """float32 inputs give exactly the float64 values of the same numbers (no float32
    rounding in a check meant to resolve 1e-12)."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((6, 4)).astype(np.float32)
    K32 = A @ A.T
    a32 = rng.random(6).astype(np.float32)
    a32 /= a32.sum()
    got = kkt_violation(K32, a32)
    assert got == kkt_violation(K32.astype(np.float64), a32.astype(np.float64))


def test_gram_symmetry_and_psd_tolerances_are_literal():
    """|K − Kᵀ| up to 1e-8·max K_ii is accepted (inclusive) and symmetrized; the smallest
    eigenvalue may go down to −1e-8·n·max K_ii. K = [[1, 1+δ], [1+δ, 1]] has eigenvalues
    2 + δ and −δ."""
    sym = margin_from_gram(np.array([[4.0, 4e-8], [0.0, 4.0]]))          # |K − Kᵀ| = 1e-8 · 4
    assert sym.separable and sym.gamma == pytest.approx(np.sqrt(2.0), rel=1e-7, abs=0)
    assert "not symmetric" in _msg(margin_from_gram, np.array([[4.0, 8e-8], [0.0, 4.0]]))
    assert margin_from_gram(np.array([[1.0, 1 + 1e-8], [1 + 1e-8, 1.0]])).status == "separable"
    assert _msg(margin_from_gram, np.array([[1.0, 1 + 4e-8], [1 + 4e-8, 1.0]])).startswith(
        "K is not positive semidefinite: smallest eigenvalue -4e-08")


def test_zero_diagonal_gram_must_be_zero():
    """max K_ii = 0 leaves no tolerance: K = 0 is the Gram matrix of zero points (not
    separable), but [[0, 1], [1, 0]] (eigenvalue −1) is no Gram matrix at all."""
    assert margin_from_gram(np.zeros((3, 3))).status == "not_separable"
    assert _msg(margin_from_gram, np.array([[0.0, 1.0], [1.0, 0.0]])).startswith(
        "K is not positive semidefinite: smallest eigenvalue -1")


EPS64 = np.finfo(np.float64).eps


@pytest.mark.parametrize("c", [1.0, 2.0**-10, 2.0**10])
def test_feature_certificate_threshold_is_4_d_eps_scale_norm_u(c):
    """a_1,2 = c·(±1, δ): u = (0, cδ) exactly (α = ½, ½), min_i <a_i, u> = c²δ², and the
    certificate needs c²δ² > 4·D·ε·scale·||u|| = 8ε·c·cδ, i.e. δ > 8ε whatever c. With the
    resolution at 0 nothing is "not separable": δ = 9ε is certified; δ = 8ε (a power of 2: both
    sides are exactly 2⁻⁹⁸c², the inequality is strict) and 7ε are undecided."""
    for delta, status in ((9 * EPS64, "separable"), (8 * EPS64, "undecided"), (7 * EPS64, "undecided")):
        A = c * np.array([[1.0, delta], [-1.0, delta]])
        res = hard_margin(A, resolution=0.0)
        np.testing.assert_array_equal(res.alpha, [0.5, 0.5])
        assert res.status == status, (delta / EPS64, c)


def test_zero_min_norm_point_has_no_direction():
    """u = 0 exactly (a point and its negation): no w, no achieved margin, γ = 0."""
    res = hard_margin(np.array([[1.0, 2.0], [-1.0, -2.0]]))
    assert res.status == "not_separable" and res.gamma == 0.0 and res.gamma_upper == 0.0
    assert res.w is None and res.gamma_lower is None and res.rel_gap is None


def _check_factor(c, M):
    L = np.tril(c.L)     # the solves read the lower triangle only (rotations leave ~ε above it)
    assert np.all(np.diag(L) > 0)
    np.testing.assert_allclose(L @ L.T, M[np.ix_(c.S, c.S)], rtol=0, atol=1e-13)


def test_corral_remove_keeps_the_cholesky_factor_of_the_remaining_points():
    """After remove(i), L Lᵀ = K_SS + 11ᵀ of the points left (L its lower triangle, with a
    positive diagonal), for every position i, and for a factor whose
    Givens steps have r = 1 exactly (K + 11ᵀ = I: every step is a pure column swap)."""
    rng = np.random.default_rng(5)
    B = rng.standard_normal((5, 7))
    K = B @ B.T
    K /= K.diagonal().max()
    for i in range(5):
        c = _GramCorral(K, list(range(5)))
        c.remove(i)
        assert c.S == [s for s in range(5) if s != i]
        _check_factor(c, K + 1.0)
    K0 = np.eye(3) - 1.0                                    # K + 11ᵀ = I
    c = _GramCorral(K0, [0, 1, 2])
    c.remove(0)
    assert c.S == [1, 2]
    np.testing.assert_array_equal(c.L, np.eye(2))


def test_resolution_boundary_is_inclusive():
    """a_1,2 = (±1, 8ε) (as above, u = (0, 2⁻⁴⁹), ||u||² = 2⁻⁹⁸ exactly, not certified): with
    τ = 2⁻⁹⁸ = ||u||²/max||a_i||² the point is at the resolution, so not separable (γ = 0, no
    rel_gap); with τ = 2⁻⁹⁹ it is above it, so undecided."""
    A = np.array([[1.0, 8 * EPS64], [-1.0, 8 * EPS64]])
    at = hard_margin(A, resolution=2.0**-98)
    assert at.status == "not_separable" and at.gamma == 0.0 and at.rel_gap is None
    assert hard_margin(A, resolution=2.0**-99).status == "undecided"


def test_gram_certificate_is_relative_to_the_largest_diagonal():
    """K = 4I: the min-norm point is α = (½, ½), ||u||² = min_i (Kα)_i = 2, max K_ii = 4. The
    Gram certificate min_i (Kα)_i > τ·max K_ii fails for τ = 3/4 (2 < 3): not separable, with
    ||u||² > 0 but no rel_gap; it holds for τ = 1/4 (2 > 1): separable, γ = √2."""
    K = 4.0 * np.eye(2)
    at = margin_from_gram(K, resolution=0.75)
    assert at.status == "not_separable" and at.gamma == 0.0
    assert at.gamma_upper == pytest.approx(np.sqrt(2.0), rel=1e-15, abs=0) and at.rel_gap is None
    below = margin_from_gram(K, resolution=0.25)
    assert below.status == "separable" and below.gamma == pytest.approx(np.sqrt(2.0), rel=1e-15, abs=0)


@pytest.mark.parametrize("c", [1.0, 0.125])
def test_undecided_at_any_scale(c):
    """The first cycle of THREE_CYCLES is undecided whether max||a_i||² is 17 or 17/64 (< 1)."""
    res = hard_margin(c * THREE_CYCLES, max_iter=1)
    assert res.status == "undecided" and res.gamma is None and res.rel_gap > 1
    g = margin_from_gram(c * c * (THREE_CYCLES @ THREE_CYCLES.T), max_iter=1)
    assert g.status == "undecided" and g.gamma is None


def test_corral_add_refuses_a_point_of_the_affine_hull():
    """a_3 = 2a_1 − a_2 lies on aff{a_1, a_2}: add returns False and changes nothing; a_4, off
    that line, is added and the factor is that of K_SS + 11ᵀ for S = [0, 1, 3]."""
    A = np.array([[1.0, 1.0], [-1.0, 1.0], [3.0, 1.0], [0.0, 2.0]])
    K = A @ A.T
    K /= K.diagonal().max()
    c = _GramCorral(K, [0, 1])
    L0 = c.L.copy()
    assert c.add(2) is False
    assert c.S == [0, 1] and np.array_equal(c.L, L0)
    assert c.add(3) is True and c.S == [0, 1, 3]
    _check_factor(c, K + 1.0)


def test_normalize_refuses_what_is_not_a_positive_finite_weighting():
    np.testing.assert_array_equal(_normalize(np.array([1.0, 3.0])), [0.25, 0.75])
    assert _normalize(np.array([1.0, -1.0])) is None                 # sum 0
    assert _normalize(np.array([-1.0, -2.0])) is None                # sum < 0
    assert _normalize(np.array([np.inf, 1.0])) is None
    with np.errstate(over="ignore"):
        assert _normalize(np.array([1e308, 1e308])) is None          # finite entries, sum overflows


def test_stop_rules_are_inclusive_and_counted():
    """K = diag(1, 2), normalized diag(½, 1): the first cycle sits at a_1 with αᵀKα = ½ and
    gap ½ (all exact). τ = ½: "zero" at once (αᵀKα <= τ); τ = ¼: on. With n = 2 the optimality
    rule is gap <= rtol·½ + 16ε: rtol = 1 − 32ε makes it ½ exactly (stop, "optimal", 1 cycle),
    rtol = 1 − 34ε makes it ½ − ε (go on: 2 cycles, 1 minor cycle). max_iter = 0: no cycle."""
    e = np.finfo(float).eps
    K = np.diag([1.0, 2.0])
    for kw, stop, it, minor in [(dict(resolution=0.5), "zero", 1, 0),
                                (dict(resolution=0.25), "optimal", 2, 1),
                                (dict(rtol=1 - 32 * e), "optimal", 1, 0),
                                (dict(rtol=1 - 34 * e), "optimal", 2, 1),
                                (dict(max_iter=0), "max_iter", 0, 0)]:
        alpha, info = min_norm_point(K, **kw)
        assert (info["stop"], info["iterations"], info["minor"]) == (stop, it, minor), kw
    _, info = min_norm_point(THREE_CYCLES @ THREE_CYCLES.T)      # one minor cycle per insertion
    assert (info["iterations"], info["minor"]) == (3, 2)
    _, info = min_norm_point(np.eye(4))
    assert (info["iterations"], info["minor"]) == (4, 3)


def test_stalled_when_the_violating_point_is_numerically_affine():
    """a_1 = (1, 1), a_2 = (−1, 1), a_3 = (2, 1) = 1.5 a_1 − 0.5 a_2, with <a_3, a_1>, <a_3, a_2>
    lowered by η = 5e-14 (a Gram matrix PSD to ~1e-13, inside the tolerance). Normalized by
    max K_ii = 5, the optimum of {a_1, a_2} (α = ½, ½, αᵀKα = 0.2) leaves a_3 violating by a gap
    0.2η = 1e-14 > 8nε = 24ε (rtol = 0), but a_3's Cholesky residual is 0.4η = 2e-14 <= 64ε·2:
    add refuses it and the solver stops "stalled" after 2 cycles, with α = (½, ½, 0)."""
    A = np.array([[1.0, 1.0], [-1.0, 1.0], [2.0, 1.0]])
    K = A @ A.T
    K[0, 2] = K[2, 0] = 3.0 - 5e-14
    K[1, 2] = K[2, 1] = -1.0 - 5e-14
    alpha, info = min_norm_point(K, rtol=0.0)
    assert info["stop"] == "stalled" and info["iterations"] == 2
    np.testing.assert_allclose(alpha, [0.5, 0.5, 0.0], atol=1e-15)
    assert min_norm_point(K)[1]["stop"] == "optimal"            # the default rtol accepts that gap
    res = margin_from_gram(K, rtol=0.0)
    assert res.separable and res.iterations == 2 and res.gamma == pytest.approx(1.0, rel=1e-12, abs=0)


@pytest.mark.parametrize("fail_at", [1, 2])
def test_failed_affine_weights_undo_the_insertion(monkeypatch, fail_at):
    """Fault injection: when the affine weights of the enlarged corral fail (None), the point
    just added is removed and the solver stops "stalled" at the α it had before that major
    cycle: e_1 (the start, j0 = argmin K_ii) for a failure in cycle 1, and the (unpatched)
    one-cycle α of THREE_CYCLES for a failure in cycle 2."""
    K = THREE_CYCLES @ THREE_CYCLES.T
    before = np.eye(3)[0] if fail_at == 1 else min_norm_point(K, max_iter=1)[0]
    real, calls = _GramCorral.affine_weights, []

    def flaky(self):
        calls.append(len(self.S))
        return None if len(calls) == fail_at else real(self)

    monkeypatch.setattr(_GramCorral, "affine_weights", flaky)
    alpha, info = min_norm_point(K)
    assert (info["stop"], info["iterations"], info["minor"]) == ("stalled", fail_at, fail_at)
    assert calls[-1] == fail_at + 1                       # the enlarged corral had fail_at + 1 points
    np.testing.assert_allclose(alpha, before, rtol=0, atol=1e-15)
    assert np.count_nonzero(alpha) == fail_at


def wolfe_reference(K, rtol=1e-13):
    """Wolfe's method written plainly (dense solves of the bordered system, no factor
    updates): returns (α, stop, major cycles, minor cycles), for comparison with
    min_norm_point's Cholesky-updating implementation on problems whose minor cycles drop
    points."""
    n = K.shape[0]
    Kn = K / K.diagonal().max()
    tau, eps = 1e-12 + 4 * n * EPS64, EPS64
    S, lam, minor = [int(np.argmin(Kn.diagonal()))], np.ones(1), 0
    for it in range(1, 20 * n + 101):
        Ka = Kn[:, S] @ lam
        xx = float(lam @ Ka[S])
        j = int(np.argmin(Ka))
        if xx <= tau:
            return S, lam, "zero", it, minor
        if xx - Ka[j] <= rtol * xx + 8 * n * eps:
            return S, lam, "optimal", it, minor
        S, lam = S + [j], np.append(lam, 0.0)
        while True:
            minor += 1
            k = len(S)
            B = np.zeros((k + 1, k + 1))
            B[:k, :k], B[:k, k], B[k, :k] = Kn[np.ix_(S, S)], 1.0, 1.0
            mu = np.linalg.solve(B, np.r_[np.zeros(k), 1.0])[:k]   # affine minimizer, Σμ = 1
            if np.all(mu > 0):
                lam = mu
                break
            neg = np.flatnonzero(mu <= 0)
            r = lam[neg] / (lam[neg] - mu[neg])
            theta = r.min()
            lam = (1 - theta) * lam + theta * mu
            keep = np.ones(k, bool)
            keep[neg[r <= theta]] = False
            keep &= lam > 0
            S, lam = [s for s, kp in zip(S, keep) if kp], lam[keep] / lam[keep].sum()
    return S, lam, "max_iter", it, minor


def test_min_norm_point_follows_wolfes_method_step_by_step():
    """Random problems (n points in D < n dimensions, mostly separable) on which minor cycles
    drop points, up to 3 in a row: the same stop, the same numbers of major and minor cycles, and the same α as the
    plain dense version above. At least some problems must drop (minor > insertions)."""
    drops = 0
    for seed in (7, 124, 134, 147, 184, 199):      # problems with 3 or 4 minor cycles in one major
        rng = np.random.default_rng(5000 + seed)
        n, D = int(rng.integers(6, 60)), int(rng.integers(2, 12))
        A = rng.standard_normal((n, D))
        A[:, 0] = np.abs(A[:, 0]) + float(rng.choice([0.0, 0.02, 0.1, 0.5]))   # margin along e_1
        K = A @ A.T
        alpha, info = min_norm_point(K)
        S, lam, stop, it, minor = wolfe_reference(K)
        ref = np.zeros(n)
        ref[S] = lam
        assert (info["stop"], info["iterations"], info["minor"]) == (stop, it, minor), seed
        np.testing.assert_allclose(alpha, ref, rtol=0, atol=1e-10)
        drops += minor - (it - 1)                               # minor cycles that dropped a point
    assert drops >= 20


def test_min_norm_point_validates_unless_told_not_to():
    """check=True (the default) refuses a matrix that is no Gram matrix; check=False trusts the
    caller (the entry points validate first) and works in float64 whatever the input dtype."""
    with pytest.raises(InputError, match="positive semidefinite"):
        min_norm_point(np.array([[1.0, 2.0], [2.0, 1.0]]))
    alpha, info = min_norm_point(np.array([[1.0, 0.5], [0.0, 1.0]]), check=False)   # not symmetric
    assert info["iterations"] >= 1 and alpha.sum() == pytest.approx(1.0, abs=1e-15)
    K32 = (THREE_CYCLES @ THREE_CYCLES.T / 7).astype(np.float32)
    a32, i32 = min_norm_point(K32, check=False)
    a64, i64 = min_norm_point(K32.astype(np.float64), check=False)
    np.testing.assert_array_equal(a32, a64)
    assert a32.dtype == np.float64 and i32 == i64


def test_min_norm_point_defaults_and_the_all_zero_gram():
    """The documented defaults: τ = 1e-12 + 4nε and at most 20n + 100 major cycles; and for
    K = 0 (every point at the origin) no cycle runs: α = e_1, stop "zero"."""
    import mhajax.analysis.margin as margin_mod
    e = np.finfo(float).eps
    alpha, info = min_norm_point(np.zeros((3, 3)))
    np.testing.assert_array_equal(alpha, [1.0, 0.0, 0.0])
    assert info == dict(iterations=0, minor=0, stop="zero", resolution=1e-12 + 12 * e, scale2=0.0)
    _, info = min_norm_point(THREE_CYCLES @ THREE_CYCLES.T)
    assert info["resolution"] == pytest.approx(1e-12 + 4 * 3 * e, rel=1e-15, abs=0)
    seen, real = [], margin_mod._wolfe

    def spy(*a, **k):
        seen.append(k["max_iter"])
        return real(*a, **k)

    mp = pytest.MonkeyPatch()
    mp.setattr(margin_mod, "_wolfe", spy)
    try:
        min_norm_point(np.eye(7))
    finally:
        mp.undo()
    assert seen == [20 * 7 + 100]


def test_all_zero_features_and_non_numeric_input():
    """G = 0: max||a_i|| = 0, so γ = 0 and the scale-free γ̄ is 0 too (not undefined); text
    where numbers belong is refused by name."""
    res = hard_margin(np.zeros((2, 3)))
    assert res.status == "not_separable" and res.gamma == 0.0 and res.gamma_bar == 0.0 and res.scale == 0.0
    assert _msg(hard_margin, [["a", "b"]]) == "G must be a numeric array"
    assert _msg(margin_from_gram, [["1", "x"], ["x", "1"]]) == "K must be a numeric array"
