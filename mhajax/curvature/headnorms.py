"""The largest per-sample head Hessian norm, m_i = max_h ‖∇²f(θ_h; X_i)‖_op, for every sample (docs/theory.md §7.1).

κ_mid and κ_Φ (§7) need, per sample, only the largest norm over the heads, not the n·H
norms; n·H dense eigensolvers (262,144 at n = 64, H = 4096) are what made them unaffordable
at width. Per sample x (``M_h [m, m]`` the head's matrix: the model's ``reduced_hessian``,
2T² × 2T² with the same nonzero spectrum, when 2T² < p, else the p × p Hessian):

1. ``eigvalsh`` of the K heads with the largest ‖M_h‖_F: m̂ = the largest of their norms;
2. every other head is *certified* ‖M_h‖ <= (1 + 2τ)·m̂ (τ = 2⁻³⁶) without an eigensolver:
   its leading a × a block is exactly 0 (a = T² for the reduced matrix, whose value–value
   block vanishes, a = T·d for the p × p Hessian, whose U–U block vanishes: Φ is linear in
   U), so with M = [[0, E], [Eᵀ, F]] and c > 0 (Haynsworth, the Schur complement of ±cI_a)

       ‖M‖ < c  ⇔  A±(c) = cI ± F − EᵀE/c ≻ 0   ([m − a, m − a]),

   tested by a Cholesky factorization that runs to completion, at c' = (1 + τ)·m̂. In floating
   point it proves λmin(A±(c')) >= −ρ with ρ = γ_{2k+a+4}·(k + 1)·(c' + ‖F‖_F + ‖E‖_F²/c')·ι
   (k = m − a; the rounding of forming A±, and Cholesky's backward error
   |Δ| <= γ_{k+1}|Rᵀ||R| (Higham, Thm 10.3), whose norm is at most tr(RᵀR)), and A±(c)
   grows with c at least as fast as cI, so ‖M‖ <= c' + ρ; the head is certified when
   moreover ρ <= τ·m̂;
3. a head that is not certified (a larger norm, a near tie, a nonzero leading block) gets
   its own ``eigvalsh``, K at a time (largest ‖M_h‖_F first), m̂ is updated, and the others
   are tested again, until every head is solved or certified.

So m̂_i <= m_i <= (1 + 2τ)·m̂_i, with m̂_i the largest norm some eigensolver computed (as
exact as the dense ``eigvalsh`` of every head would be, to a relative 3·10⁻¹¹). Every
LAPACK call is one matrix (:func:`mhajax.linalg.each`); the samples are split over the
devices (:func:`mhajax.runtime.sharding.over_blocks`), which changes no bit.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from mhajax.curvature.inertia import gamma
from mhajax.curvature.operators import weighted_head_hessians
from mhajax.linalg import each, eigvalsh
from mhajax.models.base import HeadModel, ravel_heads
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime.sharding import BLOCKS, over_blocks

#: τ: the certified heads' norms are at most (1 + 2τ)·m̂
TAU = 2.0 ** -36
#: heads solved exactly at once (first the K largest by Frobenius norm)
K = 8


def positive_definite(A):
    """Whether the Cholesky factorization (LAPACK ``potrf``, one matrix per call) of every
    matrix of ``A [b, k, k]`` (symmetric) runs to completion: ``[b]`` booleans (False for a
    NaN matrix)."""
    def one(a):
        return jnp.isfinite(jnp.sum(jax.lax.linalg.cholesky(a, symmetrize_input=False)))
    return jax.lax.map(one, A)


def _certified(M, a: int, mhat):
    """Heads of ``M [H, m, m]`` certified ‖M_h‖ <= (1 + 2τ)·m̂ (module docstring, step 2)."""
    H, m, _ = M.shape
    k = m - a
    dtype = M.dtype
    c = mhat * (1 + TAU)
    zero = jnp.all(M[:, :a, :a] == 0, axis=(1, 2))
    E, F = M[:, :a, a:], M[:, a:, a:]
    G = jnp.einsum("hij,hik->hjk", E, E)
    G = 0.5 * (G + jnp.swapaxes(G, 1, 2))
    F = 0.5 * (F + jnp.swapaxes(F, 1, 2))
    eye = jnp.eye(k, dtype=dtype)
    ok = zero
    for s in (1.0, -1.0):
        ok = ok & positive_definite(c * eye + s * F - G / c)
    fF = jnp.sqrt(jnp.sum(F * F, axis=(1, 2)))
    eF2 = jnp.sum(E * E, axis=(1, 2))
    rho = gamma(2 * k + a + 4, dtype) * (k + 1) * (c + fF + eF2 / c) * (1 + 2.0 ** -30)
    return ok & (rho <= TAU * mhat) & (c > 0)


def _norms(M):
    ev = each(eigvalsh, M)
    return jnp.maximum(-ev[..., 0], ev[..., -1])


def _sample(M, a: int):
    """``(m̂, eigensolves)`` of one sample's head matrices ``M [H, m, m]`` (module docstring)."""
    H = M.shape[0]
    kk = min(K, H)
    fro = jnp.sqrt(jnp.sum(M * M, axis=(1, 2)))
    fro = jnp.where(jnp.isfinite(fro), fro, jnp.inf)            # a NaN matrix is solved (and gives NaN)

    def solve(carry, pending):
        mhat, done = carry
        idx = jax.lax.top_k(jnp.where(pending, fro, -jnp.inf), kk)[1]
        take = pending[idx]
        nrm = _norms(M[idx])
        mhat = jnp.maximum(mhat, jnp.max(jnp.where(take, nrm, -jnp.inf)))
        mhat = jnp.where(jnp.any(take & jnp.isnan(nrm)), jnp.nan, mhat)
        return mhat, done.at[idx].set(done[idx] | take)

    mhat, done = solve((jnp.asarray(-jnp.inf, M.dtype), jnp.zeros((H,), bool)), jnp.ones((H,), bool))

    def pending_of(mhat, done):
        return ~done & ~_certified(M, a, mhat)

    def cond(s):
        return jnp.any(s[2]) & ~jnp.isnan(s[0])

    def body(s):
        mhat, done, pending = s
        mhat, done = solve((mhat, done), pending)
        return mhat, done, pending_of(mhat, done)

    mhat, done, _ = jax.lax.while_loop(cond, body, (mhat, done, pending_of(mhat, done)))
    return mhat, jnp.sum(done)


def max_head_norms(params, X, model: HeadModel = SOFTMAX):
    """``(m [n], eigensolves [n])``: m_i = max_h ‖∇²_{θ_h} f(θ_h; X_i)‖_op for every sample of
    ``X [n, T, d]`` (module docstring: exact to a relative 2τ), and how many head matrices
    were given an eigensolver for it (K at least; the other heads were certified). Pure and
    traceable; no batched LAPACK call."""
    Z, unravel_head = ravel_heads(params)
    H, p = Z.shape
    n, T, d = X.shape
    reduced = model.reduced_hessian is not None and 2 * T * T < p
    a = T * T if reduced else T * d
    one = jnp.ones((1,), X.dtype)

    def matrices(x):
        if reduced:
            return jax.lax.map(lambda zh: model.reduced_hessian(unravel_head(zh), x), Z)
        return weighted_head_hessians(params, x[None], one, model)

    def block(xs):
        return jax.lax.map(lambda x: _sample(matrices(x), a), xs)

    nb = math.gcd(n, BLOCKS)
    m, solved = over_blocks(block, (X.reshape((nb, n // nb) + X.shape[1:]),))
    return m.reshape(n), solved.reshape(n)


__all__ = ["TAU", "K", "positive_definite", "max_head_norms"]
