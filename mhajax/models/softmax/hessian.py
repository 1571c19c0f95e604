"""Closed-form Hessian of one softmax head, ``∇²_{θ_h} f(θ_h; X)`` (docs/theory.md §4–§5).

For ``f = Σ_t v_tᵀ a_t`` with ``a_t = softmax(s_t)``, ``s_t[j] = x_tᵀ W x_j``,
``v_t[j] = x_jᵀ u_t`` and the flat order ``(vec U [T·d], vec W [d²])``:

* ``∂²f/∂U² = 0`` (f is linear in U);
* cross block ``∂²f/∂u_t[k] ∂W[a,b] = x_t[a] · M_t[k, b]`` with
  ``M_t = Xᵀ (diag(a_t) − a_t a_tᵀ) X``  [d, d];
* ``∂²f/∂W[a,b] ∂W[a',b'] = Σ_t x_t[a] x_t[a'] · N_t[b, b']`` with
  ``N_t = Xᵀ D_t X``, ``D_t = diag(w_t) − a_t w_tᵀ − w_t a_tᵀ``,
  ``w_t = a_t ⊙ (v_t − a_tᵀ v_t)`` — the Hessian of ``v_tᵀ softmax(s)`` in ``s``,
  i.e. ``qᵀ D_t q = E_{a_t}[(v_t − v̄_t)(q − q̄)²]``.

:func:`weighted_head_hessian` returns ``Σ_i c_i ∇²f(θ_h; X_i)`` for a batch
``X [n, T, d]`` in O(n·T·(T d² + d⁴)) — no automatic differentiation, which is
what makes the certified block bound cheap. Tested against ``jax.hessian``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from mhajax.linalg import eigh


def _pieces(theta_h, X):
    """Attention rows ``A [n,T,T]``, ``Xᵀa_t`` and ``Xᵀw_t`` [n,T,d], and ``w [n,T,T]``."""
    S = jnp.einsum("nta,ab,njb->ntj", X, theta_h.W, X)
    A = jax.nn.softmax(S, axis=-1)
    V = jnp.einsum("tk,njk->ntj", theta_h.U, X)           # V[n,t,j] = x_jᵀ u_t
    vbar = jnp.sum(A * V, axis=-1, keepdims=True)
    Wt = A * (V - vbar)                                     # w_t = a_t ⊙ (v_t − v̄_t)
    Xa = jnp.einsum("ntj,njd->ntd", A, X)
    Xw = jnp.einsum("ntj,njd->ntd", Wt, X)
    return A, Wt, Xa, Xw


def weighted_head_hessian(theta_h, X, c) -> jax.Array:
    """``Σ_i c_i ∇²_{θ_h} f(θ_h; X_i)`` [p, p], ``p = T·d + d²``, for one head
    ``theta_h = MHAParams(U [T, d], W [d, d])``, ``X [n, T, d]``, ``c [n]``."""
    T, d = theta_h.U.shape
    A, Wt, Xa, Xw = _pieces(theta_h, X)
    n = X.shape[0]
    cX = c[:, None, None] * X
    # x_j x_jᵀ of every token, flattened [n, T, d²]: Xᵀ diag(a_t) X and Xᵀ diag(w_t) X are then
    # two batched products [n, T, T] × [n, T, d²] (no operand transposes)
    XX = (X[..., :, None] * X[..., None, :]).reshape(n, T, d * d)
    # cross block: Σ_i c_i x_it[a] (Xᵀ diag(a_t) X − (Xᵀa_t)(Xᵀa_t)ᵀ)[k, b]
    XdX = jnp.einsum("ntj,njq->ntq", A, XX).reshape(n, T, d, d)
    M = XdX - Xa[..., :, None] * Xa[..., None, :]
    C = jnp.einsum("nta,ntkb->tkab", cX, M).reshape(T * d, d * d)
    # WW block: Σ_i c_i Σ_t x_t[a] x_t[a'] N_t[b, b']
    XwX = jnp.einsum("ntj,njq->ntq", Wt, XX).reshape(n, T, d, d)
    N = XwX - Xa[..., :, None] * Xw[..., None, :] - Xw[..., :, None] * Xa[..., None, :]
    WW = jnp.einsum("nta,ntc,ntbe->abce", cX, X, N).reshape(d * d, d * d)
    top = jnp.concatenate([jnp.zeros((T * d, T * d), C.dtype), C], axis=1)
    bottom = jnp.concatenate([C.T, WW], axis=1)
    return jnp.concatenate([top, bottom], axis=0)


def head_hessian(theta_h, x) -> jax.Array:
    """``∇²_{θ_h} f(θ_h; x)`` [p, p] for a single input ``x [T, d]``."""
    return weighted_head_hessian(theta_h, x[None], jnp.ones((1,), x.dtype))


def reduced_head_hessian(theta_h, x) -> jax.Array:
    """A symmetric ``[2T², 2T²]`` matrix with the same nonzero eigenvalues as
    ``∇²_{θ_h} f(θ_h; x)`` [p, p] — so the same operator norm — for ``x [T, d]``.

    f depends on θ_h only through ``V = U xᵀ`` and ``S = x W xᵀ`` (both T×T):
    ``∇²f = Lᵀ M L`` with ``L = blockdiag(I_T ⊗ x, x ⊗ x)`` and M the Hessian
    of ``g(V, S) = Σ_t v_tᵀ softmax(s_t)``, block-diagonal over t with blocks
    ``[[0, J_t], [J_t, D_t]]``. Since ``LLᵀ = blockdiag(I ⊗ K, K ⊗ K)``,
    ``K = x xᵀ``, with ``R = K^{1/2}`` the matrix ``C M C``,
    ``C = blockdiag(I ⊗ R, R ⊗ R)``, has the nonzero spectrum of ``Lᵀ M L``
    (AB and BA share nonzero eigenvalues). Entries, with ``E_t = R J_t R`` and
    ``F_t = R D_t R``::

        N_VS[t,j; s,k] = R[t,s] E_t[j,k],   N_SS[t,j; s,k] = Σ_u R[t,u] R[u,s] F_u[j,k],

    and ``N_VV = 0``. Exact (no bound), and smaller than p×p when 2T² < T·d + d².
    """
    T = x.shape[0]
    X = x[None]
    A, Wt, _, _ = _pieces(theta_h, X)
    A, Wt = A[0], Wt[0]                                    # [T, T] rows a_t, w_t
    eye = jnp.eye(T, dtype=x.dtype)
    J = A[:, :, None] * eye[None] - A[:, :, None] * A[:, None, :]             # J_t [T, T, T]
    D = (Wt[:, :, None] * eye[None] - A[:, :, None] * Wt[:, None, :]
         - Wt[:, :, None] * A[:, None, :])                                     # D_t
    K = x @ x.T
    ev, Q = eigh(0.5 * (K + K.T))
    R = (Q * jnp.sqrt(jnp.maximum(ev, 0.0))) @ Q.T
    E = jnp.einsum("ja,tab,bk->tjk", R, J, R)
    F = jnp.einsum("ja,tab,bk->tjk", R, D, R)
    NVS = jnp.einsum("ts,tjk->tjsk", R, E).reshape(T * T, T * T)
    NSS = jnp.einsum("tu,us,ujk->tjsk", R, R, F).reshape(T * T, T * T)
    top = jnp.concatenate([jnp.zeros_like(NVS), NVS], axis=1)
    bottom = jnp.concatenate([NVS.T, 0.5 * (NSS + NSS.T)], axis=1)
    return jnp.concatenate([top, bottom], axis=0)

