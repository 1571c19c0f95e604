"""The GD step-size premise (docs/theory.md §15; the self-bounded smoothness (6.8)), measured at θ₀.

GD with step η descends when ``η·λ_max(∇²L̂(θ)) <= 1`` along its path; by self-boundedness the
smoothness falls with L̂, so θ₀ binds. The premise is judged on λ̄_max(∇²L̂(θ₀)), the certified
upper bound ``λ_max(G) + λ_max(B)``; the closed form ``ρ₀ = (β₂(θ₀)² + κ(θ₀)/√H)·L̂(θ₀)`` is
reported beside it (informational). A check whose premise failed reports PREMISE_VIOLATED.
"""
from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from mhajax.analysis.applicability import requirements
from mhajax.curvature.operators import hessian_parts
from mhajax.curvature.spectrum import certificates
from mhajax.data.common import token_radius
from mhajax.losses import LOGISTIC, risk
from mhajax.models.base import is_coupled, num_heads
from mhajax.models.softmax import SOFTMAX
from mhajax.verdict import Judgement, Verdict

#: the rule judged: η·λ̄_max(θ₀) <= 1, λ̄_max the certified upper bound on λ_max(∇²L̂(θ₀))
STEP_RULE = "η·λ̄_max(∇²L̂(θ₀)) <= 1, λ̄_max = λ_max(G) + λ_max(B) (certified upper bound)"


@partial(jax.jit, static_argnames=("model", "loss"))
def _smoothness_at(params, X, y, model, loss):
    """Per run s: ``(L̂(θ₀), λ̄_max, β₂² + κ/√H)`` at ``params`` (leaves ``[S, H, ...]``) on
    ``X [S, n, T, d]``; the closed-form coefficient is NaN for a model without κ and β₂."""
    def one(a):
        th, Xs, ys = a
        L = risk(th, Xs, ys, model, loss)
        _, upper = certificates(hessian_parts(th, Xs, ys, model, loss))
        if model.kappa is not None and model.beta2 is not None:
            R, T = token_radius(Xs), Xs.shape[1]
            coef = model.beta2(th, R, T) ** 2 + model.kappa(th, R, T) / jnp.sqrt(num_heads(th))
        else:
            coef = jnp.asarray(jnp.nan, Xs.dtype)
        return L, upper, coef
    return jax.lax.map(one, (params, X, y))


class StepPremise(NamedTuple):
    """The GD step-size premise measured at θ₀ (:func:`step_premise`)."""

    rule: str
    lr: float
    lambda_max_upper: list[float | None]
    max_lr: float | None
    holds: bool | None
    rho0: list[float | None] | None
    closed_form_max_lr: float | None
    ratio: float | None
    note: str


def step_premise(lr: float, lambda_upper, rho0=None, note: str = "") -> StepPremise:
    """The GD step-size premise from measured bounds.

    ``lambda_upper [S]``: λ̄_max(∇²L̂(θ₀)) per run (the certified upper bound, ``None`` where
    not measured); ``rho0 [S]``: the closed-form self-bounded smoothness
    ``ρ₀ = (β₂(θ₀)² + κ(θ₀)/√H)·L̂(θ₀)`` (informational; ``None`` where it does not apply).
    By self-boundedness the smoothness falls with L̂ along GD, so θ₀ binds: the premise
    ``holds`` iff ``η·max_s λ̄_max <= 1`` (``None``: not measured). ``max_lr = 1/max_s λ̄_max``
    is the largest η it allows; ``closed_form_max_lr = 1/max_s ρ₀`` the closed form's, with
    ``ratio`` = ``max_lr / closed_form_max_lr`` (how much the closed form under-allows)."""
    lam = [None if v is None or not math.isfinite(float(v)) else float(v) for v in lambda_upper]
    rho = [None if v is None or not math.isfinite(float(v)) else float(v) for v in (rho0 or [])]
    top = max([v for v in lam if v is not None], default=None) if lam and None not in lam else None
    rtop = max([v for v in rho if v is not None], default=None) if rho and None not in rho else None
    max_lr = 1.0 / top if top is not None and top > 0 else (math.inf if top is not None else None)
    cf = 1.0 / rtop if rtop is not None and rtop > 0 else None
    holds = None if top is None else bool(lr * top <= 1.0 + 1e-12)
    return StepPremise(rule=STEP_RULE, lr=float(lr), lambda_max_upper=lam, max_lr=_finite(max_lr), holds=holds,
                rho0=rho or None, closed_form_max_lr=cf,
                ratio=(max_lr / cf) if (cf and max_lr is not None and math.isfinite(max_lr)) else None,
                note=note)


def _finite(x):
    return x if x is None or math.isfinite(x) else None


def gd_step_premise(lr: float, params0, X, y, *, model=SOFTMAX, loss=LOGISTIC) -> StepPremise:
    """:func:`step_premise` measured at the initial parameters ``params0`` (leaves
    ``[S, H, ...]``) of S GD runs on ``X [S, n, T, d]``, ``y [S, n]``: λ̄_max from the G + B
    certificates (:func:`mhajax.curvature.spectrum.certificates`), ρ₀ from the model's closed
    forms where the (model, loss) pair implies the self-bounded smoothness. A coupled model
    has no certified bound: the premise is then not measured (``holds`` None)."""
    if is_coupled(model):
        return step_premise(lr, [None] * X.shape[0], note=f"not measured: the coupled model {model.name!r} "
                            "has no head blocks, hence no certified λ_max bound")
    L, upper, coef = jax.tree_util.tree_map(lambda a: [float(v) for v in a],
                                            _smoothness_at(params0, X, y, model, loss))
    ok, why = requirements(model, loss)["self_bounded_smoothness"]
    rho0 = [c * v for c, v in zip(coef, L)] if ok else None
    note = "" if ok else f"closed form not applicable: {why}"
    return step_premise(lr, upper, rho0, note)


def premise_from_records(lr: float, records, model=SOFTMAX, loss=LOGISTIC) -> StepPremise:
    """:func:`step_premise` read off the κ-chain records of one H at step 0 (θ₀), at no extra
    cost: ``lambda_max_upper`` is λ̄_max(θ₀), and ``(beta2² + kappa_bound/√H)·loss`` is ρ₀
    (``records``: NamedTuples with those fields and ``step``, ``seed``, ``heads``; ``None``: not measured)."""
    first = sorted((r for r in records if r.step == 0), key=lambda r: r.seed)
    if is_coupled(model) or not first:
        return step_premise(lr, [None] * max(1, len(first)), note="not measured: no certified λ_max bound "
                            "(coupled heads)" if is_coupled(model) else "not measured: no record at θ₀")
    ok, why = requirements(model, loss)["self_bounded_smoothness"]
    rho0 = None
    if ok and all(r.beta2 is not None and r.kappa_bound is not None and r.loss is not None for r in first):
        rho0 = [(r.beta2 ** 2 + r.kappa_bound / math.sqrt(r.heads)) * r.loss for r in first]
    return step_premise(lr, [r.lambda_max_upper for r in first], rho0,
                        "" if ok else f"closed form not applicable: {why}")


def premise_line(premise: StepPremise | None) -> str:
    """One report line: the measured bound, whether η respects it, and the closed form beside it."""
    if not premise:
        return "GD step-size premise: not measured"
    if premise.holds is None:
        return f"GD step-size premise ({premise.rule}): {premise.note or 'not measured'}"
    lam = max(premise.lambda_max_upper)
    line = (f"GD step-size premise: η = {premise.lr:.4g}, λ̄_max(θ₀) = {lam:.4g} (certified, max over runs), "
            f"η·λ̄_max = {premise.lr * lam:.4g} {'<=' if premise.holds else '>'} 1: "
            f"{'holds' if premise.holds else 'VIOLATED'} (largest η allowed {_g(premise.max_lr)})")
    if premise.closed_form_max_lr is not None:
        ratio = premise.ratio   # None when the measured bound allows any η (λ̄_max <= 0)
        line += (f"; closed form (β₂² + κ/√H)·L̂(θ₀) = {max(premise.rho0):.4g} would allow only "
                 f"η <= {premise.closed_form_max_lr:.3g} ("
                 + (f"{ratio:.3g}x less" if ratio is not None else "the measured bound allows any η")
                 + "; informational)")
    elif premise.note:
        line += f"; {premise.note}"
    return line


def _g(x):
    return "any" if x is None else f"{x:.4g}"


def premise_violated(premises) -> Judgement | None:
    """The PREMISE_VIOLATED judgement when a measured step premise failed (``premises``: one
    :class:`StepPremise` or a list of them, e.g. one per H, ``None`` where not measured), with
    the worst measured bound in the reason; else ``None``."""
    ps = [premises] if isinstance(premises, StepPremise) else [p for p in premises if p]
    bad = [p for p in ps if p.holds is False]
    if not bad:
        return None
    p = max(bad, key=lambda q: q.lr * max(q.lambda_max_upper))
    lam = max(p.lambda_max_upper)
    return Judgement(Verdict.PREMISE_VIOLATED,
                     f"GD step size η = {p.lr:.4g} exceeds what the self-bounded smoothness allows at "
                     f"θ₀: η·λ̄_max = {p.lr * lam:.4g} > 1 (λ̄_max(∇²L̂(θ₀)) <= {lam:.4g}, certified; "
                     f"η <= {p.max_lr:.4g} needed); numbers reported, the rate claim not judged")


__all__ = ["STEP_RULE", "StepPremise", "step_premise", "gd_step_premise", "premise_from_records", "premise_line",
           "premise_violated"]
