"""The hard-margin solver against independent solutions (mhajax.margin)."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mhajax.errors import InputError
from mhajax.analysis.margin import (GAP_TOL, hard_margin, kkt_violation, linear_margin,
                                    margin_from_gram, min_norm_point)


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
        assert res.rel_gap <= GAP_TOL
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
    assert res.rel_gap <= GAP_TOL
    assert res.gamma_lower <= res.gamma * (1 + 1e-12)
    # γ lies between the achieved margin of w and ||u||
    assert res.gamma_lower >= res.gamma * (1 - res.rel_gap) - 1e-15
    assert res.gamma_bar == pytest.approx(res.gamma / np.linalg.norm(A, axis=1).max(), rel=1e-14)


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
    assert r2.gamma == pytest.approx(r1.gamma, rel=1e-9)
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
    assert r2.gamma == pytest.approx(c * r1.gamma, rel=1e-9)
    assert r2.gamma_bar == pytest.approx(r1.gamma_bar, rel=1e-9)


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
    assert res.gamma == pytest.approx(1.0, rel=1e-12)
    assert np.allclose(res.w, u, atol=1e-12)
    # 1-D: x = 2 (+1), x = 1 (−1): no homogeneous separator, but one with a bias
    V1, y1 = np.array([[2.0], [1.0]]), np.array([1.0, -1.0])
    assert linear_margin(V1, y1).status == "not_separable"
    rb = linear_margin(V1, y1, bias=True)
    assert rb.separable
    # max over ||(w, b)|| <= 1 of min(2w + b, −(w + b)): b = −1.5 w, margin 0.5 w, w = 1/√3.25
    assert rb.gamma == pytest.approx(1 / np.sqrt(13), rel=1e-12)


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
