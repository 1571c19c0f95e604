"""Extreme eigenpairs of a symmetric operator from matrix-vector products.

Block Lanczos with full reorthogonalization and explicit Rayleigh–Ritz,
restarted from the current Ritz vectors until the *true* residuals
``||A v − θ v||`` of both extreme Ritz pairs are below
``rtol · max(|θ_min|, |θ_max|)``. Every function here is pure and works under
``jit`` and ``vmap`` (the restart loop is a ``lax.while_loop``).

Facts the caller can rely on:

* a Ritz value ``θ_min`` is an *upper* estimate of ``λ_min`` and ``θ_max`` a
  *lower* estimate of ``λ_max`` (Courant–Fischer), whatever the convergence;
* an eigenvalue of A lies within ``||r||`` of each Ritz value (for symmetric A).

Convergence is judged on the residual alone, never on an iteration count.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from mhajax.errors import InputError
from mhajax.linalg import eigh, norm
from mhajax.validate import checked_key, positive_float, positive_int


class ExtremeEigs(NamedTuple):
    """Result of :func:`extreme_eigs` (all leaves are arrays; batch-friendly)."""

    lambda_min: jax.Array      # Ritz value, an upper estimate of λ_min
    lambda_max: jax.Array      # Ritz value, a lower estimate of λ_max
    residual_min: jax.Array    # ||A v_min − θ_min v_min||, recomputed with a fresh product
    residual_max: jax.Array
    vec_min: jax.Array         # unit Ritz vectors [P]
    vec_max: jax.Array
    num_matvecs: jax.Array     # products with A spent, including the residual checks
    num_cycles: jax.Array
    converged: jax.Array       # both residuals <= tol
    tol: jax.Array             # the absolute residual tolerance used


def _orthogonalize(Q, w, passes: int = 2):
    """``passes`` (default two) passes of classical Gram–Schmidt of ``w``
    against the rows of ``Q`` (unused rows are zero and do not matter)."""
    for _ in range(passes):
        w = w - Q.T @ (Q @ w)
    return w


def _unit_or_random(Q, w, key, scale):
    """``w / ||w||`` if ``w`` is not negligible, else a random unit vector
    orthogonal to ``Q`` (an invariant subspace was found; the rare branch)."""
    P = w.shape[0]
    eps = jnp.finfo(w.dtype).eps
    nrm = norm(w)
    ok = nrm > eps * jnp.sqrt(P) * jnp.maximum(scale, jnp.finfo(w.dtype).tiny)

    def fresh(_):
        r = _orthogonalize(Q, jax.random.normal(key, (P,), w.dtype))
        rn = norm(r)  # zero only when Q already spans R^P
        return jnp.where(rn > 0, r / jnp.where(rn > 0, rn, 1.0), 0.0)

    return jax.lax.cond(ok, lambda _: w / jnp.where(ok, nrm, 1.0), fresh, None)


def krylov_rayleigh_ritz(matvec: Callable, start: jax.Array, num_steps: int, key, nstart=None):
    """One cycle of thick-restart Lanczos with explicit Rayleigh–Ritz.

    The basis ``Q [m, P]`` starts with the first ``nstart`` (default all,
    may be traced) rows of the start block ``S [b, P]``, orthonormalized, and
    continues as a Krylov sequence from the last of them:
    ``q_{j+1} ∝ (I − QQᵀ) A q_j`` (orthogonalized twice against all previous
    vectors — full reorthogonalization). When that vanishes (an invariant
    subspace was found) a random orthogonal vector replaces it, which keeps
    ``T = Q A Qᵀ`` exact. Returns ``(Q, T, q_next)`` where ``q_next`` is
    the next Krylov vector (for a thick restart). Costs ``m`` products.

    ``T`` is assembled from the first Gram–Schmidt coefficients ``Q a_j``
    (``a_j = A q_j``): entry ``(i, j)`` is ``q_iᵀ A q_j`` when row i was already
    in the basis at step j, else its mirror ``q_jᵀ A q_i`` from step i. So the
    products ``A Q`` are never stored: the working set is ``Q`` alone.
    """
    b, P = start.shape
    m = num_steps
    dtype = start.dtype
    Q = jnp.zeros((m, P), dtype)
    Tc = jnp.zeros((m, m), dtype)
    nstart = b if nstart is None else nstart
    scale0 = jnp.max(norm(start, axis=1))

    def put_start(i, Q):
        q = _unit_or_random(Q, _orthogonalize(Q, start[i]), jax.random.fold_in(key, 100_000 + i), scale0)
        return Q.at[i].set(jnp.where(i < nstart, q, 0.0))

    Q = jax.lax.fori_loop(0, b, put_start, Q)

    def body(j, carry):
        Q, Tc, _, scale = carry
        aq = matvec(Q[j])
        scale = jnp.maximum(scale, norm(aq))
        h = Q @ aq                       # q_iᵀ A q_j for the rows in the basis (others are 0)
        Tc = Tc.at[:, j].set(h)
        w = _orthogonalize(Q, aq - Q.T @ h, passes=1)   # the second Gram–Schmidt pass
        # Unconditional, in-place update (a lax.cond here would copy Q each step).
        nxt = jnp.minimum(j + 1, m - 1)
        w = _unit_or_random(Q, w, jax.random.fold_in(key, j), scale)
        grow = (j + 1 >= nstart) & (j + 1 < m)
        Q = Q.at[nxt].set(jnp.where(grow, w, Q[nxt]))
        return Q, Tc, aq, scale

    Q, Tc, a_last, scale = jax.lax.fori_loop(
        0, m, body, (Q, Tc, jnp.zeros((P,), dtype), jnp.zeros((), dtype)))
    q_next = _unit_or_random(Q, _orthogonalize(Q, a_last), jax.random.fold_in(key, m), scale)
    i, j = jnp.arange(m)[:, None], jnp.arange(m)[None, :]
    known = i < jnp.maximum(nstart, j + 1)      # row i was in the basis at step j
    T = jnp.where(known, Tc, Tc.T)
    T = 0.5 * (T + T.T)
    return Q, T, q_next


def extreme_eigs(matvec: Callable, dim: int, key, *, num_steps: int = 64,
                 max_cycles: int = 20, rtol: float | None = None, keep: int | None = None,
                 dtype=None) -> ExtremeEigs:
    """λ_min and λ_max of the symmetric operator ``matvec`` on ``R^dim``.

    Thick-restart Lanczos: each cycle (:func:`krylov_rayleigh_ritz`) builds a
    basis of ``m = min(num_steps, dim)`` vectors; the next starts from the
    ``keep`` lowest and ``keep`` highest Ritz vectors plus the next Krylov
    vector. It stops when both true residuals ``||A v − θ v||`` (recomputed
    with fresh products) are ``<= rtol·max(|θ_min|, |θ_max|)``, or after
    ``max_cycles`` cycles — then ``converged`` is False. ``rtol`` defaults to
    1e-10 in float64 and 1e-4 in float32. When ``num_steps >= dim`` one cycle
    spans the whole space and the result is exact up to rounding. Refused in one line
    (:class:`InputError`): a ``matvec`` that does not map ``[dim]`` to ``[dim]``, ``dim``,
    ``num_steps``, ``max_cycles`` or ``keep`` not an integer >= 1, ``rtol`` not ``None`` or
    a finite number > 0, a ``key`` that is no PRNG key, a ``dtype`` that is not floating.
    """
    dtype = dtype or jnp.result_type(float)
    key = checked_key("extreme_eigs", key)
    try:
        if not callable(matvec):
            raise InputError(f"matvec must be a function v [dim] -> A v [dim], got {type(matvec).__name__}")
        dim, num_steps, max_cycles = (positive_int(k, v) for k, v in
                                      (("dim", dim), ("num_steps", num_steps), ("max_cycles", max_cycles)))
        keep = keep if keep is None else positive_int("keep", keep)
        if rtol is not None and not isinstance(rtol, jax.core.Tracer):
            positive_float("rtol", rtol)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise InputError(f"dtype must be a floating-point type, got {jnp.dtype(dtype)}")
    except InputError as e:
        raise InputError(f"extreme_eigs: {e}") from None

    def op(v):   # checked where it is traced: a matvec that does not map [dim] to [dim], in one line
        try:
            w = matvec(v)
        except Exception as e:  # noqa: BLE001 — whatever the operator raised, reported in one line
            msg = (str(e).strip().splitlines() or [""])[0]
            raise InputError(f"extreme_eigs: matvec cannot take a vector of shape ({dim},): "
                             f"{type(e).__name__}: {msg}") from None
        if jnp.shape(w) != (dim,):
            raise InputError(f"extreme_eigs: matvec maps a vector of shape ({dim},) to shape {jnp.shape(w)}")
        return w
    m = int(min(num_steps, dim))
    if keep is None:
        keep = max(1, min(8, (m - 2) // 4))
    b = min(m, 2 * keep + 1)
    if rtol is None:
        rtol = 1e-10 if jnp.finfo(dtype).bits == 64 else 1e-4
    k0, key = jax.random.split(key)
    start = jax.random.normal(k0, (b, dim), dtype)

    def cycle(start, key, nstart):
        Q, T, q_next = krylov_rayleigh_ritz(op, start, m, key, nstart)
        evals, evecs = eigh(T)
        vecs = (evecs.T @ Q)  # Ritz vectors as rows, ascending Ritz values
        lo, hi = vecs[:keep], vecs[m - keep:] if m - keep >= keep else vecs[keep:]
        nxt = jnp.concatenate([lo, hi, q_next[None]])[:b]
        nxt = jnp.concatenate([nxt, jnp.zeros((b - nxt.shape[0], dim), dtype)]) if nxt.shape[0] < b else nxt
        unit = lambda v: v / norm(v)
        return evals[0], evals[-1], unit(vecs[0]), unit(vecs[-1]), nxt

    def residual(v, theta):
        return norm(op(v) - theta * v)

    def step(state):
        (i, key, start, lmin, lmax, vmin, vmax, rmin, rmax, nmv, _) = state
        key, kc = jax.random.split(key)
        # Cycle 0 is plain Lanczos from one random vector; later cycles are
        # thick restarts from b = 2·keep + 1 vectors.
        tmin, tmax, wmin, wmax, new_start = cycle(start, kc, jnp.where(i == 0, 1, b))
        qmin, qmax = residual(wmin, tmin), residual(wmax, tmax)
        # Keep the better estimate of each end (Ritz values are one-sided), or
        # the pair with the smaller residual: once a Ritz value has converged to
        # rounding, later cycles may return it an ulp "worse" with a far better
        # vector, which must not be discarded (else the residual never drops).
        better_min = (tmin <= lmin) | (qmin < rmin)
        better_max = (tmax >= lmax) | (qmax < rmax)
        lmin = jnp.where(better_min, tmin, lmin)
        vmin = jnp.where(better_min, wmin, vmin)
        rmin = jnp.where(better_min, qmin, rmin)
        lmax = jnp.where(better_max, tmax, lmax)
        vmax = jnp.where(better_max, wmax, vmax)
        rmax = jnp.where(better_max, qmax, rmax)
        tol = rtol * jnp.maximum(jnp.abs(lmin), jnp.abs(lmax))
        # A basis of the whole space (m == dim) makes the Ritz values exact; a cycle whose
        # Ritz values are not finite (a NaN/inf operator) ends the search: more cycles
        # cannot repair it. An infinite tol (no finite Ritz value kept yet) never converges.
        done = (((rmin <= tol) & (rmax <= tol) & jnp.isfinite(tol)) | (m == dim)
                | ~(jnp.isfinite(tmin) & jnp.isfinite(tmax)))
        return (i + 1, key, new_start, lmin, lmax, vmin, vmax, rmin, rmax, nmv + m + 2, done)
    def cond(state):
        i, done = state[0], state[-1]
        return (i < max_cycles) & ~done

    inf = jnp.asarray(jnp.inf, dtype)
    zeros = jnp.zeros((dim,), dtype)
    init = (jnp.asarray(0), key, start, inf, -inf, zeros, zeros, inf, inf,
            jnp.asarray(0), jnp.asarray(False))
    i, _, _, lmin, lmax, vmin, vmax, rmin, rmax, nmv, done = jax.lax.while_loop(cond, step, init)
    # an end that never took a finite Ritz value (still the ±inf start) is reported as NaN,
    # with a NaN residual: never as a value, never as converged
    nan = jnp.asarray(jnp.nan, dtype)
    seen_min, seen_max = jnp.isfinite(lmin), jnp.isfinite(lmax)
    lmin, rmin = jnp.where(seen_min, lmin, nan), jnp.where(seen_min, rmin, nan)
    lmax, rmax = jnp.where(seen_max, lmax, nan), jnp.where(seen_max, rmax, nan)
    tol = rtol * jnp.maximum(jnp.abs(lmin), jnp.abs(lmax))
    converged = (rmin <= tol) & (rmax <= tol)
    return ExtremeEigs(lmin, lmax, rmin, rmax, vmin, vmax, nmv, i, converged, tol)
