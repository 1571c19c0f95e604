"""H_theory(n): the number of heads the framework's sufficient condition asks for, from
constants measured on one GD run (docs/theory.md §14 derives it).

GD ``θ_{k+1} = θ_k − η∇L̂(θ_k)`` for K steps from θ₀; the NTK witness
``θ* = θ₀ + D₀ w*``, ``D₀ = log n / γ`` (γ the NTK margin at θ₀, docs/theory.md §11). With
self-bounded weak convexity ``λ_min(∇²L̂(θ)) >= −(κ(θ)/√H) L̂(θ)`` and κ̄ >= κ on every
segment ``[θ_k, θ*]``, the quasi-convexity inequality (docs/theory.md §10) keeps half of the descent
term as long as

    c_k = κ̄ ||θ_k − θ*||² / √H <= 8/9                                              (C)

and GD keeps ``||θ_k − θ*|| <= D_K`` for every k <= K while (C) holds, where

    D_K² = D₀² + 3ηK L̂(θ*) + 2η L̂(θ₀)                                             (D)

(:func:`distance_bound`). Hence the sufficient width condition

    H >= H_theory := (81/64) κ̄² D_K⁴                                                  (H)

(:func:`h_theory`). κ(θ) = max_h β₃(θ_h) is convex in θ (a max of norms of affine maps plus a
constant), so its maximum over a segment is at an endpoint: ``κ̄ = max(max_k κ(θ_k), κ(θ*))``
over *every* iterate k <= K (:func:`width_constants` keeps them all). Replacing κ̄ by the
a-priori bound ``κ(θ₀) + 2R⁵√T (D_K + D₀)`` (:func:`kappa_apriori`: every segment point lies
within D_K + D₀ of θ₀) gives ``H_apriori ~ (81/4) R¹⁰ T log⁶ n / γ⁶``, the log⁶ n of the
paper. Empirical counterparts (reported, not certified): κ_emp = max_k −√H λ_min(∇²L̂(θ_k))/L̂(θ_k)
at the checkpoints, and κ_dir = max over checkpoint segments of
``−√H δᵀ∇²L̂(θ_s)δ / (L̂(θ_s) ||δ||²)`` (:func:`segment_curvature`; ≤ 0: the loss is convex along
the segment and (C) holds for every H).
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.chain import chain_raw
from mhajax.analysis.ntk import flat_to_params, ntk_margin, tree_axpy
from mhajax.data.common import token_radius
from mhajax.errors import InputError
from mhajax.losses import LOGISTIC, Loss, risk
from mhajax.models.base import HeadModel, is_coupled, output, num_heads
from mhajax.models.softmax import SOFTMAX
from mhajax.train import runs

#: the share of the descent term the weak-convexity term may take: a_k <= 1/2
DESCENT_SHARE = 0.5


def condition_level(share: float = DESCENT_SHARE) -> float:
    """``c_max = 8α/(4 + α)``: (C) reads ``κ̄ ||θ_k − θ*||²/√H <= c_max`` when the weak-convexity
    term may take a share ``α`` of the descent (``a_k = 4c/(8 − c) <= α``); 8/9 at α = 1/2."""
    if not 0 < share < 1:
        raise InputError(f"share must lie in (0, 1), got {share!r}")
    return 8 * share / (4 + share)


def distance_bound(D0: float, lr: float, steps: int, loss_star: float, loss0: float) -> float:
    """(D): ``D_K = √(D₀² + 3ηK·L̂(θ*) + 2η·L̂(θ₀))``, the radius GD stays within around θ*
    for K steps while (C) holds."""
    return math.sqrt(D0 ** 2 + 3 * lr * steps * loss_star + 2 * lr * loss0)


def h_theory(kappa_bar: float, D_K: float, share: float = DESCENT_SHARE) -> float:
    """(H): ``(κ̄ D_K² / c_max)² = (81/64) κ̄² D_K⁴`` at α = 1/2 (0 for κ̄ <= 0)."""
    if kappa_bar is None or D_K is None:
        return None
    if kappa_bar <= 0:
        return 0.0
    return (kappa_bar * D_K ** 2 / condition_level(share)) ** 2


def kappa_apriori(kappa0: float, R: float, T: int, D_K: float, D0: float) -> float:
    """``κ(θ₀) + 2R⁵√T (D_K + D₀)``: κ̄ bounded without the run (``||U_h − U_h(θ₀)||_{2,1} <=
    √T ||U_h − U_h(θ₀)||_F <= √T (D_K + D₀)`` on every segment)."""
    return kappa0 + 2 * R ** 5 * math.sqrt(T) * (D_K + D0)


@partial(jax.jit, static_argnames=("grid", "model", "loss"))
def segment_curvature(theta_k, theta_star, X, y, grid: int = 16, model: HeadModel = SOFTMAX,
                      loss: Loss = LOGISTIC):
    """Along ``θ_s = θ_k − s δ``, ``δ = θ_k − θ*``, s on ``grid + 1`` points of [0, 1]:
    ``(κ_dir, max_s L̂(θ_s))`` with ``κ_dir = max_s −√H g''(s) / (L̂(θ_s) ||δ||²)``,
    ``g(s) = L̂(θ_s)`` (second derivative by forward-over-forward mode); −inf where
    L̂ underflowed. Pure."""
    H = num_heads(theta_k)
    delta = jax.tree_util.tree_map(jnp.subtract, theta_k, theta_star)
    dist2 = sum(jnp.sum(a * a) for a in jax.tree_util.tree_leaves(delta))
    along = lambda s: risk(jax.tree_util.tree_map(lambda a, d: a - s * d, theta_k, delta),
                                     X, y, model, loss)

    def point(s):
        d1 = lambda t: jax.jvp(along, (t,), (jnp.ones_like(t),))[1]
        return along(s), jax.jvp(d1, (s,), (jnp.ones_like(s),))[1]

    Ls, g2 = jax.vmap(point)(jnp.linspace(0.0, 1.0, grid + 1, dtype=X.dtype))
    ok = (Ls > 0) & (dist2 > 0)
    kdir = jnp.where(ok, -jnp.sqrt(jnp.asarray(H, X.dtype)) * g2 / jnp.where(ok, Ls * dist2, 1.0), -jnp.inf)
    return jnp.max(kdir), jnp.max(Ls)


def _tree_dist(a, b):
    return jnp.sqrt(sum(jnp.sum((x - z) ** 2) for x, z in zip(jax.tree_util.tree_leaves(a),
                                                                 jax.tree_util.tree_leaves(b))))


@partial(jax.jit, static_argnames=("model",))
def _along_run(params, theta_star, R, T, model):
    """κ(θ_k) and ||θ_k − θ*|| at every iterate (leaves ``[K+1, ...]``)."""
    return jax.vmap(lambda th: (model.kappa(th, R, T), _tree_dist(th, theta_star)))(params)


def width_constants(params0, X, y, *, lr: float, steps: int, checkpoints: int = 4, grid: int = 16,
                    key=None, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC, emp: bool = True) -> dict:
    """Every constant of (H) measured on one run: H heads at ``params0`` (leaves ``[H, ...]``)
    on ``X [n, T, d]``, ``y [n]``, K = ``steps`` GD steps of size ``lr``.

    Measured: R (largest token norm), γ and γ̄ (NTK margin at θ₀, certified), θ*, L̂(θ₀),
    L̂(θ*), κ(θ₀), κ(θ*), κ(θ_k) and ||θ_k − θ*|| at every iterate (κ̄ = their max with κ(θ*)),
    and at ``checkpoints + 1`` evenly spaced iterates κ_emp (exact λ_min, :func:`chain_raw` with
    ``links="core"``; skipped, None, when ``emp`` is False: it is the costly part) and κ_dir on
    the segment to θ* (``grid``). Returns a JSON-ready dict with
    ``H_theory`` (κ̄), ``H_emp`` (κ_emp), ``H_dir`` (κ_dir; 0 when every segment is convex in
    its direction), ``H_apriori``, ``H_lead`` ((H) with D₀ for D_K), ``D0``, ``D_K``,
    ``max_dist`` (the largest ||θ_k − θ*|| seen: (D) says it is <= D_K), ``condition`` (c at
    the run's own H), ``log6``, and ``defined`` / ``reason`` (False where the margin is not
    certified positive or the model has no closed-form κ)."""
    n, T = int(X.shape[0]), int(X.shape[1])
    H = num_heads(params0)
    base = dict(n=n, heads=H, lr=float(lr), steps=int(steps), log6=math.log(n) ** 6, log4=math.log(n) ** 4)
    if is_coupled(model) or model.kappa is None:
        return dict(base, defined=False, reason=f"--model {model.name} has no closed-form κ(θ)")
    R = float(token_radius(X))
    m = ntk_margin(params0, X, y, model)
    if not m.separable:
        return dict(base, defined=False, reason=f"NTK margin at θ₀ not certified positive ({m.status})")
    D0 = math.log(n) / m.gamma
    theta_star = tree_axpy(D0, flat_to_params(jnp.asarray(m.w, X.dtype), params0), params0)
    batch = lambda t: jax.tree_util.tree_map(lambda a: a[None], t)
    traj = runs(batch(params0), X[None], y[None], lr, steps=steps, every=1, model=model, loss=loss)
    iterates = jax.tree_util.tree_map(lambda a: a[0], traj.params)
    losses = np.asarray(traj.losses[0])
    kap, dist = (np.asarray(a) for a in _along_run(iterates, theta_star, R, T, model))
    risk_jit = jax.jit(risk, static_argnames=("model", "loss"))
    L0, Ls = float(risk_jit(params0, X, y, model, loss)), float(risk_jit(theta_star, X, y, model, loss))
    kappa_star = float(model.kappa(theta_star, R, T))
    kappa_bar = max(float(kap.max()), kappa_star)
    D_K = distance_bound(D0, lr, steps, Ls, L0)
    key = jax.random.PRNGKey(0) if key is None else key
    chain = jax.jit(lambda th: chain_raw(th, X, y, key, method="auto", links="core", R=R, model=model, loss=loss))
    ks = sorted({int(round(j * steps / max(1, checkpoints))) for j in range(checkpoints + 1)})
    rows = []
    for k in ks:
        th = jax.tree_util.tree_map(lambda a: a[k], iterates)
        if emp:
            raw = chain(th)
            L, lmin = float(raw.loss), float(raw.extremes.lambda_min)
        else:
            L, lmin = float(losses[k]), math.nan
        kdir, mseg = segment_curvature(th, theta_star, X, y, grid, model, loss)
        rows.append(dict(step=k, loss=L, kappa=float(kap[k]), dist=float(dist[k]),
                         kappa_emp=(-math.sqrt(H) * lmin / L) if L > 0 and math.isfinite(lmin) else None,
                         kappa_dir=float(kdir) if math.isfinite(float(kdir)) else None,
                         max_segment_loss=float(mseg)))
    kemp = max((r["kappa_emp"] for r in rows if r["kappa_emp"] is not None), default=None)
    kdir = max((r["kappa_dir"] for r in rows if r["kappa_dir"] is not None), default=None)
    kap0 = float(kap[0])
    kap_ap = kappa_apriori(kap0, R, T, D_K, D0)
    phi0 = float(jnp.max(jnp.abs(output(params0, X, model))))
    return dict(base, defined=True, reason="", R=R, gamma=m.gamma, gamma_bar=m.gamma_bar, D0=D0, D_K=D_K,
                max_dist=float(dist.max()), loss0=L0, loss_star=Ls, loss_K=float(losses[-1]),
                monotone=bool(np.all(np.diff(losses) <= 1e-12 * np.maximum(1.0, losses[:-1]))),
                kappa0=kap0, kappa_star=kappa_star, kappa_bar=kappa_bar, kappa_emp=kemp, kappa_dir=kdir,
                kappa_apriori=kap_ap, H_theory=h_theory(kappa_bar, D_K),
                H_emp=h_theory(kemp, D_K) if kemp is not None else None,
                H_dir=h_theory(kdir, D_K) if kdir is not None else None,
                H_apriori=h_theory(kap_ap, D_K), H_lead=h_theory(kappa_bar, D0),
                condition=kappa_bar * D_K ** 2 / math.sqrt(H), condition_level=condition_level(),
                phi0_max=phi0, rows=rows)


__all__ = ["DESCENT_SHARE", "condition_level", "distance_bound", "h_theory", "kappa_apriori",
           "segment_curvature", "width_constants"]
