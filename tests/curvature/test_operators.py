"""mhajax.curvature: every route to ∇²L̂ against the others, against an independent
jax.hessian of the reference model, and against central finite differences (docs/theory.md §3)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import (D, EPS, H, N, T, flat, make_refs, opnorm_sym, per_regime, problems,
                     sigmoid_np, weight_rtol)
from mhajax.curvature.operators import (assemble_hessian, block_lambda_min, dense_hessian, flat_risk,
                                        head_blocks, hvp, linearized_hvp, per_sample_head_hessian_norms,
                                        per_sample_jacobian, structured_parts)
from mhajax.curvature.spectrum import lambda_min
from mhajax.errors import InputError
from mhajax.losses import empirical_risk
from mhajax.models.base import MHAParams, ravel_heads, unravel_heads

REFS = make_refs(H, T, D)
P_H = T * D + D * D
P = H * P_H
# Identities are checked where L̂ is far from underflow; near underflow see test_bounds/test_chain.
REGIMES = ("generic", "large_w", "tiny_data", "large_u", "small_loss")

dense = jax.jit(dense_hessian, static_argnames=("chunk_size",))
assembled = jax.jit(assemble_hessian)
parts = jax.jit(structured_parts)
blocks = jax.jit(head_blocks)
jacobian = jax.jit(per_sample_jacobian)
norms = jax.jit(per_sample_head_hessian_norms)


def _unflat(th, v):
    Z, unravel_head = ravel_heads(th)
    return unravel_heads(v.reshape(Z.shape), unravel_head)


@jax.jit
def all_hvps(th, X, y, v):
    """∇²L̂ v by jvp-of-grad (pytree), by linearize (flat), by the G + B factors."""
    S = structured_parts(th, X, y)
    tree = hvp(th, X, y, _unflat(th, v))
    tree_flat = ravel_heads(tree)[0].reshape(-1)
    return tree_flat, linearized_hvp(th, X, y)(v), S.matvec(v)


def _term_scale(th, X, y):
    """Σ of the magnitudes of the summands of ∇²L̂ (rounding is relative to this):
    (1/n) Σ_i (ℓ''_i ||∇Φ_i||² + |ℓ'_i| max_h ||∇²f_ih|| / √H)."""
    z = flat(th)
    m = np.asarray(y) * np.asarray(REFS["phi"](z, X))
    J = np.asarray(REFS["jac"](z, X))
    F = opnorm_sym(REFS["head_hess"](z, X)).max(1)
    d1, d2 = sigmoid_np(-m), sigmoid_np(m) * sigmoid_np(-m)
    return float(np.mean(d2 * np.sum(J**2, 1) + d1 * F / math.sqrt(H)))


@per_regime(regimes=REGIMES)
def test_hessian_routes_agree_with_independent_reference(case):
    """jax.hessian of the reference L̂ = dense_hessian (any chunking) = assemble_hessian
    = StructuredHessian.dense(), to rounding relative to the size of the summands."""
    th, X, y, _ = case
    ref = np.asarray(REFS["hess"](flat(th), X, y))
    tol = (1e-10 + weight_rtol(th, X)) * _term_scale(th, X, y)
    for A in (dense(th, X, y), dense(th, X, y, chunk_size=1), dense(th, X, y, chunk_size=4),
              assembled(th, X, y), parts(th, X, y).dense()):
        A = np.asarray(A)
        assert A.shape == (P, P)
        assert np.abs(A - ref).max() <= tol
        np.testing.assert_array_equal(A, A.T)          # symmetrized


@per_regime(regimes=REGIMES)
def test_hvp_routes_agree(case):
    """hvp (jvp of grad) = linearized_hvp = StructuredHessian.matvec = H_ref @ v."""
    th, X, y, _ = case
    ref = np.asarray(REFS["hess"](flat(th), X, y))
    rng = np.random.default_rng(1)
    v = rng.standard_normal(P)
    a, b, c = (np.asarray(o) for o in all_hvps(th, X, y, jnp.asarray(v)))
    tol = (1e-10 + weight_rtol(th, X)) * _term_scale(th, X, y) * np.linalg.norm(v)
    for out in (a, b, c):
        assert np.linalg.norm(out - ref @ v) <= tol


# ---------------------------------------------------------------------------
# central finite differences (float64)
# ---------------------------------------------------------------------------

@jax.jit
def _fd_pieces(th, X, y, V, h):
    """Central differences along the rows of V [m, P] of L̂ (steps h, h/2) and of ∇L̂
    (steps h, h/2, h/4)."""
    risk, z0 = flat_risk(th, X, y)
    grad = jax.grad(risk)

    def cd(f, hh):
        return jax.vmap(lambda v: (f(z0 + hh * v) - f(z0 - hh * v)) / (2 * hh))(V)

    return (cd(risk, h), cd(risk, h / 2), cd(grad, h), cd(grad, h / 2), cd(grad, h / 4), grad(z0),
            jax.vmap(lambda v: jax.jvp(grad, (z0,), (v,))[1])(V))


@settings(max_examples=10)
@given(problems(regimes=("generic",)))
def test_gradient_and_hvp_against_central_differences(case):
    """Directional derivatives of L̂ and of ∇L̂ by central differences. The truncation
    error of D(h) is c·h², so |D(h) − D(h/2)| · 4/3 estimates it; the rounding error is
    ~eps·|f|/h. The autodiff value must lie within (a few times) that error estimate.
    For ∇L̂ the Richardson values R(h) = (4D(h/2) − D(h))/3 (error O(h⁴)) are compared,
    with |R(h) − R(h/2)| as the truncation estimate: plain D(h/2) was too coarse to see
    a 1e-6 relative HVP error where third derivatives are large (found by hypothesis)."""
    th, X, y, _ = case
    rng = np.random.default_rng(2)
    V = rng.standard_normal((8, P))
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    h = 1e-4
    d_h, d_h2, g_h, g_h2, g_h4, grad, hv = (np.asarray(a) for a in
                                            _fd_pieces(th, X, y, jnp.asarray(V), h))
    L = float(empirical_risk(th, X, y))
    dir_grad = V @ grad
    trunc = 4 / 3 * np.abs(d_h - d_h2)
    rnd = EPS * (abs(L) + 1) / (h / 2)
    assert np.all(np.abs(d_h2 - dir_grad) <= 4 * trunc + 10 * rnd)
    gscale = np.linalg.norm(grad) + 1
    r_h, r_h2 = (4 * g_h2 - g_h) / 3, (4 * g_h4 - g_h2) / 3
    trunc_v = np.linalg.norm(r_h - r_h2, axis=1)
    rnd_v = 10 * (5 / 3) * EPS * gscale / (h / 4) * math.sqrt(P)
    assert np.all(np.linalg.norm(r_h2 - hv, axis=1) <= 4 * trunc_v + rnd_v)
    # and the check has teeth: a 1e-6 relative error in the HVP would be seen
    assert np.all(4 * trunc_v + rnd_v < 1e-6 * np.linalg.norm(hv, axis=1))


# ---------------------------------------------------------------------------
# block structure
# ---------------------------------------------------------------------------

def _data_term(z, X, c):
    """(1/n) Σ_i c_i ∇²Φ(θ; X_i) with c fixed: the data term of ∇²L̂ when c = y ℓ'."""
    from helpers import ref_phi
    return jax.hessian(lambda v: jnp.mean(c * jax.vmap(lambda x: ref_phi(v, x, H, T, D))(X)))(z)


data_term = jax.jit(_data_term)


@per_regime(regimes=REGIMES)
def test_zero_off_diagonal_head_blocks_and_head_blocks(case):
    """The data term (1/n) Σ y_i ℓ'_i ∇²Φ_i has exactly zero blocks between heads (per-head
    layout of ravel_heads); head_blocks(...) equals its diagonal blocks, and equals the
    diagonal blocks of dense_hessian − Jᵀ diag(ℓ''/n) J."""
    th, X, y, _ = case
    z = flat(th)
    m = np.asarray(y) * np.asarray(REFS["phi"](z, X))
    c = np.asarray(y) * (-sigmoid_np(-m))
    Bfull = np.asarray(data_term(z, X, jnp.asarray(c))).reshape(H, P_H, H, P_H)
    for g in range(H):
        for h in range(H):
            if g != h:
                assert np.all(Bfull[g, :, h, :] == 0.0)
    B = np.asarray(blocks(th, X, y))
    assert B.shape == (H, P_H, P_H)
    scale = (1e-10 + weight_rtol(th, X)) * _term_scale(th, X, y)
    for h in range(H):
        assert np.abs(B[h] - Bfull[h, :, h, :]).max() <= scale
    S = parts(th, X, y)
    J = np.asarray(S.J)
    w = np.asarray(S.w)
    # ℓ'' ~ e^{-|m|}: a rounding error δm in the margin is a relative error δm in ℓ'' (weight_rtol)
    np.testing.assert_allclose(w, sigmoid_np(m) * sigmoid_np(-m) / N, rtol=1e-12 + weight_rtol(th, X),
                               atol=2 * np.finfo(np.float64).tiny)     # XLA flushes subnormals
    rest = (np.asarray(dense(th, X, y)) - (J.T * w) @ J).reshape(H, P_H, H, P_H)
    for g in range(H):
        for h in range(H):
            target = B[h] if g == h else 0.0
            assert np.abs(rest[g, :, h, :] - target).max() <= scale


@per_regime(regimes=REGIMES)
def test_per_sample_jacobian(case):
    th, X, y, _ = case
    J = np.asarray(jacobian(th, X))
    ref = np.asarray(REFS["jac"](flat(th), X))
    assert J.shape == (N, P)
    R = np.linalg.norm(np.asarray(X), axis=-1).max()
    b2 = math.sqrt(T * R**2 + R**6 * np.sum(np.linalg.norm(np.asarray(th.U), axis=-1).sum(-1) ** 2) / H)
    assert np.abs(J - ref).max() <= 1e-12 * b2


def _beta3(th, X):
    Ri = np.linalg.norm(np.asarray(X), axis=-1).max(-1)[:, None]
    l21 = np.linalg.norm(np.asarray(th.U), axis=-1).sum(-1)[None, :]
    return Ri**3 * math.sqrt(T) + 2 * Ri**5 * l21


@per_regime(regimes=REGIMES + ("near_underflow",))
def test_per_sample_head_hessian_norms_are_exact(case):
    """||∇²_{θ_h} f(θ_h; X_i)||_op for every (i, h) equals numpy's norm of jax.hessian of the
    reference head, to rounding relative to β₃ (the scale of the Hessian's entries)."""
    th, X, y, _ = case
    got = np.asarray(norms(th, X))
    ref = opnorm_sym(REFS["head_hess"](flat(th), X))
    assert got.shape == (N, H)
    assert np.all(np.abs(got - ref) <= 1e-12 * ref + 1e-12 * _beta3(th, X))


@settings(max_examples=10)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.0, 1e-12, 1e-9, 1e-6]), st.floats(0.0, 3.0))
def test_per_sample_head_hessian_norms_with_nearly_collinear_tokens(seed, gap, sw):
    """Nearly repeated tokens (x_1 = x_0 + gap·noise, as when two tokens come from the same
    mixture cluster with small σ) make the token Gram matrix nearly singular; the norms must
    stay exact (docs/theory.md §7: an underestimate could break κ_blk <= κ_mid)."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((H, T, D))
    W = sw * rng.standard_normal((H, D, D))
    X = rng.standard_normal((N, T, D))
    X[:, 1] = X[:, 0] + gap * rng.standard_normal((N, D))
    th = MHAParams(jnp.asarray(U), jnp.asarray(W))
    got = np.asarray(norms(th, jnp.asarray(X)))
    ref = opnorm_sym(REFS["head_hess"](flat(th), jnp.asarray(X)))
    assert np.all(np.abs(got - ref) <= 1e-12 * ref + 1e-12 * _beta3(th, X))


@pytest.mark.parametrize("batch_size", [1, 2, 3, 4, N + 5])
def test_per_sample_head_hessian_norms_in_chunks_with_a_padded_last_one(batch_size):
    """Any ``batch_size`` (dividing n or not, above n) gives the norms of one sample at a time:
    equal chunks, the last padded with a repeated sample that is dropped. Equal to 64 eps
    relative: the matrices are built under ``vmap`` of another width, and XLA's vectorized
    code differs from the scalar one in the last bits (a mixed-up or padded sample differs
    at the first digits)."""
    rng = np.random.default_rng(batch_size)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))), jnp.asarray(rng.standard_normal((H, D, D))))
    X = jnp.asarray(rng.standard_normal((N, T, D)))
    one = np.stack([np.asarray(norms(th, X[i:i + 1]))[0] for i in range(X.shape[0])])
    got = np.asarray(jax.jit(lambda th, X: per_sample_head_hessian_norms(th, X, batch_size=batch_size))(th, X))
    assert got.shape == one.shape
    np.testing.assert_allclose(got, one, rtol=64 * EPS, atol=0)


@pytest.mark.parametrize("entries", [1, 3, 4])
def test_the_default_chunk_size_follows_the_entry_budget(entries, monkeypatch):
    """The default ``batch_size``: ``NORMS_ENTRIES // (H·m²)`` samples (m = 2T², the
    reduced matrices), at least one. A budget of 1, 3 and 4 samples' worth of entries on 7
    samples (7 chunks of 1; 3 of 3, the last padded by 2; 2 of 4, padded by 1) gives the norms
    of one sample at a time (to 64 eps, as above)."""
    from mhajax.curvature import operators
    rng = np.random.default_rng(entries)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))), jnp.asarray(rng.standard_normal((H, D, D))))
    X = jnp.asarray(rng.standard_normal((7, T, D)))
    one = np.stack([np.asarray(norms(th, X[i:i + 1]))[0] for i in range(7)])
    m = 2 * T * T
    monkeypatch.setattr(operators, "NORMS_ENTRIES", entries * H * m * m)
    got = np.asarray(jax.jit(lambda th, X: per_sample_head_hessian_norms(th, X))(th, X))
    np.testing.assert_allclose(got, one, rtol=64 * EPS, atol=0)


def test_norms_batch_rule():
    """``max(1, min(n, 2·10⁷ // (H·q²)))`` samples per chunk."""
    from mhajax.curvature.operators import NORMS_ENTRIES, norms_batch
    assert NORMS_ENTRIES == 20_000_000
    assert norms_batch(64, 16, 72) == 64 and norms_batch(300, 16, 72) == 241 and norms_batch(64, 256, 112) == 6
    assert norms_batch(5, 10 ** 6, 112) == 1 and norms_batch(1, 1, 1) == 1


# ---------------------------------------------------------------------------
# lambda_min
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lm_case():
    """Saturated-ish softmax (W entries up to 15) and random labels."""
    rng = np.random.default_rng(7)
    U = rng.standard_normal((H, T, D))
    W = rng.uniform(-15.0, 15.0, (H, D, D))
    X = rng.standard_normal((N, T, D))
    y = np.array([1.0, -1.0] * (N // 2))
    return MHAParams(jnp.asarray(U), jnp.asarray(W)), jnp.asarray(X), jnp.asarray(y)


def test_lambda_min_methods_against_numpy(lm_case):
    """The public API: "auto" and "dense" agree with numpy eigvalsh of the independent
    Hessian to 1e-8 relative (P = 56: dense is feasible); "block" is a lower bound.
    (Hypothesis-driven comparisons of the same routes are in test_spectrum.py.)"""
    th, X, y = lm_case
    ev = np.linalg.eigvalsh(np.asarray(REFS["hess"](flat(th), X, y)))
    lam = ev[0]
    assert lam < 0
    for method in ("auto", "dense"):
        got = lambda_min(th, X, y, method=method)
        assert isinstance(got, float)
        assert abs(got - lam) <= 1e-8 * abs(lam)
    blk = lambda_min(th, X, y, method="block")
    assert blk <= lam + 1e-12 * max(abs(ev[0]), abs(ev[-1]))


def test_block_lambda_min_against_dense_eigvalsh_of_the_blocks(lm_case):
    """block_lambda_min(B) = min_h λ_min(B_h): on blocks with literal spectra (the minimum in
    a middle head, every head's spectrum mixed by a random rotation), and on the real
    B = head_blocks(θ) against numpy's eigvalsh of each block and of the independent Hessian
    (of which it is a certified lower bound, docs/theory.md §3)."""
    rng = np.random.default_rng(11)
    spectra = np.array([[0.5, 1.0, 2.0, 3.0, 4.0],
                        [7.0, 0.2, -0.25, 0.0, 0.1],       # the smallest: −0.25, in head 1
                        [-0.125, 1.0, -0.2, 1.0, -9e-2]])
    B = np.stack([q @ np.diag(e) @ q.T for q, e in
                  zip((np.linalg.qr(rng.standard_normal((5, 5)))[0] for _ in spectra), spectra)])
    B = 0.5 * (B + np.swapaxes(B, 1, 2))
    assert float(block_lambda_min(jnp.asarray(B))) == pytest.approx(-0.25, abs=1e-14)
    assert float(block_lambda_min(jnp.asarray(B[[0, 2]]))) == pytest.approx(-0.2, abs=1e-14)
    assert float(block_lambda_min(jnp.asarray(B[:1]))) == pytest.approx(0.5, abs=1e-14)
    th, X, y = lm_case
    Bl = np.asarray(blocks(th, X, y))
    truth = min(np.linalg.eigvalsh(Bl[h])[0] for h in range(H))
    got = float(block_lambda_min(jnp.asarray(Bl)))
    assert truth < 0 and abs(got - truth) <= 1e-12 * np.abs(Bl).max()
    ev = np.linalg.eigvalsh(np.asarray(REFS["hess"](flat(th), X, y)))
    assert got <= ev[0] + 1e-12 * max(abs(ev[0]), abs(ev[-1]))


def test_lambda_min_rejects_bad_input(lm_case):
    th, X, y = lm_case
    with pytest.raises(InputError, match="method"):
        lambda_min(th, X, y, method="svd")
    Xbad = np.asarray(X).copy()
    Xbad[1, 2, 3] = np.nan
    with pytest.raises(InputError, match="non-finite"):
        lambda_min(th, jnp.asarray(Xbad), y)
    with pytest.raises(InputError, match="labels"):
        lambda_min(th, X, jnp.asarray(np.where(np.asarray(y) > 0, 1.0, 0.0)))
    with pytest.raises(InputError, match="tokens"):
        lambda_min(th, X[:, :2], y)


@per_regime(regimes=("generic", "large_w"), examples=3)
def test_head_batches_change_nothing(case):
    """weighted_head_hessians mapped one head at a time (lax.map, the memory-bounded path
    taken at accelerator scale) equals the all-heads vmap up to rounding;
    head_batch_size keeps a batch under its entry budget and takes all heads when they fit."""
    from mhajax.curvature.operators import head_batch_size
    th, X, y, _ = case
    c = jnp.asarray(np.linspace(-1.0, 1.0, N))
    one = np.asarray(_whh(th, X, c, 1))
    every = np.asarray(_whh(th, X, c, H))
    np.testing.assert_allclose(one, every, rtol=1e-13, atol=1e-13 * np.abs(every).max())
    # 5 heads in batches of 2 (a remainder batch of 1) against all 5 at once
    from mhajax.bench.timing import problem
    th5, X5, _ = problem(5, T, D, N)
    np.testing.assert_allclose(np.asarray(_whh(th5, X5, c, 2)), np.asarray(_whh(th5, X5, c, 5)),
                               rtol=1e-13, atol=1e-13)
    assert head_batch_size(H, N, T, P_H) == H        # tiny heads: all at once, on any backend
    n, T_, p = 1024, 16, 16 * 32 + 32 * 32
    bs = head_batch_size(256, n, T_, p, budget=2 ** 28)
    assert 1 <= bs < 256 and bs * (n * T_ * p + p * p) <= 2 ** 28 < (bs + 1) * (n * T_ * p + p * p)


def _whh_impl(th, X, c, bs):
    from mhajax.curvature.operators import weighted_head_hessians
    return weighted_head_hessians(th, X, c, batch_size=bs)


_whh = jax.jit(_whh_impl, static_argnums=3)


# ---------------------------------------------------------------------------
# per-sample head Hessians, and the norms' p x p route (p <= 2T²)
# ---------------------------------------------------------------------------

def test_per_sample_head_hessians_equal_the_reference():
    """``[n, H, p, p]`` = jax.hessian of the reference head (tests/helpers.py) per sample and
    head, in the per-head layout [vec U_h, vec W_h]."""
    from mhajax.curvature.operators import per_sample_head_hessians
    rng = np.random.default_rng(11)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))), jnp.asarray(rng.standard_normal((H, D, D))))
    X = jnp.asarray(rng.standard_normal((N, T, D)))
    got = np.asarray(jax.jit(per_sample_head_hessians)(th, X))
    ref = np.asarray(REFS["head_hess"](flat(th), X))
    assert got.shape == (N, H, P_H, P_H)
    assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()


@pytest.mark.parametrize("how", ["small_p", "no_reduced_hessian"])
def test_per_sample_head_hessian_norms_on_the_p_by_p_route(how):
    """T = 4, d = 2: p = 12 <= 2T² = 32, so the norms come from the p x p Hessians (the
    reduced 2T² x 2T² matrices are larger); a model without ``reduced_hessian`` takes that
    route at any size. Both equal numpy's norms of the reference head's jax.hessian."""
    from mhajax.models.softmax import SOFTMAX
    Tt, Dd = (4, 2) if how == "small_p" else (T, D)
    model = SOFTMAX if how == "small_p" else SOFTMAX._replace(name="softmax-no-reduced", reduced_hessian=None)
    rng = np.random.default_rng(12)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, Tt, Dd))), jnp.asarray(rng.standard_normal((H, Dd, Dd))))
    X = jnp.asarray(rng.standard_normal((N, Tt, Dd)))
    got = np.asarray(jax.jit(lambda th, X: per_sample_head_hessian_norms(th, X, model))(th, X))
    ref = opnorm_sym(make_refs(H, Tt, Dd)["head_hess"](flat(th), X))
    assert got.shape == (N, H)
    assert np.all(np.abs(got - ref) <= 1e-12 * ref.max())


@pytest.mark.parametrize("which", ["exponential_loss", "linear_model"])
def test_every_route_uses_the_given_model_and_loss(which):
    """A loss other than the default (exponential: ℓ(m) = exp(−m)) and a model other than
    the default (the linear head): hvp, linearized_hvp, the G + B factors, the assembled and
    the dense Hessian all equal jax.hessian of that risk. For the softmax model with the
    exponential loss the risk is the reference model's (tests/helpers.py); for the linear head
    it is ℓ of mhajax's own Φ, flattened here with numpy's layout."""
    from mhajax.losses import EXPONENTIAL, LOGISTIC
    from mhajax.models.base import mha
    from mhajax.models.softmax import SOFTMAX
    from mhajax.models.variants import LINEAR
    model, loss = (SOFTMAX, EXPONENTIAL) if which == "exponential_loss" else (LINEAR, LOGISTIC)
    rng = np.random.default_rng(13)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))), jnp.asarray(0.5 * rng.standard_normal((H, D, D))))
    X = jnp.asarray(0.7 * rng.standard_normal((N, T, D)))
    y = jnp.asarray(np.array([1.0, -1.0] * (N // 2)))
    v = jnp.asarray(rng.standard_normal(P))
    if which == "exponential_loss":
        risk = lambda z: jnp.mean(jnp.exp(-y * REFS["phi"](z, X)))  # noqa: E731
    else:
        risk = lambda z: jnp.mean(jnp.logaddexp(0.0, -y * mha(_unflat(th, z), X, LINEAR)))  # noqa: E731
    ref = np.asarray(jax.hessian(risk)(jnp.asarray(flat(th))))
    tol = 1e-11 * np.abs(ref).max()

    @jax.jit
    def routes(th, X, y, v):
        S = structured_parts(th, X, y, model, loss)
        return (ravel_heads(hvp(th, X, y, _unflat(th, v), model, loss))[0].reshape(-1),
                linearized_hvp(th, X, y, model, loss)(v), S.matvec(v),
                assemble_hessian(th, X, y, model, loss), dense_hessian(th, X, y, model, loss))

    *prods, A, Dn = (np.asarray(o) for o in routes(th, X, y, v))
    for w in prods:
        assert np.abs(w - ref @ np.asarray(v)).max() <= tol * np.abs(np.asarray(v)).sum()
    assert np.abs(A - ref).max() <= tol and np.abs(Dn - ref).max() <= tol


def test_structured_hessian_dense_and_matvec_in_numpy_float32_too():
    """``StructuredHessian(J, w, B)``: ``matvec`` is (Jᵀ diag(w) J + blockdiag(B)) v and
    ``dense()`` that matrix symmetrized, both assembled here in numpy with explicit block
    slices; float32 factors give a float32 matrix."""
    from mhajax.curvature.operators import StructuredHessian
    rng = np.random.default_rng(14)
    n, Hh, p = 5, 3, 4
    J, w, B = rng.standard_normal((n, Hh * p)), rng.random(n), rng.standard_normal((Hh, p, p))
    full = (J.T * w) @ J
    for h in range(Hh):
        full[h * p:(h + 1) * p, h * p:(h + 1) * p] += B[h]
    v = rng.standard_normal(Hh * p)
    for dt, tol in ((jnp.float64, 1e-13), (jnp.float32, 1e-5)):
        S = StructuredHessian(jnp.asarray(J, dt), jnp.asarray(w, dt), jnp.asarray(B, dt))
        A = S.dense()
        assert A.dtype == dt
        assert np.abs(np.asarray(A) - 0.5 * (full + full.T)).max() <= tol * np.abs(full).max()
        assert np.abs(np.asarray(S.matvec(jnp.asarray(v, dt))) - full @ v).max() <= tol * np.abs(full).sum()


def test_dense_hessian_and_structured_parts_guard_their_sizes(monkeypatch):
    """Both public entries ask the memory guard once about the shapes of their own arguments
    (H, n, T, d; b from X's dtype), with the bytes of what they return as terms (∇²L̂; J and B),
    and pass ``force`` on; the plain functions ask nothing. The guard is a recorder; only shapes
    are traced (jax.eval_shape)."""
    from mhajax import api
    from mhajax.runtime import memory as mem
    from mhajax.models.variants import LINEAR
    calls = []
    monkeypatch.setattr(mem, "guard", lambda est, sizes, ref, *, force=False, api=False, budget=None:
                        calls.append((est(sizes), sizes, force)))
    rng = np.random.default_rng(15)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))), jnp.asarray(rng.standard_normal((H, D, D))))
    X = jnp.asarray(rng.standard_normal((N, T, D)), jnp.float32)
    y = jnp.asarray(np.array([1.0, -1.0] * (N // 2)), jnp.float32)
    sizes = dict(H=H, n=N, T=T, d=D)
    for fn, plain, what in ((api.dense_hessian, dense_hessian, "dense_hessian"),
                            (api.structured_parts, structured_parts, "structured_parts")):
        for force in (None, False, True):   # None: the default, which is False
            calls.clear()
            kw = {} if force is None else dict(force=force)
            out = jax.eval_shape(lambda th, X, y: fn(th, X, y, LINEAR, **kw), th, X, y)
            assert [(c[0].what, c[0].itemsize, c[1], c[2]) for c in calls] == [(what, 4, sizes, bool(force))]
            assert calls[0][2] is bool(force)
            returned = [out] if what == "dense_hessian" else [out.J, out.B]
            assert calls[0][0].nbytes == sum(a.size * 4 for a in returned)
            if what == "dense_hessian":   # the term is named as the refusal prints it
                assert [name for name, _ in calls[0][0].terms] == ["∇²L̂ [P, P]"]
        calls.clear()
        assert jax.eval_shape(lambda th, X, y: plain(th, X, y, LINEAR), th, X, y) == out and calls == []




def test_dense_hessian_of_float32_inputs_is_float32():
    """float32 θ, X, y give a float32 [P, P] Hessian (shapes only, jax.eval_shape)."""
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    rng = np.random.default_rng(16)
    th = MHAParams(f32(rng.standard_normal((H, T, D))), f32(rng.standard_normal((H, D, D))))
    X, y = f32(rng.standard_normal((N, T, D))), f32(np.array([1.0, -1.0] * (N // 2)))
    out = jax.eval_shape(lambda th, X, y: dense_hessian(th, X, y, chunk_size=4), th, X, y)
    assert out.shape == (P, P) and out.dtype == jnp.float32


@pytest.mark.parametrize("batch_size", [None, 1])
def test_weighted_head_hessians_without_a_closed_form_use_autodiff(batch_size):
    """A model without ``weighted_hessian`` gets Σ_i c_i ∇²_{θ_h} f(θ_h; X_i) from jax.hessian:
    equal to the same sum of the reference head's Hessians (tests/helpers.py), all heads at
    once or one at a time."""
    from mhajax.curvature.operators import weighted_head_hessians
    from mhajax.models.softmax import SOFTMAX
    model = SOFTMAX._replace(name="softmax-autodiff", weighted_hessian=None, reduced_hessian=None)
    rng = np.random.default_rng(17)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))), jnp.asarray(rng.standard_normal((H, D, D))))
    X = jnp.asarray(rng.standard_normal((N, T, D)))
    c = jnp.asarray(rng.standard_normal(N))
    got = np.asarray(jax.jit(lambda th, X, c: weighted_head_hessians(th, X, c, model, batch_size))(th, X, c))
    ref = np.einsum("i,ihab->hab", np.asarray(c), np.asarray(REFS["head_hess"](flat(th), X)))
    assert got.shape == (H, P_H, P_H)
    assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()


def test_per_sample_head_hessians_and_norms_of_the_linear_head():
    """The model passed is the one differentiated: for the linear head the per-sample head
    Hessian's norm is θ-free, ||X_i||_op³ / T (mhajax/models/variants.py), here from numpy's
    SVD, on both routes of the norms (T = 4, d = 2 takes the p x p route) and for the
    per-sample Hessians themselves."""
    from mhajax.curvature.operators import per_sample_head_hessians
    from mhajax.models.variants import LINEAR
    rng = np.random.default_rng(18)
    for Tt, Dd in ((T, D), (4, 2)):
        th = LINEAR.init(jax.random.PRNGKey(18), H, Tt, Dd, w_scale=1.0)
        X = jnp.asarray(rng.standard_normal((N, Tt, Dd)))
        ref = np.linalg.svd(np.asarray(X), compute_uv=False)[:, 0] ** 3 / Tt
        got = np.asarray(jax.jit(lambda th, X: per_sample_head_hessian_norms(th, X, LINEAR))(th, X))
        assert np.abs(got - ref[:, None]).max() <= 1e-12 * ref.max()
        hs = np.asarray(jax.jit(lambda th, X: per_sample_head_hessians(th, X, LINEAR))(th, X))
        assert np.abs(opnorm_sym(hs) - ref[:, None]).max() <= 1e-12 * ref.max()


def _scan_lengths(fn, *args):
    """The lengths of the ``lax.scan`` loops in ``fn``'s jaxpr (the chunks it sums over)."""
    return [e.params["length"] for e in jax.make_jaxpr(fn)(*args).jaxpr.eqns if e.primitive.name == "scan"]


@pytest.mark.slow
def test_chunked_hessian_sums_over_the_chunks_it_is_asked_for():
    """``chunk_size`` c gives ⌈n/c⌉ chunks (the last padded with weight 0), c clipped to
    [1, n]; by default c = max(1, P // (H·T²)). Every chunking gives the same Hessian as
    one chunk. Structure from the jaxpr, values against the unchunked Hessian."""
    from mhajax.curvature.operators import chunked_hessian
    rng = np.random.default_rng(21)
    # T != d; P // (H·T²) = 4 (P = 80), = 0 (P = 12 < 2·H·T² = 32), = 6 at H = T = 1 (P = 6)
    for Hh, Tt, Dd, n, default in ((2, 3, 5, 7, 4), (1, 4, 2, 9, 1), (1, 1, 2, 7, 6)):
        th = MHAParams(jnp.asarray(rng.standard_normal((Hh, Tt, Dd))),
                       jnp.asarray(0.5 * rng.standard_normal((Hh, Dd, Dd))))
        X = jnp.asarray(rng.standard_normal((n, Tt, Dd)))
        y = jnp.asarray(np.where(rng.standard_normal(n) > 0, 1.0, -1.0))
        one = np.asarray(chunked_hessian(th, X, y, chunk_size=n))
        for c in (1, 2, 3, n, 100, 0, None):
            f = lambda th, X, y: chunked_hessian(th, X, y, chunk_size=c)   # noqa: E731
            want = -(-n // max(1, min(n, default if c is None else c)))
            assert _scan_lengths(f, th, X, y) == [want], (Hh, Tt, Dd, c)
            np.testing.assert_allclose(np.asarray(f(th, X, y)), one, rtol=0, atol=1e-13 * np.abs(one).max())
        # dense_hessian passes chunk_size on
        assert _scan_lengths(lambda th, X, y: dense_hessian(th, X, y, chunk_size=2), th, X, y) == [-(-n // 2)]


def test_chunked_hessian_of_float32_inputs_with_padding_stays_float32():
    """float32 θ, X, y with a padded last chunk (n = 5, c = 2): a float32 Hessian, equal to
    the float64 one to float32 rounding."""
    from mhajax.curvature.operators import chunked_hessian
    rng = np.random.default_rng(22)
    th64 = MHAParams(jnp.asarray(rng.standard_normal((2, 3, 4))), jnp.asarray(0.3 * rng.standard_normal((2, 4, 4))))
    X64 = jnp.asarray(rng.standard_normal((5, 3, 4)))
    y64 = jnp.asarray([1.0, -1.0, 1.0, 1.0, -1.0])
    f32 = lambda a: a.astype(jnp.float32)   # noqa: E731
    got = chunked_hessian(jax.tree.map(f32, th64), f32(X64), f32(y64), chunk_size=2)
    assert got.dtype == jnp.float32
    want = np.asarray(chunked_hessian(th64, X64, y64, chunk_size=2))
    np.testing.assert_allclose(np.asarray(got, float), want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.slow
def test_head_hessian_norms_take_the_reduced_matrices_exactly_when_they_are_smaller():
    """``per_sample_head_hessian_norms`` uses the model's ``reduced_hessian`` (2T² × 2T²) iff
    2T² < p = Td + d², else the p × p head Hessians; both routes give the norms of
    ``per_sample_head_hessians`` (numpy's eigvalsh). The route is seen by counting the calls."""
    from mhajax.curvature.operators import per_sample_head_hessian_norms, per_sample_head_hessians
    from mhajax.models.softmax import SOFTMAX
    calls = []

    def counted(theta, x):
        calls.append(x.shape)
        return SOFTMAX.reduced_hessian(theta, x)

    model = SOFTMAX._replace(reduced_hessian=counted)
    rng = np.random.default_rng(23)
    for Tt, Dd, reduced in ((3, 4, True), (4, 5, True), (2, 2, False), (4, 2, False), (3, 2, False)):
        # p = 28 > 18; p = 45 > 32 (and < 3T² = 48); p = 8 = 8 (equality: full); p = 12 < 32; p = 10 < 18
        th = MHAParams(jnp.asarray(rng.standard_normal((2, Tt, Dd))), jnp.asarray(rng.standard_normal((2, Dd, Dd))))
        X = jnp.asarray(rng.standard_normal((3, Tt, Dd)))
        calls.clear()
        got = np.asarray(per_sample_head_hessian_norms(th, X, model))
        assert bool(calls) is reduced, (Tt, Dd)
        hs = np.asarray(per_sample_head_hessians(th, X, SOFTMAX))
        want = np.abs(np.linalg.eigvalsh(hs)).max(axis=-1)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12 * want.max())


def test_per_sample_head_hessians_of_float32_inputs_are_float32():
    """float32 θ and X give float32 head Hessians and norms (shapes only)."""
    from mhajax.curvature.operators import per_sample_head_hessian_norms, per_sample_head_hessians
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    rng = np.random.default_rng(24)
    th = MHAParams(f32(rng.standard_normal((H, T, D))), f32(rng.standard_normal((H, D, D))))
    X = f32(rng.standard_normal((N, T, D)))
    assert jax.eval_shape(per_sample_head_hessians, th, X).dtype == jnp.float32
    assert jax.eval_shape(per_sample_head_hessian_norms, th, X).dtype == jnp.float32


def test_a_chunk_or_batch_size_that_is_no_positive_integer_is_refused(lm_case):
    """``chunk_size`` of the dense Hessian and ``batch_size`` of the per-sample head norms: a
    count >= 1 or ``None`` (0 divided by zero inside the norms)."""
    from mhajax.curvature.operators import dense_hessian, per_sample_head_hessian_norms
    th, X, y = lm_case
    for bad in (0, -2, 1.5):
        with pytest.raises(InputError, match=rf"^chunk_size must be an integer >= 1, got {bad!r}$"):
            dense_hessian(th, X, y, chunk_size=bad)
        with pytest.raises(InputError, match=rf"^batch_size must be an integer >= 1, got {bad!r}$"):
            per_sample_head_hessian_norms(th, X, batch_size=bad)


def test_hvp_refuses_a_direction_that_is_not_finite():
    """A NaN direction returned a NaN product; now one line names hvp and the leaf."""
    from mhajax.curvature.operators import hvp
    from mhajax.errors import InputError
    kx, ku = jax.random.split(jax.random.PRNGKey(0))
    X, y = jax.random.normal(kx, (4, 3, 2)), jnp.array([1.0, -1.0, 1.0, -1.0])
    th = MHAParams(jax.random.normal(ku, (2, 3, 2)), jnp.zeros((2, 2, 2)))
    v = MHAParams(jnp.ones((2, 3, 2)), jnp.zeros((2, 2, 2)).at[1, 0, 1].set(jnp.inf))
    with pytest.raises(InputError, match=r"^hvp: v contains non-finite values \(leaf of shape \(2, 2, 2\)\)$"):
        hvp(th, X, y, v)
