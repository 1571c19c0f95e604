"""mhajax.spectrum: λ_min/λ_max of ∇²L̂ by dense and Lanczos routes, and the certified
bounds lambda_min_block <= λ_min, lambda_max_upper >= λ_max (SPEC §3, §7).

Truth: numpy eigvalsh of jax.hessian of the independent reference L̂."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import D, H, N, T, flat, make_refs, per_regime, weight_rtol
from mhajax.curvature import AUTO_DENSE_MAX, resolve_method, structured_parts
from mhajax.errors import InputError
from mhajax.model import MHAParams
from mhajax.spectrum import certificates, extremes, hessian_extremes

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
    return {k: float(v) for k, v in d.items()}


@per_regime(regimes=REGIMES)
def test_dense_route_and_certificates(case):
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    r = _f(ext_dense(th, X, y, KEY))
    tiny = rnd * nA
    assert abs(r["lambda_min"] - ev[0]) <= REL * abs(ev[0]) + tiny
    assert abs(r["lambda_max"] - ev[-1]) <= REL * abs(ev[-1]) + tiny
    assert r["residual_min"] <= 1e-12 * nA and r["residual_max"] <= 1e-12 * nA
    assert r["eig_converged"] == 1.0
    # certified bounds, whatever the solver did
    assert r["lambda_min_block"] <= ev[0] + tiny
    assert r["lambda_max_upper"] >= ev[-1] - tiny


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


@per_regime(regimes=REGIMES)
def test_lanczos_against_dense(case):
    """Structured-operator Lanczos with restarts (16-vector basis, P = 56): λ_min/λ_max to
    1e-8 relative, one-sided Ritz values, residuals within tolerance and consistent with
    the distance to the true spectrum."""
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    r = _f(ext_lanczos(th, X, y, KEY))
    tiny = rnd * nA
    assert r["eig_converged"] == 1.0
    assert r["residual_min"] <= r["eig_tol"] and r["residual_max"] <= r["eig_tol"]
    assert r["eig_tol"] == pytest.approx(1e-10 * max(abs(r["lambda_min"]), abs(r["lambda_max"])))
    assert r["lambda_min"] >= ev[0] - tiny           # a Ritz λ_min is an upper estimate
    assert r["lambda_max"] <= ev[-1] + tiny          # a Ritz λ_max is a lower estimate
    assert abs(r["lambda_min"] - ev[0]) <= REL * abs(ev[0]) + tiny
    assert abs(r["lambda_max"] - ev[-1]) <= REL * abs(ev[-1]) + tiny
    assert np.min(np.abs(ev - r["lambda_min"])) <= r["residual_min"] + tiny
    assert r["lambda_min_block"] <= ev[0] + tiny and r["lambda_max_upper"] >= ev[-1] - tiny
    assert r["num_matvecs"] > 0


@per_regime(regimes=("generic", "small_loss"), examples=3)
def test_lanczos_on_the_hvp_operator(case):
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    r = _f(ext_lanczos_hvp(th, X, y, KEY))
    assert r["eig_converged"] == 1.0
    assert r["lambda_min"] >= ev[0] - rnd * nA and r["lambda_max"] <= ev[-1] + rnd * nA
    assert abs(r["lambda_min"] - ev[0]) <= REL * abs(ev[0]) + rnd * nA
    assert abs(r["lambda_max"] - ev[-1]) <= REL * abs(ev[-1]) + rnd * nA


@per_regime(regimes=("generic", "large_w"), examples=4)
def test_block_method_reports_only_the_certificate(case):
    th, X, y, _ = case
    ev, nA, rnd = _truth(th, X, y)
    r = _f(ext_block(th, X, y, KEY))
    assert math.isnan(r["lambda_min"]) and math.isnan(r["lambda_max"])
    assert r["eig_converged"] == 0.0
    assert r["lambda_min_block"] <= ev[0] + rnd * nA


def test_resolve_method():
    assert resolve_method("auto", AUTO_DENSE_MAX) == "dense"
    assert resolve_method("auto", AUTO_DENSE_MAX + 1) == "lanczos"
    for m in ("dense", "block", "lanczos"):
        assert resolve_method(m, 10) == m
    with pytest.raises(InputError, match="'eig'"):
        resolve_method("eig", 10)


@pytest.fixture(scope="module")
def case0():
    rng = np.random.default_rng(11)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))),
                   jnp.asarray(3.0 * rng.standard_normal((H, D, D))))
    X = jnp.asarray(rng.standard_normal((N, T, D)))
    y = jnp.asarray(np.array([1.0, -1.0] * (N // 2)))
    return th, X, y


def test_hessian_extremes_api(case0):
    th, X, y = case0
    ev, nA, _ = _truth(th, X, y)
    res = hessian_extremes(th, X, y)                   # auto -> dense at P = 56
    assert res["method"] == "dense" and res["P"] == P
    assert all(isinstance(res[k], float) for k in ("lambda_min", "lambda_max", "lambda_min_block",
                                                     "lambda_max_upper", "residual_min"))
    assert abs(res["lambda_min"] - ev[0]) <= REL * abs(ev[0])
    assert abs(res["lambda_max"] - ev[-1]) <= REL * abs(ev[-1])
    Xbad = np.asarray(X).copy()
    Xbad[0, 0, 0] = np.inf
    with pytest.raises(InputError, match="non-finite"):
        hessian_extremes(th, jnp.asarray(Xbad), y)
    with pytest.raises(InputError, match="method"):
        hessian_extremes(th, X, y, method="qr")
