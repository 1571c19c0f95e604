"""mhajax.spectrum: λ_min/λ_max of ∇²L̂ by dense and Lanczos routes, and the certified
bounds lambda_min_block <= λ_min, lambda_max_upper >= λ_max (docs/theory.md §3, §8).

Truth: numpy eigvalsh of jax.hessian of the independent reference L̂."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import D, H, N, T, flat, make_refs, per_regime, weight_rtol
from mhajax.curvature.spectrum import resolve_method
from mhajax.curvature.operators import StructuredHessian, structured_parts
from mhajax.errors import InputError
from mhajax.models.base import MHAParams
from mhajax.curvature.spectrum import Extremes, certificates, extremes, hessian_extremes

REFS = make_refs(H, T, D)
P = H * (T * D + D * D)
REL = 1e-8
# Spectra are compared where L̂ is far from underflow (see test_chain for near underflow).
REGIMES = ("generic", "large_w", "tiny_data", "large_u", "small_loss")

KEY = jax.random.PRNGKey(0)
ext_dense = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method="dense"))
ext_lanczos = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method="lanczos", num_steps=16,
                                                   max_cycles=200))
ext_lanczos_hvp = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method="lanczos", num_steps=16,
                                                       max_cycles=200, operator="hvp"))
ext_block = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method="block"))


@jax.jit
def parts_and_certs(th, X, y):
    S = structured_parts(th, X, y)
    return S, certificates(S)


def _truth(th, X, y):
    """numpy spectrum of the reference Hessian, its norm, and the rounding level
    (relative to the norm) at which two correct implementations can differ."""
    A = np.asarray(REFS["hess"](flat(th), X, y))
    ev = np.linalg.eigvalsh(0.5 * (A + A.T))
    return ev, max(abs(ev[0]), abs(ev[-1])), 1e-12 + weight_rtol(th, X)


def _f(d):
    return jax.tree_util.tree_map(float, d)


def _computed(rec):
    """The computed fields of an Extremes record by name (a field left None was not computed)."""
    return {k: v for k, v in rec._asdict().items() if v is not None}


@per_regime(regimes=REGIMES)
def test_dense_route_and_certificates(case):
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    r = _f(ext_dense(th, X, y, KEY))
    tiny = rnd * nA
    assert abs(r.lambda_min - ev[0]) <= REL * abs(ev[0]) + tiny
    assert abs(r.lambda_max - ev[-1]) <= REL * abs(ev[-1]) + tiny
    assert r.residual_min <= 1e-12 * nA and r.residual_max <= 1e-12 * nA
    assert r.eig_converged == 1.0
    # certified bounds, whatever the solver did
    assert r.lambda_min_block <= ev[0] + tiny
    assert r.lambda_max_upper >= ev[-1] - tiny


@per_regime(regimes=REGIMES)
def test_certificates_are_what_they_claim(case):
    """lambda_min_block = min_h λ_min(B_h) and lambda_max_upper = λ_max(G) + max_h λ_max(B_h)
    recomputed with numpy from the structured factors."""
    th, X, y, _ = case
    S, (lo, hi) = parts_and_certs(th, X, y)
    lo, hi = float(lo), float(hi)
    B = np.asarray(S.B)
    evB = np.linalg.eigvalsh(B)
    J, w = np.asarray(S.J), np.asarray(S.w)
    G = (J.T * w) @ J
    lG = np.linalg.eigvalsh(0.5 * (G + G.T))[-1]
    scale = max(np.abs(evB).max(), abs(lG))
    assert abs(lo - evB[:, 0].min()) <= 1e-12 * scale
    assert abs(hi - (max(lG, 0.0) + evB[:, -1].max())) <= 1e-12 * scale


@pytest.mark.parametrize("n", [3, 12, 40])
def test_certificates_on_both_sides_of_the_gram(n):
    """λ_max(G) is taken from the smaller of D^{1/2} J Jᵀ D^{1/2} [n, n] and Jᵀ D J [P, P]
    (P = 12 here: n < P, n = P, n > P); both bounds against numpy on random factors."""
    rng = np.random.default_rng(n)
    Hh, p = 3, 4
    A = rng.standard_normal((Hh, p, p))
    S = StructuredHessian(J=jnp.asarray(rng.standard_normal((n, Hh * p))), w=jnp.asarray(rng.uniform(0, 1, n)),
                          B=jnp.asarray(A + A.transpose(0, 2, 1)))
    lo, hi = (float(v) for v in jax.jit(certificates)(S))
    J, w, B = np.asarray(S.J), np.asarray(S.w), np.asarray(S.B)
    full = (J.T * w) @ J + np.block([[B[i] if i == j else np.zeros((p, p)) for j in range(Hh)] for i in range(Hh)])
    ev = np.linalg.eigvalsh(full)
    lG = np.linalg.eigvalsh((J.T * w) @ J)[-1]
    evB = np.linalg.eigvalsh(B)
    assert abs(hi - (lG + evB[:, -1].max())) <= 1e-12 * abs(hi)
    assert abs(lo - evB[:, 0].min()) <= 1e-12 * abs(lo)
    assert lo <= ev[0] + 1e-12 and hi >= ev[-1] - 1e-12


@per_regime(regimes=REGIMES)
def test_lanczos_against_dense(case):
    """Structured-operator Lanczos with restarts (16-vector basis, P = 56): λ_min/λ_max to
    1e-8 relative, one-sided Ritz values, residuals within tolerance and consistent with
    the distance to the true spectrum."""
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    r = _f(ext_lanczos(th, X, y, KEY))
    tiny = rnd * nA
    assert r.eig_converged == 1.0
    assert r.residual_min <= r.eig_tol and r.residual_max <= r.eig_tol
    assert r.eig_tol == pytest.approx(1e-10 * max(abs(r.lambda_min), abs(r.lambda_max)))
    assert r.lambda_min >= ev[0] - tiny           # a Ritz λ_min is an upper estimate
    assert r.lambda_max <= ev[-1] + tiny          # a Ritz λ_max is a lower estimate
    assert abs(r.lambda_min - ev[0]) <= REL * abs(ev[0]) + tiny
    assert abs(r.lambda_max - ev[-1]) <= REL * abs(ev[-1]) + tiny
    assert np.min(np.abs(ev - r.lambda_min)) <= r.residual_min + tiny
    assert r.lambda_min_block <= ev[0] + tiny and r.lambda_max_upper >= ev[-1] - tiny
    assert r.num_matvecs > 0


@pytest.mark.slow
@per_regime(regimes=("generic", "small_loss"), examples=3)
def test_lanczos_on_the_hvp_operator(case):
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    r = _f(ext_lanczos_hvp(th, X, y, KEY))
    assert r.eig_converged == 1.0
    assert r.lambda_min >= ev[0] - rnd * nA and r.lambda_max <= ev[-1] + rnd * nA
    assert abs(r.lambda_min - ev[0]) <= REL * abs(ev[0]) + rnd * nA
    assert abs(r.lambda_max - ev[-1]) <= REL * abs(ev[-1]) + rnd * nA


@per_regime(regimes=("generic", "large_w"), examples=4)
def test_block_method_reports_only_the_certificate(case):
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    r = _f(ext_block(th, X, y, KEY))
    assert math.isnan(r.lambda_min) and math.isnan(r.lambda_max)
    assert r.eig_converged == 0.0
    assert r.lambda_min_block <= ev[0] + rnd * nA


def test_resolve_method():
    """auto is the certified secular route (inertia) at every P for head models, Lanczos for
    a coupled model (no head blocks)."""
    assert resolve_method("auto") == "inertia"
    assert resolve_method("auto", coupled=True) == "lanczos"
    for m in ("dense", "block", "lanczos", "inertia"):
        assert resolve_method(m) == m == resolve_method(m, coupled=True)
    with pytest.raises(InputError, match="'eig'"):
        resolve_method("eig")
    from typing import get_args
    from mhajax.curvature.spectrum import METHODS, Ends, Method
    assert get_args(Method) == METHODS and get_args(Ends) == ("both", "min")


@pytest.fixture(scope="module")
def case0():
    rng = np.random.default_rng(11)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))),
                   jnp.asarray(3.0 * rng.standard_normal((H, D, D))))
    X = jnp.asarray(rng.standard_normal((N, T, D)))
    y = jnp.asarray(np.array([1.0, -1.0] * (N // 2)))
    return th, X, y


@pytest.mark.slow
def test_hessian_extremes_api(case0):
    th, X, y = case0
    ev, nA, _ = _truth(th, X, y)
    res = hessian_extremes(th, X, y)                   # auto -> inertia (certified) at P = 56
    assert res.method == "inertia" and res.P == P
    assert res.lambda_min_lo <= ev[0] <= res.lambda_min_hi
    assert res.lambda_max_lo <= ev[-1] <= res.lambda_max_hi
    assert all(isinstance(getattr(res, k), float) for k in ("lambda_min", "lambda_max", "lambda_min_block",
                                                     "lambda_max_upper", "lambda_min_lo", "lambda_min_hi"))
    assert res.residual_min is None and res.eig_certified is True   # no vector on this route
    assert isinstance(hessian_extremes(th, X, y, method="dense").residual_min, float)
    assert abs(res.lambda_min - ev[0]) <= REL * abs(ev[0])
    assert abs(res.lambda_max - ev[-1]) <= REL * abs(ev[-1])
    Xbad = np.asarray(X).copy()
    Xbad[0, 0, 0] = np.inf
    with pytest.raises(InputError, match="non-finite"):
        hessian_extremes(th, jnp.asarray(Xbad), y)
    with pytest.raises(InputError, match="method"):
        hessian_extremes(th, X, y, method="qr")


# ---------------------------------------------------------------------------
# Accuracy across sizes, the failure-reporting path, float32 under vmap + jit
# ---------------------------------------------------------------------------

from functools import lru_cache  # noqa: E402

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from helpers import problems  # noqa: E402

# (H, T, D): P = H·(T·D + D²) = 36, 30, 40 — all above the 16-vector Lanczos basis,
# so restarts happen; dense fits everywhere.
SHAPES = [(2, 3, 3), (3, 3, 2), (5, 2, 2)]


@lru_cache(maxsize=None)
def _refs(Hh, T_, D_):
    return make_refs(Hh, T_, D_)


@lru_cache(maxsize=None)
def _small_basis_solver(num_steps, max_cycles):
    return jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method="lanczos", num_steps=num_steps,
                                                max_cycles=max_cycles))


# Found by hypothesis, W = 0, H = 5, T = D = 2: clusters at the low end. Thick restart
# keeps keep = (m − 2) // 4 Ritz vectors per end and stalls (saying so: eig_converged
# False, λ_min itself right to 1e-14) when the cluster is larger: here two eigenvalues
# 4e-4 apart stalled m = 6 (keep 1) at residual 1e-6 after 400 cycles, and three within
# 5e-5 stalled m = 12 (keep 2) at 8e-10 > tol 1.5e-11; m = 16 (keep 3) converges in both.
_NEAR_DOUBLE = (
    MHAParams(jnp.asarray([[[0.12573022, -0.13210486], [0.64042265, 0.10490012]],
                           [[-0.53566937, 0.36159505], [1.30400005, 0.94708096]],
                           [[-0.70373524, -1.26542147], [-0.62327446, 0.04132598]],
                           [[-2.32503077, -0.21879166], [-1.24591095, -0.73226735]],
                           [[-0.54425898, -0.31630016], [0.41163054, 1.04251337]]]),
              jnp.zeros((5, 2, 2))),
    jnp.asarray([[[-1.25906553, 1.51392377], [1.34587542, 0.7813114]],
                 [[0.26445563, -0.31392281], [1.45802068, 1.96025832]],
                 [[1.80163487, 1.31510376], [0.35738041, -1.20831863]],
                 [[-0.00445413, 0.65647494], [-1.28836146, 0.39512206]],
                 [[0.42986369, 0.69604272], [-1.18411797, -0.66170257]]]),
    jnp.asarray([1.0, 1.0, 1.0, -1.0, -1.0]), "generic")
_NEAR_TRIPLE = (
    MHAParams(jnp.asarray([[[0.08639605, 0.20540454], [0.08260927, -0.32578931]],
                           [[0.22633897, 0.11159364], [-0.13423831, 0.14527953]],
                           [[0.0911431, 0.07353312], [0.00710556, 0.13667825]],
                           [[-0.18411352, -0.04072749], [-0.12052983, 0.14971155]],
                           [[0.00993053, -0.07311419], [-0.19547712, -0.06429806]]]),
              jnp.zeros((5, 2, 2))),
    jnp.asarray([[[-1.22735205, -0.68322666], [-0.07204368, -0.94475162]],
                 [[-0.09826997, 0.09548303], [0.03558624, -0.50629166]],
                 [[0.59374807, 0.89116695], [0.3208483, -0.81823023]],
                 [[0.73165228, -0.50144002], [0.87916062, -1.07178742]],
                 [[0.9144672, -0.02006345], [-1.24874889, -0.31389947]]]),
    jnp.asarray([-1.0, 1.0, 1.0, 1.0, -1.0]), "generic")


@pytest.mark.slow
@settings(max_examples=12)
@given(st.sampled_from(SHAPES).flatmap(
    lambda s: problems(n=5, Hh=s[0], T=s[1], D=s[2], regimes=("generic", "large_w", "large_u"))))
@example(case=_NEAR_DOUBLE)
@example(case=_NEAR_TRIPLE)
def test_lanczos_matches_dense_eigvalsh_across_sizes(case):
    """Restarted Lanczos (16-vector basis, below P) on the structured operator, at
    several sizes P: λ_min and λ_max agree with numpy eigvalsh of the independent
    reference Hessian to 1e-8 relative; the certified bound is never above the dense λ_min."""
    th, X, y, _ = case
    Hh, T_, D_ = th.U.shape[0], th.U.shape[1], th.U.shape[2]
    A = np.asarray(_refs(Hh, T_, D_)["hess"](flat(th), X, y))
    ev = np.linalg.eigvalsh(0.5 * (A + A.T))
    nA = max(abs(ev[0]), abs(ev[-1]))
    tiny = (1e-12 + weight_rtol(th, X)) * nA
    r = _f(_small_basis_solver(16, 400)(th, X, y, KEY))
    assert r.eig_converged == 1.0
    assert abs(r.lambda_min - ev[0]) <= REL * abs(ev[0]) + tiny, (r.lambda_min, ev[0])
    assert abs(r.lambda_max - ev[-1]) <= REL * abs(ev[-1]) + tiny
    assert r.lambda_min_block <= ev[0] + tiny
    assert r.lambda_max_upper >= ev[-1] - tiny


@jax.jit
def _one_short_cycle(th, X, y, k):
    from mhajax.analysis.chain import chain_raw
    return chain_raw(th, X, y, k, method="lanczos", links="core", num_steps=3, max_cycles=1)


@pytest.mark.slow
@per_regime(regimes=("generic", "large_w"), examples=3)
def test_unconverged_solve_is_flagged_and_the_verdict_rests_on_the_certificate(case):
    """A 3-vector basis and one cycle cannot reach the 1e-10 residual: the result says
    so (eig_converged False, residual above eig_tol, both true residuals), the Ritz
    λ_min is still an upper estimate and the block bound a lower one. Through the κ
    chain, the weak-convexity verdict is decided by the certified κ_blk: replacing
    the Ritz value changes nothing, replacing the certified bound changes it."""
    from mhajax.analysis.chain import finalize
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    tiny = rnd * nA
    raw = _one_short_cycle(th, X, y, KEY)
    r, loss = _f(raw.extremes), float(raw.loss)
    assert r.eig_converged == 0.0
    assert max(r.residual_min, r.residual_max) > r.eig_tol
    assert ev[0] - tiny <= r.lambda_min           # Ritz: upper estimate of λ_min
    assert r.lambda_min_block <= ev[0] + tiny     # certificate: lower bound
    rec = finalize(raw, H)
    assert rec.eig_converged is False
    verdict = rec.checks["weak_convexity"]
    assert verdict is not None
    # the Ritz value does not enter the verdict ...
    for ritz in (r.lambda_min_block * 1e-3, ev[-1]):
        alt = finalize(raw._replace(extremes=raw.extremes._replace(lambda_min=jnp.asarray(ritz))), H)
        assert alt.checks["weak_convexity"] == verdict
    # ... the certified bound does: a violating certificate fails the check
    kappa_blk = 1e6 * (1.0 + rec.kappa_bound)            # -√H λ_blk / L̂, far above κ(θ)
    bad = finalize(raw._replace(extremes=raw.extremes._replace(
        lambda_min_block=jnp.asarray(-kappa_blk * loss / math.sqrt(H)))), H)
    assert bad.checks["weak_convexity"] is False


@pytest.mark.slow
def test_float32_vmap_jit_over_a_batch_of_points():
    """float32 and float64, jit of vmap over 3 points θ, lanczos and auto (the certified
    secular route): each point's values obey the one-sided facts (and, for Lanczos, the
    residual theorem) against numpy eigvalsh of the float64 reference Hessian (slack:
    float32 rounding of the operator, 100·eps32·||A||), the run converges and the
    enclosures hold the truth."""
    rng = np.random.default_rng(5)
    U = rng.standard_normal((3, H, T, D))
    W = 2.0 * rng.standard_normal((3, H, D, D))
    X = rng.standard_normal((N, T, D))
    y = np.array([1.0, -1.0] * (N // 2))
    keys = jax.random.split(KEY, 3)
    truths = [_truth(MHAParams(jnp.asarray(U[b]), jnp.asarray(W[b])), jnp.asarray(X), jnp.asarray(y))
              for b in range(3)]
    for dtype, slack_eps in ((jnp.float32, 100 * np.finfo(np.float32).eps), (jnp.float64, 1e-12)):
        th = MHAParams(jnp.asarray(U, dtype), jnp.asarray(W, dtype))
        Xd, yd = jnp.asarray(X, dtype), jnp.asarray(y, dtype)
        for method in ("lanczos", "auto"):
            f = jax.jit(jax.vmap(lambda th, k: extremes(th, Xd, yd, k, method=method, num_steps=16,
                                                        max_cycles=200)))
            out = f(th, keys)
            assert out.lambda_min.dtype == dtype and out.lambda_min.shape == (3,)
            for b, (ev, nA, rnd) in enumerate(truths):
                slack = (slack_eps + rnd) * nA
                lmin, lmax = float(out.lambda_min[b]), float(out.lambda_max[b])
                assert bool(out.eig_converged[b])
                if method == "lanczos":   # Ritz values: one-sided
                    assert lmin >= ev[0] - slack and lmax <= ev[-1] + slack
                    assert np.min(np.abs(ev - lmin)) <= float(out.residual_min[b]) + slack
                assert float(out.lambda_min_block[b]) <= ev[0] + slack
                assert float(out.lambda_min_lo[b]) - slack <= ev[0] <= float(out.lambda_min_hi[b]) + slack
                assert float(out.lambda_max_lo[b]) - slack <= ev[-1] <= float(out.lambda_max_hi[b]) + slack
                if method == "auto":   # the midpoint of a certified enclosure of width <= 1e-10·|λ|
                    assert abs(lmin - ev[0]) <= slack + 1e-10 * abs(ev[0])
                    assert abs(lmax - ev[-1]) <= slack + 1e-10 * abs(ev[-1])


# ---------------------------------------------------------------------------
# Certified enclosures (docs/theory.md §3.4): every route of a head model, the width target, the
# coupled model's one-sided numbers, bad input refused
# ---------------------------------------------------------------------------

from mhajax.curvature.spectrum import lambda_min, lambda_min_enclosure  # noqa: E402
from mhajax.models.softmax import SOFTMAX  # noqa: E402
from mhajax.models.two_layer import TWO_LAYER  # noqa: E402

ext_auto = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method="auto"))


@per_regime(regimes=REGIMES, examples=3)
def test_every_route_reports_a_certified_enclosure(case):
    """auto (secular search), dense and Lanczos (their value certified by two counts): the
    enclosures hold numpy's λ_min and λ_max of the independent reference Hessian, the
    reported value lies inside, and where |λ| is far above rounding (>= 1e-2·||A||: the
    counts resolve ~1e-13·||A||) the relative width of its enclosure is <= 1e-10
    (ENCLOSURE_RTOL)."""
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    tiny = rnd * nA
    for name, fn in (("auto", ext_auto), ("dense", ext_dense), ("lanczos", ext_lanczos)):
        r = _f(fn(th, X, y, KEY))
        assert r.eig_certified == 1.0, name
        assert r.lambda_min_lo - tiny <= ev[0] <= r.lambda_min_hi + tiny, (name, r, ev[0])
        assert r.lambda_max_lo - tiny <= ev[-1] <= r.lambda_max_hi + tiny, (name, r, ev[-1])
        assert r.lambda_min_lo <= r.lambda_min <= r.lambda_min_hi
        assert r.lambda_max_lo <= r.lambda_max <= r.lambda_max_hi
        assert r.eig_missed == 0.0 and r.eig_counts >= 2
        for lo, hi, lam in ((r.lambda_min_lo, r.lambda_min_hi, ev[0]),
                            (r.lambda_max_lo, r.lambda_max_hi, ev[-1])):
            if abs(lam) >= 1e-2 * nA:
                assert hi - lo <= 1e-10 * max(abs(lo), abs(hi)) * (1 + 1e-9), (name, lo, hi)


def test_lambda_min_value_and_enclosure(case0):
    """lambda_min returns a float inside the certified enclosure; lambda_min_enclosure returns
    (lo, hi); method='block' the lower bound λ_min(B) and no upper end."""
    th, X, y = case0
    ev, nA, _ = _truth(th, X, y)
    lo, hi = lambda_min_enclosure(th, X, y)
    v = lambda_min(th, X, y)
    assert isinstance(v, float) and lo <= v <= hi and lo <= ev[0] <= hi
    assert hi - lo <= 1e-10 * abs(ev[0]) * (1 + 1e-9)
    blo, bhi = lambda_min_enclosure(th, X, y, method="block")
    assert bhi is None and blo <= ev[0] and blo == lambda_min(th, X, y, method="block")


def test_coupled_model_says_it_is_not_certified():
    """The two-layer model (no head blocks) keeps the matrix-free Lanczos route: one-sided
    numbers (the Ritz λ_min is the upper end, no lower end), no certificate, residuals."""
    th = TWO_LAYER.init(jax.random.PRNGKey(2), 2, 3, 4)
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.standard_normal((N, 3, 4)))
    y = jnp.asarray(np.array([1.0, -1.0] * (N // 2)))
    res = hessian_extremes(th, X, y, model=TWO_LAYER, num_steps=16, max_cycles=200)
    assert res.method == "lanczos" and res.eig_certified is False
    assert res.lambda_min_lo is None and res.lambda_min_hi == res.lambda_min
    assert res.lambda_max_hi is None and res.lambda_max_lo == res.lambda_max
    assert res.residual_min is not None and res.eig_counts == 0


def _bad_model(kind):
    def wh(th, X, c):
        Bh = SOFTMAX.weighted_hessian(th, X, c)
        if kind == "nonsymmetric":
            return Bh + 1e-3 * jnp.triu(jnp.ones_like(Bh), 1)
        return Bh.at[0, 0].set(jnp.nan)
    return SOFTMAX._replace(name=f"softmax-{kind}", weighted_hessian=wh)


@pytest.mark.slow
@pytest.mark.parametrize("kind, match", [("nonsymmetric", "weighted_hessian .* fails"), ("nan", "not finite")])
def test_bad_head_blocks_are_refused_never_certified(case0, kind, match):
    """A user weighted_hessian returning a non-symmetric (or NaN) block: hessian_extremes and
    lambda_min raise InputError naming the problem; traced (under jit), the record says
    eig_certified False and carries no enclosure (NaN), never a wrong certificate."""
    th, X, y = case0
    bad = _bad_model(kind)
    with pytest.raises(InputError, match=match):
        lambda_min(th, X, y, model=bad)      # through hessian_extremes
    r = _f(jax.jit(lambda th, X, y, k: extremes(th, X, y, k, model=bad))(th, X, y, KEY))
    assert r.eig_certified == 0.0
    assert all(math.isnan(getattr(r, k)) for k in ("lambda_min_lo", "lambda_min_hi", "lambda_max_lo", "lambda_max_hi"))


def test_nan_parameters_are_refused(case0):
    th, X, y = case0
    bad = MHAParams(th.U.at[0, 0, 0].set(jnp.nan), th.W)
    with pytest.raises(InputError, match="non-finite"):
        lambda_min(bad, X, y)
    with pytest.raises(InputError, match="non-finite"):
        hessian_extremes(bad, X, y, method="lanczos")


# ---------------------------------------------------------------------------
# Records, defaults and arguments of every route (the mutants the tests above let
# through). Truths: literal values of the documented record, numpy eigvalsh of jax.hessian.
# ---------------------------------------------------------------------------

from jax.flatten_util import ravel_pytree  # noqa: E402

from mhajax.losses import EXPONENTIAL, LOGISTIC, empirical_risk  # noqa: E402
from mhajax.curvature.spectrum import coupled_extremes  # noqa: E402

#: every field of the record (module docstring), the same on every route
RECORD = {"lambda_min", "lambda_max", "lambda_min_lo", "lambda_min_hi", "lambda_max_lo", "lambda_max_hi",
          "lambda_min_block", "lambda_max_upper", "residual_min", "residual_max", "num_matvecs",
          "eig_converged", "eig_tol", "eig_counts", "eig_ties", "eig_width_ok", "eig_missed",
          "eig_certified", "eig_asym", "eig_asym_head", "eig_finite", "eig_premise"}
#: the fields only the host record of ``hessian_extremes`` has
HOST = {"method", "P", "model", "dtype"}


def _coupled_problem(heads=2, tokens=3, dim=4, n=N):
    th = TWO_LAYER.init(jax.random.PRNGKey(2), heads, tokens, dim)
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.standard_normal((n, tokens, dim)))
    y = jnp.asarray(np.array([1.0, -1.0] * (n // 2)))
    return th, X, y


def _dense_spectrum(th, X, y, model, loss):
    z, unravel = ravel_pytree(th)
    A = np.asarray(jax.hessian(lambda z: empirical_risk(unravel(z), X, y, model, loss))(z))
    return np.linalg.eigvalsh(0.5 * (A + A.T))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["auto", "inertia", "dense", "lanczos", "block"])
def test_every_head_route_returns_the_whole_record(case0, method):
    th, X, y = case0
    res = hessian_extremes(th, X, y, method=method, num_steps=16, max_cycles=200)
    assert set(res._fields) == RECORD | HOST
    assert set(_computed(extremes(th, X, y, KEY, method=method))) == RECORD


def test_block_record_is_one_sided_with_literal_flags(case0):
    """``block``: λ_min(B) and the Weyl bound only; the flags of a route without a two-sided
    certificate are literals (no count, no tie, width not met, nothing missed, not certified,
    no asymmetry measured, head 0, finite)."""
    th, X, y = case0
    res = hessian_extremes(th, X, y, method="block")
    assert res.method == "block"
    for k in ("lambda_min", "lambda_max", "lambda_min_hi", "lambda_max_lo", "residual_min", "residual_max",
              "eig_tol", "eig_asym"):
        assert getattr(res, k) is None, k
    assert isinstance(res.lambda_min_lo, float) and res.lambda_min_lo == res.lambda_min_block
    assert isinstance(res.lambda_max_hi, float) and res.lambda_max_hi == res.lambda_max_upper
    assert res.num_matvecs == 0 and res.eig_counts == 0 and res.eig_ties == 0
    assert res.eig_asym_head == 0
    for k, v in (("eig_converged", False), ("eig_width_ok", False), ("eig_missed", False),
                 ("eig_certified", False), ("eig_finite", True)):
        assert getattr(res, k) is v, k


@pytest.mark.slow
def test_coupled_record_is_one_sided_with_residuals_and_literal_flags():
    th, X, y = _coupled_problem()
    res = hessian_extremes(th, X, y, model=TWO_LAYER, num_steps=16, max_cycles=200)
    assert set(res._fields) == RECORD | HOST and res.P == 88
    ev = _dense_spectrum(th, X, y, TWO_LAYER, LOGISTIC)
    for k in ("lambda_min_block", "lambda_max_upper", "lambda_min_lo", "lambda_max_hi", "eig_asym"):
        assert getattr(res, k) is None, k
    assert res.eig_converged is True and res.num_matvecs > 0
    assert res.eig_tol == pytest.approx(1e-10 * max(abs(ev[0]), abs(ev[-1])), rel=1e-6, abs=0)
    for k, ref in (("residual_min", "lambda_min"), ("residual_max", "lambda_max")):
        assert 0 <= getattr(res, k) <= res.eig_tol * (1 + 1e-9), k
    assert abs(res.lambda_max - ev[-1]) <= 1e-8 * abs(ev[-1])
    assert res.eig_counts == 0 and res.eig_ties == 0 and res.eig_asym_head == 0
    for k, v in (("eig_width_ok", False), ("eig_missed", False), ("eig_certified", False),
                 ("eig_finite", True)):
        assert getattr(res, k) is v, k


def test_one_sided_routes_keep_float32():
    """block and coupled records of float32 inputs are float32 throughout (their NaN fields
    included), under jit."""
    f32 = lambda t: jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), t)  # noqa: E731
    th, X, y = f32(_coupled_problem())
    out = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, model=TWO_LAYER, num_steps=16))(th, X, y, KEY)
    rng = np.random.default_rng(3)
    th2 = f32(MHAParams(jnp.asarray(rng.standard_normal((H, T, D))), jnp.asarray(rng.standard_normal((H, D, D)))))
    X2 = f32(jnp.asarray(rng.standard_normal((N, T, D))))
    out2 = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method="block"))(th2, X2, y, KEY)
    for rec in (out, out2):
        floats = {k: v.dtype for k, v in _computed(rec).items() if jnp.issubdtype(v.dtype, jnp.floating)}
        assert set(floats.values()) == {jnp.dtype(jnp.float32)}, floats
        assert {"eig_asym", "lambda_min_lo"} <= set(floats)


@pytest.mark.slow
def test_coupled_route_defaults_and_options_reach_lanczos():
    """coupled_extremes: num_steps 64 and max_cycles 20 by default (P = 704 > 64, and a
    tolerance that is never met, so every cycle runs), and the given rtol, steps and cycles
    reach the solver."""
    th, X, y = _coupled_problem(4, 6, 8)
    run = jax.jit(lambda th, X, y, k, **kw: coupled_extremes(th, X, y, k, model=TWO_LAYER, **kw),
                  static_argnames=("num_steps", "max_cycles", "rtol"))
    base = run(th, X, y, KEY, rtol=1e-300)
    same = run(th, X, y, KEY, rtol=1e-300, num_steps=64, max_cycles=20)
    assert not bool(base.eig_converged)
    assert all(float(v) == float(getattr(same, k)) or (math.isnan(float(v)) and math.isnan(float(getattr(same, k))))
               for k, v in _computed(base).items())
    more_steps = run(th, X, y, KEY, rtol=1e-300, num_steps=65, max_cycles=20)
    more_cycles = run(th, X, y, KEY, rtol=1e-300, num_steps=64, max_cycles=21)
    m0 = int(base.num_matvecs)
    assert int(more_steps.num_matvecs) > m0 and int(more_cycles.num_matvecs) > m0
    loose = run(th, X, y, KEY, rtol=1e-3)
    tight = run(th, X, y, KEY)                                  # rtol None: 1e-10 in float64
    # tol = rtol·max(|θ_min|, |θ_max|); the looser solve's Ritz values are good to 1e-3
    assert float(loose.eig_tol) == pytest.approx(1e7 * float(tight.eig_tol), rel=2e-3, abs=0)


@pytest.mark.slow
def test_coupled_route_uses_the_loss_it_is_given():
    th, X, y = _coupled_problem()
    ev = _dense_spectrum(th, X, y, TWO_LAYER, EXPONENTIAL)
    res = hessian_extremes(th, X, y, model=TWO_LAYER, loss=EXPONENTIAL, num_steps=16, max_cycles=200)
    assert abs(res.lambda_max - ev[-1]) <= 1e-8 * abs(ev[-1])
    assert abs(res.lambda_min - ev[0]) <= 1e-8 * max(abs(ev[0]), abs(ev[-1]))
    assert lambda_min(th, X, y, model=TWO_LAYER, loss=EXPONENTIAL, num_steps=16, max_cycles=200) == \
        pytest.approx(ev[0], rel=0, abs=1e-8 * max(abs(ev[0]), abs(ev[-1])))


@pytest.mark.slow
def test_lambda_min_passes_the_loss_the_key_and_the_options(case0):
    th, X, y = case0
    ev = _dense_spectrum(th, X, y, SOFTMAX, EXPONENTIAL)
    lo, hi = lambda_min_enclosure(th, X, y, loss=EXPONENTIAL)
    assert lo <= ev[0] <= hi and hi - lo <= 1e-10 * abs(ev[0]) * (1 + 1e-9)
    k1 = jax.random.PRNGKey(7)
    via = hessian_extremes(th, X, y, method="lanczos", key=k1, ends="min", num_steps=8, max_cycles=300)
    assert lambda_min(th, X, y, method="lanczos", key=k1, num_steps=8, max_cycles=300) == via.lambda_min


@pytest.mark.slow
def test_hessian_extremes_and_lambda_min_guard_their_sizes_once(monkeypatch, case0):
    """The public entries ask the memory guard once, before anything runs, with H, n, T, d
    read off their arguments (blamed against 1), their own name and the terms of their method
    (``auto``: the certified route; the Lanczos basis of ``num_steps``), ``force`` passed on;
    nothing guards again inside, on a first call (traced then) or a later one."""
    from mhajax import api
    from mhajax.runtime import memory as mem
    calls = []
    monkeypatch.setattr(mem, "guard", lambda est, sizes, ref, *, force=False, api=False, budget=None:
                        calls.append((est(sizes), sizes, ref, force, api)))
    th, X, y = case0
    p = T * D + D * D
    sizes = dict(H=H, n=N, T=T, d=D)
    api.hessian_extremes(th, X, y, method="block")
    assert calls == [(mem.Estimate("hessian_extremes", tuple(mem.analysis(N, T, H, p, "block"))), sizes,
                      dict.fromkeys(sizes, 1), False, True)]
    calls.clear()
    api.lambda_min(th, X, y, num_steps=9)
    assert calls == [(mem.Estimate("lambda_min", tuple(mem.analysis(N, T, H, p, "inertia"))), sizes,
                      dict.fromkeys(sizes, 1), False, True)]
    calls.clear()
    api.lambda_min_enclosure(th, X, y, method="dense")
    assert calls == [(mem.Estimate("lambda_min_enclosure", tuple(mem.analysis(N, T, H, p, "dense"))), sizes,
                      dict.fromkeys(sizes, 1), False, True)]
    calls.clear()
    api.lambda_min(th, X, y, method="lanczos", num_steps=9, max_cycles=300, force=True)
    assert [c[0].terms[-1] for c in calls] == [("Lanczos basis [m, P]", (9, H * p))] and calls[0][3] is True
    calls.clear()
    api.hessian_extremes(th, X, y, method="block", num_steps=12, force=True)   # a new option set: traced now
    assert len(calls) == 1 and calls[0][3] is True
    calls.clear()
    hessian_extremes(th, X, y, method="block")      # the plain functions: no guard
    lambda_min(th, X, y, num_steps=9)
    lambda_min_enclosure(th, X, y, method="dense")
    assert calls == []



def test_lambda_min_validates_its_inputs(case0):
    th, X, y = case0
    with pytest.raises(InputError, match=r"X has 3 tokens but the parameters expect T=4"):
        lambda_min(MHAParams(jnp.zeros((H, 4, D)), th.W), X, y)
    bad = np.asarray(y).copy()
    bad[1] = 2.0
    with pytest.raises(InputError, match=r"labels must be -1 or \+1, got y\[1\] = 2\.0"):
        lambda_min(th, X, jnp.asarray(bad))


def test_uncertifiable_blocks_are_refused_with_the_whole_reason(case0):
    th, X, y = case0
    with pytest.raises(InputError) as e:
        lambda_min(th, X, y, model=_bad_model("nan"))
    assert str(e.value) == ("model 'softmax-nan': weighted_hessian (W_h(c) v vs jax.jvp of jax.grad) is not finite "
                            "at the θ given to lambda_min: the model produced NaN/inf; head 0; nothing is certified "
                            "on it")


@pytest.mark.slow
def test_the_lanczos_start_is_the_given_key_or_key_0(case0):
    """hessian_extremes starts Lanczos from ``key`` (PRNGKey(0) when None): its record equals
    the pure ``extremes`` at that key, bit for bit, and another key gives another residual."""
    th, X, y = case0
    k0, k1 = jax.random.PRNGKey(0), jax.random.PRNGKey(1)
    pure = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method="lanczos", num_steps=8, max_cycles=300))
    r0, r1 = pure(th, X, y, k0), pure(th, X, y, k1)
    assert float(r0.residual_min) != float(r1.residual_min)
    for key, ref in ((None, r0), (k1, r1)):
        got = hessian_extremes(th, X, y, method="lanczos", key=key, num_steps=8, max_cycles=300)
        assert got.residual_min == float(ref.residual_min) and got.lambda_min == float(ref.lambda_min)


def test_nonsymmetric_blocks_are_refused_with_the_whole_reason(case0):
    th, X, y = case0
    with pytest.raises(InputError) as e:
        lambda_min(th, X, y, model=_bad_model("nonsymmetric"))
    import re
    assert re.fullmatch(r"model 'softmax-nonsymmetric': weighted_hessian \(W_h\(c\) v vs jax.jvp of jax.grad\) fails "
                        r"at the θ given to lambda_min: relative discrepancy [0-9.e-]+ > 1e-10; head [01]; nothing is "
                        r"certified on it", str(e.value)), str(e.value)


@pytest.mark.slow
def test_uncertifiable_blocks_inside_the_pure_route_are_refused_with_the_whole_reason(case0):
    """Past the door (the pure route, as a command's checkpoints run it), NaN or asymmetric blocks
    still leave nothing certified, and the host refusal names the reason."""
    from mhajax.curvature.spectrum import _refuse_uncertifiable
    th, X, y = case0
    for kind, reason in (("nan", "are not finite at this θ"), ("nonsymmetric", "are not symmetric")):
        raw = extremes(th, X, y, jax.random.PRNGKey(0), model=_bad_model(kind))
        assert not bool(raw.eig_certified) and math.isnan(float(raw.lambda_min_lo))
        host = Extremes(eig_certified=False, eig_finite=bool(raw.eig_finite), eig_asym_head=int(raw.eig_asym_head))
        with pytest.raises(InputError, match=reason):
            _refuse_uncertifiable(host, raw)


def test_point_is_theta_inside_the_closed_enclosure_else_its_midpoint():
    from mhajax.curvature.inertia import Enclosure
    from mhajax.curvature.spectrum import _point
    enc = Enclosure(lo=jnp.asarray(-3.0), hi=jnp.asarray(-1.0), width_ok=True, count_lo=0, count_hi=0,
                    iterations=0, ties=0, valid=True, confirmed=True)
    for theta, want in ((-2.5, -2.5), (-3.0, -3.0), (-1.0, -1.0), (-0.5, -2.0), (-4.0, -2.0)):
        assert float(_point(jnp.asarray(theta), enc)) == want, theta


@pytest.mark.slow
def test_dense_record_literals(case0):
    """The dense route: its residuals are true residuals, no products counted, tolerance 0 in
    the input's dtype, always converged."""
    th, X, y = case0
    res = hessian_extremes(th, X, y, method="dense")
    assert res.num_matvecs == 0 and res.eig_tol == 0.0 and res.eig_converged is True
    f32 = lambda t: jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), t)  # noqa: E731
    out = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method="dense"))(f32(th), f32(X), f32(y), KEY)
    assert out.eig_tol.dtype == jnp.float32


@pytest.mark.slow
def test_heads_extremes_options_defaults_and_the_min_only_record(case0):
    """heads_extremes certifies both ends by default; ``enclosure_rtol`` sets the width aimed
    for; ``ends="min"`` leaves λ_max NaN (in the input's dtype) with its counts, ties and width
    flag neutral: the counts are exactly those of λ_min's own enclosure."""
    from mhajax.curvature import inertia
    from mhajax.curvature.spectrum import heads_extremes
    th, X, y = case0
    S = structured_parts(th, X, y)
    both = jax.jit(lambda S: heads_extremes(S, "inertia"))(S)
    assert np.isfinite(float(both.lambda_max_lo)) and np.isfinite(float(both.lambda_max_hi))
    with pytest.raises(InputError, match=r"^ends must be 'both' or 'min', got 'max'$"):
        heads_extremes(S, "inertia", ends="max")
    coarse = jax.jit(lambda S: heads_extremes(S, "inertia", enclosure_rtol=1e-4, ends="min"))(S)
    fine = jax.jit(lambda S: heads_extremes(S, "inertia", ends="min"))(S)
    wc = float(coarse.lambda_min_hi - coarse.lambda_min_lo) / abs(float(coarse.lambda_min))
    wf = float(fine.lambda_min_hi - fine.lambda_min_lo) / abs(float(fine.lambda_min))
    assert wf <= 1e-10 * (1 + 1e-9) < wc <= 1e-4 * (1 + 1e-9)
    st_ = inertia.decompose(S.B, S.J, S.w)
    e = jax.jit(lambda st_: inertia.enclose(st_, "min"))(st_)
    assert int(fine.eig_counts) == int(e.iterations) and int(fine.eig_ties) == int(e.ties)
    assert bool(fine.eig_width_ok) and math.isnan(float(fine.lambda_max_lo))
    assert bool(fine.eig_certified) and bool(both.eig_certified)   # λ_min alone is certified too
    f32 = lambda t: jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), t)  # noqa: E731
    out = jax.jit(lambda S: heads_extremes(S, "inertia", ends="min"))(f32(S))
    assert {v.dtype for v in _computed(out).values() if jnp.issubdtype(v.dtype, jnp.floating)} == {jnp.dtype(jnp.float32)}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["inertia", "lanczos", "dense"])
def test_enclosure_rtol_reaches_both_ends_of_every_route(case0, method):
    """A width target of 1e-4 gives enclosures wider than the default 1e-10 (and within
    1e-4), at λ_min and at λ_max, on the secular route and on the Lanczos route; the dense
    route's are within 1e-4 too."""
    th, X, y = case0
    run = jax.jit(lambda th, X, y, k, r: extremes(th, X, y, k, method=method, enclosure_rtol=r, num_steps=16,
                                                  max_cycles=200), static_argnums=4)
    # ``dense`` encloses by the backward error of one eigendecomposition (docs/theory.md §3.7),
    # as tight at every target: only the upper end applies to it
    for rtol, lo_w in ((1e-4, 1e-10 if method != "dense" else -1.0), (1e-10, -1.0)):
        rec = run(th, X, y, KEY, rtol)
        for end in ("min", "max"):
            w = (float(getattr(rec, f"lambda_{end}_hi")) - float(getattr(rec, f"lambda_{end}_lo"))) / \
                abs(float(getattr(rec, f"lambda_{end}")))
            assert lo_w < w <= rtol * (1 + 1e-9), (end, rtol, w)


@pytest.mark.slow
@pytest.mark.parametrize("wrong", ["min", "max"])
def test_a_missed_end_is_reported_whichever_end_it_is(case0, wrong):
    """Ritz pairs handed to the certificate: the dense extreme eigenvalue at one end, the second
    one (a converged but wrong eigenvalue, as a stalled Lanczos would give) at the other. The
    record says ``eig_missed`` and its enclosures hold the true extremes."""
    from mhajax.curvature.spectrum import heads_extremes
    th, X, y = case0
    ev, nA, _ = _truth(th, X, y)
    r = 1e-13 * nA
    tmin, tmax = (ev[1], ev[-1]) if wrong == "min" else (ev[0], ev[-2])
    S = structured_parts(th, X, y)
    rec = jax.jit(lambda S, t: heads_extremes(S, "lanczos", ritz=t))(S, (tmin, r, tmax, r))
    assert bool(rec.eig_missed)
    tol = 1e-9 * nA
    assert float(rec.lambda_min_lo) - tol <= ev[0] <= float(rec.lambda_min_hi) + tol
    assert float(rec.lambda_max_lo) - tol <= ev[-1] <= float(rec.lambda_max_hi) + tol
    ok = jax.jit(lambda S, t: heads_extremes(S, "lanczos", ritz=t))(S, (ev[0], r, ev[-1], r))
    assert not bool(ok.eig_missed)


@pytest.mark.slow
def test_inertia_record_literals_and_ends_min_on_every_route(case0):
    """The secular route has no vector and no products: residuals and tolerance None, 0
    products, converged = certified. ``ends="min"`` leaves λ_max empty on every certified route."""
    th, X, y = case0
    res = hessian_extremes(th, X, y, method="inertia")
    assert res.residual_min is None and res.residual_max is None and res.eig_tol is None
    assert res.num_matvecs == 0 and res.eig_converged is True and res.eig_certified is True
    for method in ("inertia", "lanczos", "dense"):
        r = hessian_extremes(th, X, y, method=method, ends="min", num_steps=16, max_cycles=200)
        assert r.lambda_max_lo is None and r.lambda_max_hi is None and r.lambda_max is None, method
        assert r.lambda_min_lo <= r.lambda_min <= r.lambda_min_hi, method


def test_coupled_model_refuses_the_structured_methods_by_name():
    th, X, y = _coupled_problem()
    for method in ("dense", "block", "inertia"):
        with pytest.raises(InputError) as e:
            extremes(th, X, y, KEY, method=method, model=TWO_LAYER)
        assert str(e.value) == (f"method {method!r} needs head blocks; the coupled model 'two-layer' has none "
                                "(use auto or lanczos)")


@pytest.mark.slow
def test_head_lanczos_defaults_and_options_reach_the_solver():
    """extremes(method="lanczos") on a head model: num_steps 64 and max_cycles 20 by default
    (P = 112 > 64, a tolerance never met), and the given values and rtol reach Lanczos; the
    loss reaches the operator (exponential loss: the Ritz λ_max matches dense)."""
    rng = np.random.default_rng(5)
    th = MHAParams(jnp.asarray(rng.standard_normal((4, T, D))), jnp.asarray(rng.standard_normal((4, D, D))))
    X = jnp.asarray(rng.standard_normal((N, T, D)))
    y = jnp.asarray(np.array([1.0, -1.0] * (N // 2)))
    run = jax.jit(lambda th, X, y, k, **kw: extremes(th, X, y, k, method="lanczos", **kw),
                  static_argnames=("num_steps", "max_cycles", "rtol", "loss"))
    base = run(th, X, y, KEY, rtol=1e-300)
    same = run(th, X, y, KEY, rtol=1e-300, num_steps=64, max_cycles=20)
    assert not bool(base.eig_converged) and int(base.num_matvecs) == int(same.num_matvecs)
    assert float(base.residual_min) == float(same.residual_min)
    assert int(run(th, X, y, KEY, rtol=1e-300, num_steps=65).num_matvecs) > int(base.num_matvecs)
    assert int(run(th, X, y, KEY, rtol=1e-300, max_cycles=21).num_matvecs) > int(base.num_matvecs)
    loose, tight = run(th, X, y, KEY, rtol=1e-3), run(th, X, y, KEY)
    assert float(loose.eig_tol) == pytest.approx(1e7 * float(tight.eig_tol), rel=2e-3, abs=0)
    ev = _dense_spectrum(th, X, y, SOFTMAX, EXPONENTIAL)
    e = run(th, X, y, KEY, loss=EXPONENTIAL, num_steps=16, max_cycles=300)
    assert abs(float(e.lambda_max) - ev[-1]) <= 1e-8 * abs(ev[-1])


# -- the routes of ``extremes`` that mutants showed unchecked ---------------------------------

from mhajax.curvature import spectrum as spectrum_mod  # noqa: E402
from mhajax.curvature.krylov import ExtremeEigs  # noqa: E402
from mhajax.curvature.spectrum import METHODS  # noqa: E402


def test_an_unknown_method_names_every_method():
    with pytest.raises(InputError) as e:
        resolve_method("qr")
    assert str(e.value) == "method must be one of auto, dense, block, lanczos, inertia, got 'qr'"
    assert METHODS == ("auto", "dense", "block", "lanczos", "inertia")


@pytest.mark.slow
def test_the_coupled_route_takes_lanczos_and_every_option():
    """A coupled model accepts ``method="lanczos"`` as it accepts ``auto``, and ``extremes``
    hands loss, steps, cycles and tolerance to :func:`coupled_extremes` unchanged (bit for bit;
    each option differs from its default and, in one of the two settings, changes the answer)."""
    th, X, y = _coupled_problem()
    stopped = dict(loss=EXPONENTIAL, num_steps=6, max_cycles=3, rtol=1e-3)   # 3 cycles are not enough
    loose = dict(loss=EXPONENTIAL, num_steps=6, max_cycles=3, rtol=0.3)      # converged in one cycle
    for opts, matter in ((stopped, ("loss", "num_steps", "max_cycles")), (loose, ("rtol",))):
        via = jax.jit(lambda th, X, y, k, m: extremes(th, X, y, k, method=m, model=TWO_LAYER, **opts),
                      static_argnums=4)
        direct = jax.jit(lambda th, X, y, k: coupled_extremes(th, X, y, k, model=TWO_LAYER, **opts))(th, X, y, KEY)
        for method in ("lanczos", "auto"):
            got = via(th, X, y, KEY, method)
            assert set(_computed(got)) == set(_computed(direct))
            for k, v in _computed(direct).items():
                np.testing.assert_array_equal(np.asarray(getattr(got, k)), np.asarray(v), err_msg=f"{method} {k}")
        defaults = dict(loss=LOGISTIC, num_steps=64, max_cycles=20, rtol=None)
        for name in matter:
            other = jax.jit(lambda th, X, y, k: coupled_extremes(th, X, y, k, model=TWO_LAYER,
                                                                 **dict(opts, **{name: defaults[name]})))(th, X, y, KEY)
            assert (float(other.lambda_min), int(other.num_matvecs)) != \
                (float(direct.lambda_min), int(direct.num_matvecs)), name


@pytest.mark.slow
@pytest.mark.parametrize("method", ["block", "inertia", "lanczos"])
def test_float32_records_are_float32_on_every_route(case0, method):
    """In float32 every floating field of the record is float32, the NaN placeholders of the
    one-sided and secular routes included (a placeholder in the default float would promote)."""
    th, X, y = case0
    f32 = lambda a: jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float32), a)   # noqa: E731
    rec = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method=method, num_steps=16, max_cycles=200))(
        f32(th), f32(X), f32(y), KEY)
    floats = {k: v.dtype for k, v in _computed(rec).items() if jnp.issubdtype(v.dtype, jnp.floating)}
    assert floats and all(d == jnp.float32 for d in floats.values()), floats
    assert {"lambda_min", "lambda_max", "residual_min", "eig_tol"} <= set(floats)


@pytest.mark.slow
@pytest.mark.parametrize("operator", ["structured", "hvp"])
def test_the_lanczos_operator_is_the_one_asked_for(case0, monkeypatch, operator):
    """``operator="hvp"`` runs Lanczos on the jvp-of-grad product with the caller's model and
    loss; ``"structured"`` (the default) never builds it."""
    th, X, y = case0
    seen = []
    real = spectrum_mod.linearized_hvp

    def spy(*a):
        seen.append(a[3:])
        return real(*a)
    monkeypatch.setattr(spectrum_mod, "linearized_hvp", spy)
    kw = {} if operator == "structured" else dict(operator="hvp")
    rec = extremes(th, X, y, KEY, method="lanczos", loss=EXPONENTIAL, num_steps=16, max_cycles=200, **kw)
    assert seen == ([] if operator == "structured" else [(SOFTMAX, EXPONENTIAL)])
    ev = _dense_spectrum(th, X, y, SOFTMAX, EXPONENTIAL)
    assert float(rec.lambda_min_lo) - 1e-9 * abs(ev[0]) <= ev[0] <= float(rec.lambda_min_hi) + 1e-9 * abs(ev[0])


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dense", "block", "inertia", "lanczos"])
def test_every_head_route_uses_the_loss_it_is_given(case0, method):
    """With the exponential loss the head routes bound the exponential loss's Hessian (numpy
    ``eigvalsh`` of ``jax.hessian``), not the logistic one's: the two spectra differ here."""
    th, X, y = case0
    ev = _dense_spectrum(th, X, y, SOFTMAX, EXPONENTIAL)
    other = _dense_spectrum(th, X, y, SOFTMAX, LOGISTIC)
    nA = max(abs(ev[0]), abs(ev[-1]))
    assert abs(other[0] - ev[0]) > 1e-3 * nA
    rec = _f(jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method=method, loss=EXPONENTIAL, num_steps=16,
                                                  max_cycles=200))(th, X, y, KEY))
    tol = 1e-9 * nA
    if method == "block":
        assert rec.lambda_min_block <= ev[0] + tol and rec.lambda_max_upper >= ev[-1] - tol
        exp_lo, exp_hi = (float(v) for v in certificates(structured_parts(th, X, y, SOFTMAX, EXPONENTIAL)))
        log_lo, log_hi = (float(v) for v in certificates(structured_parts(th, X, y, SOFTMAX, LOGISTIC)))
        assert abs(exp_lo - log_lo) > 1e-3 * nA                 # the losses give other bounds here
        assert abs(rec.lambda_min_block - exp_lo) <= 1e-12 * nA and abs(rec.lambda_max_upper - exp_hi) <= 1e-12 * nA
    else:
        assert rec.lambda_min_lo - tol <= ev[0] <= rec.lambda_min_hi + tol
        assert rec.lambda_max_lo - tol <= ev[-1] <= rec.lambda_max_hi + tol
        # the solver worked on the same matrix as the certificate: nothing to repair
        assert rec.eig_missed == 0.0


@pytest.mark.slow
def test_an_unreachable_width_is_reported_when_only_lambda_min_is_asked(case0):
    """``ends="min"`` with a width target below rounding: the search stops where rounding
    allows and the record says the width was not met (λ_max's empty enclosure does not vote)."""
    th, X, y = case0
    for method in ("inertia", "lanczos"):
        rec = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method=method, ends="min", enclosure_rtol=1e-30,
                                                   num_steps=16, max_cycles=200))(th, X, y, KEY)
        assert not bool(rec.eig_width_ok), method
        assert bool(rec.eig_certified), method            # still an enclosure, only a wider one
        ok = jax.jit(lambda th, X, y, k: extremes(th, X, y, k, method=method, ends="min", num_steps=16,
                                                  max_cycles=200))(th, X, y, KEY)
        assert bool(ok.eig_width_ok), method


@pytest.mark.slow
def test_a_stalled_lanczos_inside_extremes_is_repaired_not_reported(case0, monkeypatch):
    """Lanczos replaced by one that converged to the *second* eigenvalue at each end: the record
    of ``extremes`` flags the miss and reports the repaired value inside the enclosure that
    holds the true extreme — never the solver's wrong value."""
    th, X, y = case0
    ev, nA, _ = _truth(th, X, y)
    r = 1e-13 * nA

    def stalled(mv, P, key, **kw):
        dt = kw["dtype"]
        v = jnp.zeros(P, dt)
        return ExtremeEigs(jnp.asarray(ev[1], dt), jnp.asarray(ev[-2], dt), jnp.asarray(r, dt), jnp.asarray(r, dt),
                           v, v, jnp.asarray(7), jnp.asarray(1), jnp.asarray(True), jnp.asarray(r, dt))
    monkeypatch.setattr(spectrum_mod, "extreme_eigs", stalled)
    rec = _f(extremes(th, X, y, KEY, method="lanczos"))
    assert rec.eig_missed == 1.0 and rec.num_matvecs == 7.0
    tol = 1e-9 * nA
    for end, true, wrong in (("min", ev[0], ev[1]), ("max", ev[-1], ev[-2])):
        lo, hi, val = getattr(rec, f"lambda_{end}_lo"), getattr(rec, f"lambda_{end}_hi"), getattr(rec, f"lambda_{end}")
        assert lo - tol <= true <= hi + tol, end
        assert lo <= val <= hi and val != wrong, end


@pytest.mark.slow
def test_the_default_width_target_is_1e_10(case0):
    """Without ``enclosure_rtol`` the search aims at relative width 1e-10 (ENCLOSURE_RTOL):
    the record equals, bit for bit, the one asked for 1e-10 explicitly, and a tighter target
    (1e-11) gives narrower enclosures here, so the comparison can tell them apart."""
    th, X, y = case0
    run = jax.jit(lambda th, X, y, k, **kw: extremes(th, X, y, k, method="inertia", **kw),
                  static_argnames=("enclosure_rtol",))
    default, explicit, tighter = (run(th, X, y, KEY, **kw) for kw in ({}, dict(enclosure_rtol=1e-10),
                                                                       dict(enclosure_rtol=1e-11)))
    for k, v in _computed(default).items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(getattr(explicit, k)), err_msg=k)
    for end in ("min", "max"):
        width = lambda r: float(getattr(r, f"lambda_{end}_hi") - getattr(r, f"lambda_{end}_lo")) / \
            abs(float(getattr(r, f"lambda_{end}")))  # noqa: E731
        assert width(tighter) <= 1e-11 < width(default) <= 1e-10, end


BAD_OPTIONS = [
    (dict(operator="hpv"), "operator must be 'structured' or 'hvp', got 'hpv'"),
    (dict(ends="max"), "ends must be 'both' or 'min', got 'max'"),
    (dict(num_steps=0), "num_steps must be an integer >= 1, got 0"),
    (dict(num_steps=2.5), "num_steps must be an integer >= 1, got 2.5"),
    (dict(max_cycles=-1), "max_cycles must be an integer >= 1, got -1"),
    (dict(rtol=-1.0), "rtol must be a finite number > 0, got -1.0"),
    (dict(enclosure_rtol=float("nan")), "enclosure_rtol must be a finite number >= 0, got nan"),
    (dict(enclosure_rtol=-0.1), "enclosure_rtol must be a finite number >= 0, got -0.1"),
    (dict(tol=1e-3), "unknown option 'tol' (the solver's options: num_steps, max_cycles, rtol, operator, "
                     "enclosure_rtol, ends)"),
]


@pytest.mark.parametrize("opt, msg", BAD_OPTIONS, ids=[m.split(" ")[0] for _, m in BAD_OPTIONS])
@pytest.mark.parametrize("fn", [hessian_extremes, lambda_min, lambda_min_enclosure])
def test_a_bad_solver_option_is_refused_by_name_before_any_work(case0, fn, opt, msg):
    """Every solver option is checked at the door, on every route (a typo in ``operator`` used
    to run the other operator; ``num_steps=0`` raised from inside Lanczos; a NaN
    ``enclosure_rtol`` ended the certified search at once and reported the midpoint of its wide
    bracket as λ_min)."""
    th, X, y = case0
    for method in ("auto", "lanczos"):
        with pytest.raises(InputError) as e:
            fn(th, X, y, method, **opt)
        assert str(e.value) == f"{fn.__name__}: {msg}"


@pytest.mark.slow
def test_the_smallest_valid_solver_options_run(case0):
    """The bounds are the solver's own: one Lanczos step and one cycle on the hvp operator, with a
    zero enclosure width (as tight as rounding allows), still give a certified λ_min that
    brackets numpy's."""
    th, X, y = case0
    want = np.linalg.eigvalsh(np.asarray(structured_parts(th, X, y).dense()))[0]
    got = hessian_extremes(th, X, y, "lanczos", num_steps=1, max_cycles=1, operator="hvp", enclosure_rtol=0.0)
    assert got.eig_certified and not got.eig_converged
    assert got.lambda_min_lo <= want + 1e-12 * abs(want) and want - 1e-12 * abs(want) <= got.lambda_min_hi
