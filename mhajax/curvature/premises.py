"""A model's and a loss's closed forms, checked against autodiff before anything rests on them
(docs/theory.md §3.7).

A certificate or a bound that uses a field a model supplies is only as true as that field. Each
field present is checked at a given θ on ``m = min(n, 8)`` samples (those with the largest token
norm) and ``min(H, 8)`` heads (evenly spaced; every head runs the same code) and, where a
per-sample Hessian is needed, on ``min(m, 4) × min(H, 4)`` (sample, head) pairs; β₂ on the whole
model:

=================  ==========================================================================
field              check (``c``, ``v``, ``a`` random normal; ``f`` the head, ``Φ`` the model)
=================  ==========================================================================
derivatives        ``⟨∇r, v⟩`` and ``∇²r v`` by autodiff against Richardson central differences
                   of ``r`` and ``∇r`` (``r(θ) = Σ_i a_i Φ(θ; X_i)``): a ``custom_jvp`` rule or a
                   ``stop_gradient`` that makes autodiff differentiate another function
weighted_hessian   ``W_h(c) v_h`` against ``jax.jvp`` of ``jax.grad`` of ``Σ_i c_i f(θ_h; X_i)``
                   (and, inside every certified λ of a user's model, at every head with the
                   loss's own ``c``: :func:`block_discrepancy`)
reduced_hessian    ``‖R‖_op`` and ``‖R‖_F`` against those of ``jax.hessian(f) [p, p]`` (the same
                   nonzero spectrum), relative to the largest norm over the pairs
beta3, kappa       ``‖∇²f(θ_h; X_i)‖_op <= β₃(θ_h)`` and ``<= κ(θ)`` on the pairs (R = the data's
                   token radius)
beta2              ``‖∇Φ(θ; X_i)‖ <= β₂(θ)``
loss.d1, loss.d2   against ``jax.grad`` of ``loss.value`` and of ``loss.d1`` at the margins and at
                   ``z ∈ {−4, −1, −0.25, 0.5, 2, 8}``
=================  ==========================================================================

**Tolerances, from rounding** (docs/theory.md §3.7 has the argument). A closed form and autodiff
compute one number in two orders of rounding and agree to a few ε of its size (measured below
1e-14 on every built-in model, adversarial regimes included): an identity is accepted when the
discrepancy is at most :func:`identity_tolerance` ``= max(1e-10, 256·ε)`` of the size it is
measured against (the largest block product over the heads; the largest per-sample norm, or the
model's κ when larger; ``|ℓ| + |ℓ'| + |ℓ''|`` for a loss), a bound when
``measured <= bound + identity_tolerance·max(measured, bound)``. A Richardson-extrapolated
central difference is accepted against autodiff to :func:`fd_tolerance` ``= √ε`` once its own
error estimate is taken off. What is not checked: inputs beyond the samples used (a bound that
fails only elsewhere), and functions a model calls but does not name.

:func:`premise_errors` is pure (``jit``-able); :func:`check_premises` runs it, raises
:class:`~mhajax.errors.InputError` naming the model, the field and the discrepancy, and returns
the measured discrepancies. A built-in (model, loss) pair is checked once per process;
:func:`block_discrepancy` is the per-θ check that :func:`mhajax.curvature.spectrum.extremes`
adds for a user's ``weighted_hessian``.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from mhajax.data.common import token_radius
from mhajax.errors import InputError
from mhajax.losses import LOGISTIC, Loss, get_loss, is_builtin_loss, margins
from mhajax.models.base import (HeadModel, check_problem, get_model, is_builtin, is_coupled, num_heads, output,
                                ravel_heads)
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime.jaxsetup import OLD_EMITTERS, cpu_jit

#: samples used, and (sample, head) pairs per side, for the per-sample checks
SAMPLES, PAIRS = 8, 4
#: the fixed margins where a loss's derivatives are checked besides the data's own
LOSS_GRID = (-4.0, -1.0, -0.25, 0.5, 2.0, 8.0)


def identity_tolerance(dtype) -> float:
    """``max(1e-10, 256·ε)``: the relative discrepancy accepted between a closed form and autodiff
    (module docstring); 1e-10 in float64, 3.1e-5 in float32."""
    return max(1e-10, 256 * float(jnp.finfo(dtype).eps))


def fd_tolerance(dtype) -> float:
    """``√ε``: the relative discrepancy accepted between autodiff and a Richardson-extrapolated
    central difference (module docstring); 1.5e-8 in float64."""
    return float(np.sqrt(float(jnp.finfo(dtype).eps)))


class PremiseErrors(NamedTuple):
    """Relative discrepancies at one θ (scalar arrays; NaN: the field is absent). A bound's entry
    is its relative excess ``(measured − bound)/max(measured, bound)`` (<= 0: it holds); ``*_at``
    the sample or head where the worst one was found."""

    grad_fd: Any
    hvp_fd: Any
    weighted_hessian: Any
    weighted_hessian_head: Any
    reduced_hessian: Any
    beta3: Any
    kappa: Any
    pair_sample: Any
    pair_head: Any
    beta2: Any
    beta2_sample: Any
    loss_d1: Any
    loss_d2: Any


def _norm(a):
    return jnp.linalg.norm(jnp.ravel(a))


def _rel(a, b, floor=0.0):
    """``max(‖a − b‖ − floor, 0) / max(‖a‖, ‖b‖)`` (0 when both vanish)."""
    num = jnp.maximum(_norm(a - b) - floor, 0.0)
    return num / jnp.maximum(jnp.maximum(_norm(a), _norm(b)), jnp.finfo(jnp.result_type(a)).tiny)


#: steps of the finite differences: t0·4^-k, k = 0..FD_LEVELS + 1
FD_LEVELS = 8


def _fd_discrepancy(fn, z, v, exact):
    """Autodiff's directional derivative ``exact`` against central differences ``D_k`` of ``fn``
    along ``v`` at steps ``t_k = ε^{1/5}·4^-k`` (``v`` carries each leaf's own scale), extrapolated
    (``R_k = (16 D_{k+1} − D_k)/15``). Each ``R_k`` gets an error estimate, the largest of its
    distances to ``D_{k+1}`` (truncation) and to its neighbours ``R_{k±1}`` (rounding noise of
    ``fn``, which no a-priori ``ε·|fn|/t`` captures in a saturated softmax), plus
    ``4ε·max|fn|/t_{k+1}``; the level with the smallest estimate is used and its estimate taken
    off: ``max(‖exact − R‖ − est, 0)/max(‖exact‖, ‖R‖)``."""
    eps = jnp.finfo(z.dtype).eps
    t = eps ** 0.2 * 0.25 ** jnp.arange(FD_LEVELS + 2, dtype=z.dtype)

    def central(tk):
        fp, fm = fn(z + tk * v), fn(z - tk * v)
        return (fp - fm) / (2 * tk), jnp.maximum(_norm(fp), _norm(fm))

    D, big = jax.lax.map(central, t)
    R = (16 * D[1:] - D[:-1]) / 15                               # [K + 1]
    est = jnp.maximum(jnp.maximum(jax.vmap(_norm)(R[1:-1] - D[2:-1]), jax.vmap(_norm)(R[1:-1] - R[:-2])),
                      jax.vmap(_norm)(R[1:-1] - R[2:])) + 4 * eps * big[2:-1] / t[2:-1]
    k = jnp.argmin(est)
    return _rel(exact, R[1:-1][k], est[k])


def _leaf_scales(params):
    """Per coordinate of ``ravel_pytree(params)``: the rms of its leaf (1 for an all-zero leaf)."""
    def one(a):
        r = jnp.sqrt(jnp.mean(jnp.square(a)))
        return jnp.full(jnp.shape(a), jnp.where(r > 0, r, 1.0), jnp.result_type(a))
    return ravel_pytree(jax.tree_util.tree_map(one, params))[0]


def _derivatives(params, X, key, model):
    """Autodiff against finite differences of ``r(θ) = Σ_i a_i Φ(θ; X_i)``: ``(grad_fd, hvp_fd)``.

    A derivative rule is a property of the code, so it is checked where differences can resolve
    it: at θ with every leaf of rms above 1 shrunk to rms 1 (a readout pushed to 10³ to reach huge
    margins cancels to a gradient of ~1 and leaves a central difference nothing to resolve), moved
    by 0.1 of each leaf's rms times a standard normal (smooth with probability one: a ReLU head at
    W = 0 sits on its kink), along a direction scaled leaf by leaf (U and W may differ by 10⁵)."""
    ka, kv, kz = jax.random.split(key, 3)
    params = jax.tree_util.tree_map(lambda a: a / jnp.maximum(1.0, jnp.sqrt(jnp.mean(jnp.square(a)))), params)
    z0, unravel = ravel_pytree(params)
    a = jax.random.normal(ka, (X.shape[0],), z0.dtype) / X.shape[0]

    def r(z):
        return jnp.sum(a * output(unravel(z), X, model))

    s = _leaf_scales(params)
    z = z0 + 0.1 * s * jax.random.normal(kz, z0.shape, z0.dtype)
    v = s * jax.random.normal(kv, z0.shape, z0.dtype)
    grad_fd = _fd_discrepancy(r, z, v, jax.jvp(r, (z,), (v,))[1])
    hvp_fd = _fd_discrepancy(jax.grad(r), z, v, jax.jvp(jax.grad(r), (z,), (v,))[1])
    return grad_fd, hvp_fd


def block_discrepancy(params, X, c, key, model: HeadModel, bound=0.0):
    """``(max_h e_h, argmax_h)``: the model's ``weighted_hessian`` ``W_h(c) v_h`` against
    ``jax.jvp`` of ``jax.grad`` of ``g_h = Σ_i c_i f(θ_h; X_i)`` (one random ``v_h [p]`` per head;
    ``X [n, T, d]``, ``c [n]``), with ``e_h = ‖W_h v_h − ∇²g_h v_h‖/s``, ``s`` the largest product
    over the heads, or ``Σ|c_i|·bound·max‖v_h‖`` when larger (``bound``: the model's own bound κ
    on ``‖∇²f‖``): a block's error matters next to the size of the whole Hessian (Weyl), and a
    saturated head's block, ~0 in exact arithmetic, is rounding in both routes. Pure."""
    Z, unravel_head = ravel_heads(params)
    V = jax.random.normal(key, Z.shape, Z.dtype)

    def one(zh, vh):
        def g(z):
            return jnp.sum(c * jax.vmap(model.head_fn, in_axes=(None, 0))(unravel_head(z), X))
        closed = model.weighted_hessian(unravel_head(zh), X, c) @ vh
        auto = jax.jvp(jax.grad(g), (zh,), (vh,))[1]
        return _norm(closed - auto), jnp.maximum(_norm(closed), _norm(auto))

    err, size = jax.lax.map(lambda a: one(*a), (Z, V))
    scale = jnp.maximum(jnp.max(size), jnp.sum(jnp.abs(c)) * bound * jnp.max(jax.vmap(_norm)(V)))
    e = err / jnp.maximum(scale, jnp.finfo(Z.dtype).tiny)
    return jnp.max(e), jnp.argmax(e)


def _pair_hessians(params, X, model, si, hi):
    """``(H [k, p, p], ν [k])``: ``jax.hessian(f)(θ_h; X_i)`` (symmetrized) for the pairs
    ``(si[k], hi[k])`` and ``ν = ‖H − Hᵀ‖_F``, autodiff's own rounding (entry (a, b) and entry
    (b, a) come from two different products)."""
    Z, unravel_head = ravel_heads(params)

    def one(pair):
        i, h = pair
        H1 = jax.hessian(lambda z: model.head_fn(unravel_head(z), X[i]))(Z[h])
        return 0.5 * (H1 + H1.T), _norm(H1 - H1.T)
    return jax.lax.map(one, (si, hi))


def _excess(measured, bound, floor=0.0):
    """``(measured − floor − bound)/max(measured, bound)``, elementwise (<= 0 where the bound holds
    once ``floor``, the rounding of ``measured``, is allowed)."""
    den = jnp.maximum(jnp.maximum(jnp.abs(measured), jnp.abs(bound)), jnp.finfo(jnp.result_type(measured)).tiny)
    return (measured - floor - bound) / den


def _loss_errors(loss: Loss, z):
    """``(d1, d2)`` discrepancies against ``jax.grad`` at the points ``z``, each less the rounding
    ``4ε·(|ℓ| + |ℓ'| + |ℓ''|)`` of the loss's quantities there (autodiff of ``1 − σ(−z)`` at
    ``z ≪ 0`` keeps no relative digit of ``ℓ'' ≈ e^{z}``)."""
    eps = jnp.finfo(z.dtype).eps
    floor = 4 * eps * (jnp.abs(loss.value(z)) + jnp.abs(loss.d1(z)) + jnp.abs(loss.d2(z)))
    e1 = jax.vmap(_rel)(loss.d1(z), jax.vmap(jax.grad(loss.value))(z), floor)
    e2 = jax.vmap(_rel)(loss.d2(z), jax.vmap(jax.grad(loss.d1))(z), floor)
    return jnp.max(e1), jnp.max(e2)


def model_scale(model, params, R, T, dtype):
    """The model's own bound on ``‖∇²f(θ_h; x)‖`` (κ, else the largest β₃; 0 without either): the size
    next to which a closed form's error is measured when every sampled Hessian is smaller (tokens
    all equal, saturated heads: the exact value is ~0 and both routes return rounding)."""
    if not is_coupled(model) and model.kappa is not None:
        return jnp.abs(jnp.asarray(model.kappa(params, R, T), dtype))
    if not is_coupled(model) and model.beta3 is not None:
        return jnp.max(jnp.abs(jnp.asarray(model.beta3(params, R, T), dtype)))
    return jnp.asarray(0.0, dtype)


def _spread(H: int, k: int) -> np.ndarray:
    """At most ``k`` head indices spread evenly over ``0..H-1`` (the ends included)."""
    return np.unique(np.round(np.linspace(0, H - 1, min(H, k))).astype(int))


def premise_errors(params, X, y, key, *, model=SOFTMAX, loss: Loss = LOGISTIC) -> PremiseErrors:
    """Every check of the module docstring at ``params`` (H heads), ``X [n, T, d]``, ``y [n]``,
    as a :class:`PremiseErrors` of scalar arrays. Pure; ``model`` and ``loss`` static."""
    dtype = X.dtype
    nan = jnp.asarray(jnp.nan, dtype)
    zero = jnp.asarray(0)
    m = min(X.shape[0], SAMPLES)
    order = jnp.argsort(-jnp.max(jnp.linalg.norm(X, axis=-1), axis=-1))[:m]
    Xm, ym = X[order], y[order]
    k_fd, k_b = jax.random.split(key)
    # derivative rules are the same for every head: checked on at most 8 of them (cost free of H)
    few = params if is_coupled(model) else jax.tree_util.tree_map(lambda a: a[_spread(num_heads(params), SAMPLES)],
                                                                   params)
    grad_fd, hvp_fd = _derivatives(few, Xm, k_fd, model)
    grid = jnp.concatenate([margins(params, Xm, ym, model), jnp.asarray(LOSS_GRID, dtype)])
    loss_d1, loss_d2 = _loss_errors(loss, grid)
    out = dict(grad_fd=grad_fd, hvp_fd=hvp_fd, weighted_hessian=nan, weighted_hessian_head=zero,
               reduced_hessian=nan, beta3=nan, kappa=nan, pair_sample=zero, pair_head=zero,
               beta2=nan, beta2_sample=zero, loss_d1=loss_d1, loss_d2=loss_d2)
    if is_coupled(model):
        return PremiseErrors(**out)
    H = num_heads(params)
    R = token_radius(X)
    T = X.shape[1]
    size = model_scale(model, params, R, T, dtype)
    if model.weighted_hessian is not None:
        kc, kv = jax.random.split(k_b)
        c = jax.random.normal(kc, (m,), dtype)
        err, worst = block_discrepancy(few, Xm, c, kv, model, size)
        out["weighted_hessian"], out["weighted_hessian_head"] = err, jnp.asarray(_spread(H, SAMPLES))[worst]
    if any(f is not None for f in (model.reduced_hessian, model.beta3, model.kappa)):
        ks = min(m, PAIRS)
        heads = _spread(H, PAIRS)
        si = jnp.asarray(np.repeat(np.arange(ks), heads.size))
        hi = jnp.asarray(np.tile(heads, ks))
        Hs, noise = _pair_hessians(params, Xm, model, si, hi)
        ev = jnp.linalg.eigvalsh(Hs)
        op = jnp.maximum(-ev[:, 0], ev[:, -1])                  # ‖∇²f(θ_h; X_i)‖_op per pair
        floor = 4 * noise                                       # Weyl: eigenvalues move by <= ‖ΔH‖
        worst = jnp.argmax(op)
        out["pair_sample"], out["pair_head"] = order[si[worst]], hi[worst]
        if model.reduced_hessian is not None:
            Z, unravel_head = ravel_heads(params)
            Rm = jax.vmap(lambda i, h: model.reduced_hessian(unravel_head(Z[h]), Xm[i]))(si, hi)
            evr = jnp.linalg.eigvalsh(0.5 * (Rm + jnp.swapaxes(Rm, -1, -2)))
            opr = jnp.maximum(-evr[:, 0], evr[:, -1])
            fro, fror = jnp.sqrt(jnp.sum(ev ** 2, -1)), jnp.sqrt(jnp.sum(evr ** 2, -1))
            gap = jnp.maximum(jnp.maximum(jnp.abs(op - opr), jnp.abs(fro - fror)) - floor, 0.0)
            # relative to the largest norm at this θ (the norms enter κ_Φ = max and κ_mid = a mean),
            # or to the model's own bound on it when larger
            e = gap / jnp.maximum(jnp.maximum(jnp.maximum(jnp.max(fro), jnp.max(fror)), size),
                                  jnp.finfo(dtype).tiny)
            out["reduced_hessian"] = jnp.max(e)
            w = jnp.argmax(e)
            out["pair_sample"], out["pair_head"] = order[si[w]], hi[w]
        if model.beta3 is not None:
            b3 = jnp.asarray(model.beta3(params, R, T), dtype)
            ex = _excess(op, b3[hi], floor)
            out["beta3"] = jnp.max(ex)
            w = jnp.argmax(ex)
            if model.reduced_hessian is None:
                out["pair_sample"], out["pair_head"] = order[si[w]], hi[w]
        if model.kappa is not None:
            out["kappa"] = _excess(op[worst], jnp.asarray(model.kappa(params, R, T), dtype), floor[worst])
    if model.beta2 is not None:
        J = jax.vmap(jax.grad(lambda th, x: output(th, x, model)), in_axes=(None, 0))(params, Xm)
        gn = jax.vmap(lambda g: _norm(ravel_pytree(g)[0]))(J)
        ex = _excess(gn, jnp.asarray(model.beta2(params, R, T), dtype))
        out["beta2"], out["beta2_sample"] = jnp.max(ex), order[jnp.argmax(ex)]
    return PremiseErrors(**out)


@cpu_jit(options=OLD_EMITTERS, static_argnames=("model", "loss"))
def premise_jit(params, X, y, key, model, loss):
    """:func:`premise_errors`, jitted (``model``, ``loss`` static)."""
    return premise_errors(params, X, y, key, model=model, loss=loss)


#: (model, loss, dtype) of built-in pairs already checked in this process
_CHECKED: set = set()


def checked_before(model, loss, dtype) -> bool:
    """Whether ``(model, loss)`` is a built-in pair whose closed forms passed in this process
    (in ``dtype``): a built-in pair is checked once per process."""
    return is_builtin(model) and is_builtin_loss(loss) and (model, loss, str(jnp.dtype(dtype))) in _CHECKED


def remember(model, loss, dtype) -> None:
    """Record a built-in pair whose closed forms passed (a user's is never remembered)."""
    if is_builtin(model) and is_builtin_loss(loss):
        _CHECKED.add((model, loss, str(jnp.dtype(dtype))))


def _fields(model, loss):
    """``[(field name shown, PremiseErrors attribute, kind, where)]`` for the fields present."""
    head = "head_fn" if not is_coupled(model) else "phi"
    rows = [(f"{head} (autodiff gradient vs finite differences)", "grad_fd", "fd", None),
            (f"{head} (autodiff Hessian-vector product vs finite differences of the gradient)", "hvp_fd", "fd", None),
            ("loss.d1 (vs jax.grad of loss.value)", "loss_d1", "identity", None),
            ("loss.d2 (vs jax.grad of loss.d1)", "loss_d2", "identity", None)]
    if is_coupled(model):
        return rows
    if model.weighted_hessian is not None:
        rows.append(("weighted_hessian (W_h(c) v vs jax.jvp of jax.grad)", "weighted_hessian", "identity",
                     "weighted_hessian_head"))
    if model.reduced_hessian is not None:
        rows.append(("reduced_hessian (‖·‖_op, ‖·‖_F vs jax.hessian of head_fn)", "reduced_hessian", "identity",
                     "pair"))
    if model.beta3 is not None:
        rows.append(("beta3 (a bound on ‖∇²f(θ_h; X_i)‖_op)", "beta3", "bound", "pair"))
    if model.kappa is not None:
        rows.append(("kappa (a bound on max_h ‖∇²f(θ_h; X_i)‖_op)", "kappa", "bound", "pair"))
    if model.beta2 is not None:
        rows.append(("beta2 (a bound on ‖∇Φ(θ; X_i)‖)", "beta2", "bound", "beta2_sample"))
    return rows


def check_premises(params, X, y, *, model=SOFTMAX, loss: Loss = LOGISTIC, key=None, at: str = "") -> dict:
    """Run :func:`premise_errors` at θ = ``params`` and refuse what fails: an
    :class:`~mhajax.errors.InputError` of one line naming the model (or loss), the field, the
    relative discrepancy and its tolerance (``at`` says where θ came from). Returns
    ``{field attribute: discrepancy}`` (empty when a built-in pair was already checked in this
    process). Inputs are assumed validated (:func:`mhajax.validate.check_problem`)."""
    dtype = jnp.result_type(X)
    if checked_before(model, loss, dtype):
        return {}
    key = jax.random.PRNGKey(0) if key is None else key
    e = jax.device_get(premise_jit(params, X, y, key, model, loss))
    tol = dict(identity=identity_tolerance(dtype), fd=fd_tolerance(dtype), bound=identity_tolerance(dtype))
    measured = {}
    where = f" at {at}" if at else ""
    for shown, attr, kind, loc in _fields(model, loss):
        v = float(getattr(e, attr))
        measured[attr] = v
        if v <= tol[kind]:
            continue
        owner = f"loss {loss.name!r}" if attr.startswith("loss") else f"model {model.name!r}"
        if loc == "pair":
            spot = f"; sample {int(e.pair_sample)}, head {int(e.pair_head)}"
        elif loc is not None:
            spot = f"; {'head' if 'head' in loc else 'sample'} {int(getattr(e, loc))}"
        else:
            spot = ""
        if v != v:
            raise InputError(f"{owner}: {shown} is not finite{where}: the model produced NaN/inf{spot}; "
                             "nothing is certified on it")
        what = ("relative excess over the bound" if kind == "bound" else "relative discrepancy")
        raise InputError(f"{owner}: {shown} fails{where}: {what} {v:.3g} > {tol[kind]:.3g}{spot}; "
                         "nothing is certified on it")
    remember(model, loss, dtype)
    return measured


def checked(what: str, params, X, y, *, model=SOFTMAX, loss: Loss = LOGISTIC, heads: bool = False):
    """``(model, loss)`` resolved (names and import references accepted) once the inputs passed
    :func:`mhajax.models.base.check_problem` (``heads``: a head model required) and the model's
    and loss's closed forms passed :func:`check_premises` at θ = ``params``: the door of every
    certified public function."""
    model, loss = get_model(model), get_loss(loss)
    check_problem(what, params, X, y, model=model, heads=heads)
    check_premises(params, X, y, model=model, loss=loss, at=f"the θ given to {what}")
    return model, loss


__all__ = ["checked", "checked_before", "remember", "PremiseErrors", "premise_errors", "check_premises", "block_discrepancy", "identity_tolerance",
           "fd_tolerance", "premise_jit", "SAMPLES", "PAIRS", "LOSS_GRID"]
