"""NTK features, margins and the witness θ* (docs/theory.md §11), and the one-step map (§11.1).

NTK features at θ₀ (per-head flat layout of :func:`mhajax.model.ravel_heads`):

    g_i = ∇_θ Φ(θ₀; X_i) ∈ R^P,     G = [g_1; ...; g_n]  [n, P],   P = H·(T·d + d²)
    signed Gram  K_ij = y_i y_j <g_i, g_j>                  [n, n]

NTK margin (:mod:`mhajax.margin`): ``γ = max_{||w||=1} min_i y_i <g_i, w>``, with
maximizer ``w*`` [P], and the scale-free **normalized margin**
``γ̄ = γ / max_i ||g_i||`` (docs/theory.md §11: γ scales with the features; γ̄ does not).

Witness (docs/theory.md §11): ``θ* = θ₀ + (log n / γ) w*``. Along it the linearized model
``Φ_lin(θ*; X_i) = Φ(θ₀; X_i) + <g_i, θ* − θ₀>`` has
``y_i <g_i, θ* − θ₀> >= (log n / γ) m(w*) ≈ log n`` (``m(w*)`` the achieved margin),
so ``L̂_lin(θ*) <= ℓ(log n · m(w*)/γ − max_i |Φ(θ₀; X_i)|) ≈ e^{max|Φ₀|}/n``. The
true ``L̂(θ*)`` differs by the linearization error
``ε_lin = max_i |Φ(θ*; X_i) − Φ_lin(θ*; X_i)|`` (second order in ``||θ* − θ₀|| = log n / γ``).
The initialization condition of the theory is ``max_i |Φ(θ₀; X_i)| = O(log n)``.

Linear baselines (docs/theory.md §11.1): the max-margin of a homogeneous linear classifier
on mean-pooled tokens ``x̄_i = (1/T) Σ_t x_{i,t} ∈ R^d`` and on flattened tokens
``vec(X_i) ∈ R^{T·d}``, each normalized by its own largest feature norm.

One-step map (docs/theory.md §11.1): ``θ₀ = θ₋₁ − η₀ ∇L̂(θ₋₁)``. At ``W = 0`` the attention is
uniform, ``∂Φ/∂U_h = H^{-1/2} 1_T x̄ᵀ`` (mean pooling, the same for every head and
independent of U) and ``∂Φ/∂W_h`` is linear in ``U_h``. Hence from ``θ₋₁ = 0`` the
first step moves U only (``∇_W L̂ = 0`` at U = 0), by the same amount in every
head. ``head_signs`` multiplies head h's step by ``s_h ∈ {±1}`` to break that
symmetry of the *parameters* (``U_h(θ₀) = s_h u``), so Φ(θ₀) partly cancels.
It does **not** change the NTK Gram matrix at θ₀: head h's Gram contribution
``<∂_{U_h}Φ_i, ∂_{U_h}Φ_j> + <∂_{W_h}Φ_i, ∂_{W_h}Φ_j>`` is invariant under
``U_h -> −U_h`` at ``W_h = 0`` (the first term does not involve U_h, the second is
quadratic in it) — so γ and γ̄ at θ₀ are the same with or without the signs.

Everything here except :func:`ntk_margin`, :func:`witness` and
:func:`linear_margins` (which call the host-side margin solver) is pure and
``jit``/``vmap``-able.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.margin import MarginResult, hard_margin, linear_margin
from mhajax.curvature.operators import per_sample_jacobian
from mhajax.errors import InputError
from mhajax.losses import LOGISTIC, Loss, risk
from mhajax.models.base import HeadModel, MHAParams, check_problem, get_model, output, ravel_heads, unravel_heads
from mhajax.models.softmax import SOFTMAX
from mhajax.validate import check_data


# ---------------------------------------------------------------------------
# Features and Gram matrices (pure)
# ---------------------------------------------------------------------------

def ntk_features(params, X, model: HeadModel = SOFTMAX) -> jax.Array:
    """``G [n, P]``, row i = ``∇_θ Φ(θ; X_i)`` in per-head flat layout
    (:func:`mhajax.curvature.per_sample_jacobian`); validated (:func:`~mhajax.models.base.check_problem`).
    The public entry :func:`mhajax.api.ntk_features` first checks ``G`` against memory."""
    model = get_model(model)
    check_problem("ntk_features", params, X, model=model)
    return per_sample_jacobian(params, X, model)


def ntk_gram(params, X, y=None, model: HeadModel = SOFTMAX) -> jax.Array:
    """``K [n, n]``: ``<g_i, g_j>``, or the signed ``y_i y_j <g_i, g_j>`` when ``y`` is given."""
    G = ntk_features(params, X, model)
    K = G @ G.T
    return K if y is None else K * (y[:, None] * y[None, :])


def mean_pooled(X) -> jax.Array:
    """``x̄_i = (1/T) Σ_t x_{i,t}``: ``X [n, T, d] -> [n, d]``."""
    return jnp.mean(X, axis=-2)


def flattened(X) -> jax.Array:
    """``vec(X_i)``: ``X [n, T, d] -> [n, T·d]`` (row-major, token by token)."""
    return X.reshape(X.shape[:-2] + (X.shape[-2] * X.shape[-1],))


def flat_to_params(w, params):
    """A flat vector ``w [P]`` (per-head layout) as a pytree shaped like ``params``."""
    Z, unravel_head = ravel_heads(params)
    return unravel_heads(w.reshape(Z.shape), unravel_head)


def tree_axpy(a, x, y):
    """``y + a·x`` leafwise."""
    return jax.tree_util.tree_map(lambda xi, yi: yi + a * xi, x, y)


# ---------------------------------------------------------------------------
# The one-step map (pure)
# ---------------------------------------------------------------------------

def zero_params(heads: int, tokens: int, dim: int, dtype=None) -> MHAParams:
    """``θ₋₁ = 0``: ``U = 0 [H, T, d]``, ``W = 0 [H, d, d]``."""
    dtype = dtype or jnp.result_type(float)
    return MHAParams(jnp.zeros((heads, tokens, dim), dtype), jnp.zeros((heads, dim, dim), dtype))


def random_head_signs(key, heads: int, dtype=None) -> jax.Array:
    """``s [H]``, iid uniform on {−1, +1}."""
    dtype = dtype or jnp.result_type(float)
    return jnp.where(jax.random.bernoulli(key, 0.5, (heads,)), 1.0, -1.0).astype(dtype)


def one_step(params, X, y, lr, head_signs=None, model: HeadModel = SOFTMAX,
             loss: Loss = LOGISTIC):
    """``θ₀ = θ₋₁ − η₀ S ∇L̂(θ₋₁)``, ``S = diag(s_h)`` per head (identity when
    ``head_signs`` is None). ``lr`` may be traced. See the module docstring for
    what the signs do (and do not do)."""
    g = jax.grad(risk)(params, X, y, model, loss)
    if head_signs is not None:
        g = jax.tree_util.tree_map(
            lambda a: a * head_signs.reshape((-1,) + (1,) * (a.ndim - 1)).astype(a.dtype), g)
    return jax.tree_util.tree_map(lambda p, gi: p - lr * gi, params, g)


# ---------------------------------------------------------------------------
# Witness quantities (pure)
# ---------------------------------------------------------------------------

class WitnessValues(NamedTuple):
    """Values at ``θ* = θ₀ + Δ``, ``Δ = step · w`` (all scalars)."""

    loss0: jax.Array          # L̂(θ₀)
    loss_star: jax.Array      # L̂(θ*)
    loss_linear: jax.Array    # L̂_lin(θ*) = (1/n) Σ ℓ(y_i (Φ(θ₀;X_i) + <g_i, Δ>))
    lin_error: jax.Array      # max_i |Φ(θ*;X_i) − Φ(θ₀;X_i) − <g_i, Δ>|
    lin_margin_min: jax.Array  # min_i y_i <g_i, Δ>   (>= log n · m(w)/γ)
    phi0_max: jax.Array       # max_i |Φ(θ₀; X_i)|
    phi_star_margin_min: jax.Array  # min_i y_i Φ(θ*; X_i)


def witness_values(params, X, y, w, step, model: HeadModel = SOFTMAX,
                   loss: Loss = LOGISTIC) -> WitnessValues:
    """Evaluate the witness ``θ* = θ₀ + step · w`` (``w [P]`` flat, per-head layout).

    ``<g_i, Δ>`` is a forward-mode directional derivative (``jax.jvp``), so no
    Jacobian is formed. Pure and ``vmap``-able over (params, X, y, w, step)."""
    delta = jax.tree_util.tree_map(lambda a: step * a, flat_to_params(w, params))
    phi0, dphi = jax.jvp(lambda th: output(th, X, model), (params,), (delta,))
    star = jax.tree_util.tree_map(jnp.add, params, delta)
    phi_star = output(star, X, model)
    lin = phi0 + dphi
    return WitnessValues(
        loss0=jnp.mean(loss.value(y * phi0)),
        loss_star=jnp.mean(loss.value(y * phi_star)),
        loss_linear=jnp.mean(loss.value(y * lin)),
        lin_error=jnp.max(jnp.abs(phi_star - lin)),
        lin_margin_min=jnp.min(y * dphi),
        phi0_max=jnp.max(jnp.abs(phi0)),
        phi_star_margin_min=jnp.min(y * phi_star),
    )


# ---------------------------------------------------------------------------
# Host-side entry points (call the margin solver)
# ---------------------------------------------------------------------------

def ntk_margin(params, X, y, model: HeadModel = SOFTMAX, **solver_kw) -> MarginResult:
    """NTK margin at θ: :func:`mhajax.margin.hard_margin` on ``G = ∇_θΦ(θ; X_i)``
    with labels y. ``result.gamma_bar = γ / max_i ||g_i||``; ``result.w`` is ``w*`` [P].
    The public entry :func:`mhajax.api.ntk_margin` first checks the features ``[n, P]`` and
    their host copy against memory."""
    options = [k for k, v in inspect.signature(hard_margin).parameters.items() if v.kind is v.KEYWORD_ONLY]
    unknown = sorted(set(solver_kw) - set(options))
    if unknown:
        raise InputError(f"ntk_margin: unknown option {unknown[0]!r} (the solver's options: {', '.join(options)})")
    model = get_model(model)
    check_problem("ntk_margin", params, X, y, model=model)
    G = np.asarray(jax.jit(per_sample_jacobian, static_argnames=("model",))(params, X, model))
    return hard_margin(G, np.asarray(y), **solver_kw)


def witness_step(n: int, margin: MarginResult) -> float:
    """``log(n) / γ`` (raises :class:`InputError` unless the margin is certified positive)."""
    if not margin.separable or margin.w is None:
        raise InputError(f"the witness θ* = θ₀ + (log n/γ) w* needs NTK-separable data; "
                         f"the margin solver returned status {margin.status!r}")
    return math.log(n) / margin.gamma


class NTKWitness(NamedTuple):
    """The witness ``θ* = θ₀ + (log n / γ) w*`` and its values, from :func:`witness`
    (Python floats, and θ* itself).

    Attributes:
      loss0: L̂(θ₀).
      loss_star: L̂(θ*).
      loss_linear: L̂_lin(θ*) = (1/n) Σ ℓ(y_i (Φ(θ₀;X_i) + <g_i, θ* − θ₀>)).
      lin_error: ε_lin = max_i |Φ(θ*;X_i) − Φ_lin(θ*;X_i)|.
      lin_margin_min: min_i y_i <g_i, θ* − θ₀> (>= log n · m(w*)/γ).
      phi0_max: max_i |Φ(θ₀; X_i)|.
      phi_star_margin_min: min_i y_i Φ(θ*; X_i).
      step: log n / γ = ||θ* − θ₀||.
      log_n: log n.
      loss_linear_bound: ℓ(log n · m(w*)/γ − max_i |Φ(θ₀;X_i)|), an upper bound on L̂_lin(θ*).
      params: θ*, a pytree shaped like θ₀.

    """

    loss0: float
    loss_star: float
    loss_linear: float
    lin_error: float
    lin_margin_min: float
    phi0_max: float
    phi_star_margin_min: float
    step: float
    log_n: float
    loss_linear_bound: float
    params: Any


def witness(params, X, y, margin: MarginResult, model: HeadModel = SOFTMAX,
            loss: Loss = LOGISTIC) -> NTKWitness:
    """``θ* = θ₀ + (log n / γ) w*`` and its quantities (:class:`NTKWitness`: those of
    :class:`WitnessValues` as floats, ``step = log n / γ``, ``log_n``,
    ``loss_linear_bound`` and ``params`` = θ*)."""
    model = get_model(model)
    check_problem("witness", params, X, y, model=model)
    n = X.shape[0]
    step = witness_step(n, margin)
    w = jnp.asarray(margin.w, X.dtype)
    vals = jax.jit(witness_values, static_argnames=("model", "loss"))(params, X, y, w, step,
                                                                      model, loss)
    out = {k: float(v) for k, v in vals._asdict().items()}
    return NTKWitness(**out, step=step, log_n=math.log(n),
                   loss_linear_bound=float(loss.value(jnp.asarray(
                       math.log(n) * margin.gamma_lower / margin.gamma - out["phi0_max"]))),
                   params=tree_axpy(step, flat_to_params(w, params), params))


def dead_point_reason(model: HeadModel, tokens: int, dim: int, *, u_scale: float = 1.0,
                      w_scale: float = 0.0, zero: bool = False):
    """``None``, or why the NTK features of ``model`` vanish identically at its start.

    The start is ``model.init(·, u_scale, w_scale)`` (or θ = 0 when ``zero``). The probe
    evaluates ``∇_θ Φ(θ; X)`` for one head on one Gaussian ``X [T, d]``: if every entry is
    exactly 0 the start is a stationary point of every loss (e.g. ``relu`` at W = 0:
    ``relu(0) = 0`` with zero derivative; ``linear``/``value`` at θ = 0: Φ is multilinear),
    every NTK margin is 0 and GD never leaves it — a setting error, not a finding."""
    key = jax.random.PRNGKey(20231019)
    p = model.init(key, 1, tokens, dim, u_scale=u_scale, w_scale=w_scale)
    if zero:
        p = jax.tree_util.tree_map(jnp.zeros_like, p)
    X = jax.random.normal(jax.random.fold_in(key, 1), (1, tokens, dim), jnp.result_type(float))
    g = jax.grad(lambda th: output(th, X, model)[0])(p)
    if any(bool(jnp.any(leaf != 0)) for leaf in jax.tree_util.tree_leaves(g)):
        return None
    where = "θ = 0" if zero else f"its initialization (u_scale={u_scale:g}, w_scale={w_scale:g})"
    return (f"--model {model.name} has ∇_θΦ ≡ 0 at {where}: every NTK feature is 0, so the "
            f"margin is 0 and GD never leaves that point"
            + ("; use --w-scale > 0" if not zero and w_scale == 0 else ""))


def init_condition(params, X, model: HeadModel = SOFTMAX, const: float = 1.0) -> dict:
    """``max_i |Φ(θ₀; X_i)|`` against ``const · log n`` (the O(log n) condition
    with an explicit constant): ``{"phi0_max", "log_n", "ratio", "holds"}``."""
    phi0_max = float(jnp.max(jnp.abs(output(params, X, model))))
    log_n = math.log(X.shape[0])
    ratio = phi0_max / log_n if log_n > 0 else None
    return dict(phi0_max=phi0_max, log_n=log_n, ratio=ratio,
                holds=bool(log_n > 0 and phi0_max <= const * log_n))


class LinearMargins(NamedTuple):
    """The linear baselines of :func:`linear_margins`.

    Attributes:
      mean: :class:`MarginResult` on mean-pooled tokens ``x̄_i [d]``.
      flat: :class:`MarginResult` on flattened tokens ``vec(X_i) [T·d]``.

    """

    mean: MarginResult
    flat: MarginResult


def linear_margins(X, y, **solver_kw) -> LinearMargins:
    """The homogeneous max-margin linear classifier on mean-pooled and on flattened tokens
    (:class:`LinearMargins` of two :class:`MarginResult`)."""
    check_data(X, y)
    Xn = np.asarray(X)
    return LinearMargins(mean=linear_margin(np.asarray(mean_pooled(Xn)), np.asarray(y), **solver_kw),
                         flat=linear_margin(np.asarray(flattened(Xn)), np.asarray(y), **solver_kw))


__all__ = ["ntk_features", "ntk_gram", "mean_pooled", "flattened", "flat_to_params",
           "zero_params", "random_head_signs", "one_step", "WitnessValues", "witness_values",
           "ntk_margin", "witness_step", "NTKWitness", "witness", "dead_point_reason", "init_condition",
           "LinearMargins", "linear_margins"]
