"""Certified extreme eigenvalues of ``blockdiag(B) + Jᵀ diag(w) J`` by inertia counts (docs/theory.md §3.4).

Notation and shapes (float64 throughout; works under ``jit``/``vmap``, CPU and GPU):

    B [H, p, p]   symmetric head blocks,          P = H·p
    J [n, P]      per-sample gradients (rows),    w [n] weights (ℓ''/n; any sign, zeros allowed)
    A = blockdiag(B_1..B_H) + Jᵀ diag(w) J  =  B + K Σ Kᵀ          [P, P]  (never formed)
    K = Jᵀ |w|^{1/2}  [P, n],   Σ = diag(s), s_i = sign(w_i) (+1 where w_i = 0)
    B_h = Q_h Λ_h Q_hᵀ (H small ``eigh``),  Λ = diag(λ_j) [P],  K̃ = Qᵀ K [P, n] (row j: k_j)

**The count (Haynsworth inertia additivity).** For the bordered matrix

    M(x) = [[Λ − xI, K̃], [K̃ᵀ, −Σ]]      [(P + n), (P + n)]

the two Schur complements give  In(M) = In(−Σ) + In(Qᵀ(A − xI)Q)  and, eliminating any
set F of rows j with λ_j ≠ x first,  In(M) = In(D_F) + In(Z(x)),  where D = Λ − xI and

    Z(x) = [[D_N, K̃_N], [K̃_Nᵀ, −Σ − C_F(x)]],   C_F(x) = K̃_Fᵀ D_F⁻¹ K̃_F   [(r + n), (r + n)]

with N the complement of F (r rows). Inertia is (neg, zero, pos); Q is orthogonal, so

    #{eig(A) < x} = #{j ∈ F: λ_j < x} + neg(Z) − n₊,     #{eig(A) = x} = zero(Z),
    #{eig(A) > x} = #{j ∈ F: λ_j > x} + pos(Z) − n₋,     n± = #{i: s_i = ±1}.

With N = ∅ and w >= 0 this is the plain formula
#{eig(A) < x} = #{eig(B) < x} − #{negative eigenvalues of I + K̃ᵀ(Λ − x)⁻¹K̃}. A row with
k_j = 0 (decoupled) is an exact eigenvalue λ_j of the model matrix and is counted by its sign.

**One primitive, one rounding bound** (:func:`schur`). Every count in mhajax — λmin's and
λmax's enclosures here, the census (:mod:`~mhajax.curvature.census`) — is one Schur
complement Z(t) at a point t, certified for every x of a window [x₋, x₊] ∋ t (x₋ = x₊ = t for
a plain count). N holds the r rows kept in Z: among the 4r coupled poles nearest t (by λ),
those in the window first, then the largest ‖k_j‖²/|λ_j − t| (decoupled rows only when fewer
than r are coupled); F the other coupled rows, whose λ_j lie outside the window (a coupled
pole in the window outside N: the count is not made, ``ok`` False). Z(x) differs from Z(t)
by (x − t)f² on the N diagonal and by C_F(x) − C_F(t) = Σ_F k_jk_jᵀ(x − t)/((λ_j − x)(λ_j − t)),
so (Weyl) each eigenvalue of Z(x) is within err_win = h·f² + h·Σ_F ‖k_j‖²/(|λ_j − t|·dist(λ_j,
[x₋, x₊])) (h = max|x± − t|) of one of Z(t)'s; the computed eigenvalues ζ of fl(Z(t)) are
within err_round = γ_{P/G+G+5}·Σ_F ‖k_j‖²/|λ_j − t| + (8(r + n) + 2)·u·‖Z‖_F of Z(t)'s (item
3 below). With err = (err_round + err_win·ι)·ι, ι = 1 + 2⁻³⁰ (the rounding of the bounds
themselves, a relative γ_P < 2⁻³⁰ for P < 8·10⁶ in float64; 1 + 4γ_{P+8} in a shorter
float), ζ < −err is negative and ζ > err positive at every x of the window, and |ζ| <= err
is ``unsure`` (a tie), never guessed. Keeping near poles in N keeps every entry of Z bounded
when t is close to (or equal to) an eigenvalue of B: that is what makes a count near a pole
computable, not a guess.

**The row pass and devices.** C_F is G partial sums (G a divisor of P near √P) of P/G rows
each, added in ``gcd(G, BLOCKS)`` contiguous blocks: each block's partial sums in order,
then the blocks in order. The blocks, and the H head blocks of :func:`decompose`, are split
over the devices when there are several (:func:`mhajax.runtime.sharding.over_blocks`):
every block is the same program on any device count, so counts and enclosures are the
one-device ones bit for bit.

**The monotone secular function.** With S(λ) = Σ + K̃ᵀ(Λ − λI)⁻¹K̃ [n, n] (eigenvalues
μ₁ <= ... <= μ_n, each nondecreasing in λ between poles since dS/dλ = K̃ᵀD⁻²K̃ ⪰ 0),

    g_min(λ) = μ_{m(λ) + n₋}(S(λ)),    m(λ) = #{j: λ_j < λ}
    g_max(λ) = μ_{n₋ − m'(λ) + 1}(S(λ)), m'(λ) = #{j: λ_j > λ}

are continuous (across poles with k_j ≠ 0) and nondecreasing on their brackets; λmin(A)
and λmax(A) are their roots: λ > λmin ⇔ g_min(λ) > 0, λ < λmax ⇔ g_max(λ) < 0.
Newton steps use g' = ‖D⁻¹K̃v‖² (v the eigenvector of the indexed μ), O(nP) per step.
The root-finder only proposes points; every bracket end is *certified by a count*.

**Brackets (theorems, no count needed).** w >= 0: λ₁(B) <= λmin(A) <= λ_{n+1}(B)
(A ⪰ B; interlacing for a rank-n PSD update) and λ_P(B) <= λmax(A) <= λ_P(B) + ‖K‖².
Signed w: λmin ∈ [λ₁(B) − ‖K₋‖², λ_{n₊+1}(B)], λmax ∈ [λ_{P−n₋}(B), λ_P(B) + ‖K₊‖²].

**What is certified in floating point, and what is not.**

1. Exact: the sign of every ``λ_j − x`` (a correctly rounded difference has the exact sign),
   hence the counts over F; Sylvester's law (congruences by Q and by powers of two: the N
   rows of Z are scaled by f = 2^-k so that |D_N f²| <= 1).
2. Bounded, a posteriori (``Structure.backward``): the decomposition's error. The counts
   are those of the *model* matrix Ã = Λ + K̃ΣK̃ᵀ built from the computed (Λ, Q̂, K̃). With
   η = max_h ‖Q̂_hᵀQ̂_h − I‖_F, R_h = B_hQ̂_h − Q̂_hΛ_h (computed, plus its own rounding) and
   F = fl(Q̂ᵀK) − Q̂ᵀK (|F| <= γ_p|Q̂ᵀ||K|): Q̂ᵀ(A − λ)Q̂ = Ã − λ + E(λ) with
   ‖E(λ)‖ <= e_B + |λ|η + e_K, so every certified end moves out by
   δ(λ) = (e_B + |λ|η + e_K)/(1 − η)  (Ostrowski: σ_min(Q̂)² >= 1 − η).
   γ_k = k·u/(1 − k·u) are the worst-case (not probabilistic) constants.
3. Bounded, a priori, *with one standard model*: err_round above. Its first term bounds,
   for any summation order, forming C_F as G partial sums of P/G rows (each term passes
   through at most P/G + G additions, and the rounding of λ_j − t, its inverse, two products
   and the symmetrization: 5 more), by γ_{P/G+G+5}·Σ_F ‖k_j‖²/|λ_j − t| (the matrix
   |K̃_F|ᵀ|D_F⁻¹||K̃_F| bounding the entrywise error is PSD, so its norm is at most its trace);
   the second is the backward error of a symmetric eigensolver, modelled as c(m)·u·‖Z‖_F
   with c(m) = 8m (LAPACK states no explicit constant: this term is a model, not a proof),
   plus 2u·‖Z‖_F for the rounding of Z's entries. By Weyl, an accepted sign is exact.
4. Not certified: the rounding in forming B, J, w themselves (the enclosure is for the
   matrix those arrays represent — as a dense ``eigvalsh`` of the assembled Hessian
   would be). A NaN/inf input or a non-symmetric B (asymmetry relative to the size of A
   above ``asym_rtol``, :func:`asym_tolerance`)
   makes ``Structure.valid`` False: enclosures are NaN, counts all ``unsure``; the host-side
   :func:`check_inputs` raises with the offending array.

Everything here is a pure function of arrays (``jit``/``vmap``-friendly: the searches are
``lax.while_loop`` loops); ``eigh`` is injectable and defaults to :func:`mhajax.linalg.eigh`
(XLA's LAPACK when OpenBLAS is single-threaded, else a host callback; see that module).
The proof of the count and of the brackets is in docs/theory.md §3.4.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.errors import InputError
from mhajax.linalg import each
from mhajax.linalg import eigh as _default_eigh
from mhajax.runtime.sharding import BLOCKS, over_blocks

Eigh = Callable[[jax.Array], tuple]
#: the end of the spectrum an enclosure is of; the functions that also take a traced boolean
#: flag (True = λmin, so that both ends run in one ``vmap``) say ``Side | jax.Array``.
Side = Literal["min", "max"]
#: the root search's step rule (:func:`enclose`)
Step = Literal["rational", "newton", "bisect"]

#: relative safety on every computed bound (module docstring, ι), float64
_INFLATE = 1.0 + 2.0 ** -30


def gamma(k, dtype):
    """Higham's ``γ_k = k·u/(1 − k·u)``, ``u = eps/2`` of ``dtype``: the relative rounding factor
    of a k-term sum or product (every rounding bound of this module and of
    :mod:`mhajax.curvature.headnorms`)."""
    u = jnp.finfo(dtype).eps / 2
    return k * u / (1 - k * u)


def inflation(dtype, P: int) -> float:
    """ι of the module docstring, a Python float: 1 + 2⁻³⁰ in float64; in a shorter float
    (where that rounds to 1) 1 + 4γ_{P+8}."""
    eps = float(jnp.finfo(dtype).eps)
    g = (P + 8) * eps / 2 / (1 - (P + 8) * eps / 2)
    return max(_INFLATE, 1.0 + 4 * g)


class Structure(NamedTuple):
    """The decomposed operator (all arrays; a pytree).

    lam [P]: eigenvalues of B (head-major, each head ascending); Kt [P, n]: K̃ = QᵀK;
    knorm2 [P]: ‖k_j‖²; sign [n]: s; n_pos, n_neg: n±; gpos, gneg: upper bounds on
    ‖K₊‖², ‖K₋‖²; backward [3]: (e_B, η, e_K) of the docstring's item 2; scale:
    max|λ_j| + max(gpos, gneg) (a bound on ‖A‖); finite: no NaN/inf in the inputs;
    asym: max_h ‖B_h − B_hᵀ‖_F/(max_h' ‖B_h'‖_F + ‖K‖_F²) (0 for a symmetric B; the
    asymmetry relative to the size of A), asym_head: the h attaining it; valid: finite
    and asym <= asym_rtol — nothing is certified otherwise (enclosures are NaN); order [P]:
    the rows by λ_j ascending, coupled rows (k_j ≠ 0) first; keys [P]: λ in that order
    (+inf for the decoupled rows), for the choice of N."""

    lam: jax.Array
    Kt: jax.Array
    knorm2: jax.Array
    sign: jax.Array
    n_pos: jax.Array
    n_neg: jax.Array
    gpos: jax.Array
    gneg: jax.Array
    backward: jax.Array
    scale: jax.Array
    finite: jax.Array
    asym: jax.Array
    asym_head: jax.Array
    valid: jax.Array
    order: jax.Array
    keys: jax.Array


def asym_tolerance(dtype) -> float:
    """The relative asymmetry ``‖B_h − B_hᵀ‖_F/(max_h' ‖B_h'‖_F + ‖K‖_F²)`` above which B
    is refused: ``max(1e-10, 256·eps)`` (1e-10 in float64; float32 gets 3e-5). A computed
    Hessian is symmetric to a few eps of the size of its terms, and the skew part joins the
    backward error anyway, so the enclosure stays valid; the refusal catches a model whose
    blocks are plainly not symmetric. The size is that of A, not of B_h alone: a block
    that is tiny next to G (saturated heads: ‖B_h‖ ~ 1e-11, skew ~ 1e-17) is not refused."""
    return max(1e-10, 256 * float(jnp.finfo(dtype).eps))


def _heads(B0, K, *, eigh: Eigh):
    """Per head of one block of heads (``B0 [m, p, p]`` symmetric, ``K [m, p, n]``): the
    eigenvalues, K̃_h = Q_hᵀK_h, and the a-posteriori pieces of docstring item 2 (the
    residual ‖R_h‖_F with its own rounding, ‖Q_hᵀQ_h − I‖_F, ‖Q_h‖_F, max|λ|, ‖K_h‖_F)."""
    m, p, _ = B0.shape
    dtype = B0.dtype
    lamh, Q = each(eigh, B0)                                               # [m,p], [m,p,p]
    Kt = jnp.einsum("hpq,hpn->hqn", Q, K)                                  # [m, p, n]
    R = jnp.einsum("hij,hjk->hik", B0, Q) - Q * lamh[:, None, :]
    E = jnp.einsum("hji,hjk->hik", Q, Q) - jnp.eye(p, dtype=dtype)
    qn = jnp.sqrt(jnp.sum(Q * Q, axis=(1, 2)))                             # ‖Q_h‖_F
    lmax_h = jnp.max(jnp.abs(lamh), axis=1)
    bnorm = jnp.sqrt(jnp.sum(B0 * B0, axis=(1, 2)))
    r_h = jnp.sqrt(jnp.sum(R * R, axis=(1, 2))) + gamma(p + 1, dtype) * (bnorm * qn + qn * lmax_h)
    return (lamh, Kt, r_h, jnp.sqrt(jnp.sum(E * E, axis=(1, 2))), qn, lmax_h,
            jnp.sqrt(jnp.sum(K * K, axis=(1, 2))))


def decompose(B: jax.Array, J: jax.Array, w: jax.Array, *, eigh: Eigh = _default_eigh,
              asym_rtol: float | None = None) -> Structure:
    """``Structure`` of A = blockdiag(B) + Jᵀdiag(w)J from B [H, p, p], J [n, P], w [n]
    (P = H·p, J's columns head-major: column h·p + i is coordinate i of head h).

    B is split as sym(B) + skew(B); sym(B) is decomposed and ‖skew(B_h)‖_F joins the
    backward error (so rounding-level asymmetry of a computed Hessian is covered); a
    relative asymmetry above ``asym_rtol`` (default :func:`asym_tolerance`) makes the
    structure invalid.

    Costs H eigh(p×p), one [H,p,p]x[H,p,n] product (K̃), one residual check
    (H products p×p×p) — in gcd(H, BLOCKS) blocks of heads, split over the devices —
    and the n×n Gram K̃ᵀK̃ (for the λmax bracket)."""
    H, p, _ = B.shape
    n, P = J.shape
    dtype = B.dtype
    eps = jnp.finfo(dtype).eps
    asym_rtol = asym_tolerance(dtype) if asym_rtol is None else asym_rtol
    finite = jnp.all(jnp.isfinite(B)) & jnp.all(jnp.isfinite(J)) & jnp.all(jnp.isfinite(w))
    B0 = jnp.where(finite, B, 0.0)
    J0 = jnp.where(finite, J, 0.0)
    w0 = jnp.where(finite, w, 0.0)
    bnorm = jnp.sqrt(jnp.sum(B0 * B0, axis=(1, 2)))                       # ‖B_h‖_F [H]
    skew = 0.5 * (B0 - jnp.swapaxes(B0, 1, 2))
    skew_h = jnp.sqrt(jnp.sum(skew * skew, axis=(1, 2)))
    size = jnp.max(bnorm) + jnp.sum(jnp.abs(w0) * jnp.sum(J0 * J0, axis=1))     # max‖B_h‖_F + ‖K‖_F²
    asym_h = 2 * skew_h / jnp.where(size > 0, size, 1.0)
    asym = jnp.max(asym_h)
    B0 = B0 - skew                                                         # sym(B)
    sign = jnp.where(w0 < 0, -1.0, 1.0).astype(dtype)
    K = (J0 * jnp.sqrt(jnp.abs(w0))[:, None]).T.reshape(H, p, n)          # [H, p, n]
    nb = math.gcd(H, BLOCKS)
    per = over_blocks(partial(_heads, eigh=eigh), (B0.reshape(nb, H // nb, p, p), K.reshape(nb, H // nb, p, n)))
    lamh, Kt, r_h, e_h, qn, lmax_h, knF = (a.reshape((H,) + a.shape[2:]) for a in per)
    # a posteriori backward error of the decomposition (docstring item 2)
    eta = jnp.max(e_h)
    e_B = jnp.sqrt(1 + eta) * jnp.max(r_h + skew_h) + eta * jnp.max(lmax_h)
    fK = gamma(p, dtype) * jnp.sqrt(jnp.sum((qn * knF) ** 2))             # ‖F‖_F
    Kt = Kt.reshape(P, n)
    lam = lamh.reshape(P)
    G = _groups(P, None)
    gram = _gram(Kt, jnp.ones((1, P), dtype), G)[0]                        # K̃ᵀK̃ [n, n]
    pos = sign > 0
    mask = jnp.stack([pos, ~pos]).astype(dtype)                            # [2, n]
    grams = gram[None] * mask[:, :, None] * mask[:, None, :]
    gev = each(eigh, grams)[0][:, -1]                                      # λmax of K₊ᵀK₊, K₋ᵀK₋
    slack = 4 * n * eps * jnp.sqrt(jnp.sum(grams ** 2, axis=(1, 2))) + \
        gamma(P // G + G + 5, dtype) * jnp.trace(jnp.abs(grams), axis1=1, axis2=2)
    gpos, gneg = jnp.maximum(gev + slack, 0.0)
    knorm = jnp.sqrt(jnp.maximum(gpos, gneg))
    e_K = 2 * knorm * fK + fK ** 2
    backward = jnp.stack([e_B, eta, e_K])
    scale = jnp.max(jnp.abs(lam)) + jnp.maximum(gpos, gneg)
    knorm2 = jnp.sum(Kt * Kt, axis=1)
    keys = jnp.where(knorm2 > 0, lam, jnp.inf)
    order = jnp.argsort(keys)
    return Structure(lam=lam, Kt=Kt, knorm2=knorm2, sign=sign,
                     n_pos=jnp.sum(pos), n_neg=jnp.sum(~pos), gpos=gpos, gneg=gneg,
                     backward=backward, scale=scale, finite=finite, asym=asym,
                     asym_head=jnp.argmax(asym_h), valid=finite & (asym <= asym_rtol),
                     order=order.astype(jnp.int32), keys=keys[order])


def widening(st: Structure, lam) -> jax.Array:
    """δ(λ): how far a count certified for the model matrix at λ moves for A itself."""
    e_B, eta, e_K = st.backward
    return (e_B + jnp.abs(lam) * eta + e_K) / jnp.maximum(1 - eta, 1e-300)


# ---------------------------------------------------------------------------
# The count primitive
# ---------------------------------------------------------------------------

def top_rows(rho: jax.Array, r: int) -> jax.Array:
    """Indices [r] of the r largest entries of ``rho [P]``, largest first, ties to the lower
    index (r argmax passes, O(rP))."""

    def pick(k, carry):
        rest, idx = carry
        i = jnp.argmax(rest)
        return rest.at[i].set(-jnp.inf), idx.at[k].set(i.astype(idx.dtype))

    return jax.lax.fori_loop(0, r, pick, (rho, jnp.zeros((r,), jnp.int32)))[1]


def _groups(P: int, groups) -> int:
    """Number of partial sums G (a divisor of P, near √P unless given)."""
    if groups is not None:
        if P % int(groups):
            raise InputError(f"groups={groups} must divide P={P}")
        return int(groups)
    best = 1
    for g in range(1, int(P ** 0.5) + 1):
        if P % g == 0:
            best = g
    return best


def _block_gram(Kb, ib):
    """One block's partial sums in order: ``Kb [g, P/G, n]``, ``ib [g, k, P/G]`` ->
    ``[k, n, n]`` = Σ_groups K̃_gᵀ diag(inv) K̃_g. k < 8: one GEMM ``[n, P/G] x [P/G, n]`` per
    group and threshold (symmetrized); else the n(n+1)/2 products k_ja·k_jb (a <= b) of the
    group, one GEMM ``[n(n+1)/2, P/G] x [P/G, k]`` for all thresholds."""
    g, pg, n = Kb.shape
    k = ib.shape[1]
    dtype = Kb.dtype
    if k < 8:
        def body(j, acc):
            Kg = Kb[j]
            C = jnp.einsum("kp,pa,pb->kab", ib[j], Kg, Kg)
            return acc + 0.5 * (C + jnp.swapaxes(C, 1, 2))
        return jax.lax.fori_loop(0, g, body, jnp.zeros((k, n, n), dtype))
    ia, jb = np.triu_indices(n)

    def body(j, acc):
        KT = Kb[j].T                                                       # [n, P/G]
        M = jnp.concatenate([KT[a:a + 1] * KT[a:] for a in range(n)], axis=0)   # [n(n+1)/2, P/G]
        return acc + M @ ib[j].T
    acc = jax.lax.fori_loop(0, g, body, jnp.zeros((ia.size, k), dtype))
    C = jnp.zeros((k, n, n), dtype).at[:, ia, jb].set(acc.T)
    return C + jnp.swapaxes(jnp.triu(C, 1), 1, 2)


def _gram(Kt, inv, G: int):
    """``K̃ᵀ diag(inv_i) K̃`` [k, n, n] for ``inv [k, P]`` (module docstring, 'The row pass'):
    G groups of P/G rows in gcd(G, BLOCKS) blocks (split over the devices), added in block order."""
    P, n = Kt.shape
    k = inv.shape[0]
    nb = math.gcd(G, BLOCKS)
    Kb = Kt.reshape(nb, G // nb, P // G, n)
    ib = jnp.swapaxes(inv.reshape(k, nb, G // nb, P // G), 0, 1).swapaxes(1, 2)   # [nb, G/nb, k, P/G]
    parts = over_blocks(_block_gram, (Kb, ib))                              # [nb, k, n, n]
    acc = parts[0]
    for b in range(1, nb):
        acc = acc + parts[b]
    return acc


class Schur(NamedTuple):
    """The certified inertia of Ã − x for every x of a window [x₋, x₊] ∋ t, from one Schur
    complement Z(t) (module docstring, 'One primitive'); every field ``[k]`` for k points.

    below_lo, below_hi: #{j ∉ N: λ_j < x₋}, #{j ∉ N: λ_j < x₊} (exact, uncoupled rows
    and F); above: #{j ∉ N: λ_j > x₊}; exact: #{j ∉ N: k_j = 0, λ_j = t}; neg, pos, unsure:
    eigenvalues ζ of Z(t) below −err, above err, within; err: the band; err_round: its
    rounding part (without the window's); amin: min|ζ|; ok: the count was made (structure
    valid, finite, no coupled pole in the window outside N). So, for every x of the window,

        below_lo + neg − n₊ <= #{eig(Ã) < x₋},   #{eig(Ã) < x₊} <= below_hi + neg + unsure − n₊.

    C_F [k, n, n], idx [k, r] (the N rows) and dN [k, r] (λ_j − t there) are kept for the
    secular function."""

    below_lo: jax.Array
    below_hi: jax.Array
    above: jax.Array
    exact: jax.Array
    neg: jax.Array
    pos: jax.Array
    unsure: jax.Array
    err: jax.Array
    err_round: jax.Array
    amin: jax.Array
    ok: jax.Array
    CF: jax.Array
    idx: jax.Array
    dN: jax.Array


def _near(st: Structure, t, x_lo, x_hi, r: int):
    """Indices [r] of the rows kept in Z at t: among the 4r coupled poles nearest t (by λ),
    those in the window [x₋, x₊] first, then the largest ‖k_j‖²/|λ_j − t|; decoupled rows
    only when fewer than r are coupled. O(log P + r). (Any N gives a valid count; this one
    keeps the poles that would make C_F large or the window bound loose.)"""
    P = st.keys.shape[0]
    c = min(4 * r, P)
    start = jnp.clip(jnp.searchsorted(st.keys, t) - c // 2, 0, P - c)
    cand = jax.lax.dynamic_slice(st.order, (start,), (c,))
    lam, kn = st.lam[cand], st.knorm2[cand]
    d = lam - t
    inwin = (lam >= x_lo) & (lam <= x_hi)
    rho = jnp.where(kn > 0, jnp.where(inwin, jnp.inf, kn / jnp.abs(jnp.where(d == 0, 1.0, d))), -1.0)
    return cand[jnp.argsort(-rho, stable=True)[:r]]


def _rows(st: Structure, t, x_lo, x_hi, *, r: int):
    """The O(P) part of one point: N, the weights inv [P] of C_F, Σ_F ‖k_j‖²/|λ_j − t|, the
    window sum, and the counts over the rows outside N."""
    P = st.lam.shape[0]
    lam = st.lam
    coupled = st.knorm2 > 0
    inwin = (lam >= x_lo) & (lam <= x_hi)
    d = lam - t
    idx = _near(st, t, x_lo, x_hi, r)
    inN = jnp.zeros((P,), bool).at[idx].set(True)
    inF = coupled & ~inN
    lost = jnp.any(inF & inwin)                       # a coupled pole within the window outside N
    useF = inF & ~inwin                               # λ_j ∉ [x₋, x₊] ∋ t: d_j ≠ 0
    inv = jnp.where(useF, 1.0 / jnp.where(useF, d, 1.0), 0.0)
    ainv = jnp.abs(inv)
    tF = jnp.sum(st.knorm2 * ainv)
    dist = jnp.where(lam < x_lo, x_lo - lam, lam - x_hi)
    tW = jnp.sum(jnp.where(useF, st.knorm2 * ainv / jnp.where(useF, dist, 1.0), 0.0))
    outN = ~inN
    counts = (jnp.sum(outN & (lam < x_lo)), jnp.sum(outN & (lam < x_hi)), jnp.sum(outN & (lam > x_hi)),
              jnp.sum(outN & ~coupled & (d == 0)))
    return idx, inv, tF, tW, lost, counts


def _matrix(st: Structure, t, idx, CF):
    """Z(t) [(r+n), (r+n)] (N rows scaled by f = 2^-k so that |D_N f²| <= 1, a congruence) and f."""
    d = st.lam - t
    dN, KN = d[idx], st.Kt[idx]
    dmax = jnp.max(jnp.abs(dN))
    f = jnp.exp2(-jnp.ceil(jnp.log2(jnp.where(dmax > 0, dmax, 1.0)) / 2))
    Z = jnp.block([[jnp.diag(dN * f * f), KN * f], [(KN * f).T, -jnp.diag(st.sign) - CF]])
    return Z, f, dN


def _finish(st: Structure, t, x_lo, x_hi, idx, CF, tF, tW, lost, counts, Z, f, dN, zeta, *, G: int):
    """The band err and the signs of Z(t)'s eigenvalues ζ for one point (module docstring)."""
    P, n = st.Kt.shape
    r = idx.shape[0]
    dtype = st.Kt.dtype
    u = jnp.finfo(dtype).eps / 2
    infl = inflation(dtype, P)
    h = jnp.maximum(t - x_lo, x_hi - t)
    err_round = (gamma(P // G + G + 5, dtype) * tF + (8 * (r + n) + 2) * u * jnp.sqrt(jnp.sum(Z * Z))) * infl
    err = (err_round + (h * f * f + h * tW) * infl) * infl
    ok = st.valid & ~lost & jnp.all(jnp.isfinite(zeta)) & jnp.isfinite(err)
    neg = jnp.sum(zeta < -err)
    pos = jnp.sum(zeta > err)
    return Schur(*counts, neg=neg, pos=pos, unsure=r + n - neg - pos, err=err, err_round=err_round,
                 amin=jnp.min(jnp.abs(zeta)), ok=ok, CF=CF, idx=idx, dN=dN)


def schur(st: Structure, t, x_lo=None, x_hi=None, *, num_near: int = 8, groups=None,
          eigh: Eigh = _default_eigh) -> Schur:
    """The count primitive (module docstring, 'One primitive'): one Schur complement per
    point ``t [k]``, certified on the windows ``[x_lo, x_hi] ∋ t`` (default ``x_lo = x_hi =
    t``: a plain count). Cost O(k(n²P/2 + P + (r+n)³)): the row pass is one GEMM per partial
    sum for all k points (``num_near`` = r rows kept in Z; ``groups`` = G partial sums,
    default a divisor of P near √P)."""
    P, n = st.Kt.shape
    dtype = st.Kt.dtype
    t = jnp.asarray(t, dtype)
    x_lo = t if x_lo is None else jnp.asarray(x_lo, dtype)
    x_hi = t if x_hi is None else jnp.asarray(x_hi, dtype)
    r = int(min(num_near, P))
    G = _groups(P, groups)
    idx, inv, tF, tW, lost, counts = jax.vmap(partial(_rows, st, r=r))(t, x_lo, x_hi)
    CF = _gram(st.Kt, inv, G)
    Z, f, dN = jax.vmap(partial(_matrix, st))(t, idx, CF)
    zeta = each(eigh, Z)[0]
    return jax.vmap(partial(_finish, st, G=G))(t, x_lo, x_hi, idx, CF, tF, tW, lost, counts, Z, f, dN, zeta)


class Count(NamedTuple):
    """Inertia of A − λI: #{eig < λ} ∈ [below, below + unsure − exact], #{eig > λ} ∈
    [above, above + unsure − exact]; below + above + unsure = P. ``exact`` (counted in
    ``unsure``): eigenvalues of the model matrix equal to λ itself (uncoupled rows, λ_j = λ).
    ``margin``: min |ζ|/err over the eigenvalues ζ of Z (> 1: no tie; the count is exact)."""

    below: jax.Array
    above: jax.Array
    unsure: jax.Array
    margin: jax.Array
    exact: jax.Array


def count_of(st: Structure, s: Schur) -> Count:
    """The :class:`Count` of a plain :class:`Schur` point (x₋ = x₊ = t; any leading shape)."""
    P = st.Kt.shape[0]
    below = s.below_lo + s.neg - st.n_pos
    above = s.above + s.pos - st.n_neg
    margin = s.amin / jnp.where(s.err > 0, s.err, jnp.finfo(st.Kt.dtype).tiny)
    zero = jnp.zeros_like(below)
    return Count(below=jnp.where(s.ok, below, zero), above=jnp.where(s.ok, above, zero),
                 unsure=jnp.where(s.ok, s.unsure + s.exact, P), margin=jnp.where(s.ok, margin, 0.0),
                 exact=jnp.where(s.ok, s.exact, zero))


def _is_min(side):
    """``side`` as a flag: a Python bool for 'min'/'max' (static: one branch is traced),
    else a traced boolean array (True = λmin), so that both ends can run in one ``vmap``."""
    if isinstance(side, str):
        if side not in ("min", "max"):
            raise InputError(f"side must be 'min' or 'max', got {side!r}")
        return side == "min"
    return jnp.asarray(side, bool)


def _sel(is_min, a, b):
    """``a`` for the λmin side, ``b`` for the λmax side (static or traced flag)."""
    if isinstance(is_min, bool):
        return a if is_min else b
    return jnp.where(is_min, a, b)


def _evaluate(st: Structure, x, *, num_near: int, groups, eigh: Eigh, side):
    """One count at x (:func:`schur` with k = 1): the certified :class:`Count` of A − xI and,
    when ``side`` is given, ``(g, g')`` of that side's secular function (sharing C_F)."""
    P, n = st.Kt.shape
    s = jax.tree_util.tree_map(lambda a: a[0], schur(st, jnp.reshape(jnp.asarray(x, st.Kt.dtype), (1,)),
                                                      num_near=num_near, groups=groups, eigh=eigh))
    c = count_of(st, s)
    if side is None:
        return c
    # S = Σ + K̃ᵀD⁻¹K̃ from the same C_F (rows in N added back; NaN on an exact pole)
    KN = st.Kt[s.idx]
    S = jnp.diag(st.sign) + s.CF + (KN * (1.0 / s.dN)[:, None]).T @ KN
    mu, V = eigh(0.5 * (S + S.T))
    d = st.lam - x
    # 1-based index of the secular eigenvalue: m(λ) + n₋ for λmin, n₋ − m'(λ) + 1 for λmax
    i = _sel(_is_min(side), jnp.sum(d < 0) + st.n_neg, st.n_neg - jnp.sum(d > 0) + 1)
    j = jnp.clip(i - 1, 0, n - 1)
    uinv = jnp.where(d == 0, jnp.nan, 1.0 / jnp.where(d == 0, 1.0, d))
    u = (st.Kt @ V[:, j]) * uinv
    out = (i < 1) | (i > n)
    g = jnp.where(i < 1, -jnp.inf, jnp.where(i > n, jnp.inf, mu[j]))
    gp = jnp.where(out, 0.0, jnp.sum(u * u))
    return c, g, gp


def count(st: Structure, x, *, num_near: int = 8, groups=None, eigh: Eigh = _default_eigh) -> Count:
    """Certified inertia of A − xI (module docstring: 'The count'). O(n²P + (r+n)³).

    ``num_near`` = r rows kept in Z (:func:`schur`); ``groups`` = G partial sums for C_F
    (default: a divisor of P near √P)."""
    return _evaluate(st, x, num_near=num_near, groups=groups, eigh=eigh, side=None)


def secular(st: Structure, x, side: Side | jax.Array, *, num_near: int = 8, groups=None,
            eigh: Eigh = _default_eigh):
    """``(g, g')`` of the monotone secular function of ``side`` ('min' or 'max') at x
    (module docstring). ±inf where the index falls outside 1..n; NaN on an exact pole."""
    _, g, gp = _evaluate(st, x, num_near=num_near, groups=groups, eigh=eigh, side=side)
    return g, gp


class Enclosure(NamedTuple):
    """λ ∈ [lo, hi] (certified: widened by δ). ``width_ok``: the width target was met;
    ``count_lo``, ``count_hi``: the certified bracket before widening; ``iterations``:
    counts spent; ``ties``: evaluations that hit an unsure count; ``valid``: inputs finite
    and B symmetric; ``confirmed``: fresh counts at ``count_lo`` and ``count_hi``, made
    after the search and independent of it, confirm the bracket (:func:`confirm_end`).
    Unless valid and confirmed, lo = hi = NaN: no certificate."""

    lo: jax.Array
    hi: jax.Array
    width_ok: jax.Array
    count_lo: jax.Array
    count_hi: jax.Array
    iterations: jax.Array
    ties: jax.Array
    valid: jax.Array
    confirmed: jax.Array


def _sides(c: Count, side):
    """(left, right): x certified below / above the target eigenvalue."""
    m = _is_min(side)
    return (_sel(m, (c.below == 0) & (c.unsure == 0), c.above >= 1),
            _sel(m, c.below >= 1, (c.above == 0) & (c.unsure == 0)))


def initial_bracket(st: Structure, side):
    """The theorem brackets ``(lo, hi)`` of the module docstring (for the model matrix):
    w >= 0 gives [λ₁(B), λ_{n+1}(B)] for λmin and [λ_P(B), λ_P(B) + ‖K‖²] for λmax."""
    P, n = st.Kt.shape
    lam = st.lam
    m = _is_min(side)
    k = min(n, P - 1)
    out = []
    if m is not False:
        small = -jax.lax.top_k(-lam, k + 1)[0]                 # ascending, [k+1]
        hi_i = jnp.minimum(st.n_pos, k)
        out.append((small[0] - st.gneg, jnp.where(st.n_pos < P, small[hi_i], small[-1] + st.gpos)))
    if m is not True:
        big = jax.lax.top_k(lam, k + 1)[0]                     # descending
        lo_i = jnp.minimum(st.n_neg, k)
        out.append((jnp.where(st.n_neg < P, big[lo_i], big[-1] - st.gneg), big[0] + st.gpos))
    if len(out) == 1:
        return out[0]
    return _sel(m, out[0][0], out[1][0]), _sel(m, out[0][1], out[1][1])


def _left_pole(st: Structure, side):
    """λ_L: the pole where the secular function of ``side`` tends to −∞ (the smallest
    coupled eigenvalue of B for 'min', the largest for 'max'); NaN if none is coupled."""
    coupled = st.knorm2 > 0
    m = _is_min(side)
    v = _sel(m, jnp.min(jnp.where(coupled, st.lam, jnp.inf)), jnp.max(jnp.where(coupled, st.lam, -jnp.inf)))
    return jnp.where(jnp.isfinite(v), v, jnp.nan)


class _Search(NamedTuple):
    """The loop state of :func:`enclose`'s root search (scalars): ``it`` counts made; ``[lo, hi]``
    the certified bracket; ``x`` the next point; ``step_before_last``, ``last_step`` the last two
    |x_{k+1} − x_k| (a step longer than half the one before last bisects); ``ties`` unsure counts
    so far, ``[tie_lo, tie_hi]`` the cluster of their points and ``tie_step`` the outward step
    from it."""

    it: jax.Array
    lo: jax.Array
    hi: jax.Array
    x: jax.Array
    step_before_last: jax.Array
    ties: jax.Array
    tie_lo: jax.Array
    tie_hi: jax.Array
    tie_step: jax.Array
    last_step: jax.Array


def enclose(st: Structure, side: Side | jax.Array = "min", *, lo=None, hi=None, x0=None, rtol: float = 1e-10,
            atol_factor: float = 64.0, max_iter: int = 100, num_near: int = 8, groups=None,
            step: Step = "rational", eigh: Eigh = _default_eigh) -> Enclosure:
    """Certified enclosure of λmin(A) (side='min') or λmax(A) ('max').

    Every evaluation is one certified count (moving one bracket end) plus the secular
    function's value and slope from the same product. ``step``:

    * ``"rational"`` (default): the root of the one-pole model g(λ) ≈ a − b/(λ − λ_L)
      matched to (g, g') — exact when one pole dominates, Newton's step in the variable
      −1/(λ − λ_L);
    * ``"newton"``: plain Newton on g;
    * ``"bisect"``: bisection only (cost fixed in advance: log2(width/tol) counts).

    Fallbacks: a model step outside the bracket falls back to Newton's, and one still
    outside, or longer than half the step before last, to bisection; once the step is below tol/2 the next point is placed tol/4
    beside the root on the side whose end is still far, so the last two counts land on
    both sides. After an unsure count (a tie) the search steps outward from the cluster of
    unsure points (doubling the step while counts stay unsure) and stops when both gaps
    between the certified ends and that cluster are below max(tol, δ)/8 (no gap needs a finer
    resolution than the widening δ each end gets) — then the width is what the rounding
    allows and ``width_ok`` is False. Stops when
    hi − lo <= tol = max(rtol·m − δ(lo) − δ(hi), atol_factor·u·scale), m = max(|lo|, |hi|),
    or after ``max_iter`` counts: the widened enclosure then has width <= rtol·m (the
    target) unless the rounding floor atol + δ(lo) + δ(hi) is larger. ``lo``/``hi`` must be
    certified ends (default: the theorem bracket); ``x0``: first point (default: 1 % into
    the bracket for 'min', its middle for 'max')."""
    if step not in ("rational", "newton", "bisect"):
        raise InputError(f"step must be rational, newton or bisect, got {step!r}")
    dtype = st.Kt.dtype
    u = jnp.finfo(dtype).eps / 2
    lo0, hi0 = initial_bracket(st, side)
    lo = lo0 if lo is None else jnp.asarray(lo, dtype)
    hi = hi0 if hi is None else jnp.asarray(hi, dtype)
    atol = atol_factor * u * st.scale
    pole = _left_pole(st, side)

    def tol_of(lo, hi):
        target = rtol * jnp.maximum(jnp.abs(lo), jnp.abs(hi)) - widening(st, lo) - widening(st, hi)
        return jnp.maximum(target, atol)

    if x0 is None:
        x_init = lo + _sel(_is_min(side), 0.01, 0.5) * (hi - lo)
    else:
        x_init = jnp.clip(jnp.asarray(x0, dtype), lo, hi)

    def cond(s: _Search):
        it, lo, hi, tlo, thi = s.it, s.lo, s.hi, s.tie_lo, s.tie_hi
        tol = tol_of(lo, hi)
        # gaps beside the cluster need no resolution finer than the widening δ each end gets
        q = 0.125 * jnp.maximum(tol, jnp.maximum(widening(st, lo), widening(st, hi)))
        stuck = (s.ties > 0) & (jnp.clip(tlo, lo, hi) - lo <= q) & (hi - jnp.clip(thi, lo, hi) <= q)
        return (it < max_iter) & (hi - lo > tol) & ~stuck & st.valid

    def body(s: _Search) -> _Search:
        it, lo, hi, x, ties = s.it, s.lo, s.hi, s.x, s.ties
        dx2, dx1, tlo, thi, tstep = s.step_before_last, s.last_step, s.tie_lo, s.tie_hi, s.tie_step
        c, g, gp = _evaluate(st, x, num_near=num_near, groups=groups, eigh=eigh, side=side)
        left, right = _sides(c, side)
        tie = ~left & ~right
        lo = jnp.where(left, jnp.maximum(lo, x), lo)
        hi = jnp.where(right, jnp.minimum(hi, x), hi)
        tol = tol_of(lo, hi)
        mid = 0.5 * (lo + hi)
        if step == "bisect":
            nxt = mid
        else:
            inside = lambda v: jnp.isfinite(v) & (v > lo) & (v < hi) & (gp > 0)
            xn = x - g / gp
            if step == "rational":
                dx = x - pole
                a = g + gp * dx
                xr = pole + gp * dx * dx / a
                xn = jnp.where((dx > 0) & (a > 0) & inside(xr), xr, xn)
            good = inside(xn)
            conv = jnp.abs(xn - x) < 100 * tol        # Newton-converged: error ~ step² << tol
            xn = jnp.where(conv, jnp.where(xn - lo > 0.5 * tol, xn - 0.25 * tol, xn + 0.25 * tol), xn)
            stall = jnp.abs(xn - x) > 0.5 * dx2       # steps not shrinking: bisect
            nxt = jnp.where(good & ~stall, xn, mid)
        # Ties: once a count was unsure, the root lies (probably) in the cluster [tlo, thi]
        # of unsure points; search outward from it on the side with the larger gap,
        # doubling the step while counts stay unsure. Newton is not used again (it would
        # return into the cluster).
        tlo = jnp.where(tie, jnp.minimum(tlo, x), tlo)
        thi = jnp.where(tie, jnp.maximum(thi, x), thi)
        tstep = jnp.where(tie, jnp.where(ties > 0, 2 * tstep, 0.25 * tol), tstep)
        ties = ties + tie
        cl, ch = jnp.clip(tlo, lo, hi), jnp.clip(thi, lo, hi)
        gl, gr = cl - lo, hi - ch
        xt = jnp.where(gl > gr, cl - jnp.minimum(0.5 * gl, tstep), ch + jnp.minimum(0.5 * gr, tstep))
        nxt = jnp.where(ties > 0, xt, nxt)
        q = jnp.minimum(0.125 * tol, 0.25 * (hi - lo))
        nxt = jnp.clip(nxt, lo + q, hi - q)
        return _Search(it=it + 1, lo=lo, hi=hi, x=nxt, step_before_last=dx1, ties=ties, tie_lo=tlo, tie_hi=thi,
                       tie_step=tstep, last_step=jnp.abs(nxt - x))

    inf = jnp.asarray(jnp.inf, dtype)
    zero = jnp.zeros((), dtype)
    end = jax.lax.while_loop(cond, body, _Search(it=jnp.asarray(0), lo=lo, hi=hi, x=x_init, step_before_last=inf,
                                                 ties=jnp.asarray(0), tie_lo=inf, tie_hi=-inf, tie_step=zero,
                                                 last_step=inf))
    it, lo, hi, ties = end.it, end.lo, end.hi, end.ties
    kw = dict(num_near=num_near, groups=groups, eigh=eigh)
    step0 = 0.25 * tol_of(lo, hi)
    lo, ok_lo, n_lo = confirm_end(st, lo, side, "lo", step0, **kw)
    hi, ok_hi, n_hi = confirm_end(st, hi, side, "hi", step0, **kw)
    confirmed = ok_lo & ok_hi & st.valid
    ok = (hi - lo <= tol_of(lo, hi)) & confirmed
    nan = jnp.asarray(jnp.nan, dtype)
    wl, wh = widening(st, lo), widening(st, hi)
    return Enclosure(lo=jnp.where(confirmed, lo - wl, nan), hi=jnp.where(confirmed, hi + wh, nan),
                     width_ok=ok, count_lo=lo, count_hi=hi, iterations=it + n_lo + n_hi, ties=ties,
                     valid=st.valid, confirmed=confirmed)


def _end_status(c: Count, side, end: str):
    """(confirmed, refuted) of one bracket end from its count. λmin: ``lo`` needs
    #{eig < lo} = 0, ``hi`` needs #{eig <= hi} >= 1; λmax: ``hi`` needs #{eig > hi} = 0,
    ``lo`` needs #{eig >= lo} >= 1 (an eigenvalue equal to the end, ``Count.exact``, is on
    the right side of it). Neither: a tie (an eigenvalue within rounding of the end)."""
    m = _is_min(side)
    strict = c.unsure == c.exact                   # every unsure eigenvalue equals the end exactly
    none_below = (c.below == 0) & strict
    none_above = (c.above == 0) & strict
    some_at_or_below = c.below + c.exact >= 1
    some_at_or_above = c.above + c.exact >= 1
    nothing_at_or_below = (c.below == 0) & (c.unsure == 0)
    nothing_at_or_above = (c.above == 0) & (c.unsure == 0)
    if end == "lo":   # λmin: nothing below; λmax: something at or above
        return (_sel(m, none_below, some_at_or_above), _sel(m, c.below >= 1, nothing_at_or_above))
    return (_sel(m, some_at_or_below, none_above), _sel(m, nothing_at_or_below, c.above >= 1))


def confirm_end(st: Structure, x, side, end: str, step0, *, max_steps: int = 12, num_near: int = 8,
                groups=None, eigh: Eigh = _default_eigh):
    """Confirm one end of a bracket of the model matrix's λmin (``side="min"``) or λmax by a
    fresh count at it, whatever search produced it (no theorem bracket, secular value or
    Ritz value is trusted; see :func:`_end_status`). A count that ties (an eigenvalue within
    rounding of the end) moves the end outward by ``step0``, doubling, until a count decides,
    at most ``max_steps`` times. Returns ``(end, confirmed, counts spent)``: the end is moved
    only outward, so a confirmed bracket still holds the eigenvalue; a refuted end (the
    count says the eigenvalue is on the other side) is returned unconfirmed."""
    kw = dict(num_near=num_near, groups=groups, eigh=eigh, side=None)
    out = -1.0 if end == "lo" else 1.0
    step0 = jnp.maximum(jnp.abs(step0), jnp.finfo(st.Kt.dtype).tiny)

    def cond(s):
        k, _, done, _ = s
        return ~done & (k <= max_steps)

    def body(s):
        k, x, _, _ = s
        good, bad = _end_status(_evaluate(st, x, **kw), side, end)
        nxt = jnp.where(good | bad, x, x + out * step0 * 2.0 ** k)
        return k + 1, nxt, good | bad, good

    k, x, _, good = jax.lax.while_loop(cond, body, (jnp.asarray(0), jnp.asarray(x, st.Kt.dtype),
                                                    jnp.asarray(False), jnp.asarray(False)))
    return x, good & jnp.isfinite(x), k


class RitzCheck(NamedTuple):
    """Certificate of a Ritz pair (θ, ‖r‖) for λmin (mirrored for λmax): ``lower_ok``:
    count(θ − ‖r‖) == 0, so no eigenvalue lies below θ − ‖r‖; ``upper_ok``: count(θ + ‖r‖) >= 1,
    an eigenvalue lies below θ + ‖r‖; ``missed``: count(θ − ‖r‖) >= 1 — the solver
    converged to an eigenvalue that is not the smallest; ``count_outer``: that count."""

    lower_ok: jax.Array
    upper_ok: jax.Array
    missed: jax.Array
    count_outer: jax.Array


def certify_ritz(st: Structure, theta, resid, side: Side | jax.Array = "min", *, num_near: int = 8,
                 groups=None, eigh: Eigh = _default_eigh) -> RitzCheck:
    """Two counts, at θ ∓ ‖r‖ (the outer side) and at θ ± ‖r‖ (the inner side: a count at θ
    itself is a tie whenever θ is accurate, so the inner end is certified at θ + ‖r‖; that
    θ >= λmin also holds by Courant–Fischer is not relied on)."""
    kw = dict(num_near=num_near, groups=groups, eigh=eigh, side=None)
    m = _is_min(side)
    c_out = _evaluate(st, theta + _sel(m, -resid, resid), **kw)
    c_in = _evaluate(st, theta + _sel(m, resid, -resid), **kw)
    out_left, out_right = _sides(c_out, m)
    in_left, in_right = _sides(c_in, m)
    return RitzCheck(lower_ok=_sel(m, out_left, out_right), upper_ok=_sel(m, in_right, in_left),
                     missed=_sel(m, c_out.below, c_out.above) >= 1, count_outer=_sel(m, c_out.below, c_out.above))


def ritz_radius(st: Structure, theta, resid, *, rtol: float = 1e-10, atol_factor: float = 64.0):
    """The radius r' at which a candidate θ (with residual ‖r‖) is certified:
    ``max(‖r‖, tol/4)`` with tol = max(rtol·|θ| − 2δ(θ), atol_factor·u·scale). Any r' > 0
    gives a valid certificate; the floor tol/4 keeps the two counts out of the band where
    they tie (a converged θ has ‖r‖ ~ 1e-15·|θ|, and a count that close to an eigenvalue
    cannot be decided), and [θ − r', θ + r'] already meets the width target."""
    dtype = st.Kt.dtype
    u = jnp.finfo(dtype).eps / 2
    tol = jnp.maximum(rtol * jnp.abs(theta) - 2 * widening(st, theta), atol_factor * u * st.scale)
    return jnp.maximum(jnp.abs(resid), 0.25 * tol)


def enclose_from_ritz(st: Structure, theta, resid, side: Side | jax.Array = "min", *, inflate: bool = True, **kw):
    """Certify a candidate (θ, ‖r‖) — a Ritz pair, or a dense eigenvalue — with two counts
    at θ ∓ r' (r' = :func:`ritz_radius` when ``inflate``, else ‖r‖); if it holds, polish the
    certified [θ − r', θ + r'] to the width target starting from θ (no count when it is
    already narrow enough); if the outer count says an eigenvalue lies beyond θ − r' (a
    miss: the solver converged to an eigenvalue that is not the extreme one), repair:
    search [theorem end, θ − r'], whose inner end that same count certified. A non-finite
    θ or ‖r‖ certifies nothing and the search starts from the theorem bracket. Returns
    ``(Enclosure, RitzCheck)``; the enclosure's ``iterations`` include the two counts."""
    ck = {k: kw[k] for k in ("num_near", "groups", "eigh") if k in kw}
    dtype = st.Kt.dtype
    lo0, hi0 = initial_bracket(st, side)
    theta = jnp.asarray(theta, dtype)
    resid = jnp.asarray(resid, dtype)
    usable = jnp.isfinite(theta) & jnp.isfinite(resid)
    if inflate:
        resid = ritz_radius(st, theta, resid, rtol=kw.get("rtol", 1e-10), atol_factor=kw.get("atol_factor", 64.0))
    theta = jnp.where(usable, theta, 0.5 * (lo0 + hi0))
    resid = jnp.where(usable, resid, 0.0)
    chk = certify_ritz(st, theta, resid, side, **ck)
    chk = RitzCheck(lower_ok=chk.lower_ok & usable, upper_ok=chk.upper_ok & usable,
                    missed=chk.missed & usable, count_outer=chk.count_outer)
    m = _is_min(side)
    lo = _sel(m, jnp.where(chk.lower_ok, theta - resid, lo0),
              jnp.where(chk.missed, theta + resid, jnp.where(chk.upper_ok, theta - resid, lo0)))
    hi = _sel(m, jnp.where(chk.missed, theta - resid, jnp.where(chk.upper_ok, theta + resid, hi0)),
              jnp.where(chk.lower_ok, theta + resid, hi0))
    lo, hi = jnp.maximum(lo, lo0), jnp.minimum(hi, hi0)
    x0 = jnp.where(chk.missed, lo + _sel(m, 0.01, 0.5) * (hi - lo), theta)
    enc = enclose(st, side, lo=lo, hi=hi, x0=x0, **kw)
    return enc._replace(iterations=enc.iterations + 2), chk


def extremes(B, J, w, *, rtol: float = 1e-10, num_near: int = 8, step: str = "rational",
             eigh: Eigh = _default_eigh):
    """Certified ``(Enclosure(λmin), Enclosure(λmax), Structure)`` of blockdiag(B) + Jᵀdiag(w)J
    (the secular route: no Lanczos)."""
    st = decompose(B, J, w, eigh=eigh)
    kw = dict(rtol=rtol, num_near=num_near, step=step, eigh=eigh)
    return enclose(st, "min", **kw), enclose(st, "max", **kw), st


def check_inputs(B, J, w, *, asym_rtol: float | None = None):
    """Host-side validation of concrete arrays ``B [H, p, p]``, ``J [n, H·p]``, ``w [n]``:
    raise :class:`~mhajax.errors.InputError` on NaN/inf, on a non-symmetric B (relative
    asymmetry ``‖B_h − B_hᵀ‖_F/(max_h' ‖B_h'‖_F + ‖K‖_F²)`` above ``asym_rtol``, default
    :func:`asym_tolerance` of B's dtype) or on mismatched shapes — never a certificate for
    a matrix that is not the one meant."""
    B, J, w = (np.asarray(a) for a in (B, J, w))
    if B.ndim != 3 or B.shape[1] != B.shape[2]:
        raise InputError(f"B must have shape [H, p, p], got {B.shape}")
    H, p, _ = B.shape
    if J.ndim != 2 or J.shape[1] != H * p:
        raise InputError(f"J must have shape [n, H·p] = [n, {H * p}], got {J.shape}")
    if w.shape != (J.shape[0],):
        raise InputError(f"w must have shape [{J.shape[0]}], got {w.shape}")
    for name, a in (("B", B), ("J", J), ("w", w)):
        bad = ~np.isfinite(a)
        if bad.any():
            raise InputError(f"{name} has {int(bad.sum())} non-finite entries (NaN/inf): "
                             "no certificate can be given")
    asym_rtol = asym_tolerance(B.dtype) if asym_rtol is None else asym_rtol
    size = np.sqrt(np.sum(B * B, axis=(1, 2))).max() + np.sum(np.abs(w) * np.sum(J * J, axis=1))
    asym = np.sqrt(np.sum((B - np.swapaxes(B, 1, 2)) ** 2, axis=(1, 2))) / (size if size > 0 else 1.0)
    h = int(np.argmax(asym))
    if asym[h] > asym_rtol:
        raise InputError(f"B is not symmetric: head {h} has ‖B_h − B_hᵀ‖_F/(max‖B_h'‖_F + ‖K‖_F²) = "
                         f"{asym[h]:.3g} > {asym_rtol:g} (a weighted_hessian must return symmetric blocks)")


__all__ = ["Structure", "gamma", "asym_tolerance", "decompose", "widening", "inflation", "Schur", "schur",
           "Count", "count_of", "count", "secular", "top_rows",
           "Enclosure", "initial_bracket", "enclose", "confirm_end", "RitzCheck", "certify_ritz", "ritz_radius",
           "enclose_from_ritz", "extremes", "check_inputs"]
