"""Per-head attention variants beyond the paper, each with a derived closed-form κ.

Every entry is a :class:`~mhajax.model.HeadModel`: a pure per-head function
``f(θ_h; X [T, d]) -> scalar`` and its initializer, combined as
``Φ(θ; X) = H^{-1/2} Σ_h f(θ_h; X)``. Heads share no parameters, so the Hessian
of Φ stays block-diagonal over heads and the certified block route of docs/theory.md §3
applies to every model here. What changes from model to model is the closed
form κ(θ) bounding ``max_h ||∇²_{θ_h} f(θ_h; X)||_op`` over every input whose
tokens have norm <= R (derivations: docs/variants.md; ``||·||`` on a matrix
parameter is the Frobenius norm, which bounds the operator norm):

=========  ==========================================  ==================================
name       f(θ_h; X)                                   closed form β₃(θ_h) (κ = max_h β₃)
=========  ==========================================  ==================================
softmax    <U, softmax(X W Xᵀ) X>   (the paper's)      R³√T + 2R⁵||U||_{2,1}
linear     (1/T) <U, (X W Xᵀ) X>                        R³√T  (θ-free; exact norm ||X||³_op/T)
relu       (1/T) <U, relu(X W Xᵀ) X>                    R³√T  (a.e.: where the Hessian exists)
qk         <U, softmax(X W_Q W_Kᵀ Xᵀ) X>               R³√T ρ + 2R⁵ρ²||U||_{2,1} + R³||U||_{2,1},
                                                        ρ² = ||W_Q||² + ||W_K||²  (W-dependent)
value      (1/T) Σ_t a_tᵀ X V u,  a_t = softmax(s_t)   R³√(||u||² + ||V||²) + 2R⁵||Vu|| + R
causal     softmax head, a_t supported on j <= t       R³√(T−1) + 2R⁵ Σ_{t>=2} ||u_t||
cls        uᵀ Xᵀ softmax(s_1)   (first row only)       R³ + 2R⁵||u||
=========  ==========================================  ==================================

Parameters are NamedTuples whose every leaf has the head axis first; the readout
leaf is always called ``U`` (Φ is linear in it), as :mod:`mhajax.testing`'s margin
regimes expect. Every ``init(key, heads, tokens, dim, *, u_scale=1, w_scale=0, dtype=None)``
draws ``U ~ N(0, u_scale²)`` and key-query matrices ``~ N(0, w_scale²/d)``; with the
default ``w_scale = 0`` the attention starts uniform, as in the paper — except that
``relu`` is then at a dead point (``relu(0) = 0`` with zero derivative: GD never leaves
it) and ``linear`` has ``Φ ≡ 0``: use ``w_scale > 0`` for them.

A two-layer model, whose heads *do* share the second layer's input, cannot be a
HeadModel: see :mod:`mhajax.models.two_layer`. Every model here is registered
(:func:`mhajax.models.base.register`); its ``note`` states its closed form.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from mhajax.linalg import eigh
from mhajax.models.base import HeadModel, MHAParams, register
from mhajax.models.softmax.bounds import beta2
from mhajax.validate import positive_float, positive_int


def _l21(U):
    """``Σ_t ||u_t||`` over the last two axes ``[..., T, d]`` -> ``[...]``."""
    return jnp.sum(jnp.linalg.norm(U, axis=-1), axis=-1)


def _fro2(A):
    """Squared Frobenius norm over the last two axes."""
    return jnp.sum(A * A, axis=(-2, -1))


def _normal(key, shape, scale, dtype):
    return scale * jax.random.normal(key, shape, dtype)


def _check_init(heads, tokens, dim, u_scale, w_scale):
    positive_int("heads", heads)
    positive_int("tokens", tokens)
    positive_int("dim", dim)
    positive_float("u_scale", u_scale, allow_zero=True)
    positive_float("w_scale", w_scale, allow_zero=True)


def _init_uw(key, heads, tokens, dim, *, u_scale=1.0, w_scale=0.0, dtype=None) -> MHAParams:
    """``MHAParams(U [H, T, d] ~ N(0, u²), W [H, d, d] ~ N(0, w²/d))``."""
    _check_init(heads, tokens, dim, u_scale, w_scale)
    dtype = dtype or jnp.result_type(float)
    ku, kw = jax.random.split(key)
    return MHAParams(_normal(ku, (heads, tokens, dim), u_scale, dtype),
                     _normal(kw, (heads, dim, dim), w_scale / jnp.sqrt(dim), dtype))


# ---------------------------------------------------------------------------
# Linear and ReLU attention: f = (1/T) Σ_{t,j} g(s_tj) v_tj,  s_tj = x_tᵀ W x_j,
# v_tj = x_jᵀ u_t, with g(s) = s (linear) or relu(s).
# ---------------------------------------------------------------------------

def linear_head(theta_h: MHAParams, X: jax.Array) -> jax.Array:
    """``f = (1/T) <U, (X W Xᵀ) X>`` — attention without the softmax, scaled by ``1/T`` so
    that the score matrix plays the role of an (unnormalized) average over tokens.
    ``theta_h = MHAParams(U [T, d], W [d, d])``, ``X [T, d]`` -> scalar. f is bilinear in
    (U, W): its Hessian does not depend on θ (see :func:`linear_kappa`)."""
    T = X.shape[0]
    return jnp.sum(theta_h.U * ((X @ theta_h.W @ X.T) @ X)) / T


def relu_head(theta_h: MHAParams, X: jax.Array) -> jax.Array:
    """``f = (1/T) <U, relu(X W Xᵀ) X>`` (ReLU attention normalized by the sequence length
    T; no row normalization). Piecewise bilinear in (U, W): on each region of fixed sign
    pattern of ``X W Xᵀ`` it is linear attention with the negative scores masked out.
    ``theta_h = MHAParams(U [T, d], W [d, d])``, ``X [T, d]`` -> scalar."""
    T = X.shape[0]
    return jnp.sum(theta_h.U * (jax.nn.relu(X @ theta_h.W @ X.T) @ X)) / T


def _gate(theta_h, X, relu: bool):
    """``m [n, T, T]``: ``1`` (linear) or ``1[s_tj > 0]`` (relu, = relu' as JAX defines it)."""
    S = jnp.einsum("nta,ab,njb->ntj", X, theta_h.W, X)
    return (S > 0).astype(X.dtype) if relu else jnp.ones_like(S)


def _bilinear_weighted_hessian(theta_h, X, c, relu: bool):
    """``Σ_i c_i ∇²f(θ_h; X_i)`` [p, p] for linear/relu heads, flat order (vec U, vec W):
    ``∂²f/∂U² = 0``, ``∂²f/∂W² = 0`` (a.e. for relu), cross block
    ``∂²f/∂u_t[k] ∂W[a,b] = (1/T) x_t[a] Σ_j m_tj x_j[k] x_j[b]``."""
    T, d = theta_h.U.shape
    m = _gate(theta_h, X, relu)
    G = jnp.einsum("ntj,njk,njb->ntkb", m, X, X)                       # Σ_j m_tj x_j x_jᵀ
    C = jnp.einsum("n,nta,ntkb->tkab", c, X, G).reshape(T * d, d * d) / T
    zU = jnp.zeros((T * d, T * d), C.dtype)
    zW = jnp.zeros((d * d, d * d), C.dtype)
    return jnp.concatenate([jnp.concatenate([zU, C], 1), jnp.concatenate([C.T, zW], 1)], 0)


def _sqrt_gram(x):
    """``K^{1/2}`` for ``K = x xᵀ`` [T, T] (PSD square root via :func:`mhajax.linalg.eigh`)."""
    K = x @ x.T
    ev, Q = eigh(0.5 * (K + K.T))
    return (Q * jnp.sqrt(jnp.maximum(ev, 0.0))) @ Q.T


def _bilinear_reduced_hessian(theta_h, x, relu: bool):
    """``[2T², 2T²]`` symmetric matrix with the nonzero spectrum of ``∇²f(θ_h; x)`` [p, p].

    f depends on θ_h only through ``V = U xᵀ`` and ``S = x W xᵀ``, with Hessian
    ``M = [[0, D], [D, 0]]``, ``D = diag(m)/T`` in (V, S); as for softmax heads
    (:func:`mhajax.softmax_hessian.reduced_head_hessian`) ``C M C`` with
    ``C = blockdiag(I ⊗ R, R ⊗ R)``, ``R = (x xᵀ)^{1/2}``, has the nonzero spectrum of
    ``∇²f``; its off-diagonal block is ``N[t,j; s,k] = (1/T) R[t,s] (R diag(m_t) R)[j,k]``."""
    T = x.shape[0]
    m = _gate(theta_h, x[None], relu)[0]                                 # [T, T]
    R = _sqrt_gram(x)
    E = jnp.einsum("ja,ta,ak->tjk", R, m, R) / T                         # R diag(m_t) R
    N = jnp.einsum("ts,tjk->tjsk", R, E).reshape(T * T, T * T)
    Z = jnp.zeros_like(N)
    return jnp.concatenate([jnp.concatenate([Z, N], 1), jnp.concatenate([N.T, Z], 1)], 0)


def linear_beta3(params, R, T):
    """``β₃ = R³√T`` for every head, ``[H]``: the exact per-sample norm is
    ``||∇²f(θ_h; X)||_op = σ_max(X)³/T`` (singular values of the cross block
    ``(1/T) X ⊗ XᵀX``), and ``σ_max(X) <= ||X||_F <= √T R``. Equality for ``X = 1 rᵀ``
    (all tokens equal, of norm R). Also valid, a.e., for relu heads (fewer active terms)."""
    H = params.U.shape[0]
    dtype = params.U.dtype
    return jnp.full((H,), 1.0, dtype) * jnp.asarray(R, dtype) ** 3 * jnp.sqrt(jnp.asarray(T, dtype))


def linear_kappa(params, R, T):
    """κ(θ) = R³√T for linear and relu heads (does not depend on θ)."""
    return jnp.max(linear_beta3(params, R, T))


def linear_beta2(params, R, T):
    """``β₂² = (R⁶/H) Σ_h (T ||W_h||_F² + ||U_h||²_{2,1})`` bounds ``||∇_θΦ||²`` for linear
    and relu heads: ``||∇_{u_t} f|| = ||(1/T) Σ_j g(s_tj) x_j|| <= R³||W||`` and
    ``|D_W f[ΔW]| <= (1/T) Σ_{t,j} |q_tj v_tj| <= R³ ||U||_{2,1} ||ΔW||``."""
    H = params.U.shape[0]
    per = T * _fro2(params.W) + _l21(params.U) ** 2
    return jnp.sqrt(R**6 * jnp.sum(per) / H)


LINEAR = register(HeadModel(
    "linear", linear_head, _init_uw, linear_kappa, linear_beta2,
    lambda th, X, c: _bilinear_weighted_hessian(th, X, c, False),
    lambda th, x: _bilinear_reduced_hessian(th, x, False), beta3=linear_beta3,
    note="κ = R³√T, θ-free; exact per-sample norm ||X||_op³/T, equal to κ for X = 1rᵀ"))

RELU = register(HeadModel(
    "relu", relu_head, _init_uw, linear_kappa, linear_beta2,
    lambda th, X, c: _bilinear_weighted_hessian(th, X, c, True),
    lambda th, x: _bilinear_reduced_hessian(th, x, True), beta3=linear_beta3,
    note="κ = R³√T bounds the Hessian wherever it exists (a.e.); across the kinks of relu "
         "L̂ is not weakly convex at all, which no Hessian shows"))


# ---------------------------------------------------------------------------
# Separate query and key matrices: W = W_Q W_Kᵀ
# ---------------------------------------------------------------------------

class QKParams(NamedTuple):
    """``U [H, T, d]`` readout, ``WQ [H, d, r]`` query, ``WK [H, d, r]`` key matrices."""

    U: jax.Array
    WQ: jax.Array
    WK: jax.Array


def qk_head(theta_h: QKParams, X: jax.Array) -> jax.Array:
    """``f = <U, softmax(X W_Q W_Kᵀ Xᵀ) X>``: the softmax head with its key-query matrix
    factored, ``W = W_Q W_Kᵀ`` (rank <= r). ``U [T, d]``, ``WQ, WK [d, r]``, ``X [T, d]``."""
    S = (X @ theta_h.WQ) @ (X @ theta_h.WK).T
    return jnp.sum(theta_h.U * (jax.nn.softmax(S, axis=-1) @ X))


def init_qk(key, heads, tokens, dim, *, u_scale=1.0, w_scale=0.0, k_scale=1.0, rank=None,
            dtype=None) -> QKParams:
    """``U ~ N(0, u²)``, ``W_Q ~ N(0, w²/d)``, ``W_K ~ N(0, k²/d)``, rank ``r`` (default d).
    ``W_K`` is random even when ``w_scale = 0``: if both factors were 0 neither would ever
    move (∇_{W_Q} f = (∂f/∂W) W_K), so the default start is W = W_Q W_Kᵀ = 0 (uniform
    attention) with a live gradient."""
    _check_init(heads, tokens, dim, u_scale, w_scale)
    positive_float("k_scale", k_scale, allow_zero=True)
    r = dim if rank is None else positive_int("rank", rank)
    dtype = dtype or jnp.result_type(float)
    ku, kq, kk = jax.random.split(key, 3)
    s = 1.0 / jnp.sqrt(dim)
    return QKParams(_normal(ku, (heads, tokens, dim), u_scale, dtype),
                    _normal(kq, (heads, dim, r), w_scale * s, dtype),
                    _normal(kk, (heads, dim, r), k_scale * s, dtype))


def qk_beta3(params: QKParams, R, T):
    """``β₃(θ_h) = R³√T ρ + 2R⁵ρ²||U||_{2,1} + R³||U||_{2,1}``, ``ρ² = ||W_Q||² + ||W_K||²``
    (Frobenius), ``[H]``. The score moves to first order by ``q = x_tᵀ(ΔQ Kᵀ + Q ΔKᵀ)x_j``
    (``|q| <= R²ρ·||(ΔQ, ΔK)||``) and to second order by ``r = 2x_tᵀ ΔQ ΔKᵀ x_j``; the extra
    term ``Cov_a(v_t, r_t)`` gives ``R³||U||_{2,1}``. Unlike the paper's κ it grows with the
    key-query weights."""
    l21 = _l21(params.U)
    rho2 = _fro2(params.WQ) + _fro2(params.WK)
    return R**3 * jnp.sqrt(T * rho2) + 2 * R**5 * rho2 * l21 + R**3 * l21


def qk_kappa(params, R, T):
    return jnp.max(qk_beta3(params, R, T))


def qk_beta2(params: QKParams, R, T):
    """``β₂² = T R² + (R⁶/H) Σ_h ||U_h||²_{2,1} ρ_h²``: ``|D_{W_Q} f[ΔQ]| <= R³||U||_{2,1}||K||·||ΔQ||``."""
    H = params.U.shape[0]
    rho2 = _fro2(params.WQ) + _fro2(params.WK)
    return jnp.sqrt(T * R**2 + R**6 * jnp.sum(_l21(params.U) ** 2 * rho2) / H)


QK = register(HeadModel(
    "qk", qk_head, init_qk, qk_kappa, qk_beta2, beta3=qk_beta3,
    note="κ = max_h R³√Tρ_h + 2R⁵ρ_h²||U_h||_{2,1} + R³||U_h||_{2,1}, ρ_h² = ||W_Q||²+||W_K||²: "
         "grows with the key-query weights (the paper's W-free κ does not carry over)"))


# ---------------------------------------------------------------------------
# Value matrix and readout vector
# ---------------------------------------------------------------------------

class ValueParams(NamedTuple):
    """``U [H, d_v]`` readout vector u_h, ``V [H, d, d_v]`` value matrix, ``W [H, d, d]`` key-query."""

    U: jax.Array
    V: jax.Array
    W: jax.Array


def value_head(theta_h: ValueParams, X: jax.Array) -> jax.Array:
    """``f = uᵀ Vᵀ Xᵀ ā = (1/T) Σ_t a_tᵀ X V u``, ``a_t = softmax(s_t)``, ``ā = (1/T) Σ_t a_t``:
    each query row attends, the attended tokens are projected by the value matrix
    ``V [d, d_v]``, averaged over query positions and read out by ``u [d_v]``."""
    S = X @ theta_h.W @ X.T
    abar = jnp.mean(jax.nn.softmax(S, axis=-1), axis=0)                 # [T]
    return abar @ (X @ (theta_h.V @ theta_h.U))


def init_value(key, heads, tokens, dim, *, u_scale=1.0, w_scale=0.0, v_scale=1.0,
               value_dim=None, dtype=None) -> ValueParams:
    """``u ~ N(0, u²)`` [d_v], ``V ~ N(0, v²/d)`` [d, d_v] (so ``||Vu|| ~ ||u||``),
    ``W ~ N(0, w²/d)``; ``d_v`` defaults to d."""
    _check_init(heads, tokens, dim, u_scale, w_scale)
    positive_float("v_scale", v_scale, allow_zero=True)
    dv = dim if value_dim is None else positive_int("value_dim", value_dim)
    dtype = dtype or jnp.result_type(float)
    ku, kv, kw = jax.random.split(key, 3)
    s = 1.0 / jnp.sqrt(dim)
    return ValueParams(_normal(ku, (heads, dv), u_scale, dtype),
                       _normal(kv, (heads, dim, dv), v_scale * s, dtype),
                       _normal(kw, (heads, dim, dim), w_scale * s, dtype))


def value_beta3(params: ValueParams, R, T):
    """``β₃(θ_h) = R³√(||u||² + ||V||²) + 2R⁵||Vu|| + R``, ``[H]`` (T does not enter: the
    output averages over query rows). Terms: ``2Cov_a(p, q)`` with ``p = X(ΔV u + V Δu)``,
    ``E_a[(v − v̄)(q − q̄)²]`` with ``v = X V u``, and ``E_a[2 X ΔV Δu]`` (f is bilinear in (u, V))."""
    nu2 = jnp.sum(params.U**2, axis=-1)
    Vu = jnp.einsum("hdv,hv->hd", params.V, params.U)
    return (R**3 * jnp.sqrt(nu2 + _fro2(params.V)) + 2 * R**5 * jnp.linalg.norm(Vu, axis=-1)
            + R * jnp.ones_like(nu2))


def value_kappa(params, R, T):
    return jnp.max(value_beta3(params, R, T))


def value_beta2(params: ValueParams, R, T):
    """``β₂² = (1/H) Σ_h (R²||V_h||² + R²||u_h||² + R⁶||V_h u_h||²)``."""
    H = params.U.shape[0]
    Vu = jnp.einsum("hdv,hv->hd", params.V, params.U)
    per = R**2 * _fro2(params.V) + R**2 * jnp.sum(params.U**2, -1) + R**6 * jnp.sum(Vu**2, -1)
    return jnp.sqrt(jnp.sum(per) / H)


VALUE = register(HeadModel(
    "value", value_head, init_value, value_kappa, value_beta2, beta3=value_beta3,
    note="κ = max_h R³√(||u_h||²+||V_h||²) + 2R⁵||V_h u_h|| + R; depends on V"))


# ---------------------------------------------------------------------------
# Causal mask and first-token (CLS) readout: softmax rows over fewer tokens
# ---------------------------------------------------------------------------

def causal_head(theta_h: MHAParams, X: jax.Array) -> jax.Array:
    """``f = <U, softmax_causal(X W Xᵀ) X>``: row t attends to tokens ``j <= t`` only
    (lower-triangular mask; row 1 is the point mass on token 1). ``U [T, d]``, ``W [d, d]``."""
    T = X.shape[0]
    S = X @ theta_h.W @ X.T
    mask = jnp.tril(jnp.ones((T, T), bool))
    A = jax.nn.softmax(jnp.where(mask, S, -jnp.inf), axis=-1)
    return jnp.sum(theta_h.U * (A @ X))


def causal_beta3(params: MHAParams, R, T):
    """``β₃(θ_h) = R³√(T−1) + 2R⁵ Σ_{t>=2} ||u_t||``, ``[H]``: the softmax derivation of
    docs/theory.md §6.4 row by row; row 1's attention is a point mass, so its covariance terms vanish."""
    tail = _l21(params.U[:, 1:, :])
    Tm1 = jnp.maximum(jnp.asarray(T, params.U.dtype) - 1, 0.0)
    return R**3 * jnp.sqrt(Tm1) + 2 * R**5 * tail


def causal_kappa(params, R, T):
    return jnp.max(causal_beta3(params, R, T))


CAUSAL = register(HeadModel(
    "causal", causal_head, _init_uw, causal_kappa, beta2, beta3=causal_beta3,
    note="κ = max_h R³√(T−1) + 2R⁵Σ_{t>=2}||u_t||: the softmax bound, row 1 contributes nothing"))


class CLSParams(NamedTuple):
    """``U [H, d]`` readout of the first token's output, ``W [H, d, d]`` key-query."""

    U: jax.Array
    W: jax.Array


def cls_head(theta_h: CLSParams, X: jax.Array) -> jax.Array:
    """``f = uᵀ Xᵀ softmax(s_1)``, ``s_1[j] = x_1ᵀ W x_j``: only the first token's attention
    row feeds the output (a [CLS]-style readout). ``u [d]``, ``W [d, d]``, ``X [T, d]``."""
    a1 = jax.nn.softmax(X[0] @ theta_h.W @ X.T)
    return a1 @ (X @ theta_h.U)


def init_cls(key, heads, tokens, dim, *, u_scale=1.0, w_scale=0.0, dtype=None) -> CLSParams:
    """``u ~ N(0, u²)`` [d], ``W ~ N(0, w²/d)``."""
    _check_init(heads, tokens, dim, u_scale, w_scale)
    dtype = dtype or jnp.result_type(float)
    ku, kw = jax.random.split(key)
    return CLSParams(_normal(ku, (heads, dim), u_scale, dtype),
                     _normal(kw, (heads, dim, dim), w_scale / jnp.sqrt(dim), dtype))


def cls_beta3(params: CLSParams, R, T):
    """``β₃(θ_h) = R³ + 2R⁵||u||``, ``[H]``: docs/theory.md §6.4 with a single row (√T -> 1)."""
    return R**3 + 2 * R**5 * jnp.linalg.norm(params.U, axis=-1)


def cls_kappa(params, R, T):
    return jnp.max(cls_beta3(params, R, T))


def cls_beta2(params: CLSParams, R, T):
    """``β₂² = R² + (R⁶/H) Σ_h ||u_h||²``."""
    H = params.U.shape[0]
    return jnp.sqrt(R**2 + R**6 * jnp.sum(params.U**2) / H)


CLS = register(HeadModel(
    "cls", cls_head, init_cls, cls_kappa, cls_beta2, beta3=cls_beta3,
    note="κ = max_h R³ + 2R⁵||u_h||: the softmax bound with one row"))


__all__ = ["LINEAR", "RELU", "QK", "VALUE", "CAUSAL", "CLS", "QKParams", "ValueParams",
           "CLSParams", "linear_head", "relu_head", "qk_head", "value_head", "causal_head",
           "cls_head", "init_qk", "init_value", "init_cls"]
