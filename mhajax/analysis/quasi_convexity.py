"""Local quasi-convexity along a segment (docs/theory.md §10, §15.6): the numbers of (QC) for a pair.

For θ_k and a reference θ*, ``Δ = θ_k − θ*``, ``θ(t) = θ_k − tΔ`` (t ∈ [0, 1]), the self-bounded weak
convexity (6.7), ``λ_min(∇²L̂(θ)) >= −(κ(θ)/√H) L̂(θ)``, gives

    ⟨∇L̂(θ_k), θ_k − θ*⟩ >= L̂(θ_k) − L̂(θ*) − (κ̄ / (2√H)) · M · ‖Δ‖²,         (QC)

    κ̄ = max_t κ(θ(t)),   M = max_t L̂(θ(t)).

* κ̄ is exact: κ is convex along the segment (:data:`CONVEX_BOUNDS`), so its maximum is at an end.
* M is sampled, ``M_s = max_j L̂(θ(t_j))`` on ``grid + 1`` points; ``M_s <= M`` and (QC) is easier
  with a larger M, so "holds with M_s" is certified. ``M_cert = M_s · exp(β̄₂ ‖Δ‖ / (2·grid)) >= M``
  (self-bounded gradient (6.6)): a pair violates (QC) beyond doubt only if it fails with M_cert;
  failing with M_s only is inconclusive.
* Diagnostics: ``κ_need`` (the κ̄ at which (QC) is tight with M_s; <= 0: plain convexity holds) and
  ``κ_dir = max_j −√H ΔᵀHΔ / (‖Δ‖² L̂)`` on the grid, which (6.7) bounds by κ (``wc_ratio <= 1``).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.losses import LOGISTIC, Loss, risk
from mhajax.models.base import HeadModel, num_heads
from mhajax.models.softmax import SOFTMAX

#: the relative tolerance of (QC)'s comparisons in float64 (the check widens it for float32)
REL_TOL = 1e-10


def _vdot(a, b):
    return sum(jnp.vdot(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


#: models whose closed-form κ(θ) and β₂(θ) are convex along every segment (norms of affine
#: functions of θ, or constants): their maxima over a segment sit at an endpoint, so κ̄ and β̄₂
#: are exact. For the others (``qk``, ``value``: products of weights) κ̄ is the max over the
#: grid (a lower estimate: a *holds* verdict stays certified) and no violation is certified.
CONVEX_BOUNDS = ("softmax", "linear", "relu", "causal", "cls")


class Segment(NamedTuple):
    """:func:`segment_check`'s numbers for one pair (floats)."""

    loss_k: float
    loss_star: float
    lhs: float          # ⟨∇L̂(θ_k), θ_k − θ*⟩
    dist2: float        # ‖θ_k − θ*‖²
    kappa_bar: float
    beta2_bar: float
    max_loss: float     # M_s = max_seg L̂ (sampled)
    cert_factor: float  # M_cert / M_s
    kappa_dir: float
    wc_ratio: float
    heads: float        # H


class PairCheck(NamedTuple):
    """(QC) for one pair (:func:`finalize`): the segment's numbers (non-finite ones as None)
    and the verdicts."""

    loss_k: float
    loss_star: float
    lhs: float
    dist2: float
    kappa_bar: float
    beta2_bar: float
    max_loss: float
    cert_factor: float | None
    kappa_dir: float | None
    wc_ratio: float | None
    rhs: float                  # L̂(θ_k) − L̂(θ*) − κ̄/(2√H)·M_s·‖Δ‖²
    rhs_cert: float | None      # the same with M_cert
    max_loss_cert: float | None
    holds: bool                 # lhs >= rhs − tol
    certified_violation: bool   # lhs < rhs_cert − tol (κ̄, β̄₂ exact only)
    inconclusive: bool          # neither
    kappa_need: float | None    # the κ̄ that would make lhs = rhs
    convex: bool                # lhs >= L̂(θ_k) − L̂(θ*) − tol
    wc_holds: bool              # κ_dir <= κ (wc_ratio <= 1 + rel_tol)


def segment_check(theta_k, theta_star, X, y, R, grid: int, model: HeadModel = SOFTMAX,
                  loss: Loss = LOGISTIC, exact_bar: bool = True) -> Segment:
    """The numbers of (QC) for one pair (``X [n, T, d]``, ``y [n]``, ``R``: the token radius); pure,
    jittable. ``exact_bar``: κ̄, β̄₂ are endpoint maxima (:data:`CONVEX_BOUNDS`), else grid maxima."""
    H, T = num_heads(theta_k), X.shape[-2]
    objective = lambda th: risk(th, X, y, model, loss)  # noqa: E731
    loss_k, g_k = jax.value_and_grad(objective)(theta_k)
    delta = jax.tree_util.tree_map(jnp.subtract, theta_k, theta_star)
    lhs = _vdot(g_k, delta)
    dist2 = _vdot(delta, delta)
    ts = jnp.linspace(0.0, 1.0, grid + 1, dtype=X.dtype)
    path = lambda t: jax.tree_util.tree_map(lambda a, d: a - t * d, theta_k, delta)
    along = lambda t: objective(path(t))

    def point(t):
        d1 = lambda s: jax.jvp(along, (s,), (jnp.ones_like(s),))[1]
        _, g2 = jax.jvp(d1, (t,), (jnp.ones_like(t),))  # (g'(t), g''(t)), g(t) = L̂(θ(t))
        return along(t), g2, model.kappa(path(t), R, T), model.beta2(path(t), R, T)

    Ls, g2s, kaps, b2s = jax.vmap(point)(ts)
    if exact_bar:
        kappa_bar = jnp.maximum(model.kappa(theta_k, R, T), model.kappa(theta_star, R, T))
        beta2_bar = jnp.maximum(model.beta2(theta_k, R, T), model.beta2(theta_star, R, T))
    else:
        kappa_bar, beta2_bar = jnp.max(kaps), jnp.max(b2s)
    max_loss = jnp.max(Ls)
    sqrtH = jnp.sqrt(jnp.asarray(H, X.dtype))
    ok = (Ls > 0) & (dist2 > 0)
    kdir = jnp.where(ok, -sqrtH * g2s / jnp.where(ok, dist2 * Ls, 1.0), -jnp.inf)
    return Segment(loss_k=loss_k, loss_star=objective(theta_star), lhs=lhs, dist2=dist2,
                   kappa_bar=kappa_bar, beta2_bar=beta2_bar, max_loss=max_loss,
                   cert_factor=jnp.exp(beta2_bar * jnp.sqrt(dist2) / (2 * grid)),
                   kappa_dir=jnp.max(kdir), wc_ratio=jnp.max(kdir / kaps), heads=jnp.asarray(H, X.dtype))


def finalize(raw: Segment, rel_tol: float = REL_TOL, certifiable: bool = True) -> PairCheck:
    """Verdicts of (QC) for one pair from :func:`segment_check`'s numbers; ``rel_tol`` absorbs
    rounding (1e-10 in float64; :func:`mhajax.experiments.quasi_convexity.run` widens it for float32).
    ``certifiable=False`` (κ̄, β̄₂ sampled, not exact) never certifies a violation: a pair
    that fails is *inconclusive*."""
    r = Segment(*(float(v) for v in raw))
    sqrtH = np.sqrt(r.heads)
    c = r.kappa_bar / (2 * sqrtH)
    drop = r.loss_k - r.loss_star
    term_s = c * r.max_loss * r.dist2
    term_c = term_s * r.cert_factor
    tol = rel_tol * (abs(r.lhs) + abs(r.loss_k) + abs(r.loss_star) + term_s)
    rhs_s, rhs_c = drop - term_s, drop - term_c
    holds = r.lhs >= rhs_s - tol
    violated = certifiable and bool(np.isfinite(rhs_c)) and r.lhs < rhs_c - tol
    need = (2 * sqrtH * (drop - r.lhs) / (r.max_loss * r.dist2)
            if r.max_loss > 0 and r.dist2 > 0 else None)
    finite = lambda v: v if v is not None and np.isfinite(v) else None
    return PairCheck(loss_k=r.loss_k, loss_star=r.loss_star, lhs=r.lhs, dist2=r.dist2, kappa_bar=r.kappa_bar,
                     beta2_bar=r.beta2_bar, max_loss=r.max_loss, cert_factor=finite(r.cert_factor),
                     kappa_dir=finite(r.kappa_dir), wc_ratio=finite(r.wc_ratio), rhs=rhs_s, rhs_cert=finite(rhs_c),
                     max_loss_cert=finite(r.max_loss * r.cert_factor), holds=bool(holds),
                     certified_violation=violated, inconclusive=bool(not holds and not violated),
                     kappa_need=finite(need), convex=bool(drop - r.lhs <= tol), wc_holds=r.wc_ratio <= 1 + rel_tol)


def judged_pair(loss_k: float, floor: float) -> bool:
    """Whether (QC) is judged at a pair: L̂(θ_k) finite and at least ``floor`` (tiny/eps of the
    dtype; below it L̂ underflowed and (QC) is vacuous)."""
    return bool(np.isfinite(loss_k) and loss_k >= floor)


@partial(jax.jit, static_argnames=("grid", "model", "loss", "exact_bar"))
def check_pairs(theta_k, theta_star, seed_index, X, y, R, *, grid: int, model: HeadModel = SOFTMAX,
                loss: Loss = LOGISTIC, exact_bar: bool = True):
    """:func:`segment_check` over a batch of pairs (leaves ``[B, ...]``), pair b
    on data set ``seed_index[b]`` of ``X [S, n, T, d]`` (``lax.map``, one θ pair at a time)."""
    def one(args):
        tk, ts, s = args
        return segment_check(tk, ts, X[s], y[s], R[s], grid, model, loss, exact_bar)
    return jax.lax.map(one, (theta_k, theta_star, seed_index))


__all__ = ["REL_TOL", "CONVEX_BOUNDS", "Segment", "PairCheck", "segment_check", "finalize", "judged_pair", "check_pairs"]
